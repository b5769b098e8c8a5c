#!/usr/bin/python3
"""Independent test of `mpverify eval --op dot` (tensor-core instructions, bit-exact).

The expected results come from a transcription, written for this test, of the
published model MMA-Sim (github.com/microsoft/MMA-Sim, commit c785138 of
2026-01-29, "Refactor code for open source (#7)"):
  mmasim/simulator/arithmetic.py  extract_significand_exponent, fused_sum,
                                  fused_dot_add, nv_fused_dot_add
  mmasim/simulator/nv_ptx.py      classes mma, wgmma, tcgen05mma
                                  (arch_accum_fractional_bits, is_split_k)
  mmasim/isa/nv_ptx/nv_mma.py, nv_wgmma.py, nv_tcgen05mma.py  (instruction lists)
(Older snapshots call these files simulator/functions.py and simulator/nv.py
with MMASim, WGMMASim, TCGen05MMASim; the rules are the same there except the
exponent given to a zero, see ZERO_EXPONENT below.)  Line numbers in the comments
("arith.py:NN", "nv_ptx.py:NN") refer to that commit.  MMA-Sim computes with
Python floats that it keeps exact; this file uses Python integers only.

Usage: tensor_core_dot_test.py MPVERIFY_BIN WORKDIR [--vectors N] [--seed S] [--jobs J]
For every (architecture, A format, B format, output type) combination of the
CLI's presets, N random adversarial vectors (default 100000) spread over the
combination's presets (some lines chain 2-4 instructions) plus crafted edge
cases are written to WORKDIR (one file per preset: the CLI takes one --arch),
checked with `mpverify eval --op dot --arch PRESET --check`, and
"N passed, 0 failed" with exit 0 is required.  Also: the preset table against
MMA-Sim's rules, a malformed line (exit 2, empty stdout) and a deliberately
wrong expected result (must be reported: "1 failed", exit 1).
Exit 0 when everything passes, 1 otherwise.
"""
import argparse
import json
import multiprocessing
import os
import random
import subprocess
import sys
import time

# ---------------------------------------------------------------------------
# Formats (bit layouts).  tf32 is given to the CLI as its 19-bit pattern
# (sign, 8 exponent bits, 10 fraction bits, bias 127) = the fp32 pattern >> 13;
# MMA-Sim holds tf32 as fp32 with the low 13 bits cleared (arith.py:25-29
# truncate_to_tf32) and treats it as torch.float32 (min exponent -126).
# fp8-e4m3 is OCP E4M3 "fn" (torch.float8_e4m3fn): no infinity, S.1111.111 NaN.
# ---------------------------------------------------------------------------

# arith.py:93-94 (extract_significand_exponent): `if significand == 0.0:
# exponent = -126`, whatever the format.  (Older MMA-Sim snapshots used -999,
# i.e. a zero never took part in the alignment; the earliest skipped zero
# products altogether.)
ZERO_EXPONENT = -126


class Fmt:
    def __init__(self, name, ebits, mbits, fn=False):
        self.name = name
        self.ebits = ebits
        self.m = mbits
        self.fn = fn  # OCP "fn": no inf, only S.1..1.1..1 is NaN
        self.nbits = 1 + ebits + mbits
        self.bias = (1 << (ebits - 1)) - 1
        # arith.py:54-64 dtype_min_exponent: fp32/bf16/tf32 -126, fp16 -14,
        # e5m2 -14, e4m3fn -6 -- the exponent of the smallest normal.
        self.emin = 1 - self.bias
        self.efield_max = (1 << ebits) - 1
        self.emax = (self.efield_max - self.bias) if fn else (self.efield_max - 1 - self.bias)
        self.esub = self.emin - mbits  # exponent of the smallest subnormal
        self.mmask = (1 << mbits) - 1
        self.sign_bit = 1 << (self.nbits - 1)
        self.hexw = (self.nbits + 3) // 4
        self.has_inf = not fn
        self._tables = None

    # ---- classification / decoding of one pattern ------------------------
    def kind(self, x):
        """0 finite, 1 infinite, 2 NaN."""
        ef = (x >> self.m) & self.efield_max
        mant = x & self.mmask
        if self.fn:
            return 2 if (ef == self.efield_max and mant == self.mmask) else 0
        if ef == self.efield_max:
            return 1 if mant == 0 else 2
        return 0

    def sig_exp(self, x):
        """MMA-Sim's extract_significand_exponent (arith.py:76-95) for a finite
        pattern, as (S, e): significand = S / 2^m (signed), exponent e.
        Normal: S/2^m in [1,2), e = field - bias.  Subnormal: e = emin (the
        format's min normal exponent, arith.py:90-92), S/2^m < 1.  Zero: S = 0,
        e = -126 (arith.py:93-94)."""
        ef = (x >> self.m) & self.efield_max
        mant = x & self.mmask
        if ef == 0:
            S, e = mant, (self.emin if mant else ZERO_EXPONENT)
        else:
            S, e = mant | (1 << self.m), ef - self.bias
        if x & self.sign_bit:
            S = -S
        return S, e

    def tables(self):
        """Per-pattern tables (for formats of at most 19 bits)."""
        if self._tables is None:
            n = 1 << self.nbits
            S = [0] * n
            E = [0] * n
            K = [0] * n
            for x in range(n):
                k = self.kind(x)
                K[x] = k
                if k == 0:
                    S[x], E[x] = self.sig_exp(x)
            hexs = None
            if self.nbits <= 16:
                f = "%0" + str(self.hexw) + "X"
                hexs = [f % x for x in range(n)]
            special = frozenset(x for x in range(n) if K[x])
            self._tables = (S, E, K, hexs, special)
        return self._tables

    # ---- construction ------------------------------------------------------
    def fin(self, neg, e, mant):
        """A finite pattern near sign * (1 + mant/2^m) * 2^e: e above the range
        clamps to the largest binade, e below the normal range gives the
        subnormal (truncated; zero when nothing is left)."""
        if e > self.emax:
            e = self.emax
        if e >= self.emin:
            x = ((e + self.bias) << self.m) | mant
            if self.fn and e == self.emax and mant == self.mmask:
                x -= 1  # S.1111.111 is NaN in e4m3fn
        else:
            sh = self.emin - e
            x = ((1 << self.m) | mant) >> sh if sh <= self.m else 0
        return x | (self.sign_bit if neg else 0)

    def from_value(self, S, e):
        """The pattern of the value S * 2^e (S a non-zero int), or None when the
        format does not hold it exactly."""
        neg = S < 0
        S = -S if neg else S
        n = S.bit_length()
        x = n - 1 + e  # the value's exponent
        if x > self.emax:
            return None
        if x >= self.emin:
            if n > self.m + 1:
                if S & ((1 << (n - self.m - 1)) - 1):
                    return None
                full = S >> (n - self.m - 1)
            else:
                full = S << (self.m + 1 - n)
            code = ((x + self.bias) << self.m) | (full - (1 << self.m))
            if self.fn and code == (self.efield_max << self.m) | self.mmask:
                return None
        else:
            sh = e - (self.emin - self.m)  # subnormal quantum 2^(emin - m)
            if sh < 0:
                if S & ((1 << -sh) - 1):
                    return None
                code = S >> -sh
            else:
                code = S << sh
            if code >> self.m:
                return None
        return code | (self.sign_bit if neg else 0)

    def enc(self):
        """Per-exponent table for fin(): entry e - lo is (base, shift) with
        pattern = (base | mant) >> shift for exponent e (positive sign); e
        below lo gives 0, above emax clamps to emax; nan_code is the positive
        NaN pattern that (emax, all-ones) would produce in e4m3fn (-1: none)."""
        if getattr(self, "_enc", None) is None:
            lo = self.esub - 2
            t = []
            for e in range(lo, self.emax + 1):
                if e >= self.emin:
                    t.append(((e + self.bias) << self.m, 0))
                else:
                    t.append((1 << self.m, self.emin - e))
            nan_code = ((self.efield_max << self.m) | self.mmask) if self.fn else -1
            self._enc = (t, lo, len(t) - 1, nan_code)
        return self._enc

    def max_finite(self, neg=False):
        return self.fin(neg, self.emax, self.mmask)

    def inf(self, neg=False):
        return (self.efield_max << self.m) | (self.sign_bit if neg else 0)

    def nan(self, rng):
        if self.fn:
            return (self.efield_max << self.m) | self.mmask | (self.sign_bit if rng.random() < 0.5 else 0)
        mant = rng.getrandbits(self.m) or 1
        return (self.efield_max << self.m) | mant | (self.sign_bit if rng.random() < 0.5 else 0)

    def hex(self, x):
        return "%0*X" % (self.hexw, x)


FMT = {
    "fp16": Fmt("fp16", 5, 10),
    "bf16": Fmt("bf16", 8, 7),
    "tf32": Fmt("tf32", 8, 10),
    "fp8-e4m3": Fmt("fp8-e4m3", 4, 3, fn=True),
    "fp8-e5m2": Fmt("fp8-e5m2", 5, 2),
    "fp32": Fmt("fp32", 8, 23),
}
F32, F16 = FMT["fp32"], FMT["fp16"]
PTX_TO_FMT = {"f16": "fp16", "bf16": "bf16", "tf32": "tf32", "e4m3": "fp8-e4m3", "e5m2": "fp8-e5m2",
              "f32": "fp32"}
