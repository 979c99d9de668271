#!/usr/bin/env python3
"""Writes tests/io/corpus/: one small malformed safetensors file per validation rule, each named after
the rule it breaks, plus valid_reference.safetensors, a valid file written by hand with struct + json
(not by tessera) so that the reader is checked against an independent writer.

Run once; the files are committed. tests/io/test_safetensors.cpp keeps the table of file -> expected
error text, and fails if a file here is missing from it or vice versa. Uses the standard library only.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")


def pack(header, data=b"", pad=True, length=None):
    """8-byte little-endian header length, the header bytes (str -> UTF-8), then `data`."""
    h = header.encode("utf-8") if isinstance(header, str) else header
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    n = len(h) if length is None else length
    return struct.pack("<Q", n) + h + data


def entry(dtype="F32", shape=(1,), offsets=(0, 4), **extra):
    e = {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}
    e.update(extra)
    return e


def js(obj):
    return json.dumps(obj, separators=(",", ":"))


def f32(*values):
    return struct.pack("<%df" % len(values), *values)


def bf16(*values):
    # bfloat16 is the upper half of a float32 (these values are exact in bfloat16).
    return b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:] for v in values)


MALFORMED = {
    # Length field and header framing.
    "empty_file": b"",
    "file_too_small": b"\x08\x00\x00\x00\x00",
    "header_too_large": struct.pack("<Q", 100_000_001) + b"{}      ",
    "header_length_past_end": pack('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', length=1000),
    "header_length_huge": struct.pack("<Q", 2**64 - 1) + b"{}",
    "header_invalid_utf8": pack(b'{"a\xff":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', f32(1)),
    "header_overlong_utf8": pack(b'{"\xc0\xaf":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', f32(1)),
    "header_invalid_json": pack('{"a":{"dtype":"F32","shape":[1],', f32(1)),
    "header_empty": pack(b"", pad=False),
    "header_not_object": pack("[1, 2, 3]"),
    "header_string": pack('"hello"'),
    "header_too_deep": pack('{"a":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}}', f32(1)),
    # Entries.
    "entry_not_object": pack(js({"a": [0, 4]}), f32(1)),
    "missing_dtype": pack(js({"a": {"shape": [1], "data_offsets": [0, 4]}}), f32(1)),
    "missing_shape": pack(js({"a": {"dtype": "F32", "data_offsets": [0, 4]}}), f32(1)),
    "missing_data_offsets": pack(js({"a": {"dtype": "F32", "shape": [1]}}), f32(1)),
    "extra_field": pack(js({"a": entry(offsets_extra=1)}), f32(1)),
    "unknown_dtype": pack(js({"a": entry(dtype="F7")}), f32(1)),
    "dtype_not_string": pack(js({"a": entry(dtype=4)}), f32(1)),
    "shape_negative": pack(js({"a": entry(shape=(-1,))}), f32(1)),
    "shape_float": pack(js({"a": entry(shape=(1.5,))}), f32(1)),
    "shape_not_list": pack(js({"a": {"dtype": "F32", "shape": 1, "data_offsets": [0, 4]}}), f32(1)),
    "data_offsets_not_pair": pack(js({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}}), f32(1)),
    "data_offsets_negative": pack(js({"a": entry(offsets=(-4, 0))}), f32(1)),
    "data_offsets_reversed": pack(js({"a": entry(shape=(0,), offsets=(4, 0))}), f32(1)),
    "duplicate_names": pack('{"a":%s,"a":%s}' % (js(entry()), js(entry(offsets=(4, 8)))), f32(1, 2)),
    "duplicate_field": pack('{"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}}', f32(1)),
    "metadata_not_map": pack(js({"__metadata__": ["x"], "a": entry()}), f32(1)),
    "metadata_value_not_string": pack(js({"__metadata__": {"epoch": 3}, "a": entry()}), f32(1)),
    # Sizes.
    "numel_overflow": pack(js({"a": entry(dtype="U8", shape=(2**32, 2**32), offsets=(0, 0))})),
    "byte_size_overflow": pack(js({"a": entry(dtype="F32", shape=(2**62,), offsets=(0, 0))})),
    "size_mismatch": pack(js({"a": entry(shape=(2,), offsets=(0, 4))}), f32(1)),
    # Offsets: sorted, they must tile [0, buffer size) exactly.
    "offsets_hole": pack(js({"a": entry(), "b": entry(offsets=(8, 12))}), f32(1, 2, 3)),
    "offsets_not_from_zero": pack(js({"a": entry(offsets=(4, 8))}), f32(1, 2)),
    "offsets_overlap": pack(js({"a": entry(shape=(2,), offsets=(0, 8)), "b": entry(offsets=(4, 8))}), f32(1, 2)),
    "truncated_data": pack(js({"a": entry(shape=(4,), offsets=(0, 16))}), f32(1, 2)),
    "trailing_bytes": pack(js({"a": entry()}), f32(1, 2)),
}


def valid_reference():
    # In the order of their data offsets; the header lists them in another order on purpose.
    tensors = [
        ("weight", "F32", [2, 3], f32(0, 0.5, 1, 1.5, 2, 2.5)),
        ("index", "I64", [3], struct.pack("<3q", -1, 0, 2**40)),
        ("scale", "F64", [], struct.pack("<d", 3.25)),
        ("half", "F16", [2], struct.pack("<2e", 1.5, -2.0)),
        ("bf", "BF16", [2], bf16(1.0, -0.5)),
        ("count", "I32", [1], struct.pack("<i", 7)),
        ("mask", "BOOL", [2, 2], bytes([1, 0, 0, 1])),
        ("small", "I8", [2], struct.pack("<2b", -3, 4)),
        ("bytes", "U8", [2], bytes([250, 1])),
        ("empty", "F32", [0, 3], b""),
    ]
    header, data = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header = dict(sorted(header.items(), reverse=True))
    header["__metadata__"] = {"format": "pt", "note": "written by struct + json"}
    return pack(json.dumps(header), data)  # json.dumps' default separators: spaces after , and :


def main():
    os.makedirs(OUT, exist_ok=True)
    files = dict(MALFORMED)
    files["valid_reference"] = valid_reference()
    for name, raw in sorted(files.items()):
        with open(os.path.join(OUT, name + ".safetensors"), "wb") as f:
            f.write(raw)
    print("wrote %d files to %s" % (len(files), OUT))


if __name__ == "__main__":
    main()
