"""mpverify.torch.emulate against formulas written here, apart from the code under test:
  fp16, bf16: an emulated Linear's y, dx, dW and db equal torch's float32 matmul of operands rounded by
              torch's own casts (x.half().float(), ...), bit for bit; a Conv2d's y, dx and dW equal
              F.conv2d / conv2d_input / conv2d_weight of the rounded operands within a derived bound,
              and bit for bit where the inputs make every sum exact;
  fp8:        current scaling (s = fl32(max / amax)) and OCP E4M3 / E5M2 rounding transcribed here;
              the underflow counter against a recount;
  mxfp8:      rceil MX quantization transcribed here, along each GEMM's own K; the C++ block-scaled
              GEMM counts the same quantization and stays near the fp32 product;
  nvfp4:      stochastic rounding of dy draws anew each step and replays with the seed;
  training:   a small CNN trains under emulate() with an optimizer made before it;
  hopper:     accumulation=hopper against a transcription of the Hopper wgmma model (F = 25, terms
              aligned to the largest e_a + e_b, truncated, sum rounded toward zero) for K = 32;
  matmul:     emulated_matmul (attention's products) under bf16, mxfp8 and hopper;
  refusals:   a bad recipe raises ValueError naming what is wrong.
Usage: torch_emulate_test.py BUILD_PYTHON_DIR (the build tree's python/ folder, which holds the mpverify
package). Exit 77 (skipped) when torch or numpy cannot be imported, 1 on any failed check, 2 for bad usage.
"""
if __name__ != "__main__":  # a script run by ctest (usage above) that deletes its work folder, not a pytest module
    import pytest
    pytest.skip("a script: run it as ctest does, python3 FILE ARGUMENTS", allow_module_level=True)

import math
import sys
from fractions import Fraction

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(f"SKIP: {e} (install python3-torch python3-numpy)")
    sys.exit(77)

if len(sys.argv) != 2:
    print("usage: torch_emulate_test.py BUILD_PYTHON_DIR", file=sys.stderr)
    sys.exit(2)
sys.path.insert(0, sys.argv[1])
import mpverify  # noqa: E402
import mpverify.torch  # noqa: E402
from mpverify.torch.emulate import EmulatedConv2d, EmulatedLinear  # noqa: E402

checks = 0
failures = []


def check(what, ok, detail=""):
    global checks
    checks += 1
    if not ok:
        failures.append(f"{what}: {detail}")


def check_equal(what, ours, expected):
    """Bit for bit (NaN-free tensors)."""
    if ours.shape != expected.shape:
        check(what, False, f"shape {tuple(ours.shape)} != {tuple(expected.shape)}")
        return
    same = torch.equal(ours, expected)
    check(what, same, "" if same else f"max |diff| {(ours - expected).abs().max().item()}")


def check_within(what, ours, expected, bound):
    err = (ours.double() - expected.double()).abs()
    worst = (err / bound.clamp_min(1e-300)).max().item()
    check(what, bool((err <= bound).all()), f"error is {worst:.3g} of the bound")


def gamma(n, u=2.0**-24):
    return n * u / (1 - n * u)


torch.manual_seed(0)

# --- 1. fp16 and bf16 operands, fp32 accumulation: a Linear, bit for bit ------------------------------------


