"""The Monitor's statistics computed with torch operations where a tensor lives (mpverify/torch/_device_stats.py)
against the C++ recorder, the definition (record/tensor_stats.h, record/lost_updates.h), on CPU tensors: the
same code runs on a CUDA tensor, where only the device differs.

Every count and every histogram bin must be equal, and max_abs bit for bit; the norm is summed in another
order (tolerance below). The inputs are adversarial: each rounding threshold of each format and its float
neighbours, the ties at the underflow threshold (half the smallest subnormal), at the subnormal/normal
boundary and above the largest finite value, +-0, +-inf, NaN, float32 subnormals, FLT_MAX, at scales that
move them onto the thresholds, in every input dtype. Lost updates: updates of exactly half the gap to each
neighbour (ties to even and to odd weights), at binade boundaries toward zero, on subnormal and largest
weights, with inf and NaN.

Run by ctest as: /usr/bin/python3 -m pytest -q tests/python/device_stats_test.py with PYTHONPATH=BUILD/python.
"""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from mpverify import _core  # noqa: E402
from mpverify.torch import _device_stats as ds  # noqa: E402

# The subject runs on each device torch has here; the C++ definition always reads the values on the host.
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device here: the torch path is checked on CPU tensors only"))]

TARGETS = ["fp16", "bf16", "fp8-e4m3", "fp8-e5m2", "fp8-e4m3fnuz", "fp6-e2m3", "fp4-e2m1", "e5m7", "e8m3", "tf32",
           "fp16:saturate", "fp16:ftz", "e8m0"]  # the last two: no classifier, left to the host
DTYPES = [torch.float32, torch.float16, torch.bfloat16,
          *(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n))]  # torch >= 2.1


def bits_to_float(u):
    return float(np.array([u], dtype=np.uint32).view(np.float32)[0])


def adversarial(target, scale, seed):
    """float32 values that land, times `scale`, on and around every threshold of `target`."""
    with np.errstate(over="ignore"):  # a product beyond float's range is left out, below
        return _adversarial(target, scale, seed)


def _adversarial(target, scale, seed):
    info = _core.format_info(target)
    points = [info["min_subnormal"] / 2, info["min_subnormal"], info["min_normal"],
              info["min_normal"] - info["min_subnormal"] / 2, info["max_finite"],
              info["max_finite"] * (1 + 2.0 ** -info["precision"]), 1.0, 3.0 * 2 ** -20]
    th = _core._rounding_thresholds(target) or {}
    points += [bits_to_float(th[k]) for k in ("zero_max", "normal_min", "overflow_min") if k in th and th[k] < 0x7F800000]
    values = []
    for p in points:
        if p / scale > 3.4e38:
            continue
        x = np.float32(p / scale)
        for k in (-2, -1, 0, 1, 2):  # the float neighbours, by bit pattern
            values.append(float(np.array([x], np.float32).view(np.uint32).astype(np.int64)[0] + k))
    values = [bits_to_float(int(v)) for v in values if 0 <= v < 0x7F800000]
    special = [0.0, -0.0, math.inf, -math.inf, math.nan, bits_to_float(1), bits_to_float(0x007FFFFF),
               bits_to_float(0x00800000), bits_to_float(0x7F7FFFFF)]
    g = torch.Generator().manual_seed(seed)
    wide = torch.exp2(torch.empty(300).uniform_(-150, 128, generator=g)) * torch.randn(300, generator=g).sign()
    values += wide.tolist()
    # Only values whose product with the scale is a float (the path's condition; the products that are not
    # are test_a_product_out_of_float_range_is_left_to_the_host's): the thresholds stay inside at every scale.
    values = [v for v in values + special if not math.isfinite(v) or float(np.float32(v * scale)) == v * scale]
    return torch.tensor(values + [-v for v in values], dtype=torch.float32)


