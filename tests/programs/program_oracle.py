"""PyTorch side of the random program tester: runs every program of a batch as tessera's interpreter
does (same op names, same attributes) and writes what the C++ side compares with.

usage: program_oracle.py DIR [--device cpu|cuda]
Reads DIR/programs.jsonl (one program per line, with its "id") and DIR/inputs.safetensors (each input
step's values "<id>/s<i>"). Writes DIR/outputs.safetensors:
  "<id>/w<j>"      the loss weights of floating output j (float64, drawn from the program's seed)
  "<id>/ref<j>"    output j of the float64 run (integer and boolean outputs as they are)
  "<id>/gref<i>"   the float64 gradient of sum_j sum(out_j.double() * w_j) for requires_grad input i
and, in its __metadata__, "<id>" -> JSON:
  {"status": "ok", "out": [{"err", "scale", "pert"}, ...], "grad": {"<i>": {"err", "scale", "pert"}}}
     err:   max |PyTorch's run in the program's dtype - the float64 run|, or the same of a float64
            run whose every intermediate is moved by a random relative u of that dtype and rounded to
            it (four such runs), whichever is larger (for a float64 program, the rounded runs alone,
            since PyTorch's run in the program's dtype is the float64 run)
     scale: max |float64 value|
     pert:  max |float64 run at inputs moved by 1e-7 relative - the float64 run| (the conditioning)
  {"status": "rejected", "reason": ...}   not finite, discontinuous at the inputs, or so ill-conditioned
                                          in its dtype that rounding alone moves a value by a quarter of
                                          its scale: not counted
  {"status": "error", "step": k, "error": ...}   PyTorch raised at step k: tessera must raise there too
With --device cuda the program's own dtype runs on the GPU (the float64 reference stays on the CPU), so
that "err" is PyTorch's CUDA error; the metadata key "device" says which.
The safetensors files are read and written by tests/common/safetensors_io.py.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from safetensors_io import read, write  # noqa: E402

NAMES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
         "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32, "bool": torch.bool}
LOW = (torch.float16, torch.bfloat16)
PERTURB = 1e-7       # relative move of the inputs for the conditioning run
DISCONTINUOUS = 1e-4  # a move of 1e-7 that changes a value by more than this (relative) is a jump
NOISY_RUNS = 4       # float64 runs with each intermediate rounded off at the program's dtype (see run)
ILL_CONDITIONED = 0.25  # a low-precision run that far from float64 (relative) carries no answer to compare
UNIT_ROUNDOFF = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}


def wrap(d, r):
    return d + r if d < 0 else d


def prod(x, dims, keepdim):
    """torch.prod takes one dim: reduce the dims one by one."""
    if not dims:
        return torch.prod(x)
    r = x.dim()
    ds = sorted({wrap(d, max(r, 1)) for d in dims}, reverse=True)
    if r == 0:
        return x.clone()
    for d in ds:
        x = torch.prod(x, d, keepdim=True)
    if not keepdim:
        for d in ds:
            x = x.squeeze(d)
    return x


def slice_(x, a):
    d = wrap(a["dim"], x.dim())
    return x[(slice(None),) * d + (slice(a["start"], a["end"], a["step"]),)]


def squeeze(x, a):
    return x.squeeze(a["dim"]) if "dim" in a else x.squeeze()


def dims_or_all(x, a):
    return a["dims"] if a["dims"] else None


def reduce_dims(x, a):
    """tessera's empty dims mean every dim, with keepdim too (torch.sum(x, dim=[]) would ignore it)."""
    return a["dims"] if a["dims"] else list(range(x.dim()))


def sum_like(f, x, a):
    d = reduce_dims(x, a)
    return f(x, dim=d, keepdim=a.get("keepdim", False)) if d else f(x)


