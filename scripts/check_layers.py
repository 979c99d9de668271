#!/usr/bin/env python3
"""The layering of DESIGN.md "Layers", checked: exits 1 listing every #include that goes against it.

`./run test` runs it before building, so an include that points up a layer fails the test command.
Rules:
  1. A file under src/<layer>/ includes its own layer and lower layers only (ranks below); a public
     header of a layer's API (tessera/nn/..., tessera/optim/..., tessera/data/..., tessera/models/...)
     counts as that layer.
  2. The layers above the op table (nn, optim, data, io, models) call ops, never kernel slots: they do
     not include ops/kernel_slot.h or an ops/*_kernel.h slot header (Note [Scoped kernels]).
  3. Kernels (src/kernels) do not include the op table or the dispatch stages: they register into
     slots and know nothing of OpId, autograd or autocast.
  4. Public headers (include/tessera) include no CUDA header: a user without CUDA builds against them.
Usage: check_layers.py [REPO]
"""
import os
import re
import sys

RANK = {
    "core": 0, "runtime": 1, "tensor": 2, "profiler": 3, "ops": 4, "kernels": 5, "autograd": 5, "io": 5,
    "amp": 6, "compile": 7, "nn": 8, "optim": 8, "data": 8, "distributed": 9, "models": 9,
}
ABOVE_OPS = {"nn", "optim", "data", "io", "models"}
SLOT_HEADER = re.compile(r"^ops/(kernel_slot|\w+_kernel)\.h$")
DISPATCH_HEADER = re.compile(r"^ops/(table/|op_scope\.h|autograd_hook\.h|autocast_hook\.h|no_record\.h)")
CUDA_HEADER = re.compile(r"^(cuda|cublas|cudnn|nccl|nvrtc|cupti|nvtx|curand|cusparse)")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
SOURCES = (".h", ".hpp", ".cuh", ".cpp", ".cc", ".cu")


def includes(path):
    with open(path, errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield n, m.group(1)


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else "."
    src = os.path.join(repo, "src")
    bad = []
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith(SOURCES):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)
            own = rel.split(os.sep)[0]
            if own not in RANK:
                continue
            for n, inc in includes(path):
                parts = inc.split("/")
                target = parts[1] if parts[0] == "tessera" and len(parts) > 2 else parts[0]
                where = f"src/{rel}:{n}"
                if target in RANK and target != own and RANK[target] >= RANK[own]:
                    bad.append(f"{where}: {own} (rank {RANK[own]}) includes {inc} ({target}, rank {RANK[target]})")
                if own in ABOVE_OPS and SLOT_HEADER.match(inc):
                    bad.append(f"{where}: {own} includes the kernel slot header {inc}; call the op instead")
                if own == "kernels" and DISPATCH_HEADER.match(inc):
                    bad.append(f"{where}: a kernel includes the dispatch header {inc}")
    for root, _, files in os.walk(os.path.join(repo, "include")):
        for name in sorted(files):
            path = os.path.join(root, name)
            for n, inc in includes(path):
                if CUDA_HEADER.match(inc):
                    bad.append(f"{os.path.relpath(path, repo)}:{n}: a public header includes {inc}")
    for line in bad:
        print(line)
    print(f"check_layers: {len(bad)} include(s) against DESIGN.md's layering")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
