"""tessera.optim: SGD, Adam, AdamW, RMSprop over tessera's C++ optimizers, and the LR schedulers.

Note [Optimizer options]: the C++ optimizer owns the hyperparameters and the state; param_groups is a
list of dict-like views whose "lr", "momentum", "betas", "weight_decay", ... read and write the C++
optimizer's options (Optimizer::get_option / set_option), so `group["lr"] = 0.1` is what the next
step() uses, as in PyTorch, and a C++ scheduler and Python code see the same value.
"""
from tessera._C import Tensor, _optim
from tessera.optim import lr_scheduler  # noqa: F401


def _params_of(params, name):
    if isinstance(params, Tensor):
        raise TypeError(f"{name}: params argument given to the optimizer should be an iterable of Tensors or dicts, "
                        "but got tessera.Tensor")
    params = list(params)
    if not params:
        raise ValueError("optimizer got an empty parameter list")
    if isinstance(params[0], dict):
        if len(params) > 1:
            raise NotImplementedError(f"{name}: several param groups are not supported from Python yet; "
                                      "pass one list of parameters (or one group)")
        group = dict(params[0])
        return list(group.pop("params")), group
    return params, {}


class _ParamGroup:
    """One entry of Optimizer.param_groups (Note [Optimizer options])."""

    def __init__(self, opt, index):
        self._opt = opt
        self._index = index

    def __getitem__(self, key):
        cxx = self._opt._cxx
        if key == "params":
            return cxx.params(self._index)
        if key == "betas":
            return (cxx.get_option(self._index, "betas", 0), cxx.get_option(self._index, "betas", 1))
        if not cxx.has_option(self._index, key):
            raise KeyError(key)
        return cxx.get_option(self._index, key)

    def __setitem__(self, key, value):
        cxx = self._opt._cxx
        if key == "betas":
            cxx.set_option(self._index, "betas", float(value[0]), 0)
            cxx.set_option(self._index, "betas", float(value[1]), 1)
        elif cxx.has_option(self._index, key):
            cxx.set_option(self._index, key, float(value))
        else:
            raise KeyError(f"{self._opt._cxx.name} has no option '{key}'")

    def __contains__(self, key):
        return key in ("params", "betas") or self._opt._cxx.has_option(self._index, key)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def keys(self):
        return [k for k in ("params", "lr", "momentum", "dampening", "betas", "eps", "weight_decay", "alpha") if k in self]

    def __repr__(self):
        return "{" + ", ".join(f"'{k}': {self[k]!r}" for k in self.keys() if k != "params") + "}"


class Optimizer:
    """The base of the Python optimizers: step(), zero_grad(), param_groups, state."""

    def __init__(self, cxx):
        self._cxx = cxx
        self.param_groups = [_ParamGroup(self, i) for i in range(cxx.num_param_groups())]
        self.defaults = {}

    def step(self, closure=None):
        loss = None
        if closure is not None:
            from tessera.autograd.grad_mode import enable_grad
            with enable_grad():
                loss = closure()
        self._cxx.step()
        return loss

    def zero_grad(self, set_to_none=True):
        self._cxx.zero_grad(set_to_none)

    @property
    def state(self):
        return {p: self._cxx.state_of(p) for g in range(self._cxx.num_param_groups()) for p in self._cxx.params(g)}

    def __repr__(self):
        return f"{type(self).__name__} (" + ", ".join(repr(g) for g in self.param_groups) + ")"


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False):
        params, g = _params_of(params, "SGD")
        super().__init__(_optim.SGD(params, g.get("lr", lr), g.get("momentum", momentum), g.get("dampening", dampening),
                                    g.get("weight_decay", weight_decay), g.get("nesterov", nesterov), maximize))


class Adam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *, maximize=False):
        params, g = _params_of(params, "Adam")
        super().__init__(_optim.Adam(params, g.get("lr", lr), tuple(g.get("betas", betas)), g.get("eps", eps),
                                     g.get("weight_decay", weight_decay), g.get("amsgrad", amsgrad), maximize))


class AdamW(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *, maximize=False):
        params, g = _params_of(params, "AdamW")
        super().__init__(_optim.AdamW(params, g.get("lr", lr), tuple(g.get("betas", betas)), g.get("eps", eps),
                                      g.get("weight_decay", weight_decay), g.get("amsgrad", amsgrad), maximize))


class RMSprop(Optimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False):
        params, g = _params_of(params, "RMSprop")
        super().__init__(_optim.RMSprop(params, g.get("lr", lr), alpha, eps, weight_decay, momentum, centered))