# op name -> f(args, attrs, ctx); ctx: {"device", "dtype": a function mapping a dtype name to torch's}
OPS = {
    "neg": lambda x, a, c: torch.neg(x[0]),
    "abs": lambda x, a, c: torch.abs(x[0]),
    "exp": lambda x, a, c: torch.exp(x[0]),
    "expm1": lambda x, a, c: torch.expm1(x[0]),
    "log": lambda x, a, c: torch.log(x[0]),
    "log1p": lambda x, a, c: torch.log1p(x[0]),
    "sqrt": lambda x, a, c: torch.sqrt(x[0]),
    "rsqrt": lambda x, a, c: torch.rsqrt(x[0]),
    "reciprocal": lambda x, a, c: torch.reciprocal(x[0]),
    "tanh": lambda x, a, c: torch.tanh(x[0]),
    "sigmoid": lambda x, a, c: torch.sigmoid(x[0]),
    "sin": lambda x, a, c: torch.sin(x[0]),
    "cos": lambda x, a, c: torch.cos(x[0]),
    "relu": lambda x, a, c: torch.relu(x[0]),
    "silu": lambda x, a, c: F.silu(x[0]),
    "erf": lambda x, a, c: torch.erf(x[0]),
    "floor": lambda x, a, c: torch.floor(x[0]),
    "logical_not": lambda x, a, c: torch.logical_not(x[0]),
    "gelu": lambda x, a, c: F.gelu(x[0], approximate=a.get("approximate", "none")),
    "softplus": lambda x, a, c: F.softplus(x[0]),
    "pow_scalar": lambda x, a, c: torch.pow(x[0], a["exponent"]),
    "clamp": lambda x, a, c: torch.clamp(x[0], a["min"], a["max"]),
    "add_scalar": lambda x, a, c: x[0] + a["value"],
    "sub_scalar": lambda x, a, c: x[0] - a["value"],
    "mul_scalar": lambda x, a, c: x[0] * a["value"],
    "div_scalar": lambda x, a, c: x[0] / a["value"],
    "gt_scalar": lambda x, a, c: x[0] > a["value"],
    "lt_scalar": lambda x, a, c: x[0] < a["value"],
    "to_dtype": lambda x, a, c: x[0].to(c["dtype"](a["dtype"])),
    "add": lambda x, a, c: torch.add(x[0], x[1]),
    "sub": lambda x, a, c: torch.sub(x[0], x[1]),
    "mul": lambda x, a, c: torch.mul(x[0], x[1]),
    "div": lambda x, a, c: torch.div(x[0], x[1]),
    "maximum": lambda x, a, c: torch.maximum(x[0], x[1]),
    "minimum": lambda x, a, c: torch.minimum(x[0], x[1]),
    "gt": lambda x, a, c: torch.gt(x[0], x[1]),
    "lt": lambda x, a, c: torch.lt(x[0], x[1]),
    "eq": lambda x, a, c: torch.eq(x[0], x[1]),
    "logical_and": lambda x, a, c: torch.logical_and(x[0], x[1]),
    "where": lambda x, a, c: torch.where(x[0], x[1], x[2]),
    "masked_fill": lambda x, a, c: x[0].masked_fill(x[1], a["value"]),
    "lerp": lambda x, a, c: torch.lerp(x[0], x[1], a["weight"]),
    "sum": lambda x, a, c: sum_like(torch.sum, x[0], a),
    "mean": lambda x, a, c: sum_like(torch.mean, x[0], a),
    "prod": lambda x, a, c: prod(x[0], reduce_dims(x[0], a), a.get("keepdim", False)),
    "amax": lambda x, a, c: torch.amax(x[0], dim=a["dims"], keepdim=a.get("keepdim", False)),
    "amin": lambda x, a, c: torch.amin(x[0], dim=a["dims"], keepdim=a.get("keepdim", False)),
    "logsumexp": lambda x, a, c: torch.logsumexp(x[0], dim=a["dims"], keepdim=a.get("keepdim", False)),
    "var": lambda x, a, c: torch.var(x[0], dim=dims_or_all(x[0], a), correction=int(a["correction"]), keepdim=a.get("keepdim", False)),
    "std": lambda x, a, c: torch.std(x[0], dim=dims_or_all(x[0], a), correction=int(a["correction"]), keepdim=a.get("keepdim", False)),
    "norm": lambda x, a, c: torch.linalg.vector_norm(x[0], 2, dim=dims_or_all(x[0], a), keepdim=a.get("keepdim", False)),
    "argmax": lambda x, a, c: torch.argmax(x[0], dim=a.get("dim"), keepdim=a.get("keepdim", False)),
    "argmin": lambda x, a, c: torch.argmin(x[0], dim=a.get("dim"), keepdim=a.get("keepdim", False)),
    "cumsum": lambda x, a, c: torch.cumsum(x[0], a["dim"]),
    "softmax": lambda x, a, c: torch.softmax(x[0], a["dim"]),
    "log_softmax": lambda x, a, c: torch.log_softmax(x[0], a["dim"]),
    "layer_norm": lambda x, a, c: F.layer_norm(x[0], a["normalized_shape"], x[1] if len(x) > 1 else None,
                                               x[2] if len(x) > 2 else None),
    "reshape": lambda x, a, c: x[0].reshape(a["shape"]),
    "view": lambda x, a, c: x[0].view(a["shape"]),
    "permute": lambda x, a, c: x[0].permute(a["dims"]),
    "transpose": lambda x, a, c: x[0].transpose(a["dim0"], a["dim1"]),
    "t": lambda x, a, c: x[0].t(),
    "slice": lambda x, a, c: slice_(x[0], a),
    "narrow": lambda x, a, c: x[0].narrow(a["dim"], a["start"], a["length"]),
    "select": lambda x, a, c: x[0].select(a["dim"], a["index"]),
    "unsqueeze": lambda x, a, c: x[0].unsqueeze(a["dim"]),
    "squeeze": lambda x, a, c: squeeze(x[0], a),
    "flatten": lambda x, a, c: torch.flatten(x[0], a["start"], a["end"]),
    "expand": lambda x, a, c: x[0].expand(a["shape"]),
    "contiguous": lambda x, a, c: x[0].contiguous(),
    "clone": lambda x, a, c: x[0].clone(),
    "flip": lambda x, a, c: torch.flip(x[0], a["dims"]),
    "repeat": lambda x, a, c: x[0].repeat(a["repeats"]),
    "cat": lambda x, a, c: torch.cat(x, a["dim"]),
    "stack": lambda x, a, c: torch.stack(x, a["dim"]),
    "matmul": lambda x, a, c: torch.matmul(x[0], x[1]),
    "index_select": lambda x, a, c: torch.index_select(x[0], a["dim"], x[1]),
    "gather": lambda x, a, c: torch.gather(x[0], a["dim"], x[1]),
    "index": lambda x, a, c: x[0][x[1]],
    "zeros_like": lambda x, a, c: torch.zeros_like(x[0]),
    "ones_like": lambda x, a, c: torch.ones_like(x[0]),
    "full_like": lambda x, a, c: torch.full_like(x[0], a["value"]),
    "arange": lambda x, a, c: torch.arange(a["start"], a["end"], a["step"], dtype=c["dtype"](a["dtype"]), device=c["device"]),
    "linspace": lambda x, a, c: torch.linspace(a["start"], a["end"], a["steps"], dtype=c["dtype"](a["dtype"]), device=c["device"]),
    "full": lambda x, a, c: torch.full(a["shape"], a["value"], dtype=c["dtype"](a["dtype"]), device=c["device"]),
}


