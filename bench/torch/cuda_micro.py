"""The CUDA micro-benchmarks of bench/cuda/bench_cuda_micro.cpp, in PyTorch on the same GPU: same row
names, shapes, dtypes, byte and FLOP counts, and the same timing (CUDA events after warm-up, median of
--runs calls; host wall time for the eager-overhead and allocation rows). bench/run_cuda_micro.py runs it
in alternating rounds with the tessera program.

Prints one JSON object per line, with the fields of the C++ side: {"name", "unit", "value", "ms",
"samples_ms" (each timed call), "bytes" | "flops" | "ops" (the work of one call, from which the value
follows: GB/s, TFLOP/s, us/op; ms rows have none), "peak_mem_gib"}, and on the rows where torch.compile
applies (elementwise, reductions, softmax, layer norm forward and backward, RMS norm forward) "compile":
the same function compiled with torch.compile (default mode), {"value", "ms", "samples_ms"}, or
{"value": null, "error"} where compiling or running it failed. --no-compile leaves "compile" out. A row
that raises prints {"name", "unit", "value": null, "error"} and the run goes on.
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

N256M = 256 << 20
OPT = None


def timed(fn):
    """Milliseconds of each of --runs calls of fn between two CUDA events, after warm-up."""
    for _ in range(OPT.warmup):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = []
    for _ in range(OPT.runs):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        t.append(start.elapsed_time(stop))
    return t


def wall(fn):
    """Host wall milliseconds of each of --runs calls of fn (which synchronizes itself), after one warm-up."""
    fn()
    t = []
    for _ in range(OPT.runs):
        t0 = time.perf_counter()
        fn()
        t.append((time.perf_counter() - t0) * 1e3)
    return t


# The value of a row from the median ms of one call and the work of that call, as bench_cuda_micro.cpp.
FIGURE = {"bytes": lambda n, ms: n / (ms * 1e-3) / 1e9, "flops": lambda n, ms: n / (ms * 1e-3) / 1e12,
          "ops": lambda n, ms: ms * 1e3 / n}


def result(samples, work=None):
    """A row's fields from its samples (ms) and the work of one call, ("bytes" | "flops" | "ops", amount);
    work None: a row in ms."""
    ms = statistics.median(samples)
    out = {"value": FIGURE[work[0]](work[1], ms) if work else ms, "ms": ms, "samples_ms": samples}
    if work:
        out[work[0]] = work[1]
    return out


def by_bytes(n, samples):
    return result(samples, ("bytes", n))


def by_flops(n, samples):
    return result(samples, ("flops", n))


def per_op(n, samples):
    return result(samples, ("ops", n))


def compiled(fn, work=None, timed_call=None):
    """The "compile" field: fn compiled with torch.compile, timed as the eager call (timed_call(cfn) gives
    the callable to time, for a backward), as {"value", "ms", "samples_ms"} or {"value": null, "error"};
    {} (no field) with --no-compile."""
    if not OPT.compile:
        return {}
    try:
        torch._dynamo.reset()  # each row compiles afresh: no guard of another row's closure in the way
        cfn = torch.compile(fn, dynamic=False)
        r = result(timed(timed_call(cfn) if timed_call else cfn), work)
        if work:
            del r[work[0]]  # the work is the eager row's
        return {"compile": r}
    except Exception as e:  # a compiler that is missing or fails: the eager figure stands alone
        return {"compile": {"value": None, "error": f"{type(e).__name__}: {str(e)[:500]}"}}


def row(name, unit, measure):
    if OPT.only and not any(part and part in name for part in OPT.only.split(",")):
        return
    out = {"name": name, "unit": unit}
    try:
        torch.cuda.reset_peak_memory_stats()
        r = measure()
        compile_field = r.pop("compile", None)
        out.update(r)
        out["peak_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30
        if compile_field is not None:
            out["compile"] = compile_field
    except Exception as e:
        out.update({"value": None, "error": f"{type(e).__name__}: {e}"})
    print(json.dumps(out), flush=True)
    torch.cuda.empty_cache()


def rnd(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype, device="cuda")


def bench_copy_reference():
    def m():
        src, dst = rnd(N256M), torch.empty(N256M, device="cuda")
        # a same-dtype contiguous copy_ is one cudaMemcpyAsync
        return by_bytes(2 * N256M * 4, timed(lambda: dst.copy_(src)))
    row("copy_d2d_f32_256M", "GB/s", m)


def bench_elementwise():
    for dt, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        es, n = (4 if dt == torch.float32 else 2), N256M
        state = {}

        def inputs():
            if not state:
                state.update(a=rnd(n, dtype=dt), b=rnd(n, dtype=dt), out=torch.empty(n, dtype=dt, device="cuda"))
            return state["a"], state["b"], state["out"]

        # torch.compile's side computes the same values; it may allocate its output (no out= in a graph)
        def add():
            a, b, out = inputs()
            work = ("bytes", 3 * n * es)
            return {**result(timed(lambda: torch.add(a, b, out=out)), work), **compiled(lambda: a + b, work)}

        def mul():
            a, b, out = inputs()
            work = ("bytes", 3 * n * es)
            return {**result(timed(lambda: torch.mul(a, b, out=out)), work), **compiled(lambda: a * b, work)}

        def gelu():
            a, _, _ = inputs()
            work = ("bytes", 2 * n * es)
            return {**result(timed(lambda: F.gelu(a)), work), **compiled(lambda: F.gelu(a), work)}

        def copy():
            a, _, out = inputs()
            work = ("bytes", 2 * n * es)
            return {**result(timed(lambda: out.copy_(a)), work), **compiled(lambda: out.copy_(a), work)}

        row(f"add_{tag}_256M", "GB/s", add)
        row(f"mul_{tag}_256M", "GB/s", mul)
        row(f"gelu_{tag}_256M", "GB/s", gelu)
        row(f"copy_{tag}_256M", "GB/s", copy)
        state.clear()


def bench_reductions():
    m = 16384
    state = {}
    for dim, tag in ((1, "lastdim"), (0, "firstdim")):
        def meas(dim=dim):
            if not state:
                state["x"] = rnd(m, m)
            x = state["x"]
            work = ("bytes", m * m * 4 + m * 4)
            return {**result(timed(lambda: x.sum(dim)), work), **compiled(lambda: x.sum(dim), work)}
        row(f"sum_{tag}_f32_16384x16384", "GB/s", meas)
    state.clear()


def bench_norms():
    r, c = 16384, 4096
    bf = torch.bfloat16

    def softmax():
        x = rnd(r, c, dtype=bf)
        return {**result(timed(lambda: torch.softmax(x, -1))), **compiled(lambda: torch.softmax(x, -1))}

    def ln_fwd():
        x, w, b = rnd(r, c, dtype=bf), rnd(c, dtype=bf), rnd(c, dtype=bf)
        with torch.no_grad():
            return {**result(timed(lambda: F.layer_norm(x, (c,), w, b))),
                    **compiled(lambda: F.layer_norm(x, (c,), w, b))}

    def ln_bwd():
        x, w, b = (t.requires_grad_() for t in (rnd(r, c, dtype=bf), rnd(c, dtype=bf), rnd(c, dtype=bf)))
        gy = rnd(r, c, dtype=bf)
        y = F.layer_norm(x, (c,), w, b)
        eager = result(timed(lambda: torch.autograd.grad(y, (x, w, b), gy, retain_graph=True)))

        def backward_of(cfn):  # the compiled forward's graph, its backward timed as the eager one
            yc = cfn()
            return lambda: torch.autograd.grad(yc, (x, w, b), gy, retain_graph=True)
        return {**eager, **compiled(lambda: F.layer_norm(x, (c,), w, b), timed_call=backward_of)}

    row("softmax_bf16_16384x4096", "ms", softmax)
    row("layer_norm_fwd_bf16_16384x4096", "ms", ln_fwd)
    row("layer_norm_bwd_bf16_16384x4096", "ms", ln_bwd)

    def rms_fwd():
        x, w = rnd(r, c, dtype=bf), rnd(c, dtype=bf)
        with torch.no_grad():
            return {**result(timed(lambda: F.rms_norm(x, (c,), w, 1e-6))),
                    **compiled(lambda: F.rms_norm(x, (c,), w, 1e-6))}

    row("rms_norm_fwd_bf16_16384x4096", "ms", rms_fwd)


def bench_attention():
    # (B, T, H, D) bfloat16 buffers seen as (B, H, T, D), as GPT-2 makes them; FLOPs as in
    # bench_cuda_micro.cpp (forward 4 B H T^2 D / 2, forward + backward 3.5 times that).
    for b, h, t, d in ((16, 12, 1024, 64), (8, 16, 2048, 128)):
        tag = f"bf16_B{b}_H{h}_T{t}_D{d}_causal"
        fwd_flops = 4.0 * b * h * t * t * d / 2

        def qkv(b=b, h=h, t=t, d=d):
            return [rnd(b, t, h, d, dtype=torch.bfloat16) for _ in range(3)]

        def attend(x):
            return F.scaled_dot_product_attention(x[0].transpose(1, 2), x[1].transpose(1, 2), x[2].transpose(1, 2),
                                                  is_causal=True)

        def fwd(fwd_flops=fwd_flops):
            x = qkv()
            with torch.no_grad():
                return by_flops(fwd_flops, timed(lambda: attend(x)))

        def fwd_bwd(fwd_flops=fwd_flops, b=b, h=h, t=t, d=d):
            x = [y.requires_grad_() for y in qkv()]
            gy = rnd(b, h, t, d, dtype=torch.bfloat16)
            return by_flops(3.5 * fwd_flops, timed(lambda: torch.autograd.grad(attend(x), x, gy)))

        row(f"attention_fwd_{tag}", "TFLOP/s", fwd)
        row(f"attention_fwd_bwd_{tag}", "TFLOP/s", fwd_bwd)


def bench_loss():
    r, c = 8192, 50257

    def ce():
        x = rnd(r, c, dtype=torch.bfloat16).requires_grad_()
        t = torch.randint(0, c, (r,), device="cuda")
        return result(timed(lambda: torch.autograd.grad(F.cross_entropy(x, t), (x,))))

    row("cross_entropy_fwd_bwd_bf16_8192x50257", "ms", ce)


def bench_fused():
    """The unfused compositions that tessera's fused ops replace (GPT-2 124M sizes), bf16, fwd + bwd."""
    r, c, f, v = 16384, 768, 3072, 50257
    bf = torch.bfloat16

    def add_ln():
        x, res = rnd(r, c, dtype=bf).requires_grad_(), rnd(r, c, dtype=bf).requires_grad_()
        w, b = rnd(c, dtype=bf).requires_grad_(), rnd(c, dtype=bf).requires_grad_()
        gs, gy = rnd(r, c, dtype=bf), rnd(r, c, dtype=bf)

        def step():
            s = x + res
            y = F.layer_norm(s, (c,), w, b)
            torch.autograd.grad((s, y), (x, res, w, b), (gs, gy))
        return result(timed(step))

    def lin_gelu():
        x = rnd(r, c, dtype=bf).requires_grad_()
        w = (rnd(f, c, dtype=bf) / math.sqrt(c)).requires_grad_()
        b = rnd(f, dtype=bf).requires_grad_()
        gy = rnd(r, f, dtype=bf)

        def step():
            y = F.gelu(F.linear(x, w, b), approximate="tanh")
            torch.autograd.grad(y, (x, w, b), gy)
        return result(timed(step))

    def mlp():
        x = rnd(r, c, dtype=bf).requires_grad_()
        w1 = (rnd(f, c, dtype=bf) / math.sqrt(c)).requires_grad_()
        b1 = rnd(f, dtype=bf).requires_grad_()
        w2 = (rnd(c, f, dtype=bf) / math.sqrt(f)).requires_grad_()
        b2 = rnd(c, dtype=bf).requires_grad_()
        gy = rnd(r, c, dtype=bf)

        def step():
            y = F.linear(F.gelu(F.linear(x, w1, b1), approximate="tanh"), w2, b2)
            torch.autograd.grad(y, (x, w1, b1, w2, b2), gy)
        return result(timed(step))

    def lin():
        x = rnd(r, c, dtype=bf).requires_grad_()
        w = (rnd(v, c, dtype=bf) * 0.02).requires_grad_()
        gy = rnd(r, v, dtype=bf)

        def step():
            torch.autograd.grad(F.linear(x, w), (x, w), gy)
        return result(timed(step))

    def lin_ce():
        x = rnd(r, c, dtype=bf).requires_grad_()
        w = (rnd(v, c, dtype=bf) * 0.02).requires_grad_()
        t = torch.randint(0, v, (r,), device="cuda")

        def step():
            torch.autograd.grad(F.cross_entropy(F.linear(x, w), t), (x, w))
        return result(timed(step))

    row("add_layer_norm_fwd_bwd_bf16_16384x768", "ms", add_ln)
    row("linear_gelu_fwd_bwd_bf16_16384x768x3072", "ms", lin_gelu)
    row("mlp_gelu_fwd_bwd_bf16_16384x768x3072x768", "ms", mlp)
    row("linear_fwd_bwd_bf16_16384x768x50257", "ms", lin)
    row("linear_cross_entropy_fwd_bwd_bf16_16384x768x50257", "ms", lin_ce)


