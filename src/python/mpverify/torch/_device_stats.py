"""The Monitor's statistics where a tensor lives: torch operations on the tensor's own device.

A CUDA tensor is counted on the GPU and only the counts cross to the host (a few numbers and the 277
histogram bins, in one copy), where the C++ recorder finishes them (StepRecorder.record_counted: the rates,
the headroom, the lines). The rules are the C++ recorder's (record/tensor_stats.h, record/lost_updates.h),
and tests/python/device_stats_test.py holds this file to it count for count and bin for bin on CPU tensors:

- at scale 1, v = x; at a power-of-two scale, v = x * scale in float32, used only where every product is
  exact (none overflowed or lost bits below float's normal range); otherwise None, and the caller measures
  on the host (a scale that is not a power of two: the C++ side computes the exact products in double);
- x rounds to +-0, to a non-zero subnormal, or overflows according to thresholds on |v|'s float32 bit
  pattern that the C++ side found from the emulator's definition (_core._rounding_thresholds), and an
  infinity or a NaN counts what the definition counts for one; a format they cannot describe gives None;
- the histogram bins floor(log2 |v|), read exactly from frexp;
- max_abs is the largest finite |x|; the norm is the square root of the sum of the finite x^2 in float64 in
  torch's order of summation, not the C++ side's eight partial sums, so its last bits may differ (each sum is
  within n * 2^-53 relative of the exact one for n elements);
- lost updates by the spacing rule (record/lost_updates.cpp, swamped_by_spacing), transcribed below, for
  weights stored in fp32, fp16 or bf16 (torch's casts round to nearest even, as the emulator does); any
  other format, or a weight that is not a value of its format, gives None.
"""
import math

import torch

from .. import _core

MIN_EXPONENT = -149  # emu::ExponentHistogram: bins of floor(log2|v|) from 2^-149 to 2^127
BINS = 277
_INFINITY_BITS = 0x7F800000
_MAGNITUDE = 0x7FFFFFFF
_DTYPES = (torch.float32, torch.float16, torch.bfloat16,  # every value a float32: x.float() is exact
           *(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n)))  # torch >= 2.1
_CASTS = {"fp16": torch.float16, "bf16": torch.bfloat16}  # formats torch rounds to (nearest even)
_thresholds = {}


def rounding_thresholds(format_name):
    """_core._rounding_thresholds, asked once per format."""
    if format_name not in _thresholds:
        _thresholds[format_name] = _core._rounding_thresholds(format_name)
    return _thresholds[format_name]


def tensor_counts(t, target, scale=1.0):
    """StepRecorder.record_counted's counts of t against the format `target` at `scale`, computed on t's
    device; None where this path does not apply (the caller then measures on the host)."""
    if t.dtype not in _DTYPES or t.layout is not torch.strided:
        return None
    thresholds = rounding_thresholds(target)
    if thresholds is None or not _power_of_two(scale):
        return None
    x = t.detach().reshape(-1).float()  # exact for fp16 and bf16
    if x.numel() == 0:
        return {"elements": 0, "zeros_in": 0, "nonfinite_in": 0, "nans": 0, "underflow_to_zero": 0,
                "subnormal": 0, "overflow": 0, "max_abs": 0.0, "norm": 0.0, "bins": [0] * BINS}
    v = x if scale == 1.0 else x * scale
    finite_x = torch.isfinite(x)
    one = torch.ones((), dtype=torch.long, device=x.device)
    exact = ((v / scale == x) | ~finite_x).all().long() if scale != 1.0 else one  # dividing by 2^k undoes it
    u = v.view(torch.int32) & _MAGNITUDE
    finite = u < _INFINITY_BITS
    counts = torch.stack([
        (u == 0).sum(), (~finite).sum(), (u > _INFINITY_BITS).sum(),
        ((u >= 1) & (u <= thresholds["zero_max"])).sum(),
        ((u > thresholds["zero_max"]) & (u < thresholds["normal_min"])).sum(),
        ((u >= thresholds["overflow_min"]) & finite).sum(), exact])
    histogram = _exponent_histogram(v, finite & (u != 0))
    magnitudes = torch.where(finite_x, x.abs(), torch.zeros_like(x))
    floats = torch.stack([magnitudes.max().double(), magnitudes.double().square().sum()])
    # One crossing for the counts and the bins (the wait for the device), one for the two floats.
    head = torch.cat([counts, histogram]).tolist()
    zeros, nonfinite, nans, to_zero, subnormal, overflow, all_exact = head[:7]
    if not all_exact:
        return None
    max_abs, sum_squares = floats.tolist()
    rounded = {"underflow_to_zero": to_zero, "subnormal": subnormal, "overflow": overflow}
    for key in rounded:  # what infinities and NaNs count (a saturating format counts an infinity's overflow)
        rounded[key] += (nonfinite - nans) * thresholds["infinity"][key] + nans * thresholds["nan"][key]
    return {"elements": x.numel(), "zeros_in": zeros, "nonfinite_in": nonfinite, "nans": nans, **rounded,
            "max_abs": max_abs, "norm": math.sqrt(sum_squares), "bins": head[7:]}


