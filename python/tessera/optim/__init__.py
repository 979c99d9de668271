"""tessera.optim: SGD, Adam, AdamW, RMSprop, Adagrad over tessera's C++ optimizers, and the LR schedulers.

Note [Optimizer options]: the C++ optimizer owns the hyperparameters and the state; param_groups is a
list of dict-like views whose "lr", "momentum", "betas", "weight_decay", ... read and write the C++
optimizer's options (Optimizer::get_option / set_option), so `group["lr"] = 0.1` is what the next
step() uses, as in PyTorch, and a C++ scheduler and Python code see the same value.
"""
import json

from tessera._C import Tensor, _optim
from tessera.optim import lr_scheduler  # noqa: F401


def _groups_of(params, name):
    """params as PyTorch takes it: an iterable of tensors (one group) or of dicts, each with "params" and
    its own options (Note [Param groups from Python] in python/src/optim.cpp). Returns [(params, options)]."""
    if isinstance(params, Tensor):
        raise TypeError(f"{name}: params argument given to the optimizer should be an iterable of Tensors or dicts, "
                        "but got tessera.Tensor")
    params = list(params)
    if not params:
        raise ValueError("optimizer got an empty parameter list")
    if not isinstance(params[0], dict):
        return [(params, {})]
    groups = []
    for g in params:
        if not isinstance(g, dict) or "params" not in g:
            raise TypeError(f"{name}: every param group must be a dict with 'params'")
        ps = g["params"]
        ps = [ps] if isinstance(ps, Tensor) else list(ps)
        groups.append((ps, {k: v for k, v in g.items() if k != "params"}))
    return groups


def _numeric(v):
    """A value the C++ groups hold (a number, a flag, or betas' pair); anything else stays in Python."""
    if isinstance(v, (bool, int, float)):
        return True
    return isinstance(v, (list, tuple)) and all(isinstance(x, (int, float)) for x in v)


class _ParamGroup:
    """One entry of Optimizer.param_groups (Note [Optimizer options])."""

    def __init__(self, opt, index, extra=None):
        self._opt = opt
        self._index = index
        self._extra = dict(extra or {})  # keys that are no option of the C++ optimizer, as PyTorch keeps them

    def __getitem__(self, key):
        cxx = self._opt._cxx
        if key == "params":
            return cxx.params(self._index)
        if key == "betas":
            return (cxx.get_option(self._index, "betas", 0), cxx.get_option(self._index, "betas", 1))
        if key in self._extra:
            return self._extra[key]
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
            self._extra[key] = value

    def __contains__(self, key):
        return key in ("params", "betas") or key in self._extra or self._opt._cxx.has_option(self._index, key)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def keys(self):
        names = ("params", "lr", "momentum", "dampening", "betas", "eps", "weight_decay", "alpha", "lr_decay",
                 "initial_accumulator_value", "nesterov", "amsgrad", "centered", "maximize")
        return [k for k in names if k in self] + list(self._extra)

    def __repr__(self):
        return "{" + ", ".join(f"'{k}': {self[k]!r}" for k in self.keys() if k != "params") + "}"


class Optimizer:
    """The base of the Python optimizers: step(), zero_grad(), param_groups, add_param_group, state.

    A subclass names its C++ class (_cxx_class) and passes its constructor's keywords as `defaults`."""

    _cxx_class = None

    def __init__(self, params, defaults):
        groups = _groups_of(params, type(self).__name__)
        self.defaults = dict(defaults)
        cxx_groups = [(ps, {k: v for k, v in opts.items() if k in defaults}) for ps, opts in groups]
        self._cxx = self._cxx_class(cxx_groups, self.defaults)
        self.param_groups = [_ParamGroup(self, i, {k: v for k, v in opts.items() if k not in defaults})
                             for i, (_, opts) in enumerate(groups)]

    def add_param_group(self, param_group):
        (ps, opts), = _groups_of([param_group], type(self).__name__)
        self._cxx.add_param_group(ps, {k: v for k, v in opts.items() if k in self.defaults})
        self.param_groups.append(_ParamGroup(self, len(self.param_groups),
                                             {k: v for k, v in opts.items() if k not in self.defaults}))

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

    def state_dict(self):
        """PyTorch's {"state": {index: {"step": ..., "exp_avg": ...}}, "param_groups": [{..., "params": [indices]}]};
        the tensors are the optimizer's own, as in PyTorch."""
        flat, groups_json = self._cxx.state_dict()
        state = {}
        for key, t in flat.items():
            _, index, name = key.split(".", 2)
            state.setdefault(int(index), {})[name] = t
        groups = json.loads(groups_json)
        for g, view in zip(groups, self.param_groups):
            g.update(view._extra)
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restores what state_dict() gave (of an optimizer with the same groups and parameter counts)."""
        flat = {f"state.{i}.{name}": t for i, d in state_dict["state"].items() for name, t in d.items()}
        groups = []
        for g, view in zip(state_dict["param_groups"], self.param_groups):
            view._extra.update({k: v for k, v in g.items() if k != "params" and not _numeric(v)})
            groups.append({k: v for k, v in g.items() if k == "params" or _numeric(v)})
        self._cxx.load_state_dict(flat, json.dumps(groups))

    @property
    def state(self):
        return {p: self._cxx.state_of(p) for g in range(self._cxx.num_param_groups()) for p in self._cxx.params(g)}

    def __repr__(self):
        return f"{type(self).__name__} (" + ", ".join(repr(g) for g in self.param_groups) + ")"


class SGD(Optimizer):
    _cxx_class = _optim.SGD

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize))


class Adam(Optimizer):
    _cxx_class = _optim.Adam

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *, maximize=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))


class AdamW(Optimizer):
    _cxx_class = _optim.AdamW

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *, maximize=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))


class RMSprop(Optimizer):
    _cxx_class = _optim.RMSprop

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False, *,
                 maximize=False):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, maximize=maximize))


class Adagrad(Optimizer):
    _cxx_class = _optim.Adagrad

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10, *,
                 maximize=False):
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, eps=eps, maximize=maximize))