def full_bins(histogram):
    """The C++ histogram (first_exponent and its occupied counts) as the 277 bins from 2^-149."""
    bins = [0] * ds.BINS
    if histogram["first_exponent"] is not None:
        for i, c in enumerate(histogram["counts"]):
            bins[histogram["first_exponent"] + i - ds.MIN_EXPONENT] = c
    return bins


def as_numpy(t):
    """What the C++ definition reads: the tensor's values as float32 (exact for every dtype here)."""
    return t.float().numpy()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("scale", [1.0, 2.0 ** -3, 2.0 ** 10, 2.0 ** 24])
def test_counts_and_bins_equal_the_recorders(target, dtype, scale, device):
    x = adversarial(target, scale, seed=7).to(dtype)
    if dtype is not torch.float32:  # rounded to the dtype: keep the values whose products are still floats
        x = x[~torch.isfinite(x.float()) | ((x.float() * scale).double() == x.double() * scale)]
    ours = ds.tensor_counts(x.to(device), target, scale)
    truth = _core.tensor_stats(as_numpy(x), "", target, scale)
    if _core._rounding_thresholds(target) is None:  # a format the thresholds cannot describe: the host's
        assert ours is None
        return
    assert ours is not None, "every product is a float here"
    assert ours["elements"] == truth["count"] and ours["zeros_in"] == truth["zeros_in"]
    assert ours["nonfinite_in"] == truth["nonfinite_in"]
    for key in ("underflow_to_zero", "subnormal", "overflow"):
        assert ours[key] == truth[key], key
    assert ours["bins"] == full_bins(truth["histogram"])
    assert ours["nans"] == truth["histogram"]["nans"]
    assert truth["histogram"]["below_range"] == truth["histogram"]["above_range"] == 0
    assert ours["max_abs"] == truth["max_abs"]


def test_every_count_and_the_lines_through_the_recorder():
    """record_counted's lines equal record()'s, key for key, the norm within its summation bound: both sums
    of the n squares (exact in float64: a float squared has 48 bits) are within (n - 1) 2^-53 relative of the
    exact sum, so they differ by at most 2 (n - 1) 2^-53 relative, and the square root halves that."""
    import json
    g = torch.Generator().manual_seed(3)
    tensors = [torch.randn(5000, generator=g) * 2.0 ** -18, adversarial("fp16", 1.0, 4),
               torch.randn(64, 3, generator=g).to(torch.bfloat16), torch.zeros(0)]
    for study in ("fp16", "fp8-e5m2"):
        ours, truth = _core.StepRecorder(study), _core.StepRecorder(study)
        for r in (ours, truth):
            r.begin_step(0, True, True)
        for i, t in enumerate(tensors):
            fmt = {torch.float32: "fp32", torch.bfloat16: "bf16"}[t.dtype]
            for scale in (1.0, 2.0 ** 12) if i != 1 else (1.0,):  # FLT_MAX times 2^12 is no float
                counts = ds.tensor_counts(t, ours.target_format(fmt), scale)
                assert counts is not None
                ours.record_counted(f"l{i}", "y", "activation_grad", "backward", fmt, scale, counts)
                truth.record(f"l{i}", "y", "activation_grad", "backward", as_numpy(t),
                             "", fmt, scale)
        assert ours.gradients() == truth.gradients() and ours.by_format() == truth.by_format()
        assert ours.take_histogram_lines_text() == truth.take_histogram_lines_text()
        for a, b in zip(ours.take_tensor_lines_text(), truth.take_tensor_lines_text(), strict=True):
            a, b = json.loads(a), json.loads(b)
            n = a["count"]
            assert a.pop("norm") == pytest.approx(b.pop("norm"), rel=max(n - 1, 0) * 2.0 ** -53, abs=0)
            assert a == b


def test_a_product_out_of_float_range_is_left_to_the_host():
    x = torch.tensor([2.0 ** 120, 1.0])
    assert ds.tensor_counts(x, "fp16", 2.0 ** 10) is None  # 2^130: not a float; the C++ side computes it in double
    assert ds.tensor_counts(torch.tensor([2.0 ** -140]), "fp16", 2.0 ** -10) is None  # loses bits below 2^-126
    assert ds.tensor_counts(x, "fp16", 3.0) is None  # not a power of two
    assert ds.tensor_counts(x.double(), "fp16", 1.0) is None  # float64: not recorded


