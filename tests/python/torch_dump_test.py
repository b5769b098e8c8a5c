"""Integration test: train a tiny model in PyTorch, dump it with
mpverify.torch.Dumper (and with numpy's own writers), and hold mpverify's
counts against what PyTorch itself produces for the same tensors:
  analyze: underflow to zero, subnormal and overflow of x.mul(S).half() and
           x.mul(S).bfloat16() (x.float() first for half/bf16 tensors), exactly;
  swamp:   lost updates of w + u in fp16/bf16 and fp32, exactly.
Usage: torch_dump_test.py MPVERIFY_BIN PYTHON_PACKAGE_DIR WORK_DIR (build/python). Exit 77 (skipped)
when torch or numpy cannot be imported, 1 on any mismatch.
"""
if __name__ != "__main__":  # a script run by ctest (usage above) that deletes its work folder, not a pytest module
    import pytest
    pytest.skip("a script: run it as ctest does, python3 FILE ARGUMENTS", allow_module_level=True)

import json
import os
import shutil
import struct
import subprocess
import sys

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"SKIP: {e} (install python3-torch python3-numpy)")
    sys.exit(77)

mpverify, package_dir, work = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, package_dir)
from mpverify.torch import Dumper  # noqa: E402
from mpverify.torch.safetensors import write_safetensors  # noqa: E402

checks = 0
failures = []


def expect_equal(what, ours, theirs):
    global checks
    checks += 1
    if ours != theirs:
        failures.append(f"{what}: mpverify {ours} != torch {theirs}")


