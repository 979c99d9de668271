"""tessera.autograd: backward, grad, the grad-mode context managers and gradcheck (torch.autograd)."""
from tessera._C import _autograd as _ag
from tessera.autograd.grad_mode import no_grad, enable_grad, set_grad_enabled, is_grad_enabled  # noqa: F401

Node = _ag.Node


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False):
    """Accumulates the gradients of `tensors` into the leaves' .grad (torch.autograd.backward)."""
    _ag.backward(tensors, grad_tensors, retain_graph, create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False):
    """The gradients of `outputs` with respect to `inputs`, returned as a tuple (torch.autograd.grad)."""
    return _ag.grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused)


def gradcheck(func, inputs, eps=1e-6, atol=1e-5, rtol=1e-3):
    """Compares analytical gradients with finite differences (float64 inputs that require grad)."""
    if not isinstance(inputs, (tuple, list)):
        inputs = (inputs,)
    return _ag.gradcheck(func, list(inputs), eps, atol, rtol)


class detect_anomaly:
    """Within the block, the first NaN or Inf a backward node produces raises, naming the node."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        self.prev = _ag.is_anomaly_enabled()
        _ag.set_detect_anomaly(self.check_nan)

    def __exit__(self, *exc):
        _ag.set_detect_anomaly(self.prev)
        return False
