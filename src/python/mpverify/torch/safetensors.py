"""Tensor files for mpverify's readers: safetensors (any float dtype, bfloat16 and
float8 kept) and one .npy per tensor (float16/32/64).

Written by this module itself, with torch and numpy only: the safetensors
layout is an 8-byte little-endian header length, a JSON header padded to 8
bytes, then the raw little-endian data. Every file goes to NAME.tmp and is
renamed, so a reader never sees half a file.
"""

import json
import os
import struct
import sys

import torch

_DTYPES = {
    torch.float16: ("F16", torch.int16),
    torch.bfloat16: ("BF16", torch.int16),
    torch.float32: ("F32", torch.int32),
    torch.float64: ("F64", torch.int64),
}
for _name, _code in (("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2")):
    if hasattr(torch, _name):  # torch >= 2.1
        _DTYPES[getattr(torch, _name)] = (_code, torch.uint8)


def _raw_bytes(t):
    """The tensor's elements as little-endian bytes, C order."""
    if sys.byteorder != "little":
        raise RuntimeError("mpverify writes little-endian data and runs only on little-endian machines")
    # Reinterpreted as integers of the same width: numpy has no bfloat16/float8.
    return t.detach().cpu().contiguous().view(_DTYPES[t.dtype][1]).numpy().tobytes()


def _atomic_write(path, chunks):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        for c in chunks:
            f.write(c)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_safetensors(path, tensors):
    """tensors: dict name -> torch.Tensor (float16/bfloat16/float32/float64/float8)."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        if t.dtype not in _DTYPES:
            raise TypeError(f"{name}: dtype {t.dtype} is not a float type mpverify reads")
        data = _raw_bytes(t)
        header[name] = {"dtype": _DTYPES[t.dtype][0], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the safetensors library pads to 8 bytes: aligned data
    _atomic_write(path, [struct.pack("<Q", len(text)), text] + blobs)


def write_npy_dir(path, tensors):
    import numpy as np
    os.makedirs(path, exist_ok=True)
    for name, t in tensors.items():
        if t.dtype == torch.bfloat16 or t.dtype not in _DTYPES or _DTYPES[t.dtype][0].startswith("F8"):
            raise TypeError(f"{name}: numpy cannot hold {t.dtype}; use fmt='safetensors'")
        file = os.path.join(path, name + ".npy")
        with open(file + ".tmp", "wb") as f:
            np.save(f, t.detach().cpu().numpy())
        os.replace(file + ".tmp", file)