def in_layout(t, layout):
    """The same values stored as tessera stores them (program.cpp's materialize_input), so that view
    and the other stride-sensitive ops see the same strides on both sides."""
    if layout == "transposed":
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout == "sliced":
        buf = torch.zeros(t.shape[:-1] + (2 * t.shape[-1],), dtype=t.dtype, device=t.device)
        v = buf[..., ::2]
        v.copy_(t)
        return v
    return t


class StepError(Exception):
    def __init__(self, step, err):
        super().__init__(f"step {step}: {type(err).__name__}: {err}")
        self.step, self.err = step, err


def call(op, args, attrs, ctx):
    """One op; where PyTorch's CPU kernels lack a 16-bit dtype, compute in float32 and round once, as
    its GPU kernels (and tessera's) do."""
    try:
        return OPS[op](args, attrs, ctx)
    except RuntimeError as e:
        low = [t.dtype for t in args if isinstance(t, torch.Tensor) and t.dtype in LOW]
        if "not implemented for" not in str(e) or not low:
            raise
        up = [t.float() if isinstance(t, torch.Tensor) and t.dtype in LOW else t for t in args]
        r = OPS[op](up, attrs, ctx)
        return r.to(low[0]) if r.dtype == torch.float32 else r


def run(prog, values, weights, mode, device, perturb=None, noise=None):
    """Runs `prog` with its inputs' values. mode "low": the program's dtypes; "f64": every floating
    input and floating dtype attribute in float64. `noise` = (u, dtype, generator): each floating op
    result y of a float64 run becomes y (1 + u r) + u m r', r and r' uniform in [-1, 1] and m the
    largest magnitude of the op's operands, rounded to `dtype`'s values (the gradient that flows back
    through it is scaled likewise): a model of another implementation's rounding in that dtype, of
    unit roundoff u.
    Returns (outputs, grads by step) or raises StepError."""
    f64 = mode == "f64"

    def dtype(name):
        d = NAMES[name]
        return torch.float64 if f64 and d.is_floating_point else d

    ctx = {"device": device, "dtype": dtype}
    v, leaves = [], []
    for k, s in enumerate(prog["steps"]):
        if s["op"] == "input":
            t = values[k].to(device)
            if f64 and t.is_floating_point():
                t = t.double()
                if perturb is not None:
                    t = t + perturb[k].to(device)
            t = in_layout(t, s["layout"])
            if s["requires_grad"]:
                t = t.detach().requires_grad_()
                leaves.append(k)
            v.append(t)
            continue
        try:
            r = call(s["op"], [v[i] for i in s["in"]], s.get("attrs", {}), ctx)
        except Exception as e:  # noqa: BLE001 - every PyTorch error is an answer tessera must match
            raise StepError(k, e) from e
        if noise is not None and r.is_floating_point() and r.numel():
            u, low, gen = noise
            ins = [v[i] for i in s["in"] if v[i].is_floating_point() and v[i].numel()]
            m = max([float(t.detach().abs().max()) for t in ins], default=0.0)
            rel = torch.rand(r.shape, generator=gen, dtype=torch.float64) * 2 - 1
            ab = torch.rand(r.shape, generator=gen, dtype=torch.float64) * 2 - 1
            # relative to the result, and absolute at the operands' magnitude (what cancels in
            # x - mean(x) or a + (-a) leaves that much), then onto the dtype's grid: ties and flips as
            # rounding makes them
            r = r * (1 + u * rel) + (u * m) * ab
            r = r.to(low).to(torch.float64)
        v.append(r)
    outs = [v[o] for o in prog["outputs"]]
    grads = {}
    loss = None
    for j, o in enumerate(outs):
        if o.is_floating_point() and o.requires_grad:
            if j not in weights:
                g = torch.Generator().manual_seed((prog["seed"] * 7919 + 1000003 + j) % (2 ** 63))
                weights[j] = torch.randn(o.shape, generator=g, dtype=torch.float64)
            term = (o.double() * weights[j].to(device)).sum()
            loss = term if loss is None else loss + term
    if loss is not None and leaves:
        try:
            g = torch.autograd.grad(loss, [v[k] for k in leaves], allow_unused=True)
        except Exception as e:  # noqa: BLE001
            raise StepError(len(prog["steps"]), e) from e
        for k, gk in zip(leaves, g):
            grads[k] = torch.zeros_like(v[k]) if gk is None else gk
    return [o.detach() for o in outs], {k: g.detach() for k, g in grads.items()}