def linear_case(recipe, cast):
    """An emulated Linear against x.cast().float() @ W.cast().float().T + b, and its dx, dW, db by hand."""
    lin = torch.nn.Linear(48, 24)
    x = (torch.randn(2, 5, 48) * 3).requires_grad_()
    dy = torch.randn(2, 5, 24) * 1e-3
    r = lambda t: cast(t.detach()).float()  # noqa: E731
    y_expected = r(x).reshape(10, 48) @ r(lin.weight).T + lin.bias.detach()
    dx_expected = r(dy).reshape(10, 24) @ r(lin.weight)
    dw_expected = r(dy).reshape(10, 24).T @ r(x).reshape(10, 48)
    check(f"{recipe}: the rounding changes x (not a vacuous test)", not torch.equal(r(x), x.detach()))
    emulated = mpverify.torch.emulate(torch.nn.Sequential(lin), recipe)
    check(f"{recipe}: the Linear is replaced", isinstance(emulated[0], EmulatedLinear))
    check(f"{recipe}: the same weight Parameter", emulated[0].weight is lin.weight and emulated[0].bias is lin.bias)
    y = emulated(x)
    y.backward(dy)
    check_equal(f"{recipe} Linear y", y.detach().reshape(10, 24), y_expected)
    check_equal(f"{recipe} Linear dx", x.grad.reshape(10, 48), dx_expected)
    check_equal(f"{recipe} Linear dW", lin.weight.grad, dw_expected)
    check_equal(f"{recipe} Linear db", lin.bias.grad, dy.reshape(10, 24).sum(0))
    return emulated[0]


linear_case("fp16", lambda t: t.half())
linear_case("bf16", lambda t: t.bfloat16())

# Counters: underflow to zero of x in fp16, against a recount.
lin = torch.nn.Linear(64, 8)
tiny = torch.randn(16, 64) * 2.0 ** torch.randint(-30, 0, (16, 64)).float()
emulated = mpverify.torch.emulate(torch.nn.Sequential(lin), "fp16")
emulated(tiny)
recount = int(((tiny != 0) & (tiny.half() == 0)).sum())
check("fp16 counters: some x underflow (not vacuous)", recount > 0)
check("fp16 counters: fprop x underflow_to_zero", emulated[0].counters["fprop"]["x"]["underflow_to_zero"] == recount,
      f"{emulated[0].counters['fprop']['x']['underflow_to_zero']} != {recount}")

# --- 1b. Conv2d under fp16 ----------------------------------------------------------------------------------
# torch's conv2d sums in its own order, the emulated one in im2col order (and dx's patches through F.fold).
# Both compute the same exact sum S of n products of fp16 values (exact in fp32) plus, forward, the bias: any
# order of fp32 additions of those n + 1 terms is within gamma_{n+1} * T of S (Higham, Accuracy and Stability,
# (3.5)-(3.6); T = the sum of the terms' magnitudes, here in float64), so the two differ by at most
# 2 gamma_{n+1} T. n = c*r*s for y, k*r*s for dx (the patch positions that cover an input pixel), n*p*q for dW.


def conv_case(conv, x, dy, cast, name):
    r = lambda t: cast(t.detach()).float()  # noqa: E731
    xr, wr, dyr = r(x), r(conv.weight), r(dy)
    args = dict(stride=conv.stride, padding=conv.padding, dilation=conv.dilation)
    y_ref = F.conv2d(xr, wr, conv.bias.detach(), **args)
    dx_ref = torch.nn.grad.conv2d_input(x.shape, wr, dyr, **args)
    dw_ref = torch.nn.grad.conv2d_weight(xr, conv.weight.shape, dyr, **args)
    a64 = lambda t: t.double().abs()  # noqa: E731
    y_mag = F.conv2d(a64(xr), a64(wr), a64(conv.bias.detach()), **args)
    dx_mag = torch.nn.grad.conv2d_input(x.shape, a64(wr), a64(dyr), **args)
    dw_mag = torch.nn.grad.conv2d_weight(a64(xr), conv.weight.shape, a64(dyr), **args)
    k, c, kh, kw = conv.weight.shape
    model = mpverify.torch.emulate(torch.nn.Sequential(conv), "fp16")
    check(f"{name}: the Conv2d is replaced", isinstance(model[0], EmulatedConv2d))
    xg = x.detach().clone().requires_grad_()
    y = model(xg)
    y.backward(dy)
    n_y, n_dx, n_dw = c * kh * kw + 1, k * kh * kw, dy.shape[0] * dy.shape[2] * dy.shape[3]
    return (y.detach(), xg.grad, conv.weight.grad), (y_ref, dx_ref, dw_ref), \
        (2 * gamma(n_y) * y_mag, 2 * gamma(n_dx) * dx_mag, 2 * gamma(n_dw) * dw_mag)


