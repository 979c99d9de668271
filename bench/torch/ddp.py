#!/usr/bin/env python3
"""The work of bench/distributed/bench_ddp.cpp in PyTorch: DistributedDataParallel at world size 1 (the
nccl backend, one GPU) against plain training, GPT-2 124M (bench/torch/models.py's nanoGPT model),
batch 16 x 1024, bfloat16 autocast, clip_grad_norm_ 1.0, fused AdamW; eager. Two replicas with the same
weights; rounds alternate plain and DDP. The same JSON lines as the C++ side.
"""
import argparse
import json
import os
import socket
import statistics
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import GPT  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)

    def replica(wrap):
        torch.manual_seed(1234)
        model = GPT(block_size=max(1024, a.seq)).cuda().train()
        params = list(model.parameters())
        opt = torch.optim.AdamW(params, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, fused=True)
        fwd = DistributedDataParallel(model, device_ids=[0]) if wrap else model
        return model, fwd, params, opt

    plain, wrapped = replica(False), replica(True)
    torch.manual_seed(7)
    x = torch.randint(0, 50257, (a.batch, a.seq), device="cuda")
    y = torch.randint(0, 50257, (a.batch, a.seq), device="cuda")

    def step(r):
        _, fwd, params, opt = r
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fwd(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    def time_ms(r):
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(a.iters):
            step(r)
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / a.iters

    for _ in range(a.warmup):
        step(plain)
        step(wrapped)
    p, d = [], []
    for r in range(a.rounds):
        p.append(time_ms(plain))
        d.append(time_ms(wrapped))
        print(json.dumps({"round": r, "plain_ms": p[-1], "ddp_ms": d[-1]}), flush=True)
    diff = max((u - v).abs().max().item() for u, v in zip(plain[0].parameters(), wrapped[0].parameters()))
    print(json.dumps({"summary": {"batch": a.batch, "seq": a.seq, "iters": a.iters, "rounds": a.rounds,
                                  "plain_ms": statistics.median(p), "ddp_ms": statistics.median(d),
                                  "max_weight_diff": diff, "torch": torch.__version__}}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