def bench_matmul():
    n = 8192
    flops = 2.0 * n ** 3

    def bf16():
        a, b = rnd(n, n, dtype=torch.bfloat16), rnd(n, n, dtype=torch.bfloat16)
        return by_flops(flops, timed(lambda: torch.matmul(a, b)))

    def tf32():
        a, b = rnd(n, n), rnd(n, n)
        prev = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return by_flops(flops, timed(lambda: torch.matmul(a, b)))
        finally:
            torch.backends.cuda.matmul.allow_tf32 = prev

    row("matmul_bf16_8192", "TFLOP/s", bf16)
    row("matmul_f32_tf32_8192", "TFLOP/s", tf32)


# (name, cin, cout, hw, k, stride, pad): the distinct conv shapes of torchvision's ResNet-50, as in
# bench_cuda_micro.cpp.
RESNET50 = [
    ("conv1_7x7_3_64_s2", 3, 64, 224, 7, 2, 3),
    ("l1_1x1_64_64", 64, 64, 56, 1, 1, 0),
    ("l1_3x3_64_64", 64, 64, 56, 3, 1, 1),
    ("l1_1x1_64_256", 64, 256, 56, 1, 1, 0),
    ("l1_1x1_256_64", 256, 64, 56, 1, 1, 0),
    ("l2_1x1_256_128", 256, 128, 56, 1, 1, 0),
    ("l2_3x3_128_128_s2", 128, 128, 56, 3, 2, 1),
    ("l2_1x1_128_512", 128, 512, 28, 1, 1, 0),
    ("l2_down_1x1_256_512_s2", 256, 512, 56, 1, 2, 0),
    ("l2_1x1_512_128", 512, 128, 28, 1, 1, 0),
    ("l2_3x3_128_128", 128, 128, 28, 3, 1, 1),
    ("l3_1x1_512_256", 512, 256, 28, 1, 1, 0),
    ("l3_3x3_256_256_s2", 256, 256, 28, 3, 2, 1),
    ("l3_1x1_256_1024", 256, 1024, 14, 1, 1, 0),
    ("l3_down_1x1_512_1024_s2", 512, 1024, 28, 1, 2, 0),
    ("l3_1x1_1024_256", 1024, 256, 14, 1, 1, 0),
    ("l3_3x3_256_256", 256, 256, 14, 3, 1, 1),
    ("l4_1x1_1024_512", 1024, 512, 14, 1, 1, 0),
    ("l4_3x3_512_512_s2", 512, 512, 14, 3, 2, 1),
    ("l4_1x1_512_2048", 512, 2048, 7, 1, 1, 0),
    ("l4_down_1x1_1024_2048_s2", 1024, 2048, 14, 1, 2, 0),
    ("l4_1x1_2048_512", 2048, 512, 7, 1, 1, 0),
    ("l4_3x3_512_512", 512, 512, 7, 3, 1, 1),
]


