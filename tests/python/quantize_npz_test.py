"""`mpverify quantize`'s OUT.npz read by numpy: the arrays' names, dtypes and
shapes, and mxfp8-e4m3 under rceil against a numpy transcription of the rule
(Transformer Engine's): per 1x32 block along the last axis (the last block of a
row partial), X = 2^ceil(log2(amax / 448)) with the exponent clamped to
[-127, 127]; each element x / X rounded to nearest-even in E4M3 (bias 7, 3
fraction bits, subnormals down to 2^-9), which under this rule never exceeds 448.
Usage: quantize_npz_test.py MPVERIFY_BIN WORK_DIR. Exit 77 (skipped) when numpy
cannot be imported, 1 on any mismatch.
"""
if __name__ != "__main__":  # a script run by ctest (usage above) that deletes its work folder, not a pytest module
    import pytest
    pytest.skip("a script: run it as ctest does, python3 FILE ARGUMENTS", allow_module_level=True)

import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
except ImportError as e:
    print(f"SKIP: {e} (install python3-numpy)")
    sys.exit(77)

mpverify, work = sys.argv[1], sys.argv[2]
failures = []


def check(what, ok):
    if not ok:
        failures.append(what)


def run(*args):
    r = subprocess.run([mpverify, "quantize", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"mpverify quantize {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


def rceil_scales(x, block=32):
    """2^ceil(log2(amax / 448)) per block of `block` along the last axis, as float64."""
    rows, cols = x.shape
    nblocks = -(-cols // block)
    scales = np.empty((rows, nblocks))
    for b in range(nblocks):
        amax = np.abs(x[:, b * block:(b + 1) * block].astype(np.float64)).max(axis=1)
        ratio = amax / 448.0
        m, ex = np.frexp(np.where(ratio > 0, ratio, 1.0))  # ratio = m * 2^ex, m in [0.5, 1)
        k = np.where(m == 0.5, ex - 1, ex)                 # ceil(log2 ratio)
        k = np.where(ratio > 0, k, -127)
        scales[:, b] = np.exp2(np.clip(k, -127, 127))
    return scales


def e4m3_round(y):
    """Nearest-even in E4M3 of float64 values (|y| <= 448 here), sign kept on zero."""
    a = np.abs(y)
    _, ex = np.frexp(np.where(a > 0, a, 1.0))
    e = np.maximum(ex - 1, -6)              # the binade, subnormals at 2^-6's step
    step = np.exp2(e - 3.0)
    q = np.round(a / step) * step           # numpy rounds halves to even
    return np.copysign(np.minimum(q, 448.0), y)


def e4m3_codes(q):
    a = np.abs(q)
    _, ex = np.frexp(np.where(a > 0, a, 1.0))
    e = ex - 1
    normal = a >= 2.0 ** -6
    field = np.where(normal, e + 7, 0)
    mant = np.where(normal, (a / np.exp2(e) - 1) * 8, a / 2.0 ** -9)
    return (np.signbit(q).astype(np.uint8) << 7) | (field.astype(np.uint8) << 3) | mant.astype(np.uint8)


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
rng = np.random.default_rng(7)
x = (rng.standard_normal((6, 80)) * np.exp2(rng.integers(-30, 30, (6, 1)))).astype(np.float32)
x[0, 5:40] = 0                            # zeros inside blocks
x[1, ::4] *= np.float32(2.0 ** -17)       # elements 2^17 below their block's amax: E4M3 subnormals or 0
x[2, 64:80] = np.float32(-3.0)            # a partial block of one value
np.save(os.path.join(work, "x.npy"), x)
out = os.path.join(work, "q.npz")
j = run(os.path.join(work, "x.npy"), "--scheme", "mxfp8-e4m3", "--out", out, "--json")

z = np.load(out)
check(f"members {sorted(z.files)}", sorted(z.files) == ["codes", "scales", "values"])
check(f"values dtype {z['values'].dtype}", z["values"].dtype == np.float32)
check(f"codes dtype {z['codes'].dtype}", z["codes"].dtype == np.uint8)
check(f"scales dtype {z['scales'].dtype}", z["scales"].dtype == np.float32)
check(f"values shape {z['values'].shape}", z["values"].shape == x.shape)
check(f"codes shape {z['codes'].shape}", z["codes"].shape == x.shape)
check(f"scales shape {z['scales'].shape}", z["scales"].shape == (6, 3))

scales = rceil_scales(x)
per_element = np.repeat(scales, 32, axis=1)[:, :80]
q = e4m3_round(x.astype(np.float64) / per_element)
check("scales differ from the transcription", np.array_equal(z["scales"], scales.astype(np.float32)))
bad = np.argwhere(z["codes"] != e4m3_codes(q))
check(f"{len(bad)} codes differ, first at {bad[:3].tolist()}", len(bad) == 0)
check("values differ", np.array_equal(z["values"], (q * per_element).astype(np.float32)))
nonzero = x != 0
check(f"underflow_to_zero {j['underflow_to_zero']}", j["underflow_to_zero"] == int(np.sum(nonzero & (q == 0))))
check(f"subnormal {j['subnormal']}", j["subnormal"] == int(np.sum((q != 0) & (np.abs(q) < 2.0 ** -6))))
check(f"saturated {j['saturated']}", j["saturated"] == 0)
check(f"blocks {j['blocks']}", j["blocks"] == 18)
check(f"subnormals exercised: {j['subnormal']}", j["subnormal"] > 0)

# nvfp4 adds the tensor scale, shape (1,), float32.
j = run(os.path.join(work, "x.npy"), "--scheme", "nvfp4", "--out", out, "--json")
z = np.load(out)
check(f"nvfp4 members {sorted(z.files)}", sorted(z.files) == ["codes", "scales", "tensor_scale", "values"])
check(f"tensor_scale {z['tensor_scale'].dtype} {z['tensor_scale'].shape}",
      z["tensor_scale"].dtype == np.float32 and z["tensor_scale"].shape == (1,))
check(f"nvfp4 scales shape {z['scales'].shape}", z["scales"].shape == (6, 5))

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("quantize_npz_test: all checks passed")
