"""nn.Module for Python classes, with PyTorch's semantics.

Note [Attribute registration]: as in PyTorch, assigning a Parameter to an attribute registers it as
a parameter, a Module as a submodule, and register_buffer a buffer; each lives in its ordered dict
(_parameters, _modules, _buffers), attribute lookup falls back to those dicts, and deleting or
re-assigning the attribute updates them. Traversal (parameters(), named_parameters(), state_dict(),
modules()) is depth first in registration order and lists a shared tensor or module once, under its
first name, so tied weights are one parameter.

Module.to() converts every parameter and buffer in place (tessera's Note [Module.to]): the tensor
objects an optimizer already holds see the new device and dtype.
"""
from collections import OrderedDict

from tessera._C import Tensor, _nn
from tessera.autograd.grad_mode import no_grad
from tessera.nn.parameter import Parameter


class Module:
    """The base of every layer. Subclasses set attributes in __init__ (after super().__init__()) and
    override forward()."""

    training: bool
    _version = 1

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        for hook in self._forward_pre_hooks.values():
            r = hook(self, args)
            if r is not None:
                args = r if isinstance(r, tuple) else (r,)
        out = self.forward(*args, **kwargs)
        for hook in self._forward_hooks.values():
            r = hook(self, args, out)
            if r is not None:
                out = r
        return out

    # ---- registration (Note [Attribute registration]) ----
    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            if isinstance(value, (Parameter, Module)):
                raise AttributeError("cannot assign parameters or modules before Module.__init__() call")
            object.__setattr__(self, name, value)
            return
        params, modules, buffers = self._parameters, self._modules, self._buffers
        if isinstance(value, Parameter):
            self._remove_from(name, modules, buffers)
            self.__dict__.pop(name, None)
            self._set_parameter(name, value)
        elif name in params:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(tessera.nn.Parameter or None expected)")
            self._set_parameter(name, value)
        elif isinstance(value, Module):
            self._remove_from(name, params, buffers)
            self.__dict__.pop(name, None)
            modules[name] = value
        elif name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                "(tessera.nn.Module or None expected)")
            modules[name] = None
        elif name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' (tessera.Tensor or None expected)")
            self._set_buffer(name, value)
        else:
            object.__setattr__(self, name, value)

    def _set_parameter(self, name, value):
        self._parameters[name] = value

    def _set_buffer(self, name, value):
        self._buffers[name] = value

    @staticmethod
    def _remove_from(name, *dicts):
        for d in dicts:
            d.pop(name, None)

    def __getattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(self._parameters) | set(self._buffers) | set(self._modules))

    def register_parameter(self, name, param):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f'parameter name must be a non-empty string without ".", got {name!r}')
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(tessera.nn.Parameter or None required)")
        self._set_parameter(name, param)

    def register_buffer(self, name, tensor, persistent=True):
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f'buffer name must be a non-empty string without ".", got {name!r}')
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (tessera.Tensor or None required)")
        self._set_buffer(name, tensor)
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def register_module(self, name, module):
        self.add_module(name, module)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if not isinstance(name, str) or "." in name or not name:
            raise KeyError(f'module name must be a non-empty string without ".", got {name!r}')
        self._modules[name] = module

    def register_forward_hook(self, hook):
        return _Handle(self._forward_hooks, hook)

    def register_forward_pre_hook(self, hook):
        return _Handle(self._forward_pre_hooks, hook)

    # ---- traversal ----
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if self in memo and remove_duplicate:
            return
        memo.add(self)
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and m not in seen:
                seen.add(m)
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, get, prefix, recurse):
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mprefix, m in mods:
            for name, t in get(m):
                if t is None or id(t) in seen:
                    continue
                seen.add(id(t))
                yield mprefix + ("." if mprefix else "") + name, t

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target):
        m = self
        for part in target.split(".") if target else []:
            if part not in m._modules:
                raise AttributeError(f"{type(m).__name__} has no attribute `{part}`")
            m = m._modules[part]
        return m

    def get_parameter(self, target):
        mod, _, name = target.rpartition(".")
        m = self.get_submodule(mod)
        if name not in m._parameters:
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return m._parameters[name]

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---- mode, device, gradients ----
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.detach_()
                p.grad.zero_()

    def to(self, *args, **kwargs):
        """to(device), to(dtype), to(device, dtype), to(tensor): converts parameters and buffers in place."""
        device, dtype = _parse_to(args, kwargs)
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")
        params = list(self.parameters())
        buffers = list(self.buffers())
        _nn.convert_in_place(params, buffers, device, dtype)
        return self

    def cuda(self, device=None):
        return self.to("cuda" if device is None else device)

    def cpu(self):
        return self.to("cpu")

    def float(self):
        return self.to(dtype=_dtype("float32"))

    def double(self):
        return self.to(dtype=_dtype("float64"))

    def half(self):
        return self.to(dtype=_dtype("float16"))

    def bfloat16(self):
        return self.to(dtype=_dtype("bfloat16"))

    # ---- state ----
    def state_dict(self, destination=None, prefix="", keep_vars=False):
        out = OrderedDict() if destination is None else destination
        for mprefix, m in self.named_modules(prefix=prefix.rstrip(".")):
            p = mprefix + "." if mprefix else ""
            for name, t in m._parameters.items():
                if t is not None:
                    out[p + name] = t if keep_vars else t.detach()
            for name, t in m._buffers.items():
                if t is not None and name not in m._non_persistent_buffers:
                    out[p + name] = t if keep_vars else t.detach()
        return out

    def load_state_dict(self, state_dict, strict=True):
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        for k, v in state_dict.items():
            if k in own and tuple(own[k].shape) != tuple(v.shape):
                errors.append(f"size mismatch for {k}: copying a param with shape {v.shape} from checkpoint, "
                              f"the shape in current model is {own[k].shape}.")
        if strict and (missing or unexpected):
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        with no_grad():
            for k, v in state_dict.items():
                if k in own:
                    own[k].copy_(v)
        return _IncompatibleKeys(missing, unexpected)

    # ---- printing, as PyTorch's repr ----
    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        children = []
        for name, m in self._modules.items():
            r = repr(m).replace("\n", "\n  ")
            children.append(f"({name}): {r}")
        lines = lines + children
        s = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not children:
                s += lines[0]
            else:
                s += "\n  " + "\n  ".join(lines) + "\n"
        return s + ")"


class _Handle:
    _next = 0

    def __init__(self, store, hook):
        _Handle._next += 1
        self.id = _Handle._next
        self.store = store
        store[self.id] = hook

    def remove(self):
        self.store.pop(self.id, None)


class _IncompatibleKeys:
    def __init__(self, missing_keys, unexpected_keys):
        self.missing_keys = missing_keys
        self.unexpected_keys = unexpected_keys

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return f"_IncompatibleKeys(missing_keys={self.missing_keys}, unexpected_keys={self.unexpected_keys})"

    def __iter__(self):
        return iter((self.missing_keys, self.unexpected_keys))


def _dtype(name):
    import tessera
    return getattr(tessera, name)


def _parse_to(args, kwargs):
    import tessera
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
    for a in args:
        if isinstance(a, tessera.dtype):
            dtype = a
        elif isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif a is not None:
            device = a
    return device, dtype