def bench_conv():
    batch, bf, cl = 256, torch.bfloat16, torch.channels_last
    torch.backends.cudnn.benchmark = True  # PyTorch's usual setting for fixed shapes
    total, complete = 0.0, True
    for name, cin, cout, hw, k, stride, pad in RESNET50:
        done = []

        def meas():
            x = rnd(batch, cin, hw, hw, dtype=bf).contiguous(memory_format=cl).requires_grad_()
            w = (rnd(cout, cin, k, k, dtype=bf) / math.sqrt(cin * k * k)).contiguous(memory_format=cl).requires_grad_()
            ho = (hw + 2 * pad - k) // stride + 1
            gy = rnd(batch, cout, ho, ho, dtype=bf).contiguous(memory_format=cl)

            def step():
                y = F.conv2d(x, w, None, stride, pad)
                torch.autograd.grad(y, (x, w), gy)
            r = result(timed(step))
            done.append(r["ms"])
            return {**r, "layout": "channels_last"}
        row(f"conv2d_rn50_b256_bf16/{name}", "ms", meas)
        if done:
            total += done[0]
        else:
            complete = False

    def tot():
        if not complete:
            raise RuntimeError("some layers failed (see the conv2d_rn50_b256_bf16/ rows)")
        return {"value": total, "ms": total, "layout": "channels_last", "layers": len(RESNET50)}
    row("conv2d_rn50_b256_bf16_fwd_bwd", "ms", tot)


