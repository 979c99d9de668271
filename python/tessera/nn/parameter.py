"""nn.Parameter: a tensor that a Module registers as a parameter when assigned to one of its attributes."""
from tessera._C import Tensor, empty


class Parameter(Tensor):
    """Parameter(data=None, requires_grad=True): the same memory as `data`, a leaf that requires grad.

    As torch.nn.Parameter, it shares storage with `data` and has no history of its own; tensors an op
    returns from it are plain Tensors.
    """

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = empty(0)
        Tensor.__init__(self, data.detach())
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)

    def __reduce_ex__(self, proto):
        return (Parameter, (self.detach(), self.requires_grad))
