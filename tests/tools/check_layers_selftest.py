#!/usr/bin/env python3
"""scripts/check_layers.py refuses each kind of bad include and accepts the good ones (run by ctest)."""
import os
import subprocess
import sys
import tempfile

script = sys.argv[1]

def run(files):
    with tempfile.TemporaryDirectory() as repo:
        for rel, text in files.items():
            path = os.path.join(repo, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        r = subprocess.run([sys.executable, script, repo], capture_output=True, text=True)
        return r.returncode, r.stdout

good = {"src/ops/a.cpp": '#include "tensor/tensor_impl.h"\n#include "ops/op_scope.h"\n',
        "src/nn/b.cpp": '#include "ops/loss_ops.h"\n#include "tessera/tensor.h"\n',
        "src/kernels/cpu/c.cpp": '#include "ops/elementwise_kernel.h"\n',
        "include/tessera/d.h": "#include <vector>\n"}
code, out = run(good)
assert code == 0, out

cases = {
    "upward": ({"src/tensor/x.cpp": '#include "ops/op_scope.h"\n'}, "tensor (rank 2) includes ops/op_scope.h"),
    "sideways": ({"src/nn/x.cpp": '#include "models/gpt2.h"\n'}, "nn (rank 8) includes models/gpt2.h"),
    "public_api_upward": ({"src/ops/x.cpp": '#include "tessera/nn/functional.h"\n'},
                          "ops (rank 4) includes tessera/nn/functional.h"),
    "slot": ({"src/optim/x.cpp": '#include "ops/optim_kernel.h"\n'}, "kernel slot header ops/optim_kernel.h"),
    "dispatch_in_kernel": ({"src/kernels/cuda/x.cu": '#include "ops/table/op_table.h"\n'}, "dispatch header"),
    "cuda_public": ({"include/tessera/x.h": "#include <cuda_runtime.h>\n"}, "public header includes cuda_runtime.h"),
}
for name, (files, phrase) in cases.items():
    code, out = run({**good, **files})
    assert code == 1, f"{name}: exit {code}\n{out}"
    assert phrase in out, f"{name}: {phrase!r} not in\n{out}"
    assert "1 include(s)" in out, f"{name}: {out}"
print("check_layers self-test: ok")
