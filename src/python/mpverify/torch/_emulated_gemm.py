"""One GEMM of an emulated layer: its operands brought into their formats, their product, its counters.

An operand is either a format (Format: every element rounded once, after per-tensor current scaling where the
recipe asks for it) or a block scheme (Scheme: quantized along the GEMM's K). The product is torch's float32
matmul of the rounded values (accumulation "fp32"), the emulator's GEMM (emu/gemm_emu.h: in-order fp32 or
fp16 steps, a tensor-core instruction chain) or the block-scaled GEMM (emu/block_scaled_gemm.h), the last two
through mpverify._core.
"""
import zlib

import numpy as np
import torch

import mpverify
from mpverify import _core
from mpverify._tensors import as_input


class Format:
    """A per-tensor operand: every element rounded once to the format, after current scaling when `scaled`:
    x_s = fl32(x * s) with s = fl32(max_finite / amax) (training::current_scale), the GEMM's result later
    multiplied by fl32(1/s_a * 1/s_b), as src/nn/operand_scaling.h does it after Transformer Engine."""

    block = False

    def __init__(self, name, scaled, rounding, seed):
        info = mpverify.format_info(name)
        self.name, self.scaled, self.rounding, self.seed = name, scaled, rounding, seed
        self.max_finite = info["max_finite"]
        # fp32 itself (under any name): rounding a float32 changes nothing, so nothing is done or counted.
        self.identity = {**info, "name": ""} == {**mpverify.format_info("fp32"), "name": ""}

    def quantize(self, t, stream):
        """(values, fl32(1/s), counters) of the whole float32 tensor t."""
        if self.identity:
            return t, 1.0, None
        scale = _core.current_scale(amax(t), self.max_finite) if self.scaled else 1.0
        values, counters = mpverify.round(t * scale if scale != 1.0 else t, self.name, self.rounding, self.seed,
                                          stream)
        counters["scale"] = scale
        return torch.from_numpy(values), float(np.float32(1) / np.float32(scale)), counters


class Scheme:
    """A block-scaled operand: quantized along the GEMM's K (mpverify.quantize, or inside the C++ GEMM)."""

    block = True
    identity = False

    def __init__(self, name, tile, scale_rule, rounding, seed):
        self.name, self.tile, self.rounding, self.seed = name, tile, rounding, seed
        self.scale_rule = scale_rule if name.startswith("mx") else None  # E8M0 scales: the MX schemes only

    def quantize_along(self, t, axis, stream):
        q = mpverify.quantize(t, self.name, axis=axis, scale_rule=self.scale_rule, tile=self.tile,
                              rounding=self.rounding, seed=self.seed, stream=stream)
        return torch.from_numpy(q["values"]), dict(q["counters"], sqnr_db=q["sqnr_db"])


class Operand:
    """A GEMM operand on its way into its format: a format's operand is rounded at once (the whole tensor, before
    a convolution gathers its patches, so that its amax and counts are the tensor's), a block scheme's when the
    GEMM knows its K."""

    def __init__(self, t, spec, stream=0):
        self.spec, self.stream = spec, stream
        self.inverse, self.counters = 1.0, None
        if spec.block:
            self.values = t
        else:
            self.values, self.inverse, self.counters = spec.quantize(t, stream)

    def gathered(self, lower):
        """The operand with lower(values) as its values (a convolution's patches, one batch matrix)."""
        out = Operand.__new__(Operand)
        out.__dict__.update(self.__dict__, values=lower(self.values))
        return out


def gemm(recipe, a, b, transpose_a, transpose_b):
    """C = op(A) op(B) in float32 under the recipe, and the counters (A's, B's, the accumulation's or None).

    A is m x k (k x m with transpose_a), B is k x n (n x k with transpose_b); C is unscaled (times
    fl32(1/s_a * 1/s_b)) but not rounded to the output format."""
    if recipe.kind == "block":
        return _block_gemm(recipe, a, b, transpose_a, transpose_b)
    qa, counters_a = _along_k(a, 0 if transpose_a else 1)
    qb, counters_b = _along_k(b, 1 if transpose_b else 0)
    if recipe.kind == "torch":
        c, accumulate = (qa.t() if transpose_a else qa) @ (qb.t() if transpose_b else qb), None
    else:
        (a_np, a_bits), (b_np, b_bits) = as_input(qa), as_input(qb)
        c, sites = _core.gemm(a_np, a_bits, b_np, b_bits, transpose_a, transpose_b, _core_format(a.spec),
                              _core_format(b.spec), recipe.accumulation, recipe.promotion, "fp32")
        c, accumulate = torch.from_numpy(c), sites.get("gemm.accumulate")
    alpha = float(np.float32(a.inverse) * np.float32(b.inverse))
    return (c * alpha if alpha != 1.0 else c), counters_a, counters_b, accumulate


def _along_k(operand, axis):
    if operand.spec.block:
        return operand.spec.quantize_along(operand.values.contiguous(), axis, operand.stream)
    return operand.values, operand.counters


def _core_format(spec):
    return "fp32" if spec.identity else spec.name


def _block_gemm(recipe, a, b, transpose_a, transpose_b):
    """The C++ block-scaled GEMM: it quantizes both operands along K itself (A's rounding: the recipe's dy's)."""
    sa, sb = a.spec, b.spec
    (a_np, a_bits), (b_np, b_bits) = as_input(a.values), as_input(b.values)
    c, counters = _core.block_gemm(a_np, a_bits, b_np, b_bits, transpose_a, transpose_b, sa.name, sa.tile or "",
                                   sb.name, sb.tile or "", recipe.accumulation, sa.scale_rule or sb.scale_rule or "",
                                   sa.rounding, sa.seed, a.stream)
    accumulate = dict(counters["accumulate"], promotions=counters["promotions"],
                      promotions_inexact=counters["promotions_inexact"])
    return torch.from_numpy(c), counters["a"], counters["b"], accumulate


def output(recipe, c):
    """A GEMM's result rounded to the recipe's output format, and the rounding's counters (None for fp32)."""
    values, _, counters = recipe.output.quantize(c.contiguous(), 0)
    return values, counters


def counted(roles, parts, output_counters):
    """One GEMM's counters by operand role: e.g. {"x": ..., "w": ..., "accumulate": ..., "output": ...}."""
    _, counters_a, counters_b, accumulate = parts
    found = {roles[0]: counters_a, roles[1]: counters_b, "accumulate": accumulate, "output": output_counters}
    return {k: v for k, v in found.items() if v is not None}


def amax(t):
    """max |t| over the non-NaN elements (NaN dropped, as Transformer Engine's fmaxf reduction drops it)."""
    if t.numel() == 0:
        return 0.0
    a = t.detach().abs()
    return float(torch.where(torch.isnan(a), torch.zeros_like(a), a).max())


def draw_stream(name, gemm_name, step):
    """The stream of stochastic draws for one GEMM's dy: a tag, CRC-32 of "LAYER.GEMM.dy", and the step
    (formats::stochastic_draw(seed, stream, i) then rounds element i)."""
    return (0x5E << 56) | (zlib.crc32(f"{name}.{gemm_name}.dy".encode()) << 24) | (step & 0xFFFFFF)