def dtype_name(t):
    return str(t.dtype).replace("torch.", "")


def maxabs(t):
    return float(t.double().abs().max()) if t.numel() else 0.0


def finite(t):
    return not t.is_floating_point() or bool(torch.isfinite(t).all())


def compare(ref, low, pert, noisy, what):
    """-> ({"err", "scale", "pert"}, None) or (None, reason to reject). err is the larger of the low run's
    and the noisy runs' distance from the float64 run."""
    if not finite(ref) or not finite(low) or not all(finite(t) for t in noisy):
        return None, f"{what} is not finite"
    if not ref.is_floating_point():
        if not all(torch.equal(ref.cpu(), t.cpu().to(ref.dtype)) for t in [low] + noisy):
            return None, f"{what}: rounding to the program's dtype changes an integer value"
        if pert is not None and not torch.equal(ref.cpu(), pert.cpu()):
            return None, f"{what}: an integer value changes under a 1e-7 move of the inputs"
        return {"err": 0.0, "scale": maxabs(ref), "pert": 0.0, "dtype": dtype_name(low)}, None
    scale = maxabs(ref)
    err = max([maxabs(t.cpu().double() - ref.cpu()) for t in [low] + noisy]) if ref.numel() else 0.0
    p = maxabs(pert.cpu() - ref.cpu()) if pert is not None and ref.numel() else 0.0
    if not math.isfinite(p) or p > DISCONTINUOUS * (1 + scale):
        return None, f"{what} jumps under a 1e-7 move of the inputs (by {p:.3g}, scale {scale:.3g})"
    if err > ILL_CONDITIONED * scale + 1e-6:
        return None, f"{what}: in the program's dtype, rounding alone moves it by {err:.3g} (scale {scale:.3g})"
    return {"err": err, "scale": scale, "pert": p, "dtype": dtype_name(low)}, None


