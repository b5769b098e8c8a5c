"""Dump a PyTorch model's weights, gradients and updates per step for mpverify.

Needs torch and numpy only.

    from mpverify_dump import TensorDumper
    dumper = TensorDumper(model, "dump/")          # registers gradient hooks
    for step, (x, y) in enumerate(batches):
        opt.zero_grad()
        loss_fn(model(x), y).backward()             # the hooks keep each parameter's gradient
        with dumper.step(step):                     # weights + grads saved on entry,
            opt.step()                              # updates (after - before) on exit
    dumper.close()

    mpverify analyze dump/step-000003/grads.safetensors --format fp16 --scales 1,8,64,512,4096,65536
    mpverify swamp --weights dump/step-000003/weights.safetensors --grads dump/step-000003/grads.safetensors --lr 0.1

Layout: DIR/step-NNNNNN/{weights,grads,updates}.safetensors, tensors named by
model.named_parameters(). Files are written as safetensors by this module
itself (8-byte little-endian header length, JSON header, raw little-endian
data), so bfloat16 and float8 tensors keep their type; `fmt="npy"` writes one
.npy per tensor instead (float16/32/64 only: numpy has no bfloat16).

What each file holds:
  weights: the parameters just before optimizer.step(), in their own dtype;
  grads:   the gradients the backward pass produced (the .grad the optimizer
           sees; with a GradScaler, still scaled unless you unscale first);
  updates: the change the step applied, (after - before) computed in float64
           and stored as float32. An update that the fp32 weights themselves
           swallowed shows up as 0 there; for plain SGD use
           `mpverify swamp --grads ... --lr LR`, which forms u = -lr * g.
Every file is written to NAME.tmp and renamed, so a reader never sees half a file.
"""

import contextlib
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
        raise RuntimeError("mpverify_dump writes little-endian data and runs only on little-endian machines")
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


class TensorDumper:
    """Registers a gradient hook on every parameter of `model` and writes
    weights, gradients and updates of the steps it is asked to (every
    `every`-th step passed to step())."""

    def __init__(self, model, out_dir, every=1, fmt="safetensors"):
        if fmt not in ("safetensors", "npy"):
            raise ValueError("fmt must be 'safetensors' or 'npy'")
        self.model, self.out_dir, self.every, self.fmt = model, out_dir, every, fmt
        self.params = {n: p for n, p in model.named_parameters() if p.requires_grad}
        self._grads = {}
        self._handles = [p.register_hook(self._grad_hook(n)) for n, p in self.params.items()]
        os.makedirs(out_dir, exist_ok=True)

    def _grad_hook(self, name):
        def hook(grad):
            # Accumulates like .grad does over several backward passes.
            prev = self._grads.get(name)
            self._grads[name] = grad.detach().clone() if prev is None else prev + grad.detach()
            return grad
        return hook

    def _write(self, step_dir, what, tensors):
        if self.fmt == "safetensors":
            write_safetensors(os.path.join(step_dir, what + ".safetensors"), tensors)
        else:
            write_npy_dir(os.path.join(step_dir, what), tensors)

    @contextlib.contextmanager
    def step(self, step):
        """Wrap optimizer.step(): saves weights and gradients before it and the
        updates after it (when this step is dumped), then clears the gradients kept."""
        dump = step % self.every == 0
        step_dir = os.path.join(self.out_dir, f"step-{step:06d}")
        before = {}
        if dump:
            os.makedirs(step_dir, exist_ok=True)
            before = {n: p.detach().clone() for n, p in self.params.items()}
            self._write(step_dir, "weights", before)
            grads = {n: g for n, g in self._grads.items()}
            if grads:
                self._write(step_dir, "grads", grads)
        try:
            yield
        finally:
            if dump:
                updates = {n: (p.detach().double() - before[n].double()).float() for n, p in self.params.items()}
                self._write(step_dir, "updates", updates)
            self._grads.clear()

    def close(self):
        for h in self._handles:
            h.remove()
        self._handles = []
