"""PyTorch side of the optimizer and LR-scheduler conformance tests (tests/optim/test_torch_reference.cpp).

usage: torch_optim_reference.py INPUTS.safetensors OUTPUTS.safetensors

INPUTS (written by tessera) holds the initial parameters "param.<j>", the gradients "grad.<step>.<j>" and,
in its __metadata__, JSON lists "optim_cases" ({"name", "class", "kwargs", "dtype", "steps"}) and
"sched_cases" ({"name", "spec", "optimizer", "lrs", "steps"}). For each optimizer case the parameters
(cast to the case's dtype) take `steps` steps of torch.optim.<class>(**kwargs) with those gradients;
OUTPUTS gets "<name>/param.<j>" and the optimizer state as "<name>/state.<index>.<key>" (numbers as
0-dim float64). For each scheduler case, OUTPUTS gets "<name>/lr" and "<name>/momentum", float64
(steps + 1, groups): get_last_lr() and each group's momentum (or beta1) after construction and after
every optimizer.step(); scheduler.step() pair.
The safetensors files are read and written by tests/common/safetensors_io.py (standard library and torch).
"""
import json
import os
import sys
import warnings

import torch
import torch.optim.lr_scheduler as S

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from safetensors_io import read, write  # noqa: E402
NAMED = {"float32": torch.float32, "float64": torch.float64}


def kwargs_of(d):
    return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}


def run_optim_case(case, inputs, out):
    dtype = NAMED[case["dtype"]]
    nparams = sum(1 for k in inputs if k.startswith("param."))
    params = [inputs["param.%d" % j].to(dtype).clone().requires_grad_() for j in range(nparams)]
    opt = getattr(torch.optim, case["class"])(params, **kwargs_of(case["kwargs"]))
    for s in range(case["steps"]):
        for j, p in enumerate(params):
            p.grad = inputs["grad.%d.%d" % (s, j)].to(dtype).clone()
        opt.step()
    name = case["name"]
    for j, p in enumerate(params):
        out["%s/param.%d" % (name, j)] = p.detach().clone()
    for index, st in opt.state_dict()["state"].items():
        for key, v in st.items():
            if v is None:
                continue
            t = v.detach().clone() if isinstance(v, torch.Tensor) else torch.tensor(float(v), dtype=torch.float64)
            if key == "step":
                t = t.to(torch.float64).reshape(())
            out["%s/state.%d.%s" % (name, index, key)] = t


def make_scheduler(opt, spec):
    kind = spec["type"]
    if kind == "SequentialLR":
        return S.SequentialLR(opt, [make_scheduler(opt, s) for s in spec["schedulers"]], milestones=spec["milestones"])
    if kind == "ChainedScheduler":
        return S.ChainedScheduler([make_scheduler(opt, s) for s in spec["schedulers"]])
    return getattr(S, kind)(opt, **spec["args"])


def momentum_of(group):
    if "momentum" in group:
        return float(group["momentum"])
    if "betas" in group:
        return float(group["betas"][0])
    return 0.0


def run_sched_case(case, out):
    groups = [{"params": [torch.zeros(1, requires_grad=True)], "lr": lr} for lr in case["lrs"]]
    opt_spec = case["optimizer"]
    opt = getattr(torch.optim, opt_spec["class"])(groups, **kwargs_of(opt_spec["kwargs"]))
    sched = make_scheduler(opt, case["spec"])
    lrs = [list(sched.get_last_lr())]
    moms = [[momentum_of(g) for g in opt.param_groups]]
    for _ in range(case["steps"]):
        opt.step()
        sched.step()
        lrs.append(list(sched.get_last_lr()))
        moms.append([momentum_of(g) for g in opt.param_groups])
    out[case["name"] + "/lr"] = torch.tensor(lrs, dtype=torch.float64)
    out[case["name"] + "/momentum"] = torch.tensor(moms, dtype=torch.float64)


def main():
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    inputs, meta = read(sys.argv[1])
    out = {}
    for case in json.loads(meta.get("optim_cases", "[]")):
        run_optim_case(case, inputs, out)
    for case in json.loads(meta.get("sched_cases", "[]")):
        run_sched_case(case, out)
    write(sys.argv[2], out, {})


if __name__ == "__main__":
    main()
