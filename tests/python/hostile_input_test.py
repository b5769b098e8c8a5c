"""The Python module's intake of arrays it was not built for: big-endian arrays (what np.load returns for a
'>f4' file), views numpy cannot copy, integers beyond 2^53, and a negative amax. Each case once gave a wrong
answer or a crash; each expected value here comes from numpy's own casts or exact integer arithmetic.

Run with pytest (PYTHONPATH=build/python).
"""
import random
import subprocess
import sys

import numpy as np
import pytest

import mpverify

VALUES = [1.5, -2.25, 100.0, 3e-5, 65504.0, 1e-8, -0.0, 7.0]


@pytest.mark.parametrize("order", [">", "<"])
@pytest.mark.parametrize("dtype", ["f2", "f4", "f8"])
def test_round_reads_either_byte_order(order, dtype):
    native = np.array(VALUES, dtype=dtype)
    swapped = native.astype(order + dtype)
    got, counters = mpverify.round(swapped, "fp16")
    # numpy's own cast to float16 rounds to nearest even once from the array's value.
    np.testing.assert_array_equal(got, native.astype(np.float16).astype(np.float32))
    assert counters == mpverify.round(native, "fp16")[1]


def test_every_array_reading_function_reads_big_endian_float32():
    native = np.array(VALUES, dtype=np.float32)
    big = native.astype(">f4")
    assert big.dtype.byteorder == ">"
    for name, call in [
        ("quantize", lambda x: mpverify.quantize(x, "mxfp8-e4m3")["values"]),
        ("analyze", lambda x: mpverify.analyze(x, "fp16", scales=[1.0, 1024.0])),
        ("tensor_stats", lambda x: mpverify.tensor_stats(x, "fp16")),
        ("lost_updates", lambda x: mpverify.lost_updates(np.full_like(x, 4096.0), x, "fp16")),
    ]:
        want, got = call(native), call(big)
        if isinstance(want, np.ndarray):
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:
            assert got == want, name


def test_big_endian_bit_patterns_keep_their_values():
    # bfloat16 bit patterns of 1.5 and -2.25, stored big-endian: the bits, not the bytes, are the value.
    bits = np.array([0x3FC0, 0xC010], dtype=">u2")
    got, _ = mpverify._core.round(bits, "bfloat16", "fp32", "rne", 0, 0)
    np.testing.assert_array_equal(got, np.array([1.5, -2.25], dtype=np.float32))


def test_an_input_too_large_to_copy_raises_naming_it():
    # A broadcast view of 2^50 float32 elements (4 PiB) cannot be made contiguous on any machine: numpy's
    # MemoryError must come back as an exception, not a crash. In a child process, so a crash fails the test.
    code = (
        "import numpy as np, mpverify\n"
        "x = np.broadcast_to(np.float32(1), (2**50,))\n"
        "try:\n"
        "    mpverify.round(x, 'fp16')\n"
        "except MemoryError as e:\n"
        "    print('MemoryError:', e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr}"
    assert "MemoryError: round: x: cannot be read as a contiguous array of float32" in r.stdout, r.stdout


def exact_round_integer(n, p):
    """n rounded to nearest even at p significand bits, in exact integer arithmetic (no exponent limits)."""
    magnitude = abs(n)
    cut = max(0, magnitude.bit_length() - p)
    q, r = divmod(magnitude, 1 << cut)
    half = (1 << cut) >> 1
    if cut and (r > half or (r == half and q & 1)):
        q += 1
    return (q << cut) * (1 if n >= 0 else -1)


def test_integers_beyond_two_to_the_53_round_once():
    # 2^54 + 2^30 + 1: nearest even to float64 gives 2^54 + 2^30, a tie at fp32's 24 bits that rounds to
    # 2^54; rounded once, the +1 breaks the tie upward to 2^54 + 2^31.
    got, _ = mpverify.round([2**54 + 2**30 + 1], "fp32")
    assert int(got[0]) == 2**54 + 2**31
    rng = random.Random(45)
    numbers = []
    for _ in range(2000):
        bits = rng.randint(54, 63)
        n = rng.getrandbits(bits) | (1 << (bits - 1))
        # Half the cases sit one above or below a tie at 24 and at 8 bits, where double rounding bites.
        if rng.random() < 0.5:
            cut = bits - rng.choice([24, 8])
            n = (n >> cut << cut) + (1 << (cut - 1)) + rng.choice([-1, 1])
        numbers.append(n if rng.random() < 0.5 else -n)
    for fmt, p in [("fp32", 24), ("bf16", 8)]:
        got, _ = mpverify.round(numbers, fmt)
        want = [exact_round_integer(n, p) for n in numbers]
        wrong = [(n, int(g), w) for n, g, w in zip(numbers, got, want) if int(g) != w]
        assert not wrong, f"{fmt}: {len(wrong)} of {len(numbers)} differ, first {wrong[0]}"
    unsigned = np.array([2**64 - 1, 2**63 + 2**39 + 1], dtype=np.uint64)
    got, _ = mpverify.round(unsigned, "fp32")
    assert [int(g) for g in got] == [2**64, exact_round_integer(2**63 + 2**39 + 1, 24)]


def test_a_negative_amax_is_refused_as_the_trace_reader_refuses_it():
    for name in ["delayed", "current", "mxfp8"]:
        s = mpverify.Scaler(name)
        with pytest.raises(ValueError, match="negative"):
            s.step(amax=-5.0)
        with pytest.raises(ValueError, match="negative"):
            s.step(amax=-0.0)
        s.step(amax=0.0)  # zero, inf and nan are amaxes a trace may hold
        s.step(amax=float("inf"))
        s.step(amax=float("nan"))
