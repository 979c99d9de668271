"""The built-in modules: tessera's C++ modules wrapped (layers, normalization, activations), the
containers and the losses.

Note [Wrapped modules]: a built-in such as Linear is a Python Module holding the C++ module (`_cxx`).
Its parameters and buffers are the C++ module's own tensors, registered in _parameters / _buffers as
Parameter objects over the same TensorImpl (not copies and not detached views), so the C++ forward,
an optimizer and state_dict all address one tensor. Assigning a parameter or buffer on the Python
side (`lin.weight = Parameter(...)`, `lin.bias = None`) sets the C++ member as well; train()/eval()
reach the C++ module's mode (Dropout, BatchNorm read it); to() converts the shared tensors in place.
Other attributes (in_features, kernel_size, eps, ...) are read from the C++ module.
"""
from collections import OrderedDict

from tessera import _C
from tessera._C import Tensor
from tessera._C import _nn
from tessera.nn import functional as F
from tessera.nn.module import Module
from tessera.nn.parameter import Parameter


def _as_parameter(t):
    """A Parameter object over t's own TensorImpl (Note [Wrapped modules])."""
    p = Parameter.__new__(Parameter)
    Tensor.__init__(p, t)
    return p


class _Wrapped(Module):
    _cxx_class = None

    def __init__(self, *args, **kwargs):
        super().__init__()
        cxx = self._cxx_class(*args, **kwargs)
        object.__setattr__(self, "_cxx", cxx)
        for name, t in cxx.named_parameters():
            self._parameters[name] = _as_parameter(t)
        for name, t in cxx.named_buffers():
            self._buffers[name] = t
        # Registered but absent (bias=False): PyTorch keeps the name with None.
        for name in ("weight", "bias"):
            if hasattr(type(cxx), name) and name not in self._parameters and getattr(cxx, name) is None:
                self._parameters[name] = None

    def _set_parameter(self, name, value):
        super()._set_parameter(name, value)
        if hasattr(type(self._cxx), name):
            setattr(self._cxx, name, value)

    def _set_buffer(self, name, value):
        super()._set_buffer(name, value)
        if hasattr(type(self._cxx), name):
            setattr(self._cxx, name, value)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            cxx = self.__dict__.get("_cxx")
            if cxx is not None and hasattr(cxx, name):
                return getattr(cxx, name)
            raise

    def forward(self, input):
        return self._cxx.forward(input)

    def train(self, mode=True):
        super().train(mode)
        self._cxx.train(mode)
        return self

    def extra_repr(self):
        return self._cxx.extra_repr()


def _wrap(name, cxx_class, doc):
    cls = type(name, (_Wrapped,), {"_cxx_class": cxx_class, "__doc__": doc, "__module__": "tessera.nn"})
    return cls