FP8 = ("e4m3", "e5m2")

# ---------------------------------------------------------------------------
# MMA-Sim's instruction table, transcribed.
# ---------------------------------------------------------------------------
# isa/nv_ptx/nv_mma.py:8-118 (qualifier = shape.d.a.b.c); f64 and e2m1 left out
# (no such format in the CLI).
_VOLTA = ["m8n8k4.f32.f16.f16.f32", "m8n8k4.f32.f16.f16.f16", "m8n8k4.f16.f16.f16.f16"]
_TURING = ["m16n8k8.f32.f16.f16.f32", "m16n8k8.f16.f16.f16.f16"]
_AMPERE = ["m16n8k8.f32.tf32.tf32.f32", "m16n8k4.f32.tf32.tf32.f32", "m16n8k16.f32.f16.f16.f32",
           "m16n8k16.f16.f16.f16.f16", "m16n8k16.f32.bf16.bf16.f32", "m16n8k8.f32.bf16.bf16.f32"]
_ADA = ["m16n8k%d.%s.%s.%s.%s" % (k, d, a, b, d) for k in (32, 16) for d in ("f32", "f16")
        for a in FP8 for b in FP8]
_HOPPER = []  # hopper_mma_qualifiers holds f64 only
ARCH_MMA_QUALIFIERS = {  # nv_mma.py:102-115
    "Volta": _VOLTA,
    "Turing": _TURING + _VOLTA,
    "Ampere": _AMPERE + _TURING,
    "Ada Lovelace": _ADA + _AMPERE + _TURING,
    "Hopper": _HOPPER + _AMPERE + _TURING,
    "Blackwell": _AMPERE + _TURING,
}
SM_ARCH = {70: "Volta", 75: "Turing", 80: "Ampere", 89: "Ada Lovelace", 90: "Hopper", 100: "Blackwell"}
# nv_ptx.py:17-25 arch_accum_fractional_bits
ARCH_ACCUM_FRACTIONAL_BITS = {"Volta": 23, "Turing": 24, "Ampere": 24, "Ada Lovelace": 24,
                              "Hopper": 25, "Blackwell": 25, "RTX Blackwell": 25}
OUTPUT_TEXT = {"f32": "fp32, toward zero",
               "f32_e8m13": "fp32 with 13 fraction bits (E8M13), toward zero",
               "f16": "fp16, to nearest-even"}


def _wgmma_ok(k, d, a, b):  # isa/nv_ptx/nv_wgmma.py:13-28
    if k == 8:
        return a == b == "tf32" and d == "f32"
    if k == 16:
        if a == "f16":
            return b == "f16" and d in ("f32", "f16")
        return a == "bf16" and b == "bf16" and d == "f32"
    if k == 32:
        return a in FP8 and b in FP8 and d in ("f32", "f16")
    return False


def _tcgen05_ok(k, d, a, b):  # isa/nv_ptx/nv_tcgen05mma.py:20-34 (e2m1 left out)
    if k == 8:
        return a == b == "tf32" and d == "f32"
    if k == 16:
        if d == "f32":
            return a in ("f16", "bf16") and b in ("f16", "bf16")
        return d == "f16" and a == b == "f16"
    if k == 32:
        return a in FP8 and b in FP8 and d in ("f32", "f16")
    return False


def derive_preset(name):
    """The parameters MMA-Sim gives the instruction a preset name stands for
    (smXX.INSTR.SHAPE.OUT.A[.B]); None if MMA-Sim has no such instruction."""
    parts = name.split(".")
    if len(parts) not in (5, 6) or not parts[0].startswith("sm"):
        return None
    try:
        sm = int(parts[0][2:])
    except ValueError:
        return None
    instr, shape, d, a = parts[1], parts[2], parts[3], parts[4]
    b = parts[5] if len(parts) == 6 else a
    arch = SM_ARCH.get(sm)
    if arch is None or d not in ("f32", "f16") or a not in PTX_TO_FMT or b not in PTX_TO_FMT:
        return None
    if instr == "mma":
        if not (shape.startswith("m") and "n" in shape and "k" in shape):
            return None
        k = int(shape.split("k")[1])  # isa/common.py:141-145 nv_shape_to_mnk
        if "%s.%s.%s.%s.%s" % (shape, d, a, b, d) not in ARCH_MMA_QUALIFIERS[arch]:
            return None
        F = ARCH_ACCUM_FRACTIONAL_BITS[arch]  # nv_ptx.py:26
        out = "f32" if d == "f32" else "f16"  # nv_ptx.py:27
        if arch == "Ada Lovelace" and a in FP8:  # nv_ptx.py:28-34
            F = 13
            if out == "f32":
                out = "f32_e8m13"
        split = False  # nv_ptx.py:36-49 is_split_k
        if arch in ("Ampere", "Ada Lovelace"):
            if k == 8 and a == "tf32":
                split = True
            if k == 16 and a in ("f16", "bf16"):
                split = True
            if k == 32 and a in FP8:
                split = True
    elif instr in ("wgmma", "tcgen05"):
        if not shape.startswith("k"):
            return None
        k = int(shape[1:])
        if instr == "wgmma":
            if arch != "Hopper" or not _wgmma_ok(k, d, a, b):  # nv_wgmma.py:6
                return None
            F = 25  # nv_ptx.py:151
            out = "f32" if d == "f32" else "f16"
            if a in FP8:  # nv_ptx.py:153-159
                F = 13
                if out == "f32":
                    out = "f32_e8m13"
        else:
            if arch != "Blackwell" or not _tcgen05_ok(k, d, a, b):  # nv_tcgen05mma.py:13
                return None
            F = 25  # nv_ptx.py:189 (no fp8 special case for tcgen05)
            out = "f32" if d == "f32" else "f16"
        split = False  # wgmma/tcgen05: one fused_dot_add (nv_ptx.py:175, 209)
    else:
        return None
    return {"name": name, "a": PTX_TO_FMT[a], "b": PTX_TO_FMT[b],
            "c": "fp32" if d == "f32" else "fp16",  # c is converted to d's type (nv_ptx.py:68)
            "k": k, "fraction_bits": F, "split_halves": split, "output": OUTPUT_TEXT[out],
            "_out": out, "_sm": sm}


def mmasim_preset_names():
    """Every preset MMA-Sim's tables define with formats the CLI has and c == d."""
    names = []
    for sm, arch in SM_ARCH.items():
        for q in ARCH_MMA_QUALIFIERS[arch]:
            shape, d, a, b, c = q.split(".")
            if c != d:
                continue
            names.append("sm%d.mma.%s.%s.%s" % (sm, shape, d, a if a == b else a + "." + b))
    for instr, sm, ok in (("wgmma", 90, _wgmma_ok), ("tcgen05", 100, _tcgen05_ok)):
        for k in (8, 16, 32):
            for d in ("f32", "f16"):
                for a in ("tf32", "f16", "bf16") + FP8:
                    for b in ("tf32", "f16", "bf16") + FP8:
                        if ok(k, d, a, b):
                            names.append("sm%d.%s.k%d.%s.%s" % (sm, instr, k, d, a if a == b else a + "." + b))
    return sorted(set(names))


# MMA-Sim instructions that the CLI is known not to offer (reported, not failed).
KNOWN_ABSENT = {
    "sm75.mma.m8n8k4.f32.f16": "Turing also runs Volta's m8n8k4 in MMA-Sim (nv_mma.py:104)",
    "sm75.mma.m8n8k4.f16.f16": "Turing also runs Volta's m8n8k4 in MMA-Sim (nv_mma.py:104)",
    "sm100.tcgen05.k16.f32.f16.bf16": "tcgen05 kind::f16 with mixed A/B types (nv_tcgen05mma.py:27-28)",
    "sm100.tcgen05.k16.f32.bf16.f16": "tcgen05 kind::f16 with mixed A/B types (nv_tcgen05mma.py:27-28)",
}


# ---------------------------------------------------------------------------
# The model: one fused dot-add (arith.py:159-193 nv_fused_dot_add), exact.
# MMA-Sim computes it in doubles, and every step there is exact, so integers
# give the same bits: the significand products have at most 24 bits (fp32 c)
# or 22 (tf32 x tf32); the scale 2^(F + e_i - E) is at least 2^-483 (a normal
# double); each truncated term is an integer times 2^-F below 2^27 and the sum
# of at most 33 of them stays below 2^33; sum * 2^E (|E| <= 254) and the
# output's frexp / trunc / round are exact.
# ---------------------------------------------------------------------------
OUT_F32, OUT_E8M13, OUT_F16 = 0, 1, 2
OUT_CODE = {"f32": OUT_F32, "f32_e8m13": OUT_E8M13, "f16": OUT_F16}
NAN32, NAN16 = 0x7FFFFFFF, 0x7FFF  # arith.py:172-176