conv = torch.nn.Conv2d(3, 6, 3, stride=2, padding=1)
x = torch.randn(4, 3, 11, 11)
ours, refs, bounds = conv_case(conv, x, torch.randn(4, 6, 6, 6), lambda t: t.half(), "fp16 Conv2d")
for what, o, e, b in zip(("y", "dx", "dW"), ours, refs, bounds):
    check_within(f"fp16 Conv2d {what} within 2 gamma_n T of torch's conv", o, e, b)
# Not vacuous: the fp32 convolution of the unrounded operands lies outside the bound somewhere.
y_fp32 = F.conv2d(x, conv.weight.detach(), conv.bias.detach(), stride=2, padding=1)
check("fp16 Conv2d: the fp32 conv is outside the bound (rounding applied)",
      bool(((y_fp32.double() - ours[0].double()).abs() > bounds[0]).any()))

# Small integers: every product and sum is exact in fp32, so any order gives the same bits.
conv = torch.nn.Conv2d(2, 4, (3, 2), padding=(1, 2), dilation=(1, 2))
with torch.no_grad():
    conv.weight.copy_(torch.randint(-4, 5, conv.weight.shape).float())
    conv.bias.copy_(torch.randint(-4, 5, conv.bias.shape).float())
x = torch.randint(-8, 9, (3, 2, 7, 6)).float()
dy_shape = F.conv2d(x, conv.weight, padding=(1, 2), dilation=(1, 2)).shape
ours, refs, _ = conv_case(conv, x, torch.randint(-8, 9, dy_shape).float(), lambda t: t.half(), "integer Conv2d")
for what, o, e in zip(("y", "dx", "dW"), ours, refs):
    check(f"integer Conv2d {what}: non-zero (not vacuous)", bool(e.abs().sum() > 0))
    check_equal(f"integer Conv2d {what} equals torch's conv", o, e)

# padding_mode="reflect": torch pads, the emulated conv multiplies. Small integers, the bias too: every sum
# is exact in fp32 whatever order torch's kernel for this CPU adds in (a random bias made it one ulp apart).
conv = torch.nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect")
x = torch.randint(-8, 9, (2, 2, 5, 5)).float()
with torch.no_grad():
    conv.weight.copy_(torch.randint(-4, 5, conv.weight.shape).float())
    conv.bias.copy_(torch.randint(-4, 5, conv.bias.shape).float())
expected = F.conv2d(F.pad(x, (1, 1, 1, 1), mode="reflect"), conv.weight, conv.bias)
check_equal("reflect-padded Conv2d y", mpverify.torch.emulate(torch.nn.Sequential(conv), "fp16")(x).detach(), expected)

# --- 2. fp8 with current scaling, transcribed ---------------------------------------------------------------


def round_ocp(v, mantissa_bits, emin, max_finite):
    """v (float64 array) rounded to nearest-even into an OCP FP8 format, saturating at +-max_finite."""
    a = np.abs(v)
    e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    quantum = np.exp2(np.maximum(e, emin) - mantissa_bits)
    r = np.minimum(np.round(a / quantum) * quantum, max_finite)  # np.round: half to even; a / quantum exact
    return np.copysign(r, v)


E4M3 = (3, -6, 448.0)
E5M2 = (2, -14, 57344.0)


def scaled(t, fmt):
    """(values rounded after current scaling, fl32(1/s), s): amax over |t|, s = fl32(max / amax)."""
    v = t.detach().numpy().astype(np.float32)
    amax = np.float32(np.abs(v).max())
    s = np.float32(fmt[2]) / amax
    q = round_ocp((v * s).astype(np.float64), *fmt).astype(np.float32)  # v * s: one float32 product
    return torch.from_numpy(q), np.float32(1) / s, float(s)