def _exponent_histogram(v, counted):
    """Counts of floor(log2|v|) over `counted` (the finite non-zero v), bins -149..127, without leaving the
    device: the values not counted go to one extra bin, dropped after the scatter."""
    _, exponent = torch.frexp(v)  # |v| = m 2^exponent, m in [0.5, 1): floor(log2|v|) = exponent - 1
    index = torch.where(counted, exponent.long() - 1 - MIN_EXPONENT, torch.full_like(exponent, BINS, dtype=torch.long))
    bins = torch.zeros(BINS + 1, dtype=torch.long, device=v.device)
    bins.scatter_add_(0, index, torch.ones_like(index))
    return bins[:BINS]


def _power_of_two(scale):
    return scale > 0 and math.isfinite(scale) and math.frexp(scale)[0] == 0.5


def lost_update_counts(before, after, stored):
    """_core.lost_updates_of_step's counts ({"with_master": ..., "without_master": ...}, each with updates,
    lost, ratio_needed, ratio_sufficient) for weights `before` updated to `after`, stored in `stored`, on
    their device; None where this path does not apply."""
    if before.dtype not in _DTYPES or before.layout is not torch.strided or stored not in ("fp32", *_CASTS):
        return None
    w = before.detach().reshape(-1).float()
    u = (after.detach().reshape(-1).double() - w.double()).float()  # the update applied, rounded once
    return update_counts(w, u, stored)


def update_counts(w, u, stored):
    """_core.lost_updates's counts for float32 weights w and updates u (record::lost_updates), on their
    device; None where this path does not apply."""
    if stored not in ("fp32", *_CASTS):
        return None
    low = w if stored == "fp32" else w.to(_CASTS[stored]).float()  # stored in the format: rounded to it
    info = _core.format_info(stored)
    sides = {"with_master": _side(w, u, 24, -126, 127), "without_master": _side(
        low, u, info["precision"], info["emin"], info["emax"])}
    if any(side is None for side in sides.values()):
        return None
    return sides


def _side(w, u, precision, emin, emax):
    """One side's counts: updates (u != 0, w and u finite), lost (w != 0 and fl(w + u) == w, by spacing),
    and |w| against 2^p |u| and 2^(p+1) |u| (exact in float32: a power of two times a float is exact unless
    it overflows, and then it exceeds every |w|)."""
    wb, ub = w.view(torch.int32).long(), u.view(torch.int32).long()
    w_abs, u_abs = wb & _MAGNITUDE, ub & _MAGNITUDE
    update = (u_abs != 0) & (w_abs < _INFINITY_BITS) & (u_abs < _INFINITY_BITS)
    counted = update & (w_abs != 0)
    swamped, not_a_value = _swamped_by_spacing(wb, ub, precision, emin, emax)
    needed = w.abs() >= (2.0 ** precision) * u.abs()
    sufficient = w.abs() > (2.0 ** (precision + 1)) * u.abs()
    totals = torch.stack([update.sum(), (counted & swamped).sum(), (counted & not_a_value).sum(),
                          (update & needed).sum(), (update & sufficient).sum()]).tolist()
    if totals[2]:
        return None  # a weight that is not a value of its format: the host adds instead
    return {"updates": totals[0], "lost": totals[1], "ratio_needed": totals[3], "ratio_sufficient": totals[4]}


def _swamped_by_spacing(wb, ub, p, emin, emax):
    """record/lost_updates.cpp's swamped_by_spacing, line by line, on int64 tensors of float32 bit patterns:
    fl(w + u) == w when |u| is below half the gap from w to its neighbour on u's side, or equal to it with
    w's last significand bit even. Returns (swamped, w is not a value of the format)."""
    w_abs, u_abs = wb & _MAGNITUDE, ub & _MAGNITUDE
    field = w_abs >> 23
    float_normal = field != 0
    e = torch.where(float_normal, field - 127, torch.full_like(field, -127))
    significand = torch.where(float_normal, (w_abs & 0x7FFFFF) | 0x800000, w_abs)
    q = torch.clamp(e, min=emin) - p + 1
    shift = q - torch.where(float_normal, e - 23, torch.full_like(e, -149))
    clamped = torch.clamp(shift, max=31)
    one = torch.ones_like(clamped)
    not_a_value = (e > emax) | (shift > 24) | ((significand & ((one << clamped) - 1)) != 0)
    even = ((significand >> clamped) & 1) == 0
    toward_zero = ((wb ^ ub) >> 31 & 1) != 0
    binade_first = (significand == 0x800000) & (e > emin)
    h = torch.where(toward_zero & binade_first, q - 2, q - 1)
    half_gap = torch.where(h >= -126, (h + 127) << 23,
                           torch.where(h >= -149, one << torch.clamp(h + 149, min=0), torch.zeros_like(h)))
    return (u_abs < half_gap) | ((u_abs == half_gap) & even), not_a_value