def bench_batch_norm():
    def meas():
        c, bf, cl = 256, torch.bfloat16, torch.channels_last
        x = rnd(256, c, 56, 56, dtype=bf).contiguous(memory_format=cl).requires_grad_()
        gy = rnd(256, c, 56, 56, dtype=bf).contiguous(memory_format=cl)
        w, b = rnd(c).requires_grad_(), rnd(c).requires_grad_()
        rm, rv = torch.zeros(c, device="cuda"), torch.ones(c, device="cuda")

        def step():
            y = F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5)
            torch.autograd.grad(y, (x, w, b), gy)
        return {**result(timed(step)), "layout": "channels_last"}
    row("batch_norm_fwd_bwd_bf16_cl_256x256x56x56", "ms", meas)


def bench_overhead():
    def eager():
        x0, y = rnd(1024), rnd(1024)

        def loop():
            x = x0
            for _ in range(1000):
                x = torch.add(x, y)
            torch.cuda.synchronize()
        return per_op(1000, wall(loop))

    def alloc():
        iters = 10000

        def loop():
            for _ in range(iters):
                torch.empty(262144, device="cuda")
        return per_op(iters, wall(loop))

    row("eager_add_1024_x1000", "us/op", eager)
    row("alloc_free_1MiB", "us/op", alloc)


def main():
    global OPT
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--only", default="", help="only rows whose name contains one of these comma-separated parts")
    ap.add_argument("--no-compile", dest="compile", action="store_false")
    OPT = ap.parse_args()
    OPT.runs = max(OPT.runs, 20)
    if not torch.cuda.is_available():
        print("cuda_micro.py: PyTorch sees no CUDA GPU", file=sys.stderr)
        return 3
    torch.manual_seed(0)
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__}), flush=True)
    bench_copy_reference()
    bench_elementwise()
    bench_reductions()
    bench_norms()
    bench_attention()
    bench_loss()
    bench_fused()
    bench_matmul()
    bench_conv()
    bench_batch_norm()
    bench_overhead()
    return 0


if __name__ == "__main__":
    sys.exit(main())