lin = torch.nn.Linear(40, 12)
x = (torch.randn(9, 40) * 2.0 ** torch.randint(-12, 2, (9, 40)).float()).requires_grad_()
dy = torch.randn(9, 12) * 1e-4
qx, ix, sx = scaled(x, E4M3)
qw, iw, sw = scaled(lin.weight, E4M3)
qdy, idy, _ = scaled(dy, E5M2)
model = mpverify.torch.emulate(torch.nn.Sequential(lin), "fp8")
y = model(x)
y.backward(dy)
check_equal("fp8 Linear y", y.detach(), (qx @ qw.T) * float(ix * iw) + lin.bias.detach())
check_equal("fp8 Linear dx", x.grad, (qdy @ qw) * float(idy * iw))
check_equal("fp8 Linear dW", lin.weight.grad, (qdy.T @ qx) * float(idy * ix))
counters = model[0].counters
check("fp8 counters: x's scale", counters["fprop"]["x"]["scale"] == sx, f"{counters['fprop']['x']['scale']} != {sx}")
xs = (x.detach().numpy() * np.float32(sx)).astype(np.float64)
recount = int(((xs != 0) & (round_ocp(xs, *E4M3) == 0)).sum())
check("fp8 counters: some x underflow (not vacuous)", recount > 0)
check("fp8 counters: fprop x underflow_to_zero", counters["fprop"]["x"]["underflow_to_zero"] == recount,
      f"{counters['fprop']['x']['underflow_to_zero']} != {recount}")
check("fp8 counters: dgrad and wgrad recorded", {"dy", "w"} <= set(counters["dgrad"]) and
      {"dy", "x"} <= set(counters["wgrad"]))

# --- 2b. mxfp8: each GEMM quantizes its own copy along its own K ---------------------------------------------
# OCP MX with Transformer Engine's rceil scales: per block of 32 along K (a partial block at the end), the scale
# is fl32(amax * fl32(1/448)) rounded up to a power of two, each element x / scale rounded to E4M3 (saturating)
# and multiplied back.


def mx_e4m3(t, axis):
    v = np.moveaxis(t.detach().numpy().astype(np.float32), axis, -1)
    out = np.empty(v.shape, dtype=np.float64)
    for start in range(0, v.shape[-1], 32):
        block = v[..., start:start + 32]
        ratio = np.abs(block).max(axis=-1, keepdims=True) * (np.float32(1) / np.float32(448))
        scale = np.exp2(np.ceil(np.log2(ratio.astype(np.float64))))  # ratio: an fp32 product, exact in double
        out[..., start:start + 32] = round_ocp(block / scale, *E4M3) * scale
    return torch.from_numpy(np.moveaxis(out, -1, axis).astype(np.float32))


def spread(*shape):
    """Values over 2^-8 .. 2^8, so that blocks along the two axes get different scales."""
    return torch.randn(*shape) * 2.0 ** torch.randint(-8, 9, shape).float()


lin = torch.nn.Linear(48, 20)
with torch.no_grad():
    lin.weight.copy_(spread(20, 48))
x = spread(40, 48).requires_grad_()
dy = spread(40, 20)
model = mpverify.torch.emulate(torch.nn.Sequential(lin), "mxfp8")
y = model(x)
y.backward(dy)
check_equal("mxfp8 Linear y (x and W along the features)", y.detach(),
            mx_e4m3(x, 1) @ mx_e4m3(lin.weight, 1).T + lin.bias.detach())
check_equal("mxfp8 Linear dx (dy along the outputs, W along its rows)", x.grad, mx_e4m3(dy, 1) @ mx_e4m3(lin.weight, 0))
check_equal("mxfp8 Linear dW (dy and x along the batch)", lin.weight.grad, mx_e4m3(dy, 0).T @ mx_e4m3(x, 0))
check("mxfp8: a GEMM's K matters (quantizing W along its rows or columns differs)",
      not torch.equal(mx_e4m3(lin.weight, 0), mx_e4m3(lin.weight, 1)))
