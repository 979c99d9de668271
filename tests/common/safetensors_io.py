"""safetensors read and write for the PyTorch sides of the tests (the conformance oracle, the random
program oracle), with the standard library and torch only, so that nothing beyond torch is needed.
"""
import json
import os
import struct

import torch

DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}
CODES = {v: k for k, v in DTYPES.items()}


def read(path):
    """-> ({name: tensor}, the __metadata__ dict)."""
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        buf = bytearray(data[base + b:base + e])
        dt = DTYPES[info["dtype"]]
        t = torch.frombuffer(buf, dtype=dt) if buf else torch.empty(0, dtype=dt)
        tensors[name] = t.reshape(info["shape"])
    return tensors, meta


def write(path, tensors, meta):
    """Names sorted, data in that order, header padded to 8 bytes; written to path + ".tmp" and renamed."""
    header, chunks, off = {}, [], 0
    for name in sorted(tensors):
        # a fresh tensor: contiguous() keeps any stride of a size-1 dim, which view(uint8) refuses
        src = tensors[name].detach()
        t = torch.empty(src.shape, dtype=src.dtype).copy_(src)
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": CODES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    header["__metadata__"] = meta
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for c in chunks:
            f.write(c)
    os.replace(path + ".tmp", path)