def round_output(T, sexp, out):
    """The exact sum T * 2^sexp to the output format (arith.py:182-193).
    fp32 / e8m13: extract_significand_exponent(value, float32) -- exponent
    clamped at -126 (subnormals) -- then math.trunc(s * 2^nf) * 2^-nf with
    nf = 23 or 13 (toward zero); fp16: exponent clamped at -14, then Python's
    round(s * 2^10) (half to even).  The product `int * float` gives +0.0 when
    the truncated/rounded significand is the int 0, so an exact zero sum and an
    underflow to zero both give +0, never -0.  A result of 2^128 or more (fp32)
    or 2^16 or more after rounding (fp16) becomes inf in torch.tensor(...,
    dtype) (a double-to-float conversion), with the sum's sign."""
    if T == 0:
        return 0
    neg = T < 0
    M = -T if neg else T
    x = M.bit_length() - 1 + sexp  # floor(log2 |value|)
    if out != OUT_F16:
        nf = 23 if out == OUT_F32 else 13
        ex = x if x > -126 else -126
        sh = sexp - ex + nf
        q = M << sh if sh >= 0 else M >> -sh  # truncation toward zero
        if q == 0:
            return 0  # int 0 * float -> +0.0
        if ex > 127:
            return 0xFF800000 if neg else 0x7F800000
        if q >> nf:
            bits = ((ex + 127) << 23) | ((q - (1 << nf)) << (23 - nf))
        else:  # subnormal (ex == -126)
            bits = q << (23 - nf)
        return bits | (0x80000000 if neg else 0)
    ex = x if x > -14 else -14
    sh = sexp - ex + 10
    if sh >= 0:
        q = M << sh
    else:
        n = -sh
        q = M >> n
        r = M & ((1 << n) - 1)
        h = 1 << (n - 1)
        if r > h or (r == h and (q & 1)):
            q += 1
    if q == 0:
        return 0  # round() gives the int 0 -> +0.0
    if q >> 11:  # rounded up to 2.0
        q >>= 1
        ex += 1
    if ex > 15:
        return 0xFC00 if neg else 0x7C00
    bits = (((ex + 15) << 10) | (q - 1024)) if q >> 10 else q
    return bits | (0x8000 if neg else 0)


class Instr:
    """One preset, ready for evaluation."""

    def __init__(self, p):
        self.name = p["name"]
        self.k = p["k"]
        self.F = p["fraction_bits"]
        self.split = p["split_halves"]
        self.out = OUT_CODE[p["_out"]]
        self.fa, self.fb = FMT[p["a"]], FMT[p["b"]]
        self.fc = FMT[p["c"]]
        SA, self.EA, self.KA, _, self.specA = self.fa.tables()
        SB, self.EB, self.KB, _, self.specB = self.fb.tables()
        self.SAraw, self.SBraw = SA, SB
        # Product term i: significand S_a*S_b / 2^mp, exponent e_a + e_b
        # (arith.py:151-155).  fused_sum (arith.py:115-129) keeps
        # trunc(s_i * 2^(F + e_i - E)); with s_i = P_i / 2^mp that is
        # trunc(P_i * 2^pre >> (E - e_i + extra)) with pre - extra = F - mp.
        mp = self.fa.m + self.fb.m
        self.pre = max(0, self.F - mp)
        self.extra = max(0, mp - self.F)
        self.SA = [s << self.pre for s in SA] if self.pre else SA
        self.SB = SB
        if self.fc is F16:
            self.CS, self.CE, self.CK = F16.tables()[0], F16.tables()[1], F16.tables()[2]

    def decode_c(self, c):
        if self.fc is F16:
            return self.CK[c], self.CS[c], self.CE[c], 10
        k = F32.kind(c)
        if k:
            return k, 0, 0, 23
        ef = (c >> 23) & 0xFF
        mant = c & 0x7FFFFF
        if ef:
            S, e = mant | 0x800000, ef - 127
        else:
            S, e = mant, (-126 if mant else ZERO_EXPONENT)
        return 0, (-S if c >> 31 else S), e, 23

    def special(self, a, b, ck, c):
        """fused_dot_add's NaN/inf check (arith.py:140-144): the fp64 sum of
        the exact products plus c.  Any NaN, inf*0, or infinities of both signs
        -> NaN (canonical for the output type, arith.py:172-176); otherwise an
        infinity -> that infinity (arith.py:177-180); else None (finite)."""
        KA, KB, SA, SB = self.KA, self.KB, self.SAraw, self.SBraw
        nan = pos = neg = False
        for x, y in zip(a, b):
            ka, kb = KA[x], KB[y]
            if ka == 0 and kb == 0:
                continue
            if ka == 2 or kb == 2:
                nan = True
            elif (ka == 0 and SA[x] == 0) or (kb == 0 and SB[y] == 0):
                nan = True  # inf * 0
            else:
                if bool(x & self.fa.sign_bit) != bool(y & self.fb.sign_bit):
                    neg = True
                else:
                    pos = True
        if ck == 2:
            nan = True
        elif ck == 1:
            if c & self.fc.sign_bit:
                neg = True
            else:
                pos = True
        if nan or (pos and neg):
            return NAN16 if self.out == OUT_F16 else NAN32
        if pos:
            return 0x7C00 if self.out == OUT_F16 else 0x7F800000
        if neg:
            return 0xFC00 if self.out == OUT_F16 else 0xFF800000
        return None

    def fused(self, a, b, c):
        """nv_fused_dot_add(a, b, c, F, output_type) (arith.py:159-193)."""
        ck, cs, ce, mc = self.decode_c(c)
        if ck or not (self.specA.isdisjoint(a) and self.specB.isdisjoint(b)):
            r = self.special(a, b, ck, c)
            if r is not None:
                return r
        EA, EB, SA, SB = self.EA, self.EB, self.SA, self.SB
        es = [EA[x] + EB[y] for x, y in zip(a, b)]
        # arith.py:118: E = max over all exponents (c's included, zeros included
        # with their exponent -126 + partner's exponent)
        E = max(es)
        if ce > E:
            E = ce
        F = self.F
        T = 0
        xt = self.extra
        # arith.py:120-128: each term truncated toward zero (math.trunc) to F
        # fraction bits after alignment to E, then an exact sum.
        for x, y, e in zip(a, b, es):
            p = SA[x] * SB[y]
            if p:
                d = E - e + xt
                if p > 0:
                    T += p >> d
                else:
                    T -= (-p) >> d
        d = F + ce - E - mc  # c's term: trunc(s_c * 2^(F + e_c - E)), s_c = cs / 2^mc
        if cs:
            if d >= 0:
                T += cs << d
            elif cs > 0:
                T += cs >> -d
            else:
                T -= (-cs) >> -d
        # arith.py:182-193: result = sum * 2^E, rounded once
        return round_output(T, E - F, self.out)

    def instruction(self, a, b, c):
        """mma.__call__ (nv_ptx.py:66-96): on Ampere/Ada split-k presets two
        fused dot-adds of k/2, the first's result (in the output type) being
        the second's c; otherwise one."""
        if self.split:
            h = self.k // 2
            c = self.fused(a[:h], b[:h], c)
            return self.fused(a[h:], b[h:], c)
        return self.fused(a, b, c)

    def line(self, A, B, c):
        """A line of K = n*k products: n instructions in order of increasing K,
        each result the next one's c (the CLI's chaining contract)."""
        k = self.k
        for j in range(0, len(A), k):
            c = self.instruction(A[j:j + k], B[j:j + k], c)
        return c