check("mxfp8 counters: fprop x blocks", model[0].counters["fprop"]["x"]["blocks"] == 40 * 2,
      str(model[0].counters["fprop"]["x"]))
check("mxfp8 counters: wgrad dy blocks", model[0].counters["wgrad"]["dy"]["blocks"] == 20 * 2,
      str(model[0].counters["wgrad"]["dy"]))

# The same GEMMs through the C++ block-scaled GEMM (sm100.mxf8f6f4): the same quantization, so the same
# counts, and products accumulated by the tensor-core model, whose results lie within K 2^-22 sum|a||b| of the
# fp32 matmul of the same quantized values (each of the K/32 instructions truncates its 33 terms by less than
# 2^-24 of its largest and rounds toward zero by less than 2^-23): the operands' layout and K axes reach the
# core intact, or the results would be far apart.
x.grad, lin.weight.grad = None, None
counters_torch = model[0].counters
mpverify.torch.emulate(model, "mxfp8:accumulation=sm100.mxf8f6f4")
y_tc = model(x)
y_tc.backward(dy)
for what, ours, qa, qb, k in (("y", y_tc.detach() - lin.bias.detach(), mx_e4m3(x, 1), mx_e4m3(lin.weight, 1).T, 48),
                              ("dx", x.grad, mx_e4m3(dy, 1), mx_e4m3(lin.weight, 0), 20),
                              ("dW", lin.weight.grad, mx_e4m3(dy, 0).T, mx_e4m3(x, 0), 40)):
    check_within(f"mxfp8 sm100.mxf8f6f4 {what} near the fp32 matmul", ours, qa @ qb,
                 k * 2.0**-22 * (qa.double().abs() @ qb.double().abs()))
for gemm, role in (("fprop", "x"), ("fprop", "w"), ("dgrad", "dy"), ("wgrad", "x")):
    ours = {k: v for k, v in model[0].counters[gemm][role].items() if k != "sqnr_db"}
    theirs = {k: v for k, v in counters_torch[gemm][role].items() if k != "sqnr_db"}
    check(f"mxfp8 sm100.mxf8f6f4 {gemm} {role}: the same quantization counts", ours == theirs, f"{ours} != {theirs}")
accumulate = model[0].counters["fprop"]["accumulate"]
check("mxfp8 sm100.mxf8f6f4: instructions counted", accumulate["elements"] == 40 * 20 * 2, str(accumulate))

# nvfp4 rounds dy stochastically: each backward step draws anew, and the same seed replays the draws.
def nvfp4_grads(seed, steps):
    torch.manual_seed(3)
    model = mpverify.torch.emulate(torch.nn.Sequential(torch.nn.Linear(64, 32)), f"nvfp4:seed={seed}")
    x, dy = torch.randn(32, 64), torch.randn(32, 32)
    grads = []
    for _ in range(steps):
        model.zero_grad()
        model(x).backward(dy)
        grads.append(model[0].weight.grad.clone())
    return grads


first, second = nvfp4_grads(0, 2)
check("nvfp4: two backward steps draw dy's rounding anew", not torch.equal(first, second))
check("nvfp4: the same seed replays the draws", torch.equal(nvfp4_grads(0, 1)[0], first))
check("nvfp4: another seed draws otherwise", not torch.equal(nvfp4_grads(1, 1)[0], first))

