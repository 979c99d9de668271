"""Loads a tessera checkpoint's model.safetensors into the same CNN built in PyTorch with
load_state_dict(strict=True) and checks its output on the saved input. Exit status 0 when they agree."""
import json
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

DT = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64}


def read(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[8 + n + b:8 + n + e]), dtype=DT[info["dtype"]]).reshape(info["shape"])
    return out


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.fc1 = nn.Linear(64 * 5 * 5, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def main():
    d = sys.argv[1]
    m = CNN()
    m.load_state_dict(read(f"{d}/model.safetensors"), strict=True)
    io = read(f"{d}/io.safetensors")
    with torch.no_grad():
        y = m(io["x"])
    ok = torch.allclose(y, io["y"], rtol=1e-4, atol=1e-5)
    print("max abs difference", (y - io["y"]).abs().max().item())
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
