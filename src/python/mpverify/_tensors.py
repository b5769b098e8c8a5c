"""Tensors in: numpy arrays and torch CPU tensors, without copies where possible.

The C++ core reads numpy arrays. A torch CPU tensor becomes one through
tensor.numpy(), which shares its memory; bfloat16 and the fp8 types, which
numpy has no type for, go in as their bit patterns (tensor.view(int16/uint8))
with the dtype's name, and the core decodes them exactly. A CUDA tensor is
copied to the CPU first.
"""
import math

import numpy as np

_BIT_DTYPES = {"bfloat16": "int16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8"}


def as_input(x, what="x"):
    """(numpy array, bits) for the core: bits is "" or the name of the dtype the array's integers encode."""
    if type(x).__module__.startswith("torch"):
        return _torch_input(x, what)
    array = np.asarray(x)
    if array.dtype.kind not in "f" and array.dtype != np.dtype(object):
        if array.dtype.kind in "iub":
            array = _integers_as_float64(array)
        else:
            raise TypeError(f"{what}: dtype {array.dtype} is not a floating-point type")
    return array, ""


_EXACT_LIMIT = 2**53  # every integer of magnitude <= 2^53 is a float64


def _integers_as_float64(array):
    """Integers as float64 that any later rounding to a format of <= 51 significand bits rounds correctly.

    Up to 2^53 a float64 holds the integer exactly. Beyond, it is rounded to odd: truncated toward zero,
    then its last significand bit set when anything was cut off. A second rounding to p bits from a value
    rounded to odd at p + 2 or more bits gives the correctly rounded result (Boldo and Melquiond, "Emulation
    of FMA and correctly rounded sums: proved algorithms using rounding to odd", IEEE TC 2008), where
    numpy's nearest-even cast would round twice: 2^54 + 2^30 + 1 became 2^54 + 2^30, then 2^54 in fp32.
    """
    values = array.astype(np.float64)
    big = np.flatnonzero((array > _EXACT_LIMIT) | (array < -_EXACT_LIMIT)) if array.dtype.kind != "b" else []
    flat = values.reshape(-1)
    for i in big:
        flat[i] = _round_to_odd(int(array.reshape(-1)[i]))
    return values


def _round_to_odd(n):
    """The float64 nearest n toward zero, with its last significand bit set when that is not exactly n."""
    truncated = float(n)  # nearest-even; step back toward zero when it went past n
    if abs(int(truncated)) > abs(n):
        truncated = math.nextafter(truncated, 0.0)
    if int(truncated) == n:
        return truncated
    if int(np.float64(truncated).view(np.uint64)) & 1:
        return truncated
    return math.nextafter(truncated, math.copysign(math.inf, truncated))


def _torch_input(t, what):
    import torch

    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if not t.is_contiguous():
        t = t.contiguous()
    name = str(t.dtype).replace("torch.", "")
    if name in _BIT_DTYPES:
        return t.view(getattr(torch, _BIT_DTYPES[name])).numpy(), name
    if not t.dtype.is_floating_point:
        raise TypeError(f"{what}: torch dtype {t.dtype} is not a floating-point type")
    return t.numpy(), ""