def weights_and_updates(fmt, seed):
    """(w as a value of fmt, u) pairs on the spacing rule's edges, and random ones."""
    info = _core.format_info(fmt)
    p, emin = info["precision"], info["emin"]
    w, u = [], []
    for e in (emin, emin + 1, 0, 5, info["emax"]):
        for significand in (2 ** (p - 1), 2 ** (p - 1) + 1, 2 ** p - 1):  # a binade's first, odd, last
            wv = significand * 2.0 ** (e - p + 1)
            ulp = 2.0 ** (max(e, emin) - p + 1)
            for uv in (ulp / 2, ulp / 4, ulp / 2 * (1 + 2 ** -20), ulp / 2 * (1 - 2 ** -20), ulp):
                for sw in (1, -1):
                    for su in (1, -1):
                        w.append(sw * wv)
                        u.append(su * uv)
    sub = info["min_subnormal"]
    w += [sub, 3 * sub, 0.0, 1.0, 1.0, math.inf, 1.0, info["max_finite"]]
    u += [sub / 2, sub / 2, 1.0, math.nan, math.inf, 0.0, -2.0 ** -p, info["max_finite"] * 2.0 ** -p]
    g = torch.Generator().manual_seed(seed)
    rw = torch.randn(2000, generator=g)
    ru = torch.randn(2000, generator=g) * torch.exp2(torch.empty(2000).uniform_(-30, 0, generator=g))
    return (torch.cat([torch.tensor(w, dtype=torch.float32), rw]),
            torch.cat([torch.tensor(u, dtype=torch.float32), ru]))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("stored", ["fp32", "fp16", "bf16"])
def test_lost_updates_equal_the_recorders(stored, device):
    w, u = weights_and_updates(stored if stored != "fp32" else "fp16", seed=5)
    ours = ds.update_counts(w.to(device), u.to(device), stored)
    truth = _core.lost_updates(w.numpy(), "", u.numpy(), "", stored)
    assert ours is not None
    for side in ("with_master", "without_master"):
        for key in ("updates", "lost", "ratio_needed", "ratio_sufficient"):
            assert ours[side][key] == truth[side][key], (side, key)
        assert truth[side]["lost"] > 0 and truth[side]["updates"] > truth[side]["lost"]  # both outcomes met


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_lost_updates_of_a_step_equal_the_recorders(dtype, device):
    """From the weights before and after a step, in each weight dtype: the update applied, then both sides."""
    w, u = weights_and_updates("fp16", seed=6)
    before = w.to(dtype)
    after = (before.double() + u.double() * 3).to(dtype)
    for stored in ("fp32", "fp16", "bf16"):
        ours = ds.lost_update_counts(before.to(device), after.to(device), stored)
        truth = _core.lost_updates_of_step(as_numpy(before), "", as_numpy(after), "", stored)
        for side in ("with_master", "without_master"):
            for key in ("updates", "lost", "ratio_needed", "ratio_sufficient"):
                assert ours[side][key] == truth[side][key], (stored, side, key)


def test_lost_updates_of_other_formats_are_left_to_the_host():
    w = torch.ones(4)
    assert ds.lost_update_counts(w, w + 1, "fp8-e4m3") is None
    assert ds.lost_update_counts(w.double(), w.double(), "fp16") is None


def test_the_monitor_refuses_an_unknown_statistics_mode(tmp_path):
    import mpverify.torch as mt
    m = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="statistics must be one of auto, torch, not 'gpu'"):
        mt.Monitor(m, torch.optim.SGD(m.parameters(), lr=0.1), out=tmp_path / "run", statistics="gpu")
    assert not (tmp_path / "run").exists()  # refused before anything is written