Linear = _wrap("Linear", _nn.Linear, "y = x W^T + b (torch.nn.Linear); weight (out_features, in_features).")
Embedding = _wrap("Embedding", _nn.Embedding, "A lookup table of num_embeddings rows of embedding_dim (torch.nn.Embedding).")
Conv1d = _wrap("Conv1d", _nn.Conv1d, "1-D convolution over (N, C, L) (torch.nn.Conv1d).")
Conv2d = _wrap("Conv2d", _nn.Conv2d, "2-D convolution over (N, C, H, W) (torch.nn.Conv2d).")
ConvTranspose2d = _wrap("ConvTranspose2d", _nn.ConvTranspose2d, "Transposed 2-D convolution (torch.nn.ConvTranspose2d).")
MaxPool2d = _wrap("MaxPool2d", _nn.MaxPool2d, "2-D max pooling (torch.nn.MaxPool2d).")
AvgPool2d = _wrap("AvgPool2d", _nn.AvgPool2d, "2-D average pooling (torch.nn.AvgPool2d).")
AdaptiveAvgPool2d = _wrap("AdaptiveAvgPool2d", _nn.AdaptiveAvgPool2d, "Average pooling to a fixed output size.")
LayerNorm = _wrap("LayerNorm", _nn.LayerNorm, "Layer normalization over the trailing normalized_shape dims.")
GroupNorm = _wrap("GroupNorm", _nn.GroupNorm, "Group normalization (torch.nn.GroupNorm).")
RMSNorm = _wrap("RMSNorm", _nn.RMSNorm, "RMS normalization (torch.nn.RMSNorm).")
BatchNorm1d = _wrap("BatchNorm1d", _nn.BatchNorm1d, "Batch normalization over (N, C) or (N, C, L).")
BatchNorm2d = _wrap("BatchNorm2d", _nn.BatchNorm2d, "Batch normalization over (N, C, H, W).")
Dropout = _wrap("Dropout", _nn.Dropout, "Inverted dropout, active in training mode (torch.nn.Dropout).")
ReLU = _wrap("ReLU", _nn.ReLU, "max(x, 0).")
GELU = _wrap("GELU", _nn.GELU, "Gaussian error linear unit; approximate='none' or 'tanh'.")
SiLU = _wrap("SiLU", _nn.SiLU, "x * sigmoid(x).")
Tanh = _wrap("Tanh", _nn.Tanh, "tanh(x).")
Sigmoid = _wrap("Sigmoid", _nn.Sigmoid, "sigmoid(x).")
Softmax = _wrap("Softmax", _nn.Softmax, "softmax over dim.")
LogSoftmax = _wrap("LogSoftmax", _nn.LogSoftmax, "log_softmax over dim.")
Flatten = _wrap("Flatten", _nn.Flatten, "Flattens dims start_dim..end_dim.")
Identity = _wrap("Identity", _nn.Identity, "Returns its input.")


# ---- containers ----
class Sequential(Module):
    """Calls its modules in order (torch.nn.Sequential); Sequential(OrderedDict) names them."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        keys = list(self._modules)
        n = len(keys)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range")
        return self._modules[keys[idx % n]]

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self


class ModuleList(Module):
    """A list of modules registered as submodules (torch.nn.ModuleList)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ModuleList(list(self._modules.values())[idx])
        n = len(self)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range")
        return self._modules[str(idx % n)]

    def __setitem__(self, idx, module):
        self.add_module(str(idx % len(self)), module)

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self


class ModuleDict(Module):
    """A dict of modules registered as submodules (torch.nn.ModuleDict)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __contains__(self, key):
        return key in self._modules

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def update(self, modules):
        items = modules.items() if hasattr(modules, "items") else modules
        for k, m in items:
            self[k] = m


class ParameterList(Module):
    def __init__(self, values=None):
        super().__init__()
        for v in values or []:
            self.append(v)

    def append(self, value):
        self.register_parameter(str(len(self._parameters)), value if isinstance(value, Parameter) else Parameter(value))
        return self

    def __getitem__(self, idx):
        return self._parameters[str(idx % len(self._parameters))]

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())


# ---- losses (thin modules over nn.functional, as PyTorch's) ----
class _Loss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        if reduction not in ("none", "mean", "sum", "batchmean"):
            raise ValueError(f"{reduction} is not a valid value for reduction")
        self.reduction = reduction


class CrossEntropyLoss(_Loss):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, self.weight, self.ignore_index, self.reduction, self.label_smoothing)


class NLLLoss(_Loss):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class MSELoss(_Loss):
    def forward(self, input, target):
        return F.mse_loss(input, target, self.reduction)


class L1Loss(_Loss):
    def forward(self, input, target):
        return F.l1_loss(input, target, self.reduction)


class BCELoss(_Loss):
    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, self.weight, self.reduction)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight=None, reduction="mean", pos_weight=None):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight, self.reduction, self.pos_weight)


class SmoothL1Loss(_Loss):
    def __init__(self, reduction="mean", beta=1.0):
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, self.reduction, self.beta)


class KLDivLoss(_Loss):
    def __init__(self, reduction="mean", log_target=False):
        super().__init__(reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return F.kl_div(input, target, self.reduction, self.log_target)
