"""tessera from Python: PyTorch's names and semantics over tessera's C++ core.

    import tessera as ts
    x = ts.randn(64, 784)
    net = ts.nn.Sequential(ts.nn.Linear(784, 128), ts.nn.ReLU(), ts.nn.Linear(128, 10))
    loss = ts.nn.functional.cross_entropy(net(x), ts.randint(0, 10, (64,)))
    loss.backward()

The extension module tessera._C holds the tensor, the ops, autograd, the C++ modules and optimizers;
this package adds what PyTorch writes in Python (nn.Module and its attribute registration, the
optimizers' param_groups, the context managers) and the namespaces (tessera.nn, tessera.optim,
tessera.autograd, tessera.cuda).
"""
from tessera import _C
from tessera._C import (  # noqa: F401
    Tensor, Size, dtype, device, Generator,
    bool, uint8, int8, int32, int64, float16, bfloat16, float32, float64,
    float, double, half, long, int, return_types,
    IndexError, ValueError, DTypeError, ShapeError, DeviceError, OutOfMemoryError, NotImplementedError, IOError,
    tensor, as_tensor, from_numpy, from_dlpack,
    zeros, ones, empty, full, arange, linspace, eye, rand, randn, randint, randperm, scalar_tensor,
    zeros_like, ones_like, empty_like, full_like, rand_like, randn_like,
    manual_seed, set_num_threads, get_num_threads, promote_types, can_cast,
)

# The torch.* functions of _C (add, cat, where, sum, matmul, ...).
for _name in dir(_C):
    if not _name.startswith("_") and _name not in globals():
        globals()[_name] = getattr(_C, _name)
del _name

from tessera.autograd.grad_mode import no_grad, enable_grad, set_grad_enabled, is_grad_enabled  # noqa: E402,F401
from tessera import autograd, nn, optim, cuda, amp, utils, safetensors, profiler  # noqa: E402,F401
from tessera.compiler import compile, compile_explain  # noqa: E402,F401
from tessera.nn.parameter import Parameter  # noqa: E402,F401

_dtypes = {d.__repr__().split(".")[1]: d for d in (bool, uint8, int8, int32, int64, float16, bfloat16, float32, float64)}


def _dtype_by_name(name):
    return _dtypes[name]


class _RemovableHandle:
    """What Tensor.register_hook returns (torch.utils.hooks.RemovableHandle)."""

    def __init__(self, remove):
        self._remove = remove

    def remove(self):
        if self._remove is not None:
            self._remove()
            self._remove = None


_register_hook = Tensor.register_hook


def _tensor_register_hook(self, hook):
    return _RemovableHandle(_register_hook(self, hook))


Tensor.register_hook = _tensor_register_hook
Tensor.__module__ = "tessera"


def is_tensor(obj):
    return isinstance(obj, Tensor)