def evaluate(prog, values, device):
    gen = torch.Generator().manual_seed(prog["seed"] % (2 ** 63))
    perturb = {}
    for k, s in enumerate(prog["steps"]):
        if s["op"] == "input" and values[k].is_floating_point():
            x = values[k].double()
            sign = torch.randint(0, 2, x.shape, generator=gen, dtype=torch.float64) * 2 - 1
            perturb[k] = PERTURB * (1 + x.abs()) * sign
    weights = {}
    try:
        low_out, low_grad = run(prog, values, weights, "low", device)
    except StepError as e:
        return {"status": "error", "step": e.step, "error": f"{type(e.err).__name__}: {e.err}"}, {}
    try:
        ref_out, ref_grad = run(prog, values, weights, "f64", "cpu")
        pert_out, pert_grad = run(prog, values, weights, "f64", "cpu", perturb)
        noisy = []
        u = UNIT_ROUNDOFF.get(prog["dtype"], 0.0)
        for i in range(NOISY_RUNS if u else 0):
            gen_i = torch.Generator().manual_seed((prog["seed"] * 31 + i + 1) % (2 ** 63))
            noisy.append(run(prog, values, weights, "f64", "cpu", noise=(u, NAMES[prog["dtype"]], gen_i)))
    except StepError as e:
        return {"status": "rejected", "reason": f"the float64 run raised where the program's dtype did not: {e}"}, {}
    meta = {"status": "ok", "out": [], "grad": {}}
    tensors = {f"w{j}": w for j, w in weights.items()}
    for j, (r, lo, pe) in enumerate(zip(ref_out, low_out, pert_out)):
        stats, why = compare(r, lo, pe, [n[0][j] for n in noisy], f"output {j}")
        if why:
            return {"status": "rejected", "reason": why}, {}
        meta["out"].append(stats)
        tensors[f"ref{j}"] = r
    for k, r in ref_grad.items():
        stats, why = compare(r, low_grad[k], pert_grad.get(k), [n[1][k] for n in noisy if k in n[1]],
                             f"the gradient of step {k}")
        if why:
            return {"status": "rejected", "reason": why}, {}
        meta["grad"][str(k)] = stats
        tensors[f"gref{k}"] = r
    return meta, tensors


def main():
    d = sys.argv[1]
    device = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("program_oracle.py: --device cuda, but this PyTorch sees no GPU")
    torch.manual_seed(0)
    inputs, _ = read(os.path.join(d, "inputs.safetensors"))
    tensors, meta = {}, {"torch_version": torch.__version__, "device": device}
    counts = {"ok": 0, "rejected": 0, "error": 0}
    with open(os.path.join(d, "programs.jsonl")) as f:
        for line in f:
            prog = json.loads(line)
            pid = prog["id"]
            values = {k: inputs[f"{pid}/s{k}"] for k, s in enumerate(prog["steps"]) if s["op"] == "input"}
            m, ts = evaluate(prog, values, device)
            counts[m["status"]] += 1
            meta[pid] = json.dumps(m)
            for name, t in ts.items():
                tensors[f"{pid}/{name}"] = t
    write(os.path.join(d, "outputs.safetensors"), tensors, meta)
    print(f"PyTorch {torch.__version__} on {device}: {counts['ok']} programs ran, {counts['rejected']} rejected "
          f"(not finite or discontinuous at the inputs), {counts['error']} raised")


if __name__ == "__main__":
    main()
