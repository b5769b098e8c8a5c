"""FID statistics files (.npz with mu and sigma) in `mpverify fid` and in the
gate's FID (`gate --metric fid --fid-reference`), held against numpy/scipy.

The fixtures are written here with numpy the way the upstream tools write them:
  pytorch-fid (src/pytorch_fid/fid_score.py, calculate_activation_statistics
  and save_fid_stats): mu = np.mean(act, axis=0), sigma = np.cov(act,
  rowvar=False), act float64; np.savez_compressed(path, mu=m1, sigma=s1).
  clean-fid (cleanfid/fid.py, make_custom_stats): mu = np.mean(np_feats,
  axis=0) on float32 features (so mu is float32), sigma = np.cov(...)
  (float64); np.savez_compressed(outf, mu=mu, sigma=sigma).
Plain np.savez (stored members) is written too.

The expected FIDs come from pytorch-fid's calculate_frechet_distance
transcribed in tests/scripts/scipy_fid.py (scipy.linalg.sqrtm of sigma1 .
sigma2), never from mpverify. Checks:
  - FID(stats A, stats B) equals the scipy FID of those statistics within 1e-6
    relative (the bound tests/fid_test.cpp derives for sqrtm against the
    symmetric routes on well-conditioned full-rank inputs);
  - FID from the statistics equals FID from the features they were computed
    from within 1e-9 relative: the two differ only in how the mean and the
    covariance were summed (np.cov's two passes against Chan's merge), about
    N u ~ 200 * 1.1e-16 of each entry, which moves a FID of well-conditioned
    d = 5 covariances by ~1e-13 relative; 1e-9 leaves 10^4 of room and still
    fails on any real mix-up (a transposed sigma, float32 rounding of sigma:
    ~1e-8 relative, the N - 1 vs N denominator: 0.5%);
  - mixed sides (features against statistics) likewise;
  - the gate's per-run FIDs from seed-<s>.npz against a reference equal scipy's,
    and its verdict equals the gate's on a value file of those scipy FIDs;
  - bad statistics files exit 2 with the file and the key named, nothing on stdout.
Usage: fid_statistics_test.py MPVERIFY_BIN WORK_DIR. Exit 77 (skipped) without
numpy/scipy, 1 on any mismatch.
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
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
    from scipy_fid import calculate_frechet_distance  # pytorch-fid's, transcribed line by line
except ImportError as e:
    print(f"SKIP: {e} (install python3-numpy and python3-scipy)")
    sys.exit(77)

mpverify, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failures = []


def check(what, ok):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def path(name):
    return os.path.join(work, name)


def run(*args):
    return subprocess.run([mpverify, *args], capture_output=True, text=True)


def fid_json(a, b):
    r = run("fid", a, b, "--json")
    if r.returncode != 0:
        raise SystemExit(f"mpverify fid {a} {b} exited {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


def relative(x, y):
    return abs(x - y) / max(abs(y), 1e-300)


def features(rng, rows, d, shift):
    """float32 features with correlated columns (a full-rank, non-diagonal covariance)."""
    mix = rng.standard_normal((d, d)) * 0.5 + np.eye(d)
    return (rng.standard_normal((rows, d)) @ mix + shift).astype(np.float32)


def pytorch_fid_stats(x):
    act = x.astype(np.float64)  # pytorch-fid's pred_arr is float64
    return np.mean(act, axis=0), np.cov(act, rowvar=False)


def clean_fid_stats(x):
    return np.mean(x, axis=0), np.cov(x, rowvar=False)  # mu float32, sigma float64


rng = np.random.default_rng(20240611)
d = 5
A, B = features(rng, 200, d, 0.0), features(rng, 150, d, 0.3)
np.save(path("a.npy"), A)
np.save(path("b.npy"), B)
mu_a, sigma_a = pytorch_fid_stats(A)
np.savez_compressed(path("a_pytorch_fid.npz"), mu=mu_a, sigma=sigma_a)
np.savez(path("a_stored.npz"), mu=mu_a, sigma=sigma_a)
mu_b, sigma_b = pytorch_fid_stats(B)
np.savez_compressed(path("b_pytorch_fid.npz"), mu=mu_b, sigma=sigma_b)
mu_bc, sigma_bc = clean_fid_stats(B)
check("clean-fid's mu is float32 and sigma float64", mu_bc.dtype == np.float32 and sigma_bc.dtype == np.float64)
np.savez_compressed(path("b_clean_fid.npz"), mu=mu_bc, sigma=sigma_bc)

# --- statistics against scipy, and against the features they came from ---------------------------
scipy_ab = calculate_frechet_distance(mu_a, sigma_a, mu_b, sigma_b)
scipy_ab_clean = calculate_frechet_distance(mu_a, sigma_a, mu_bc.astype(np.float64), sigma_bc)
from_features = fid_json(path("a.npy"), path("b.npy"))["fid"]
for a, b, expected in [("a_pytorch_fid.npz", "b_pytorch_fid.npz", scipy_ab), ("a_stored.npz", "b_pytorch_fid.npz", scipy_ab),
                       ("a_pytorch_fid.npz", "b_clean_fid.npz", scipy_ab_clean), ("a.npy", "b_pytorch_fid.npz", scipy_ab),
                       ("a_pytorch_fid.npz", "b.npy", scipy_ab)]:
    j = fid_json(path(a), path(b))
    check(f"fid {a} {b} = {j['fid']!r}, scipy {expected!r}", relative(j["fid"], expected) <= 1e-6)
    if "clean" not in a + b:
        check(f"fid {a} {b} = {j['fid']!r}, from the features {from_features!r}", relative(j["fid"], from_features) <= 1e-9)
    kinds = [j["a_kind"], j["b_kind"]]
    check(f"fid {a} {b}: kinds {kinds}", kinds == ["statistics" if n.endswith(".npz") else "features" for n in (a, b)])
    check(f"fid {a} {b}: kid is null with a statistics side", j["kid"] is None and j["kid_subsets"] is None)
    check(f"fid {a} {b}: dims {j['dims']}", j["dims"] == d)
check(f"features FID {from_features!r} vs scipy {scipy_ab!r}", relative(from_features, scipy_ab) <= 1e-6)
j = fid_json(path("a_pytorch_fid.npz"), path("a_pytorch_fid.npz"))
check(f"FID of a statistics file with itself is {j['fid']!r}, not ~0", abs(j["fid"]) <= 1e-12 * np.trace(sigma_a))

# --- bad statistics files: exit 2, the file and the key named, nothing on stdout -------------------
good = path("a_pytorch_fid.npz")
asym = sigma_a.copy()
asym[0, 1] += 1e-3 * np.max(np.diag(sigma_a))
neg = sigma_a.copy()
neg[2, 2] = -1.0
indefinite = np.eye(d)
indefinite[:2, :2] = [[1.0, 2.0], [2.0, 1.0]]
nan_sigma = sigma_a.copy()
nan_sigma[1, 3] = np.nan
bad = {
    "no_sigma.npz": (dict(mu=mu_a), ["sigma", "no array"]),
    "mu_2d.npz": (dict(mu=mu_a.reshape(1, d), sigma=sigma_a), ["'mu'", "shape [1, 5]"]),
    "sigma_wrong.npz": (dict(mu=mu_a, sigma=sigma_a[:, :4]), ["'sigma'", "[5, 4]"]),
    "sigma_other_d.npz": (dict(mu=mu_a[:4], sigma=sigma_a), ["'sigma'", "[5, 5]", "4 features"]),
    "mu_f16.npz": (dict(mu=mu_a.astype(np.float16), sigma=sigma_a), ["'mu'", "f16", "float32 or float64"]),
    "mu_int.npz": (dict(mu=np.arange(d), sigma=sigma_a), ["'mu'", "<i8", "float32 or float64"]),
    "sigma_nan.npz": (dict(mu=mu_a, sigma=nan_sigma), ["sigma[1, 3]", "not finite"]),
    "sigma_asym.npz": (dict(mu=mu_a, sigma=asym), ["not symmetric", "sigma[0, 1]", "sigma[1, 0]"]),
    "sigma_negative.npz": (dict(mu=mu_a, sigma=neg), ["sigma[2, 2]", "negative variance"]),
    # Symmetric, non-negative diagonal, eigenvalue -1: not a covariance (once clamped as "rounding").
    "sigma_indefinite.npz": (dict(mu=mu_a, sigma=indefinite),
                             ["the eigenvalue -1,", "not a covariance matrix"]),
    "four.npz": (dict(mu=mu_a[:4], sigma=sigma_a[:4, :4]), ["d = 4", "d = 5"]),
}
for name, (arrays, words) in bad.items():
    np.savez(path(name), **arrays)
with open(path("not_zip.npz"), "wb") as f:
    f.write(b"this is not a zip archive")
bad["not_zip.npz"] = (None, ["not_zip.npz"])
for name, (_, words) in bad.items():
    # A bad file on either side; "four.npz" is a good file of another d.
    for args in ([path(name), good], [good, path(name)]):
        r = run("fid", *args)
        check(f"fid {' '.join(args)}: exit {r.returncode}, expected 2", r.returncode == 2)
        check(f"fid {' '.join(args)}: stdout {r.stdout!r}", r.stdout == "")
        for w in words + ([] if name == "four.npz" else [name]):
            check(f"fid {' '.join(args)}: {w!r} not in {r.stderr!r}", w in r.stderr)
r = run("fid", good, path("b.npy"), "--bootstrap", "10")
check(f"--bootstrap with statistics: exit {r.returncode}, {r.stderr!r}", r.returncode == 2 and "--bootstrap" in r.stderr)

# --- the gate: per-run statistics against a reference --------------------------------------------
real = features(rng, 300, d, 0.0)
mu_r, sigma_r = pytorch_fid_stats(real)
np.savez_compressed(path("real.npz"), mu=mu_r, sigma=sigma_r)
rows = {"fp32": [], "o2": []}
for side, shift in (("fp32", 0.20), ("o2", 0.21)):
    os.makedirs(path(side))
    for seed in (1, 2, 3, 4):
        mu, sigma = pytorch_fid_stats(features(rng, 200, d, shift))
        np.savez_compressed(os.path.join(path(side), f"seed-{seed}.npz"), mu=mu, sigma=sigma)
        rows[side].append((seed, calculate_frechet_distance(mu, sigma, mu_r, sigma_r)))
    with open(path(side + ".csv"), "w") as f:
        f.write("seed,value\n" + "".join(f"{s},{v!r}\n" for s, v in rows[side]))
margin = "3"
r = run("gate", "--baseline", path("fp32"), "--candidate", path("o2"), "--metric", "fid", "--fid-reference",
        path("real.npz"), "--margin", margin, "--json")
check(f"gate on statistics: exit {r.returncode} {r.stderr!r}", r.returncode in (0, 1, 3))
g = json.loads(r.stdout) if r.stdout else {}
for side, key in (("fp32", "baseline_runs"), ("o2", "candidate_runs")):
    got = [(run_["seed"], run_["value"]) for run_ in g.get(key, [])]
    check(f"gate {key}: seeds {[s for s, _ in got]}", [s for s, _ in got] == [s for s, _ in rows[side]])
    for (s, v), (_, expected) in zip(got, rows[side]):
        check(f"gate {key} seed {s}: FID {v!r}, scipy {expected!r}", relative(v, expected) <= 1e-6)
check(f"gate names each run by its file: {g.get('baseline_runs', [{}])[0].get('run')!r}",
      g.get("baseline_runs", [{}])[0].get("run", "").endswith("seed-1.npz"))
check(f"gate unit {g.get('unit')!r}", g.get("unit") == "FID")
v = run("gate", "--baseline", path("fp32.csv"), "--candidate", path("o2.csv"), "--metric", "fid", "--margin", margin,
        "--json")
gv = json.loads(v.stdout)
check(f"gate verdict {g.get('verdict')!r} equals the value files' {gv['verdict']!r}", g.get("verdict") == gv["verdict"])
check(f"gate interval {g.get('ci_lower')!r} vs the value files' {gv['ci_lower']!r}",
      abs(g.get("ci_lower", 1e9) - gv["ci_lower"]) <= 1e-5 * abs(gv["ci_lower"]) + 1e-9)

os.makedirs(path("misnamed"))
shutil.copy(os.path.join(path("o2"), "seed-1.npz"), os.path.join(path("misnamed"), "run1.npz"))
os.makedirs(path("small"))
np.savez(os.path.join(path("small"), "seed-1.npz"), mu=mu_a[:4], sigma=sigma_a[:4, :4])
np.savez(os.path.join(path("small"), "seed-2.npz"), mu=mu_a[:4], sigma=sigma_a[:4, :4])
for args, words in [
    (["--candidate", path("misnamed"), "--metric", "fid", "--fid-reference", path("real.npz")], ["run1.npz", "seed-<s>.npz"]),
    (["--candidate", path("small"), "--metric", "fid", "--fid-reference", path("real.npz")], ["seed-1.npz", "d = 4", "d = 5"]),
    (["--candidate", path("o2"), "--metric", "kid", "--fid-reference", path("real.npz")], ["--metric fid"]),
    (["--candidate", path("o2"), "--metric", "fid", "--fid-reference", path("sigma_asym.npz")], ["--fid-reference", "not symmetric"]),
    (["--candidate", path("o2"), "--metric", "fid", "--fid-reference", path("sigma_indefinite.npz")],
     ["--fid-reference", "not a covariance matrix"]),
    (["--candidate", path("o2.csv"), "--metric", "fid", "--fid-reference", path("real.npz")], ["value file"]),
]:
    r = run("gate", "--baseline", path("fp32"), *args, "--margin", margin)
    check(f"gate {args}: exit {r.returncode}, expected 2", r.returncode == 2)
    check(f"gate {args}: stdout {r.stdout!r}", r.stdout == "")
    for w in words:
        check(f"gate {args}: {w!r} not in {r.stderr!r}", w in r.stderr)

print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
