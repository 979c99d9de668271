"""PyTorch side of the conformance suite: reads the inputs tessera wrote, evaluates each case's torch
expression once, writes the outputs. One process per suite run.

usage: torch_oracle.py INPUTS.safetensors OUTPUTS.safetensors
The inputs file's __metadata__ maps "case:<name>" to a JSON object {"expr": str, "n": number of inputs};
inputs are named "<name>/in<i>". Outputs are written as "<name>/out<j>"; a case that raises in PyTorch
gets "error:<name>" -> error text in the outputs' __metadata__ (tessera's side then expects an error
too). Gradients of the weighted sum of the outputs (weights "<name>/w<j>" from the inputs file) are
written as "<name>/grad<i>"; a failure to differentiate as "grad_error:<name>".
When torch.cuda.is_available(), every case is evaluated again with its inputs (and weights) on torch's
GPU and its factories on that device: "<name>/cuda_out<j>", "<name>/cuda_grad<i>", "cuda_error:<name>",
"cuda_grad_error:<name>", and "cuda_device" -> the GPU's name ("" when no GPU was used). tessera's GPU
suites compare with these as well as with the CPU outputs.
The safetensors files are read and written by tests/common/safetensors_io.py (standard library and torch only).
"""
import contextlib
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from safetensors_io import read, write  # noqa: E402



def as_tensors(r):
    if isinstance(r, torch.Tensor):
        return [r]
    if isinstance(r, (bool, int, float)):
        return [torch.tensor(r)]
    if isinstance(r, (tuple, list)):
        out = []
        for x in r:
            out.extend(as_tensors(x))
        return out
    raise TypeError(f"unsupported result type {type(r)}")


LOW = (torch.float16, torch.bfloat16)


def evaluate(expr, x):
    env = {"torch": torch, "F": F, "x": x, "inf": float("inf"), "nan": float("nan")}
    try:
        return eval(expr, env), False
    except RuntimeError as e:
        # PyTorch's CPU kernels lack many float16/bfloat16 ops; its GPU kernels compute those in float32
        # and round once. Do the same here so that tessera's 16-bit results are checked, not skipped.
        low = [t.dtype for t in x if isinstance(t, torch.Tensor) and t.dtype in LOW]
        if "not implemented for" not in str(e) or not low:
            raise
        env["x"] = [t.float() if isinstance(t, torch.Tensor) and t.dtype in LOW else t for t in x]
        r = eval(expr, env)
        back = lambda t: t.to(low[0]) if isinstance(t, torch.Tensor) and t.dtype == torch.float32 else t
        return (type(r)(back(t) for t in r) if isinstance(r, (tuple, list)) else back(r)), True


def gradients(expr, x, weights):
    """Gradients of sum_j sum(out_j * w_j) with respect to the floating inputs, by input index."""
    xs = [t.detach().clone().requires_grad_() if t.is_floating_point() else t for t in x]
    r, _ = evaluate(expr, xs)
    outs = as_tensors(r)
    loss = None
    for j, w in weights.items():
        if j < len(outs) and outs[j].requires_grad:
            term = (outs[j] * w).sum().double()
            loss = term if loss is None else loss + term
    if loss is None:
        return {}
    wrt = [(i, t) for i, t in enumerate(xs) if t.is_floating_point()]
    grads = torch.autograd.grad(loss, [t for _, t in wrt], allow_unused=True)
    return {i: g for (i, _), g in zip(wrt, grads) if g is not None}


def on_device(device):
    """Factories without a device argument build on `device` (torch >= 2.0); a no-op otherwise."""
    if device == "cpu" or not hasattr(torch.device, "__enter__"):
        return contextlib.nullcontext()
    return torch.device(device)


def run_case(name, spec, inputs, device, prefix, outputs, errors, grad_errors, emulated):
    """Evaluates one case with its inputs on `device`; outputs "<name>/<prefix>out<j>" and
    "<name>/<prefix>grad<i>", errors by case name. Returns nothing."""
    x = [inputs[f"{name}/in{i}"].to(device) for i in range(spec["n"])]
    try:
        with torch.no_grad(), on_device(device):
            r, emu = evaluate(spec["expr"], x)
        if emu:
            emulated.append(name)
        for j, t in enumerate(as_tensors(r)):
            outputs[f"{name}/{prefix}out{j}"] = t
    except Exception as e:  # recorded: tessera must raise as well
        errors[name] = f"{type(e).__name__}: {e}"
        return
    weights = {j: inputs[k].to(device) for j in range(16) if (k := f"{name}/w{j}") in inputs}
    if weights:
        try:
            with on_device(device):
                for k, g in gradients(spec["expr"], x, weights).items():
                    outputs[f"{name}/{prefix}grad{k}"] = g
        except Exception as e:
            grad_errors[name] = f"{type(e).__name__}: {e}"


def main():
    inputs, meta = read(sys.argv[1])
    outputs, errors, emulated, grad_errors = {}, {}, [], {}
    cuda = torch.cuda.is_available()
    cuda_errors, cuda_emulated, cuda_grad_errors = {}, [], {}
    torch.manual_seed(0)
    for key, spec in meta.items():
        if not key.startswith("case:"):
            continue
        name = key[5:]
        spec = json.loads(spec)
        run_case(name, spec, inputs, "cpu", "", outputs, errors, grad_errors, emulated)
        if cuda and name in errors:
            # A case that raises on the CPU is not run on the GPU: PyTorch's CUDA kernels check
            # indices with device-side asserts, which abort the process's CUDA context instead of
            # raising (index_select with an index out of range). The CPU's error stands for both.
            cuda_errors[name] = errors[name]
        elif cuda:
            run_case(name, spec, inputs, "cuda", "cuda_", outputs, cuda_errors, cuda_grad_errors, cuda_emulated)
    meta_out = {"torch_version": torch.__version__, "emulated_in_float32": json.dumps(emulated),
                "cuda_device": torch.cuda.get_device_name() if cuda else ""}
    meta_out.update({f"error:{k}": v for k, v in errors.items()})
    meta_out.update({f"grad_error:{k}": v for k, v in grad_errors.items()})
    if cuda:
        meta_out["cuda_emulated_in_float32"] = json.dumps(cuda_emulated)
        meta_out.update({f"cuda_error:{k}": v for k, v in cuda_errors.items()})
        meta_out.update({f"cuda_grad_error:{k}": v for k, v in cuda_grad_errors.items()})
        n = sum(k.startswith("case:") for k in meta)
        print(f"PyTorch oracle: {n} cases on the CPU and on {meta_out['cuda_device']} "
              f"({len(errors)} raised on the CPU, {len(cuda_errors)} on the GPU)")
    write(sys.argv[2], outputs, meta_out)

if __name__ == "__main__":
    main()