# --- 3. a small CNN trains after emulate(), with the optimizer made before ----------------------------------
torch.manual_seed(1)
cnn = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                          torch.nn.Conv2d(4, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                          torch.nn.Linear(8 * 4 * 4, 10))
optimizer = torch.optim.SGD(cnn.parameters(), lr=0.05, momentum=0.9)
before = [p.detach().clone() for p in cnn.parameters()]
ids = [id(p) for p in cnn.parameters()]
images, labels = torch.randn(32, 1, 8, 8), torch.randint(0, 10, (32,))
for recipe in ("bf16", "fp8", "mxfp8"):
    mpverify.torch.emulate(cnn, recipe)
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = F.cross_entropy(cnn(images), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    check(f"CNN under {recipe}: the losses are finite", all(math.isfinite(v) for v in losses), str(losses))
check("CNN: the same parameters", [id(p) for p in cnn.parameters()] == ids)
check("CNN: every parameter changed", all(not torch.equal(b, p) for b, p in zip(before, cnn.parameters())))
check("CNN: the loss fell", losses[-1] < F.cross_entropy(torch.zeros(32, 10), labels).item(), str(losses))
check("CNN: layers replaced", [type(m).__name__ for m in cnn] ==
      ["EmulatedConv2d", "ReLU", "MaxPool2d", "EmulatedConv2d", "ReLU", "Flatten", "EmulatedLinear"])

# --- 4. a tensor-core model: the Hopper wgmma chain, transcribed ------------------------------------------
# docs/tensor-cores.md: every product is a term with significand s_a s_b and exponent e_a + e_b (a zero has
# s = 0, e = -126; a subnormal its format's minimum normal exponent), c is one more term; all are aligned to
# the largest exponent E and truncated toward zero to F fraction bits; the exact sum is rounded toward zero to
# fp32. sm90.wgmma.k16.f32.f16: k = 16, F = 25; a K of 32 is two instructions, the first's result the second's c.


def significand_exponent(v, emin):
    if v == 0:
        return Fraction(0), -126
    m, e = math.frexp(abs(v))  # |v| = m 2^e, m in [0.5, 1)
    e -= 1
    if e < emin:
        return Fraction(abs(v)) / Fraction(2) ** emin, emin
    return Fraction(abs(v)) / Fraction(2) ** e, e


def toward_zero_fp32(value):
    if value == 0:
        return 0.0
    a = abs(value)
    e = max(math.floor(math.log2(a)), -126)
    while Fraction(2) ** e > a:  # log2 of a Fraction may land one off
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, -126)
    quantum = Fraction(2) ** (e - 23)
    r = (a // quantum) * quantum
    if r >= Fraction(2) ** 128:
        return math.copysign(math.inf, value)
    return math.copysign(float(r), value)


def wgmma(a, b, c, fraction_bits=25):
    terms = []
    for x, y in zip(a, b):
        sx, ex = significand_exponent(x, -14)
        sy, ey = significand_exponent(y, -14)
        terms.append((math.copysign(1, x) * math.copysign(1, y), sx * sy, ex + ey))
    sc, ec = significand_exponent(c, -126)
    terms.append((math.copysign(1, c), sc, ec))
    top = max(e for _, _, e in terms)
    total = sum(sign * math.floor(s * Fraction(2) ** (fraction_bits + e - top)) for sign, s, e in terms)
    return toward_zero_fp32(Fraction(total) * Fraction(2) ** (top - fraction_bits))


def hopper_dot(a, b):
    c = 0.0
    for i in range(0, len(a), 16):
        c = wgmma(a[i:i + 16], b[i:i + 16], c)
    return c


torch.manual_seed(2)
k = 32
x = (torch.randn(4, k) * 2.0 ** torch.randint(-14, 6, (4, k)).float()).half().float()
w = (torch.randn(3, k) * 2.0 ** torch.randint(-14, 6, (3, k)).float()).half().float()
x[0, 0], w[0, 0], x[0, 1], w[0, 1] = 1024.0, 1024.0, -1024.0, 1024.0  # cancellation: the small terms' lost bits show
lin = torch.nn.Linear(k, 3, bias=False)
with torch.no_grad():
    lin.weight.copy_(w)
model = mpverify.torch.emulate(torch.nn.Sequential(lin), "fp16:accumulation=hopper")
y = model(x).detach()
expected = torch.tensor([[hopper_dot(x[i].tolist(), w[j].tolist()) for j in range(3)] for i in range(4)])
check_equal("hopper Linear y equals the transcribed wgmma chain", y, expected)
check("hopper: differs from the fp32 matmul somewhere (not vacuous)", not torch.equal(y, x @ w.T))
check("hopper: the accumulation's counters", model[0].counters["fprop"]["accumulate"]["truncated"] > 0,
      str(model[0].counters["fprop"].get("accumulate")))

# --- emulated_matmul (attention's products) ----------------------------------------------------------------
a = torch.randn(2, 3, 5, 16).requires_grad_()
b = torch.randn(2, 3, 16, 7).requires_grad_()
dc = torch.randn(2, 3, 5, 7)
counts = {}
c = mpverify.torch.emulated_matmul(a, b, "bf16", counts)
c.backward(dc)
r = lambda t: t.detach().bfloat16().float()  # noqa: E731
check_equal("emulated_matmul bf16 c", c.detach(), r(a) @ r(b))
check_equal("emulated_matmul bf16 da", a.grad, r(dc) @ r(b).transpose(-1, -2))
check_equal("emulated_matmul bf16 db", b.grad, r(a).transpose(-1, -2) @ r(dc))
check("emulated_matmul counters", set(counts) == {"fprop", "dgrad", "wgrad"}, str(set(counts)))

# Block schemes quantize each batch matrix along its own K: a along its last axis, b along its rows; b is
# broadcast over a's batch, and its gradient summed back.
a = spread(3, 5, 64).requires_grad_()
b = spread(64, 6).requires_grad_()
counts = {}
c = mpverify.torch.emulated_matmul(a, b, "mxfp8", counts)
c.backward(torch.ones_like(c))
check_equal("emulated_matmul mxfp8 c", c.detach(), torch.stack([mx_e4m3(a[i], 1) @ mx_e4m3(b, 0) for i in range(3)]))
check("emulated_matmul mxfp8: b's gradient has b's shape", b.grad.shape == b.shape, str(b.grad.shape))
check("emulated_matmul mxfp8: a's blocks over the batch", counts["fprop"]["a"]["blocks"] == 3 * 5 * 2,
      str(counts["fprop"]["a"]))
counts = {}
mpverify.torch.emulated_matmul(a, b, "fp16:accumulation=hopper", counts).sum().backward()
check("emulated_matmul hopper: the instructions counted", counts["fprop"]["accumulate"]["elements"] == 3 * 5 * 6 * 4,
      str(counts["fprop"].get("accumulate")))

# --- refusals ------------------------------------------------------------------------------------------------


def refused(recipe, *words):
    try:
        mpverify.torch.emulate(torch.nn.Linear(4, 4), recipe)
    except ValueError as e:
        check(f"recipe {recipe!r}: the message names {words}", all(w in str(e) for w in words), str(e))
        return
    check(f"recipe {recipe!r} is refused", False, "no ValueError")


refused({"x": "fp16", "colour": "red"}, "colour", "dy", "accumulation")
refused("fp16:x=fp17", "fp17", "bf16", "mxfp8-e4m3")
refused("fp64", "fp64", "nvfp4")
refused("fp16:accumulation=pascal", "pascal", "hopper")
refused("mxfp8:accumulation=hopper", "mxfp8-e4m3", "sm100.mxf8f6f4")
refused("fp16:scaling=sometimes", "scaling", "current")
try:
    mpverify.torch.emulate(torch.nn.Sequential(torch.nn.Conv2d(4, 4, 3, groups=2)), "fp16")
    check("a grouped Conv2d is refused", False, "no ValueError")
except ValueError as e:
    check("a grouped Conv2d is refused, named", "groups=2" in str(e) and "exclude" in str(e), str(e))

print(f"{checks} checks, {len(failures)} failed")
for f in failures:
    print("FAIL", f)
sys.exit(1 if failures else 0)