def run(*args):
    r = subprocess.run([mpverify, *args], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        raise SystemExit(f"mpverify {' '.join(args)} exited {r.returncode}")
    return json.loads(r.stdout)


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
torch.manual_seed(0)

# --- a tiny model trained for a few steps, dumped by the Dumper ----------
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
lr = 0.05
opt = torch.optim.SGD(model.parameters(), lr=lr)
dumper = Dumper(model, os.path.join(work, "dump"))
for step in range(3):
    x = torch.randn(16, 8)
    y = torch.randn(16, 4)
    opt.zero_grad()
    # A tiny loss factor puts the gradients where fp16 loses them (2^-24 .. 2^-30).
    loss = 1e-6 * torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    with dumper.step(step):
        opt.step()
dumper.close()
step_dir = os.path.join(work, "dump", "step-000002")
for name in ("weights", "grads", "updates"):
    assert os.path.exists(os.path.join(step_dir, name + ".safetensors")), name

# --- extra files written by numpy and by the module, in other dtypes/orders ---
extra = os.path.join(work, "extra")
os.makedirs(extra)
rng = np.random.default_rng(1)
arrays = {
    "npy_f32": (rng.standard_normal((40, 30)) * 2.0 ** rng.integers(-40, 20, (40, 30))).astype("<f4"),
    "npy_f64_be": (rng.standard_normal(500) * 2.0 ** rng.integers(-40, 20, 500)).astype(">f8"),
    "npy_fortran": np.asfortranarray((rng.standard_normal((20, 25)) * 1e-6).astype("<f4")),
    "npy_f16": (rng.standard_normal(700) * 2.0 ** rng.integers(-20, 14, 700)).astype("<f2"),
    # Doubles just above fp16/bf16 rounding midpoints: torch's .half() of a float64 tensor
    # goes through float32, where the tail below 2^-24 relative is lost (two roundings).
    "npy_f64_midpoints": np.array([2.0**-25 * (1 + 2.0**-40), 1 + 2.0**-11 + 2.0**-40, 1 + 2.0**-8 + 2.0**-40,
                                   65520 * (1 - 2.0**-30), 2.0**-133 * (1 + 2.0**-40), 2.0**-25], dtype="<f8"),
}
for name, a in arrays.items():
    np.save(os.path.join(extra, name + ".npy"), a)
np.savez(os.path.join(extra, "stored.npz"), a=arrays["npy_f32"], b=arrays["npy_f16"])
np.savez_compressed(os.path.join(extra, "deflated.npz"), c=arrays["npy_fortran"], d=arrays["npy_f64_be"])
bf16 = (torch.randn(300) * 2.0 ** torch.randint(-130, 20, (300,)).float()).bfloat16()
write_safetensors(os.path.join(extra, "bf16.safetensors"), {"bf": bf16, "h": torch.randn(50).half() * 1e-5})

torch_tensors = {
    "npy_f32.npy:npy_f32": torch.from_numpy(arrays["npy_f32"]),
    "npy_f64_be.npy:npy_f64_be": torch.from_numpy(arrays["npy_f64_be"].astype("<f8")),
    "npy_fortran.npy:npy_fortran": torch.from_numpy(np.ascontiguousarray(arrays["npy_fortran"])),
    "npy_f16.npy:npy_f16": torch.from_numpy(arrays["npy_f16"]),
    "npy_f64_midpoints.npy:npy_f64_midpoints": torch.from_numpy(arrays["npy_f64_midpoints"]),
    "stored.npz:a": torch.from_numpy(arrays["npy_f32"]),
    "stored.npz:b": torch.from_numpy(arrays["npy_f16"]),
    "deflated.npz:c": torch.from_numpy(np.ascontiguousarray(arrays["npy_fortran"])),
    "deflated.npz:d": torch.from_numpy(arrays["npy_f64_be"].astype("<f8")),
    "bf16.safetensors:bf": bf16,
}


def torch_counts(t, scale, target):
    """PyTorch's cast of x * S: float32 product (float64 for double tensors)."""
    x = t if t.dtype == torch.float64 else t.float()
    y = x.mul(scale)
    y = y.half() if target == "fp16" else y.bfloat16()
    min_normal = 2.0 ** -14 if target == "fp16" else 2.0 ** -126
    finite_in = torch.isfinite(x)
    nonzero_in = finite_in & (x != 0)
    yf = y.float()
    return {
        "count": x.numel(),
        "zeros_in": int((x == 0).sum()),
        "nan_or_inf_in": int((~finite_in).sum()),
        "underflow_to_zero": int((nonzero_in & (yf == 0)).sum()),
        "subnormal": int((torch.isfinite(yf) & (yf != 0) & (yf.abs() < min_normal)).sum()),
        "overflow": int((finite_in & ~torch.isfinite(yf)).sum()),
    }


def read_st(path):
    """An F32 safetensors file as name -> flat float32 torch tensor."""
    raw = open(path, "rb").read()
    hlen = struct.unpack("<Q", raw[:8])[0]
    out = {}
    for name, info in json.loads(raw[8:8 + hlen]).items():
        assert info["dtype"] == "F32", info
        b, e = info["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(raw[8 + hlen + b:8 + hlen + e], dtype="<f4").copy())
    return out


scales = [1.0, 8.0, 1024.0, 65536.0, 3.0, 0.125]
scale_arg = ",".join(repr(s) for s in scales)
for target in ("fp16", "bf16"):
    # The hook module's dump: gradients of step 2 (a file) and the whole dump directory.
    grads = run("analyze", os.path.join(step_dir, "grads.safetensors"), "--format", target, "--scales", scale_arg, "--json")
    # The hook's gradients, read back with numpy from the file (the hook saved exactly .grad).
    for name, t in read_st(os.path.join(step_dir, "grads.safetensors")).items():
        for r in grads["results"]:
            if r["tensor"] == name:
                theirs = torch_counts(t, r["scale"], target)
                for k, v in theirs.items():
                    expect_equal(f"{target} grads {name} scale {r['scale']} {k}", r[k], v)
    # numpy-written and module-written files of every dtype and order.
    res = run("analyze", extra, "--format", target, "--scales", scale_arg, "--json")
    seen = set()
    for r in res["results"]:
        if r["tensor"] in torch_tensors:
            seen.add(r["tensor"])
            theirs = torch_counts(torch_tensors[r["tensor"]], r["scale"], target)
            for k, v in theirs.items():
                expect_equal(f"{target} {r['tensor']} scale {r['scale']} {k}", r[k], v)
    expect_equal(f"{target} tensors compared", sorted(seen), sorted(torch_tensors))
    expect_equal(f"{target} no failures", res["failures"], [])

# The gradients really lie where fp16 loses some at scale 1 (else the check above proves little).
g_total = run("analyze", os.path.join(step_dir, "grads.safetensors"), "--format", "fp16", "--json")["total"][0]
if g_total["underflow_to_zero"] + g_total["subnormal"] == 0:
    failures.append("the test's gradients never reach fp16's underflow range")

# --- swamp: lost updates against torch's own additions --------------------------
sw = run("swamp", "--weights", os.path.join(step_dir, "weights.safetensors"),
         "--grads", os.path.join(step_dir, "grads.safetensors"), "--lr", repr(lr), "--json")
W = read_st(os.path.join(step_dir, "weights.safetensors"))
G = read_st(os.path.join(step_dir, "grads.safetensors"))
lr32 = float(np.float32(lr))
for r in sw["tensors"]:
    w, g = W[r["tensor"]], G[r["tensor"]]
    u = g.mul(-lr32)  # fl32(-lr * g)
    upd = (u != 0) & torch.isfinite(u) & torch.isfinite(w)
    for target, cast in (("fp16", torch.Tensor.half), ("bf16", torch.Tensor.bfloat16)):
        ws = cast(w)
        # w_s + u summed exactly in float64 then rounded once: the float64 sum is exact
        # whenever the result can be a format midpoint (|u| within 2^-12 |w| needs < 53 bits),
        # and a far-smaller u rounds back to w either way.
        lost = upd & (cast(ws.double() + u.double()) == ws)
        expect_equal(f"swamp {target} {r['tensor']} lost", r[target]["without_master"]["lost"], int(lost.sum()))
        expect_equal(f"swamp {target} {r['tensor']} updates", r[target]["without_master"]["updates"], int(upd.sum()))
    lost32 = upd & ((w.double() + u.double()).float() == w)
    expect_equal(f"swamp fp32-master {r['tensor']} lost", r["fp16"]["with_master"]["lost"], int(lost32.sum()))
expect_equal("swamp tensors", len(sw["tensors"]), 4)

print(f"{checks} checks, {len(failures)} failed")
for f in failures:
    print("FAIL", f)
shutil.rmtree(work, ignore_errors=True)
sys.exit(1 if failures else 0)
