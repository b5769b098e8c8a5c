"""Tensors in: numpy arrays and torch CPU tensors, without copies where possible.

The C++ core reads numpy arrays. A torch CPU tensor becomes one through
tensor.numpy(), which shares its memory; bfloat16 and the fp8 types, which
numpy has no type for, go in as their bit patterns (tensor.view(int16/uint8))
with the dtype's name, and the core decodes them exactly. A CUDA tensor is
copied to the CPU first.
"""
import numpy as np

_BIT_DTYPES = {"bfloat16": "int16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8"}


def as_input(x, what="x"):
    """(numpy array, bits) for the core: bits is "" or the name of the dtype the array's integers encode."""
    if type(x).__module__.startswith("torch"):
        return _torch_input(x, what)
    array = np.asarray(x)
    if array.dtype.kind not in "f" and array.dtype != np.dtype(object):
        if array.dtype.kind in "iub":
            array = array.astype(np.float64)  # Python ints and bools: their exact values
        else:
            raise TypeError(f"{what}: dtype {array.dtype} is not a floating-point type")
    return array, ""


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