# ---------------------------------------------------------------------------
# Crafted edge cases, derived by hand (the model must agree with the stated
# result before the CLI is asked).  Operands: hex patterns; missing operands
# are +0 (a zero times a zero has exponent -252 and never matters).
# ---------------------------------------------------------------------------
CRAFTED = [
    # ---- fp16 -> fp32, F = 24, one fused op of 8 (sm80.mma.m16n8k8.f32.f16)
    # exact cancellation: 1*1.5 + (-1)*1.5 + 0 = 0 -> +0
    ("sm80.mma.m16n8k8.f32.f16", ["3C00", "BC00"], ["3E00", "3E00"], "00000000", "00000000",
     "exact cancellation gives +0"),
    # c = -0, products (-1)*(+0) = -0: every term truncates to the int 0, sum
    # +0.0 (arith.py:121-128) -> +0, not IEEE's -0
    ("sm80.mma.m16n8k8.f32.f16", ["BC00"], ["0000"], "80000000", "00000000",
     "-0 + (-0) gives +0"),
    # 2^-14 * 2^-14 = 2^-28 (s=1, e=-28), c = 0 (e=-126): E = -28, exact -> 2^-28 = 0x31800000
    ("sm80.mma.m16n8k8.f32.f16", ["0400"], ["0400"], "00000000", "31800000",
     "fp16 2^-14*2^-14 with c = 0"),
    # 2^-28 vs c = 2^-5: E = -5, c -> 2^24, product trunc(2^(24-28+5)) = 2:
    # (2^24 + 2) * 2^-29 = 2^-5 (1 + 2^-23) -> 0x3D000001
    ("sm80.mma.m16n8k8.f32.f16", ["0400"], ["0400"], "3D000000", "3D000001",
     "fp16 2^-14*2^-14 against c = 2^-5"),
    # 2^-28 vs c = 1: trunc(2^(24-28)) = 0, shifted out entirely -> 1.0
    ("sm80.mma.m16n8k8.f32.f16", ["0400"], ["0400"], "3F800000", "3F800000",
     "a term shifted out entirely"),
    # -2^-28 vs c = 1: truncation toward zero of the term gives 0 -> exactly 1.0
    # (a correctly rounded RZ would give 0x3F7FFFFF)
    ("sm80.mma.m16n8k8.f32.f16", ["8400"], ["0400"], "3F800000", "3F800000",
     "a negative term shifted out entirely"),
    # significand >= 2: 1.5*1.5 = 2.25 has exponent 0 (not 1); with -2.25 and
    # 2^-12*2^-12 = 2^-24: E = 0, the last term trunc(2^(24-24)) = 1 survives -> 2^-24 = 0x33800000
    ("sm80.mma.m16n8k8.f32.f16", ["3E00", "BE00", "0C00"], ["3E00", "3E00", "0C00"], "00000000",
     "33800000", "product significand >= 2 keeps the nominal exponent"),
    # c = -2.25 has exponent 1: E = 1, 2.25 - 2.25 = 0 and 2^-24 -> trunc(2^-1) = 0 -> +0
    ("sm80.mma.m16n8k8.f32.f16", ["3E00", "0C00"], ["3E00", "0C00"], "C0100000", "00000000",
     "c of exponent 1 shifts the small term out"),
    # two products of 2^-24 (2^-12*2^-12) with c = 1: F = 24 keeps both (1 each) -> 1 + 2^-23
    ("sm80.mma.m16n8k8.f32.f16", ["0C00", "0C00"], ["0C00", "0C00"], "3F800000", "3F800001",
     "F = 24 keeps 2^-24 terms"),
    # chain of two m16n8k8 (K = 16): 1 + 2^-24 is truncated to 1 after the
    # first instruction, and again after the second -> 1.0
    ("sm80.mma.m16n8k8.f32.f16", ["0C00"] + ["0000"] * 7 + ["0C00"], ["0C00"] + ["0000"] * 7 + ["0C00"],
     "3F800000", "3F800000", "chained instructions round in between"),
    # ---- Volta F = 23 (sm70.mma.m8n8k4.f32.f16): the same two 2^-24 terms
    # truncate to trunc(2^-1) = 0 each -> 1.0
    ("sm70.mma.m8n8k4.f32.f16", ["0C00", "0C00"], ["0C00", "0C00"], "3F800000", "3F800000",
     "F = 23 drops 2^-24 terms"),
    # ---- Hopper F = 25: four products 2^-24 * 0.5 (0x0001 = 2^-24: s = 2^-10,
    # e = -14; 0.5: e = -1): e = -15, trunc(2^-10 * 2^(25-15)) = 1 each -> 1 + 2^-23
    ("sm90.mma.m16n8k8.f32.f16", ["0001"] * 4, ["3800"] * 4, "3F800000", "3F800001",
     "F = 25 keeps 2^-25 terms"),
    # ... while F = 24 (Ampere) truncates each to 0 -> 1.0
    ("sm80.mma.m16n8k8.f32.f16", ["0001"] * 4, ["3800"] * 4, "3F800000", "3F800000",
     "F = 24 drops 2^-25 terms"),
    # ---- split halves (sm80.mma.m16n8k16.f32.f16): 2^-24 in each half, c = 1:
    # each half gives 1 + 2^-24 -> fp32 RZ 1.0 -> 1.0
    ("sm80.mma.m16n8k16.f32.f16", ["0C00"] + ["0000"] * 7 + ["0C00"], ["0C00"] + ["0000"] * 7 + ["0C00"],
     "3F800000", "3F800000", "split halves round in between"),
    # ... the same on sm90 (one fused op of 16, F = 25) -> 1 + 2^-23
    ("sm90.mma.m16n8k16.f32.f16", ["0C00"] + ["0000"] * 7 + ["0C00"], ["0C00"] + ["0000"] * 7 + ["0C00"],
     "3F800000", "3F800001", "no split on Hopper"),
    # ---- fp16 -> fp16 (sm80.mma.m16n8k8.f16.f16), RNE
    # 1 + 2^-11: a tie between 1 and 1 + 2^-10 -> even: 1.0 = 0x3C00
    ("sm80.mma.m16n8k8.f16.f16", ["1000"], ["3C00"], "3C00", "3C00", "fp16 tie to even (down)"),
    # (1 + 2^-10) + 2^-11: tie between 0x3C01 and 0x3C02 -> even 0x3C02
    ("sm80.mma.m16n8k8.f16.f16", ["1000"], ["3C00"], "3C01", "3C02", "fp16 tie to even (up)"),
    # 1 + 2^-11 + 2^-19: above the tie -> 0x3C01
    ("sm80.mma.m16n8k8.f16.f16", ["1000", "0C00"], ["3C00", "2000"], "3C00", "3C01", "fp16 above the tie"),
    # 65504 + 16 = 65520: tie between 65504 (odd) and 65536 -> 65536 -> inf
    ("sm80.mma.m16n8k8.f16.f16", ["4C00"], ["3C00"], "7BFF", "7C00", "fp16 output overflow to inf"),
    # 65504 + 14 = 65518: below the tie -> 65504
    ("sm80.mma.m16n8k8.f16.f16", ["4B00"], ["3C00"], "7BFF", "7BFF", "fp16 output just below overflow"),
    # -(2^-14 * 2^-14) = -2^-28 rounds to zero: round() gives the int 0 -> +0
    ("sm80.mma.m16n8k8.f16.f16", ["8400"], ["0400"], "0000", "0000", "fp16 negative underflow gives +0"),
    # 2^-14 * 0.5 = 2^-15: fp16 subnormal 0x0200
    ("sm80.mma.m16n8k8.f16.f16", ["0400"], ["3800"], "0000", "0200", "fp16 subnormal result"),
    # exact cancellation with c = -0 -> +0
    ("sm80.mma.m16n8k8.f16.f16", ["3C00", "BC00"], ["3C00", "3C00"], "8000", "0000",
     "fp16 exact cancellation gives +0"),
    # inf * 0 -> canonical fp16 NaN 0x7FFF
    ("sm80.mma.m16n8k8.f16.f16", ["7C00"], ["0000"], "3C00", "7FFF", "fp16 inf*0 -> NaN 0x7FFF"),
    # ---- bf16 -> fp32 (sm80.mma.m16n8k8.f32.bf16), F = 24
    # zero rule: 0 * 2^127 has exponent -126 + 127 = 1; E = 1, so
    # 2^-60 * 1 (e = -60) truncates to trunc(2^(24-60-1)) = 0 -> +0
    ("sm80.mma.m16n8k8.f32.bf16", ["0000", "2180"], ["7F00", "3F80"], "00000000", "00000000",
     "a zero's exponent -126 dominates the alignment"),
    # control: without the zero * 2^127 term the result is 2^-60 = 0x21800000
    ("sm80.mma.m16n8k8.f32.bf16", ["2180"], ["3F80"], "00000000", "21800000",
     "control for the zero rule"),
    # 2^127 * 2 = 2^128: fp32 overflow -> inf (MMA-Sim's torch conversion),
    # not RZ's 0x7F7FFFFF
    ("sm80.mma.m16n8k8.f32.bf16", ["7F00"], ["4000"], "00000000", "7F800000",
     "overflow to inf for fp32 RZ"),
    # -FLT_MAX - 2^127 = -(3 - 2^-23) 2^127 -> -inf
    ("sm80.mma.m16n8k8.f32.bf16", ["FF00"], ["3F80"], "FF7FFFFF", "FF800000", "negative overflow"),
    # FLT_MAX + 2^103 (half an fp32 ulp; bf16 0x7300): (2^25 - 1) 2^103 < 2^128, RZ -> FLT_MAX
    ("sm80.mma.m16n8k8.f32.bf16", ["7300"], ["3F80"], "7F7FFFFF", "7F7FFFFF",
     "FLT_MAX + half an ulp stays FLT_MAX"),
    # FLT_MAX + 2^104 (one ulp; bf16 0x7380) = 2^128 exactly -> inf
    ("sm80.mma.m16n8k8.f32.bf16", ["7380"], ["3F80"], "7F7FFFFF", "7F800000",
     "FLT_MAX + 1 ulp overflows"),
    # inf * 0 -> canonical NaN 0x7FFFFFFF
    ("sm80.mma.m16n8k8.f32.bf16", ["7F80"], ["0000"], "3F800000", "7FFFFFFF", "inf*0 -> NaN"),
    # +inf + -inf -> NaN
    ("sm80.mma.m16n8k8.f32.bf16", ["7F80", "FF80"], ["3F80", "3F80"], "00000000", "7FFFFFFF",
     "+inf + -inf -> NaN"),
    # +inf + finite -> +inf
    ("sm80.mma.m16n8k8.f32.bf16", ["7F80", "3F80"], ["3F80", "3F80"], "3F800000", "7F800000",
     "inf + finite -> inf"),
    # c = -inf, finite products -> -inf
    ("sm80.mma.m16n8k8.f32.bf16", ["3F80"], ["3F80"], "FF800000", "FF800000", "c = -inf"),
    # c = +inf, product -inf -> NaN
    ("sm80.mma.m16n8k8.f32.bf16", ["FF80"], ["3F80"], "7F800000", "7FFFFFFF", "c = inf, product -inf"),
    # c a NaN with a payload -> canonical NaN
    ("sm80.mma.m16n8k8.f32.bf16", ["3F80"], ["3F80"], "FFC00123", "7FFFFFFF", "c NaN -> canonical"),
    # 2^-100 * 1.5*2^-40 = 1.5*2^-140: E = max(-140, c's -126) = -126,
    # trunc(1.5 * 2^(24-140+126)) = 1536 exact -> fp32 subnormal 1.5*2^9 * 2^-149 = 0x00000300
    ("sm80.mma.m16n8k8.f32.bf16", ["0D80"], ["2BC0"], "00000000", "00000300", "fp32 subnormal result"),
    # -2^-75 * 2^-75 = -2^-150: term trunc(-1 * 2^(24-150+126)) = -1 kept, but
    # the fp32 output truncates it to 0 -> +0 (not -0)
    ("sm80.mma.m16n8k8.f32.bf16", ["9A00"], ["1A00"], "00000000", "00000000",
     "fp32 negative underflow gives +0"),
    # ---- bf16 split (sm80.mma.m16n8k16.f32.bf16): 2^-24 (0x3380) in each half, c = 1 -> 1.0
    ("sm80.mma.m16n8k16.f32.bf16", ["3380"] + ["0000"] * 7 + ["3380"], ["3F80"] + ["0000"] * 7 + ["3F80"],
     "3F800000", "3F800000", "bf16 split halves"),
    # ... one fused op of 8 (sm80.mma.m16n8k8.f32.bf16): 1 + 2^-23
    ("sm80.mma.m16n8k8.f32.bf16", ["3380", "3380"], ["3F80", "3F80"], "3F800000", "3F800001",
     "bf16 one fused op"),
    # ---- tf32 (sm80.mma.m16n8k4.f32.tf32): 19-bit patterns (fp32 >> 13)
    # 1.5 * 1.5 = 2.25 -> 0x40100000
    ("sm80.mma.m16n8k4.f32.tf32", ["1FE00"], ["1FE00"], "00000000", "40100000", "tf32 1.5*1.5"),
    # smallest tf32 subnormal 0x00001 = fp32 0x00002000 = 2^-136 (s = 2^-10, e = -126), times 1:
    # term trunc(2^-10 * 2^24) = 2^14 -> 2^-136 = 0x00002000
    ("sm80.mma.m16n8k4.f32.tf32", ["00001"], ["1FC00"], "00000000", "00002000", "tf32 subnormal"),
    # tf32 NaN (fp32 0x7FC00000 >> 13 = 0x3FE00) -> canonical NaN
    ("sm80.mma.m16n8k4.f32.tf32", ["3FE00"], ["1FC00"], "00000000", "7FFFFFFF", "tf32 NaN"),
    # zero rule with tf32: 0 * 2^127 (fp32 0x7F000000 >> 13 = 0x3F800) has exponent
    # -126 + 127 = 1; 2^-30 * 1 (fp32 0x30800000 >> 13 = 0x18400) truncates to 0 -> +0
    ("sm80.mma.m16n8k4.f32.tf32", ["00000", "18400"], ["3F800", "1FC00"], "00000000", "00000000",
     "tf32 zero rule"),
    # ---- fp8 e4m3 (sm89.mma.m16n8k32.f32.e4m3, F = 13, E8M13, split)
    # c = 1 + 2^-14 (0x3F800200), products zero: E = 0, trunc((1 + 2^-14) 2^13) = 2^13 -> 1.0
    ("sm89.mma.m16n8k32.f32.e4m3", [], [], "3F800200", "3F800000", "e8m13 truncation of 1+2^-14 to 1"),
    # Blackwell tcgen05 fp8: F = 25, plain fp32 -> 1 + 2^-14 kept
    ("sm100.tcgen05.k32.f32.e4m3", [], [], "3F800200", "3F800200", "tcgen05 fp8 keeps fp32"),
    # wgmma fp8 (F = 13, no split): 2^-7 (0x04, s = 0.5, e = -6) * 2^-6 (0x08): s = 0.5,
    # e = -12: trunc(0.5 * 2^(13-12)) = 1 -> 1 + 2^-13 = 0x3F800400
    ("sm90.wgmma.k32.f32.e4m3", ["04"], ["08"], "3F800000", "3F800400", "e8m13 keeps 2^-13"),
    # 2^-7 * 2^-7: s = 0.25, e = -12: trunc(0.25 * 2) = 0 -> 1.0
    ("sm90.wgmma.k32.f32.e4m3", ["04"], ["04"], "3F800000", "3F800000", "e8m13 drops 2^-14"),
    # 448 * 448 = 200704 = 1.53125 * 2^17 -> 0x48440000 (exact in E8M13)
    ("sm90.wgmma.k32.f32.e4m3", ["7E"], ["7E"], "00000000", "48440000", "e4m3 max squared"),
    # e4m3 NaN (0x7F) -> canonical NaN
    ("sm89.mma.m16n8k32.f32.e4m3", ["7F"], ["38"], "00000000", "7FFFFFFF", "e4m3 NaN"),
    # the same with fp16 output -> 0x7FFF
    ("sm89.mma.m16n8k32.f16.e4m3", ["FF"], ["38"], "0000", "7FFF", "e4m3 NaN, fp16 output"),
    # ---- mixed fp8 (sm89.mma.m16n8k32.f32.e5m2.e4m3): e5m2 inf (0x7C) * e4m3 0 -> NaN
    ("sm89.mma.m16n8k32.f32.e5m2.e4m3", ["7C"], ["00"], "00000000", "7FFFFFFF", "e5m2 inf * 0"),
    # e5m2 -inf (0xFC) * e4m3 1.0 (0x38) -> -inf
    ("sm89.mma.m16n8k32.f32.e5m2.e4m3", ["FC"], ["38"], "3F800000", "FF800000", "e5m2 -inf * 1"),
    # ---- e5m2 -> fp16 (sm89.mma.m16n8k32.f16.e5m2)
    # 57344 * 1 -> fp16 0x7B00 (exact)
    ("sm89.mma.m16n8k32.f16.e5m2", ["7B"], ["3C"], "0000", "7B00", "e5m2 max to fp16"),
    # 2 * 57344 = 114688 -> inf
    ("sm89.mma.m16n8k32.f16.e5m2", ["7B", "7B"], ["3C", "3C"], "0000", "7C00", "fp8 sum overflows fp16"),
    # 1 + 2^-11 (e5m2 2^-11 = 0x10): tie -> even 0x3C00; with c = 0x3C01 -> 0x3C02
    ("sm89.mma.m16n8k32.f16.e5m2", ["10"], ["3C"], "3C00", "3C00", "fp16 tie from fp8, down"),
    ("sm89.mma.m16n8k32.f16.e5m2", ["10"], ["3C"], "3C01", "3C02", "fp16 tie from fp8, up"),
]


