"""tessera.compiler: tessera.compile, torch.compile's spelling over ts::compile (Note [Compiling Python] in
python/src/compile.cpp). A Python function or a tessera.nn.Module is captured into a graph at its first
call for each combination of guards (shapes, strides, dtypes, devices, requires_grad, the non-tensor
arguments by value, grad mode, autocast, training mode, a module's parameters by identity); later calls
that pass the guards run the graph, and its backward is a captured graph too.

    fast = tessera.compile(net)                    # or @tessera.compile on a function
    loss = F.cross_entropy(fast(x), y); loss.backward()
    print(tessera.compile_explain(fast, x))        # graphs, guards, breaks and why

Backends: "eager" (the graph through tessera's kernels; the default here, as ts::compile's) and
"codegen" (fused generated kernels, C++ on the CPU and CUDA through NVRTC; "inductor", PyTorch's
default, is taken as "codegen"). As with torch.jit.trace, Python control flow that depends on anything
but the guarded properties is baked in at capture; a host read (item(), numpy(), print) is a graph break
and that variant runs eagerly with a warning (fullgraph=True raises instead).
"""
import functools

from tessera._C import Tensor, _compile

_BACKENDS = {"eager": "eager", "codegen": "codegen", "inductor": "codegen"}


def _flatten_args(args, kwargs):
    """The call's tensors in order (lists and tuples of tensors flattened) and its other arguments as
    text, which the guards compare by value."""
    tensors, scalars = [], []

    def visit(a, key=""):
        if isinstance(a, Tensor):
            tensors.append(a)
        elif isinstance(a, (list, tuple)) and a and all(isinstance(t, Tensor) for t in a):
            scalars.append(f"{key}{type(a).__name__} of {len(a)} tensors")
            tensors.extend(a)
        else:
            scalars.append(key + repr(a))

    for a in args:
        visit(a)
    for k in sorted(kwargs):
        visit(kwargs[k], k + "=")
    return tensors, scalars


def _flatten_out(out):
    """(tensors, rebuild): a Tensor, or a tuple / list (nested) of tensors."""
    if isinstance(out, Tensor):
        return [out], lambda ts: ts[0]
    if isinstance(out, (tuple, list)):
        parts = [_flatten_out(o) for o in out]
        sizes = [len(p[0]) for p in parts]
        kind = type(out)

        def rebuild(ts):
            res, i = [], 0
            for (_, r), n in zip(parts, sizes):
                res.append(r(ts[i:i + n]))
                i += n
            return kind(res)
        return [t for p in parts for t in p[0]], rebuild
    raise TypeError(f"tessera.compile: the function must return a Tensor or a tuple / list of Tensors, "
                    f"got {type(out).__name__}")


class CompiledFunction:
    """What tessera.compile returns for a function: call it as the function."""

    def __init__(self, fn, core):
        self._fn = fn
        self._core = core
        self._rebuild = None  # the output structure, from the last call that ran the program
        functools.update_wrapper(self, fn, updated=())

    def _program(self, args, kwargs):
        def program():
            flat, self._rebuild = _flatten_out(self._fn(*args, **kwargs))
            return flat
        return program

    def __call__(self, *args, **kwargs):
        tensors, scalars = _flatten_args(args, kwargs)
        out = self._core.run(tensors, scalars, self._program(args, kwargs))
        return self._rebuild(out)

    def explain(self, *args, **kwargs):
        tensors, scalars = _flatten_args(args, kwargs)
        return self._core.explain(tensors, scalars, self._program(args, kwargs))

    def stats(self):
        return self._core.stats()

    def last_graph(self):
        return self._core.last_graph()

    def last_backward_graph(self):
        return self._core.last_backward_graph()

    def reset(self):
        self._core.reset()


class OptimizedModule(CompiledFunction):
    """What tessera.compile returns for a module (torch's OptimizedModule): calls run the module's
    forward through the compiled graph; attributes read through to the module (_orig_mod)."""

    def __init__(self, module, core):
        super().__init__(module, core)
        self._orig_mod = module

    def __getattr__(self, name):
        return getattr(self.__dict__["_orig_mod"], name)

    def __repr__(self):
        return f"OptimizedModule({self._orig_mod!r})"


def compile(model=None, *, fullgraph=False, dynamic=None, backend="eager", mode=None, options=None, disable=False,
            recompile_limit=8):
    """torch.compile: compile a function or a tessera.nn.Module; without `model`, a decorator.

    dynamic: True makes the batch size symbolic once two batch sizes have been captured (Note
    [Symbolic batch]: the batch is dim 0 of the first tensor argument; other dimensions stay static;
    sizes the program computes from the batch on the host must be lines in it). None (the default)
    and False capture every batch size as a variant of its own: unlike torch.compile's automatic
    dynamic shapes, which see the size expressions, two captures cannot prove a line, so it is opt-in."""
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options,
                                 disable=disable, recompile_limit=recompile_limit)
    if disable:
        return model
    if backend not in _BACKENDS:
        raise ValueError(f"compile: unknown backend '{backend}' (expected one of {', '.join(sorted(_BACKENDS))})")
    if options:
        raise ValueError(f"compile: options are not supported (got {sorted(options)})")
    from tessera.nn.module import Module
    is_module = isinstance(model, Module)
    state = None
    if is_module:
        def state():
            params = list(model.named_parameters()) + list(model.named_buffers())
            return params, [m.training for m in model.modules()]
    if not callable(model):
        raise TypeError(f"compile: expected a callable or a tessera.nn.Module, got {type(model).__name__}")
    name = type(model).__name__ if is_module else getattr(model, "__name__", "function")
    core = _compile.CompiledProgram(mode or "default", bool(dynamic), fullgraph, _BACKENDS[backend], recompile_limit,
                                    name, state)
    return OptimizedModule(model, core) if is_module else CompiledFunction(model, core)


def compile_explain(compiled, *args, **kwargs):
    """Runs a call of `compiled` and describes what the compiler made of it: every variant's graph, its
    guards, each graph break and its reason (ts::compile_explain)."""
    return compiled.explain(*args, **kwargs)
