"""The mpverify format a torch dtype is stored in."""
import torch

_FORMATS = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}
for _name, _format in (("float8_e4m3fn", "fp8-e4m3"), ("float8_e5m2", "fp8-e5m2")):
    if hasattr(torch, _name):  # torch >= 2.1
        _FORMATS[getattr(torch, _name)] = _format


def format_of(dtype):
    """fp16, bf16, fp32, fp8-e4m3 or fp8-e5m2; None for other dtypes (float64, integers), which are not recorded."""
    return _FORMATS.get(dtype)