def crafted_line(inst, A, B, c):
    k = inst.k
    n = max(1, -(-max(len(A), len(B)) // k))
    K = n * k
    A = [int(x, 16) for x in A] + [0] * (K - len(A))
    B = [int(x, 16) for x in B] + [0] * (K - len(B))
    return A, B, int(c, 16)


# ---------------------------------------------------------------------------
# Random adversarial vectors.
# ---------------------------------------------------------------------------
# Kinds of random segments (the operands of one instruction) and their weights:
#   uniform        any finite encoding, some zeros and subnormals         (1)
#   clustered      products near one random binade, spreads 0..30        (1)
#   cancel         pairs that cancel exactly or to one ulp, c = -(sum)    (2)
#   residual       exactly cancelling large pairs + small terms near E-F (2)
#   c_vs_products  c F-ish binades above or below the products           (3)
#   sig_ge2        significands >= 1.5 (products >= 2.25) beside products
#                  of the next binade written with small significands   (4)
#   tiny_zero      zeros times large partners (exponent -126 + e_b),
#                  products around 2^-126..2^-160, subnormals, c tiny    (5)
#   subnormal_big  a subnormal times a large partner on top (its nominal
#                  exponent sets E), cancelled by a normal twin
#   overflow       products near the top of the range, c near max        (6)
#   special        NaN, inf, inf*0, +inf with -inf, c NaN/inf            (7)
CATEGORIES = [  # (name, weight)
    ("uniform", 14), ("clustered", 14), ("cancel", 14), ("residual", 12), ("c_vs_products", 10),
    ("sig_ge2", 8), ("tiny_zero", 9), ("subnormal_big", 7), ("overflow", 7), ("special", 5),
]
_CAT_NAMES = [c for c, _ in CATEGORIES]
_CAT_CUM = []
_acc = 0
for _c, _w in CATEGORIES:
    _acc += _w
    _CAT_CUM.append(_acc)
_CAT_TOTAL = _acc


class Gen:
    def __init__(self, rng, inst):
        self.rng = rng
        self.gb = rng.getrandbits
        self.rnd = rng.random
        self.fa, self.fb, self.fc = inst.fa, inst.fb, inst.fc
        self.F = inst.F
        self.EA, self.EB = inst.EA, inst.EB
        self.SAraw, self.SBraw = inst.SAraw, inst.SBraw
        self.specA, self.specB = inst.specA, inst.specB
        self.mp = inst.fa.m + inst.fb.m
        # the binade below which k products cannot overflow the output
        self.out_top = (15 if inst.fc is F16 else 127) - (inst.k.bit_length() - 1)

    def ri(self, lo, hi):
        """Uniform integer in [lo, hi]."""
        return lo + int(self.rnd() * (hi - lo + 1))

    # ---- elements ----
    def uni(self, f, spec):
        x = self.gb(f.nbits)
        if x in spec:
            x ^= 1 << f.m  # largest binade instead of inf/NaN
        return x

    def split_exp(self, tp):
        """Exponents (ea, eb) with ea + eb = tp, each inside its format."""
        fa, fb = self.fa, self.fb
        lo = max(fa.esub, tp - fb.emax)
        hi = min(fa.emax, tp - fb.esub)
        if lo > hi:
            ea = fa.emax if tp > 0 else fa.esub
        else:
            ea = self.ri(lo, hi)
        return ea, tp - ea

    def prod_range(self):
        fa, fb = self.fa, self.fb
        return fa.esub + fb.esub, fa.emax + fb.emax

    def clustered(self, k, tp, spread, hi_mant=False, sign_bias=0.5):
        """k products near 2^tp: exponents (ca, cb) with ca + cb = tp, each
        operand's exponent within +-spread, random fractions and signs
        (A negative with probability 1 - sign_bias).  Same as fin() per
        element, through the per-exponent tables (speed)."""
        fa, fb, gb, rnd = self.fa, self.fb, self.gb, self.rnd
        ma, mb = fa.m, fb.m
        ca, cb = self.split_exp(tp)
        encA, loA, nA, nanA = fa.enc()
        encB, loB, nB, nanB = fb.enc()
        hA = (1 << (ma - 1)) if hi_mant else 0
        hB = (1 << (mb - 1)) if hi_mant else 0
        sA, sB = fa.sign_bit, fb.sign_bit
        a, b = [], []
        if spread:
            w = 2 * spread + 1
            ia0 = ca - spread - loA
            ib0 = cb - spread - loB
            for _ in range(k):
                ia = ia0 + int(rnd() * w)
                ib = ib0 + int(rnd() * w)
                baseA, shA = encA[0 if ia < 0 else (nA if ia > nA else ia)]
                baseB, shB = encB[0 if ib < 0 else (nB if ib > nB else ib)]
                x = (baseA | gb(ma) | hA) >> shA
                y = (baseB | gb(mb) | hB) >> shB
                if x == nanA:
                    x -= 1
                if y == nanB:
                    y -= 1
                a.append(x | sA if rnd() >= sign_bias else x)
                b.append(y | sB if rnd() < 0.5 else y)
        else:
            ia, ib = ca - loA, cb - loB
            baseA, shA = encA[0 if ia < 0 else (nA if ia > nA else ia)]
            baseB, shB = encB[0 if ib < 0 else (nB if ib > nB else ib)]
            for _ in range(k):
                x = (baseA | gb(ma) | hA) >> shA
                y = (baseB | gb(mb) | hB) >> shB
                if x == nanA:
                    x -= 1
                if y == nanB:
                    y -= 1
                a.append(x | sA if rnd() >= sign_bias else x)
                b.append(y | sB if rnd() < 0.5 else y)
        return a, b

    def permutation(self, k):
        """A random affine permutation i -> (s*i + o) mod k (k a power of two,
        s odd): cheaper than shuffle, and it spreads neighbours over both
        halves of a split instruction."""
        s = 2 * int(self.rnd() * (k // 2)) + 1
        o = int(self.rnd() * k)
        return [(s * i + o) % k for i in range(k)]

    def max_prod_exp(self, a, b):
        EA, EB, SA, SB = self.EA, self.EB, self.SAraw, self.SBraw
        best = None
        for x, y in zip(a, b):
            if SA[x] and SB[y]:
                e = EA[x] + EB[y]
                if best is None or e > best:
                    best = e
        return best

    # ---- segments (the operands of one instruction) ----
    def segment(self, cat, k):
        rnd, ri = self.rnd, self.ri
        fa, fb = self.fa, self.fb
        lo, hi = self.prod_range()
        if cat == "uniform":
            sa, sb = self.specA, self.specB
            a = [self.uni(fa, sa) for _ in range(k)]
            b = [self.uni(fb, sb) for _ in range(k)]
            if hi > self.out_top and rnd() < 0.7:
                # products can exceed the output's range: A (and sometimes B)
                # below 2 (top exponent bit clear), so that not every such sum
                # overflows
                m = ~(1 << (fa.nbits - 2))
                a = [x & m for x in a]
                if rnd() < 0.5:
                    m = ~(1 << (fb.nbits - 2))
                    b = [y & m for y in b]
            if rnd() < 0.4:  # sprinkle zeros and subnormals
                for i in range(k):
                    r = rnd()
                    if r < 0.08:
                        a[i] = fa.sign_bit if rnd() < 0.5 else 0
                    elif r < 0.16:
                        b[i] = self.gb(fb.m) | (fb.sign_bit if rnd() < 0.5 else 0)
                    elif r < 0.24:
                        a[i] = self.gb(fa.m) | (fa.sign_bit if rnd() < 0.5 else 0)
            return a, b
        if cat == "clustered":
            tp = ri(lo, hi if rnd() < 0.2 else min(hi, self.out_top))
            spread = (0, 1, 3, 8, 30)[int(rnd() * 5)]
            return self.clustered(k, tp, spread)
        if cat == "cancel":
            tp = ri(max(lo, -60), min(hi, 60, self.out_top + 3)) if rnd() < 0.7 else ri(lo, hi)
            spread = (0, 2, 6)[int(rnd() * 3)]
            h = k // 2
            a, b = self.clustered(h, tp, spread)
            a2, b2 = [], []
            same = fa is fb
            for x, y in zip(a, b):
                r = rnd()
                if r < 0.4:
                    x2, y2 = x ^ fa.sign_bit, y
                elif r < 0.6:
                    x2, y2 = x, y ^ fb.sign_bit
                elif r < 0.75 and same:
                    x2, y2 = y ^ fa.sign_bit, x  # swapped operands
                else:  # nearly: one ulp off
                    x2, y2 = (x ^ fa.sign_bit) ^ 1, y
                    if fa.kind(x2):
                        x2 = x ^ fa.sign_bit
                a2.append(x2)
                b2.append(y2)
            layout = rnd()
            if layout < 0.35:  # pairs across the two halves (split presets)
                return a + a2, b + b2
            if layout < 0.7:  # adjacent pairs
                A, B = [], []
                for i in range(h):
                    A += [a[i], a2[i]]
                    B += [b[i], b2[i]]
                return A, B
            idx = self.permutation(k)
            A0, B0 = a + a2, b + b2
            return [A0[i] for i in idx], [B0[i] for i in idx]
        if cat == "residual":
            # large products that cancel exactly in pairs, plus small terms
            # near E - F whose truncation to F bits is what remains: chosen so
            # the remainder lies inside the output format's range
            F = self.F
            if self.fc is F16:
                er = ri(-22, 12)
            else:
                er = ri(-140, 100)
            r = ri(-2, 12)
            tp = er + F - r
            if tp > self.out_top + 4 and rnd() < 0.7:
                tp = self.out_top + 4 - int(rnd() * 4)
            if tp > hi:
                tp = hi
            npairs = 1 + int(rnd() * (k // 4))
            hm = rnd() < 0.5
            a, b = self.clustered(npairs, tp, (0, 1, 2)[int(rnd() * 3)], hi_mant=hm)
            a += [x ^ fa.sign_bit for x in a]
            b += b
            a2, b2 = self.clustered(k - 2 * npairs, tp - F + r, (0, 2, 5)[int(rnd() * 3)])
            a += a2
            b += b2
            idx = self.permutation(k)
            return [a[i] for i in idx], [b[i] for i in idx]
        if cat == "c_vs_products":
            tp = ri(lo, hi if rnd() < 0.2 else min(hi, self.out_top))
            return self.clustered(k, tp, (0, 2, 5)[int(rnd() * 3)])
        if cat == "sig_ge2":
            tp = ri(max(lo, -40), min(hi, 40, self.out_top + 2))
            a, b = self.clustered(k, tp, 0, hi_mant=True)
            # some products one binade up with small significands: same value
            # scale, different nominal exponent
            for i in range(k):
                r = rnd()
                if r < 0.25:
                    ea, eb = self.split_exp(tp + 1)
                    a[i] = fa.fin(rnd() < 0.5, ea, self.gb(fa.m) >> 1)
                    b[i] = fb.fin(rnd() < 0.5, eb, 0)
                elif r < 0.4 and i:
                    a[i] = a[i - 1] ^ fa.sign_bit
                    b[i] = b[i - 1]
            return a, b
        if cat == "tiny_zero":
            r = rnd()
            a, b = [], []
            if r < 0.5:
                # zero times a large partner: exponent -126 + e_b; the others
                # placed at -126 + e_b - g, g around F (bf16/tf32 only reach)
                eb0 = ri(fb.emax - 10, fb.emax) if rnd() < 0.7 else ri(fb.esub, fb.emax)
                ez = ZERO_EXPONENT + eb0
                for i in range(k):
                    if rnd() < 0.25:
                        a.append(fa.sign_bit if rnd() < 0.5 else 0)
                        b.append(fb.fin(rnd() < 0.5, eb0, self.gb(fb.m)))
                    else:
                        tp = ez - ri(-2, self.F + 6)
                        ea, eb = self.split_exp(tp)
                        a.append(fa.fin(rnd() < 0.5, ea, self.gb(fa.m)))
                        b.append(fb.fin(rnd() < 0.5, eb, self.gb(fb.m)))
                return a, b
            if r < 0.65:
                # products just around and below fp32's smallest normal 2^-126
                # (reachable with 8-bit exponents), zeros (sometimes nearly all)
                pz = 0.15 if rnd() < 0.6 else 0.85
                for i in range(k):
                    if rnd() < pz:
                        a.append(0 if rnd() < 0.5 else fa.sign_bit)
                        b.append(fb.fin(rnd() < 0.5, ri(fb.esub, fb.emax), self.gb(fb.m)))
                    else:
                        ea, eb = self.split_exp(ri(-160, -118))
                        a.append(fa.fin(rnd() < 0.5, ea, self.gb(fa.m)))
                        b.append(fb.fin(rnd() < 0.5, eb, self.gb(fb.m)))
                return a, b
            if r < 0.85:
                # subnormals and the smallest normals, zeros
                for i in range(k):
                    s = rnd()
                    if s < 0.2:
                        a.append(0 if rnd() < 0.5 else fa.sign_bit)
                    else:
                        a.append(fa.fin(rnd() < 0.5, ri(fa.esub, fa.emin + 3), self.gb(fa.m)))
                    b.append(fb.fin(rnd() < 0.5, ri(fb.esub, fb.emin + 3), self.gb(fb.m)))
                return a, b
            # all products zero (c alone, against the zeros' exponents)
            for i in range(k):
                a.append(0 if rnd() < 0.5 else fa.sign_bit)
                b.append(self.uni(fb, self.specB) if rnd() < 0.5 else fb.fin(False, fb.emax, 0))
            return a, b
        if cat == "subnormal_big":
            # a subnormal times a large partner on top: its nominal exponent
            # (the format's min normal exponent, not the value's) sets E; often
            # cancelled exactly by the same value written with a normal
            # operand (another nominal exponent); the rest near E - F
            gb = self.gb
            a, b = [], []
            eb0 = ri(max(fb.emin, fb.emax - 12), fb.emax)
            xa = gb(fa.m) or 1  # subnormal fraction
            a0 = xa | (fa.sign_bit if rnd() < 0.5 else 0)
            b0 = fb.fin(rnd() < 0.5, eb0, gb(fb.m))
            a.append(a0)
            b.append(b0)
            if rnd() < 0.6:
                # -(a0 * b0) as a normal a1 = a0 * 2^j and b1 = b0 / 2^j
                Sa, _ = fa.sig_exp(a0)
                Sb, eb = fb.sig_exp(b0)
                j = fa.m + 1 - abs(Sa).bit_length() + int(rnd() * 3)
                a1 = fa.from_value(Sa, fa.emin - fa.m + j)
                b1 = fb.from_value(-Sb, eb - fb.m - j)
                if a1 is None or b1 is None:
                    a1, b1 = a0 ^ fa.sign_bit, b0
                a.append(a1)
                b.append(b1)
            E0 = fa.emin + eb0
            F = self.F
            a2, b2 = self.clustered(k - len(a), E0 - F + ri(-4, 6), 2)
            a += a2
            b += b2
            idx = self.permutation(k)
            return [a[i] for i in idx], [b[i] for i in idx]
        if cat == "overflow":
            tp = ri(min(hi, self.out_top - 2), min(hi, self.out_top + 4))
            return self.clustered(k, tp, (0, 1, 2)[int(rnd() * 3)], sign_bias=0.1 if rnd() < 0.7 else 0.5)
        if cat == "special":
            a, b = self.segment(("uniform", "clustered", "cancel")[int(rnd() * 3)], k)
            for _ in range(1 + int(rnd() * 2)):
                i = int(rnd() * k)
                r = rnd()
                if r < 0.3:
                    if rnd() < 0.5:
                        a[i] = fa.nan(self.rng)
                    else:
                        b[i] = fb.nan(self.rng)
                elif r < 0.6:
                    if fa.has_inf:
                        a[i] = fa.inf(rnd() < 0.5)
                    elif fb.has_inf:
                        b[i] = fb.inf(rnd() < 0.5)
                    else:
                        a[i] = fa.nan(self.rng)
                elif r < 0.8:  # inf * 0
                    if fa.has_inf:
                        a[i], b[i] = fa.inf(rnd() < 0.5), (0 if rnd() < 0.5 else fb.sign_bit)
                    elif fb.has_inf:
                        a[i], b[i] = (0 if rnd() < 0.5 else fa.sign_bit), fb.inf(rnd() < 0.5)
                else:  # +inf and -inf
                    j = int(rnd() * k)
                    if fa.has_inf:
                        a[i], a[j] = fa.inf(False), fa.inf(True)
                        b[i] = b[j] = fb.fin(False, 0, 0)
                    elif fb.has_inf:
                        b[i], b[j] = fb.inf(False), fb.inf(True)
                        a[i] = a[j] = fa.fin(False, 0, 0)
            return a, b
        raise ValueError(cat)

    # ---- c ----
    def exact_neg_sum_c(self, a, b):
        """c = -(exact sum of the products), rounded to c's format (fp32 RZ,
        fp16 RNE): a near-exact cancellation of all products by c."""
        EA, EB, SA, SB = self.EA, self.EB, self.SAraw, self.SBraw
        terms = [(SA[x] * SB[y], EA[x] + EB[y]) for x, y in zip(a, b) if SA[x] and SB[y]]
        if not terms:
            return 0
        e0 = min(e for _, e in terms)
        T = sum(p << (e - e0) for p, e in terms)
        c = round_output(-T, e0 - self.mp, OUT_F16 if self.fc is F16 else OUT_F32)
        if self.fc.kind(c):
            return 0
        return c

    def gen_c(self, cat, a, b):
        fc, rnd, ri = self.fc, self.rnd, self.ri
        tp = self.max_prod_exp(a, b)
        if tp is None:
            tp = 0
        r = rnd()
        if cat == "cancel" and r < 0.6:
            c = self.exact_neg_sum_c(a, b)
            if c and rnd() < 0.5:
                c += 1 if rnd() < 0.5 else -1  # one ulp off (same sign)
                if fc.kind(c) or (c & (fc.sign_bit - 1)) == 0:
                    c = self.exact_neg_sum_c(a, b)
            return c
        if cat == "c_vs_products":
            F = self.F
            g = ri(F - 4, F + 6) if rnd() < 0.6 else ri(0, 60)
            e = tp + g if rnd() < 0.5 else tp - g  # c dominating / dominated
            return fc.fin(rnd() < 0.5, e, self.gb(fc.m))
        if cat == "tiny_zero":
            if r < 0.3:
                return 0 if rnd() < 0.5 else fc.sign_bit
            if r < 0.7:  # subnormal or smallest normals
                return fc.fin(rnd() < 0.5, ri(fc.esub, fc.emin + 2), self.gb(fc.m))
            return fc.fin(rnd() < 0.5, tp + ri(-30, 5), self.gb(fc.m))
        if cat == "overflow":
            if r < 0.5:
                return fc.fin(rnd() < 0.2, fc.emax - ri(0, 2), self.gb(fc.m))
            return fc.fin(rnd() < 0.5, tp + ri(-4, 2), self.gb(fc.m))
        if cat == "special" and r < 0.25:
            s = rnd()
            if s < 0.4:
                return fc.nan(self.rng)
            return fc.inf(rnd() < 0.5)
        # generic mixture
        if r < 0.25:
            return self._uni_c()
        if r < 0.7:
            return fc.fin(rnd() < 0.5, tp + ri(-self.F - 4, 4), self.gb(fc.m))
        if r < 0.85:
            return 0 if rnd() < 0.5 else fc.sign_bit
        return fc.fin(rnd() < 0.5, ri(fc.esub, fc.emax), self.gb(fc.m))

    def _uni_c(self):
        fc = self.fc
        x = self.gb(fc.nbits)
        if fc.kind(x):
            x ^= 1 << fc.m
        return x

    def pick_category(self):
        r = self.rnd() * _CAT_TOTAL
        for name, cum in zip(_CAT_NAMES, _CAT_CUM):
            if r < cum:
                return name
        return _CAT_NAMES[-1]


def hexer(f):
    t = f.tables()[3] if f.nbits <= 16 else None
    if t is not None:
        return t.__getitem__
    fmt = "%0" + str(f.hexw) + "X"
    return lambda x: fmt % x


# ---------------------------------------------------------------------------
# One combination: generate, write, run the CLI.
# ---------------------------------------------------------------------------
def combo_id(p):
    return "sm%d_%s_%s_%s" % (p["_sm"], p["a"], p["b"], p["c"])


def run_bin(binary, args, data=b""):
    """Run mpverify with `data` on standard input.  The binary may be in the
    middle of a rebuild (missing or busy): retry for up to two minutes."""
    deadline = time.time() + 120
    while True:
        try:
            r = subprocess.run([binary] + args, input=data, capture_output=True)
            return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
        except OSError as e:
            if time.time() > deadline:
                return -1, "", "cannot run %s: %s" % (binary, e)
            time.sleep(2)


def run_cli(binary, preset, path):
    """`mpverify eval --op dot --arch PRESET --check < path`."""
    with open(path, "rb") as f:
        data = f.read()
    return run_bin(binary, ["eval", "--op", "dot", "--arch", preset, "--check"], data)


def parse_summary(stdout):
    lines = stdout.strip().splitlines()
    if not lines:
        return None
    parts = lines[-1].split()
    if len(parts) == 4 and parts[1] == "passed," and parts[3] == "failed":
        try:
            return int(parts[0]), int(parts[2])
        except ValueError:
            return None
    return None


def generate(cid, presets, n_vectors, seed):
    """The cases of one combination: {preset: [(A, B, c, d), ...]} (crafted
    cases first), and the crafted cases on which the model disagrees with the
    hand-derived result."""
    # same seed -> same files: the generator's seed is a string (hashed with
    # SHA-512 by random.seed, independent of PYTHONHASHSEED)
    rng = random.Random("%d:%s" % (seed, cid))
    insts = [Instr(p) for p in presets]
    gens = [Gen(rng, i) for i in insts]
    cases = {i.name: [] for i in insts}
    problems = []
    for (pname, A, B, c, d, what) in CRAFTED:
        for inst in insts:
            if inst.name != pname:
                continue
            A2, B2, c2 = crafted_line(inst, A, B, c)
            got = inst.line(A2, B2, c2)
            if got != int(d, 16):
                problems.append("model disagrees with a crafted case (%s, %s): model %0*X, by hand %s"
                                % (pname, what, inst.fc.hexw, got, d))
            cases[pname].append((A2, B2, c2, int(d, 16)))
    rnd = rng.random
    np_ = len(insts)
    for _ in range(n_vectors):
        pi = int(rnd() * np_)
        inst, g = insts[pi], gens[pi]
        # most lines one instruction, some a chain of 2-4
        n_instr = 1 if rnd() < 0.8 else 2 + int(rnd() * 3)
        k = inst.k
        A, B = [], []
        for j in range(n_instr):
            cat = g.pick_category()
            a, b = g.segment(cat, k)
            if j == 0:
                c = g.gen_c(cat, a, b)
            A += a
            B += b
        cases[inst.name].append((A, B, c, inst.line(A, B, c)))
    return insts, cases, problems


def do_combination(job):
    cid, presets, n_vectors, seed, workdir, binary = job
    t0 = time.time()
    insts, cases, problems = generate(cid, presets, n_vectors, seed)
    n_crafted = sum(1 for cr in CRAFTED for i in insts if i.name == cr[0])
    out = {}
    for inst in insts:
        ha, hb, hc = hexer(inst.fa), hexer(inst.fb), hexer(inst.fc)
        out[inst.name] = [" ".join([" ".join(map(ha, A)), " ".join(map(hb, B)), hc(c), hc(d)])
                          for (A, B, c, d) in cases[inst.name]]
    del cases
    t_gen = time.time() - t0
    total_n = total_pass = total_fail = 0
    ok = not problems
    for inst in insts:
        path = os.path.join(workdir, "%s__%s.txt" % (cid, inst.name))
        with open(path, "w") as f:
            lines = out[inst.name]
            f.write("\n".join(lines) + ("\n" if lines else ""))
        n = len(out[inst.name])
        rc, so, se = run_cli(binary, inst.name, path)
        s = parse_summary(so)
        good = s == (n, 0) and rc == 0
        if not good:
            ok = False
            mism = [ln[:400] for ln in so.splitlines() if ln.startswith("line ")][:5]
            problems.append("%s: expected '%d passed, 0 failed' and exit 0; got %r, exit %d%s%s"
                            % (inst.name, n, so.strip().splitlines()[-1] if so.strip() else "", rc,
                               ("\n      " + "\n      ".join(mism)) if mism else "",
                               ("\n      stderr: " + se.strip()[:300]) if se.strip() else ""))
        if s:
            total_pass += s[0]
            total_fail += s[1]
        total_n += n
    return {"cid": cid, "ok": ok, "n": total_n, "passed": total_pass, "failed": total_fail,
            "crafted": n_crafted, "presets": [i.name for i in insts], "problems": problems,
            "t_gen": t_gen, "t_all": time.time() - t0}


# ---------------------------------------------------------------------------
# Driver.
# ---------------------------------------------------------------------------
def check_preset_table(listed):
    """The CLI's preset table against derive_preset (MMA-Sim's rules)."""
    errors, notes = [], []
    names = set()
    for p in listed:
        name = p.get("name")
        names.add(name)
        exp = derive_preset(name) if isinstance(name, str) else None
        if exp is None:
            if p.get("fp8_through_fp16") is True:
                # The project's own hardware-derived model of Hopper's FP8
                # mma.sync (fp16 HMMAs plus an fp32 add); MMA-Sim has no such
                # instruction (hopper_mma_qualifiers, nv_mma.py:54-59: f64
                # only), so there is nothing to hold it against here.
                notes.append("outside MMA-Sim, not checked here: %s (fp8_through_fp16)" % name)
            else:
                errors.append("preset %r: no such instruction in MMA-Sim" % (name,))
            continue
        if p.get("fp8_through_fp16", False) is not False:
            errors.append("preset %s: fp8_through_fp16 = %r on an MMA-Sim instruction"
                          % (name, p.get("fp8_through_fp16")))
        for key in ("a", "b", "c", "k", "fraction_bits", "split_halves", "output"):
            if p.get(key) != exp[key]:
                errors.append("preset %s: %s = %r, MMA-Sim gives %r" % (name, key, p.get(key), exp[key]))
    for name in mmasim_preset_names():
        if name not in names:
            if name in KNOWN_ABSENT:
                notes.append("not offered by the CLI: %s (%s)" % (name, KNOWN_ABSENT[name]))
            else:
                errors.append("MMA-Sim instruction missing from the preset list: %s" % name)
    return errors, notes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mpverify")
    ap.add_argument("workdir")
    ap.add_argument("--vectors", type=int, default=100000,
                    help="random vectors per (arch, A, B, output) combination (default 100000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    args = ap.parse_args()
    binary = os.path.abspath(args.mpverify)
    os.makedirs(args.workdir, exist_ok=True)
    t0 = time.time()
    failures = []

    # -- the preset table
    rc, so, se = run_bin(binary, ["eval", "--op", "dot", "--list", "--json"])
    try:
        listed = json.loads(so)
    except ValueError:
        print("FAIL: `eval --op dot --list --json` did not print JSON (exit %d): %s" % (rc, se.strip()))
        return 1
    errors, notes = check_preset_table(listed)
    for n in notes:
        print("note: " + n)
    if errors:
        failures += ["preset table: " + e for e in errors]
    print("preset table: %d presets, %s" % (len(listed), "OK" if not errors else "%d errors" % len(errors)))

    # -- combinations
    combos = {}
    for p in listed:
        exp = derive_preset(p.get("name", ""))
        if exp is None:
            continue
        combos.setdefault(combo_id(exp), []).append(exp)
    crafted_presets = {c[0] for c in CRAFTED}
    missing = crafted_presets - {p["name"] for ps in combos.values() for p in ps}
    for m in sorted(missing):
        failures.append("crafted cases name a preset the CLI lacks: %s" % m)
    jobs = [(cid, combos[cid], args.vectors, args.seed, args.workdir, binary) for cid in sorted(combos)]
    if args.jobs > 1:
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            res = list(pool.imap(do_combination, jobs))
    else:
        res = [do_combination(j) for j in jobs]
    for rr in res:
        print("%-34s %7d lines (%d crafted) over %d preset(s): %d passed, %d failed  %s  [%.1fs]"
              % (rr["cid"], rr["n"], rr["crafted"], len(rr["presets"]), rr["passed"], rr["failed"],
                 "OK" if rr["ok"] else "FAIL", rr["t_all"]))
        for pr in rr["problems"]:
            failures.append("%s: %s" % (rr["cid"], pr))

    # -- a malformed line: exit 2, nothing on stdout
    preset = "sm80.mma.m16n8k8.f32.f16"
    for bad in ("3C00 3C00 3C00 zz\n", "3C00 " * 16 + "3F800000 41100000 00000000\n",
                "3C00 " * 16 + "3F8000001 41100000\n"):
        rc, so, se = run_bin(binary, ["eval", "--op", "dot", "--arch", preset, "--check"], bad.encode())
        if rc != 2 or so != "":
            failures.append("malformed line %r: exit %d, stdout %r (want exit 2, empty stdout)"
                            % (bad.strip()[:40], rc, so[:200]))
    # -- a deliberately wrong expected d must be caught
    bad_path = os.path.join(args.workdir, "flipped__%s.txt" % preset)
    inst = Instr(derive_preset(preset))
    lines = []
    for (pname, A, B, c, d, what) in CRAFTED:
        if pname == preset:
            A2, B2, c2 = crafted_line(inst, A, B, c)
            lines.append([" ".join("%04X" % x for x in A2 + B2), "%08X" % c2, "%08X" % inst.line(A2, B2, c2)])
    flip = len(lines) // 2
    lines[flip][2] = "%08X" % (int(lines[flip][2], 16) ^ 1)
    with open(bad_path, "w") as f:
        f.write("".join(" ".join(l) + "\n" for l in lines))
    rc, so, se = run_cli(binary, preset, bad_path)
    s = parse_summary(so)
    if s != (len(lines) - 1, 1) or rc != 1 or ("line %d:" % (flip + 1)) not in so:
        failures.append("a flipped expected result was not caught: %r, exit %d (want '%d passed, 1 failed', "
                        "exit 1, line %d reported)" % (so.strip()[-200:], rc, len(lines) - 1, flip + 1))
    else:
        print("flipped expected result: caught (%d passed, 1 failed, exit 1)" % (len(lines) - 1))

    total = sum(rr["n"] for rr in res)
    print("%d combinations, %d lines, %.1fs" % (len(res), total, time.time() - t0))
    if failures:
        print("FAILED:")
        for f in failures:
            print("  " + f)
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
