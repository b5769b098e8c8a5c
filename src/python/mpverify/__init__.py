"""mpverify: what low-precision formats do to your tensors, from Python.

The C++ core of the `mpverify` command, on numpy arrays and torch tensors
(CPU tensors are read without copies; bfloat16 and fp8 tensors by their bits):

    import mpverify
    mpverify.format_info("fp16")["max_finite"]             # 65504.0
    values, counters = mpverify.round(x, "fp8-e4m3")       # one rounding per element, counted
    q = mpverify.quantize(w, "mxfp8-e4m3", axis=-1)        # block scaling: values, codes, scales, counters
    mpverify.analyze(grads, "fp16", scales=[1, 1024, 65536])   # underflow / overflow per scale
    mpverify.swamp(w, u)                                   # lost updates w + u == w, fp16 and bf16
    s = mpverify.Scaler("torch"); s.step(found_inf=False)  # loss-scale strategies, bit for bit
    mpverify.gate("runs/fp32", "runs/amp", metric="loss", margin=0.05)   # the parity gate

For your own training loop, mpverify.torch.Monitor records a run directory
that `mpverify gate` and `mpverify compare-runs` read (docs/python.md).
Errors raise ValueError (bad input) or RuntimeError carrying the core's message.
"""
from . import _core
from ._tensors import as_input as _input

__all__ = ["format_info", "format_names", "block_schemes", "round", "quantize", "tensor_stats", "analyze",
           "lost_updates", "swamp", "Scaler", "scaler_names", "gate", "write_ensemble_manifest", "fid", "kid",
           "ROUNDINGS"]

ROUNDINGS = ("rne", "rtz", "up", "down", "rna", "odd", "stochastic")  # nearest-even, toward zero, ..., ties away


def format_info(name):
    """The format's parameters and constants: a dict with name, exponent_bits, mantissa_bits, precision
    (p, the hidden bit counted), bias, width, encoding, overflow, emin, emax, max_finite, min_normal,
    min_subnormal, epsilon, unit_roundoff, lost_update_ratio_needed (2^p) and _sufficient (2^(p+1)).
    `name`: fp16, bf16, tf32, fp8-e4m3, fp8-e5m2, fp4-e2m1, e8m0, ... or eXmY[:modifiers]."""
    return _core.format_info(name)


def format_names():
    """The names of the preset formats (`mpverify formats` describes them)."""
    return list(_core.format_names())


def block_schemes():
    """The names of the block schemes quantize() takes (mxfp8-e4m3, nvfp4, fp8-tile1x128, ...)."""
    return list(_core.block_schemes())


def round(x, format, rounding="rne", seed=0, stream=0):
    """Rounds every element of x once to `format` and returns (values, counters).

    values: a float32 numpy array of x's shape holding the rounded values. counters: a dict of what the
    rounding did (elements, zeros_in, nonfinite_in, inexact, underflow, underflow_to_zero, subnormal,
    overflow, nan_created), defined as the emulator defines them. float64 input is rounded once from the
    double (as `mpverify round` does). rounding: one of ROUNDINGS; "stochastic" draws element i's
    random bits from (seed, stream, i), so the same seed gives the same bits."""
    array, bits = _input(x)
    values, counters = _core.round(array, bits, format, rounding, seed, stream)
    return values, counters


def quantize(x, scheme, axis=-1, scale_rule=None, tile=None, rounding="rne", seed=0, stream=0):
    """Block quantization of x along `axis` (the GEMM's reduction dimension), as `mpverify quantize`.

    scheme: one of block_schemes(); scale_rule (MX schemes): floor, ceil, even or rceil (default rceil);
    tile="16x16": NVFP4's 2-D weight blocks (2-D x). Returns a dict: values (dequantized float32, x's
    shape), codes (uint8 element bit patterns), scales (float32, the block grid), tensor_scale (NVFP4) or
    None, scheme, element, block, counters (elements, blocks, nonfinite_in, saturated, underflow_to_zero,
    subnormal, scales_clamped, inexact) and sqnr_db against x."""
    array, bits = _input(x)
    return _core.quantize(array, bits, scheme, axis, scale_rule or "", tile or "", rounding, seed, stream)


def tensor_stats(x, format, scale=1.0):
    """What the recorders measure of one tensor: x * scale (exact) rounded to nearest-even to `format`.

    A dict: count, zeros_in, nonfinite_in, nonzero_finite, underflow_to_zero, subnormal, overflow and their
    rates over the non-zero finite elements, max_abs, headroom_log2 (log2(max_finite / (scale * max_abs)),
    None when nothing is non-zero), histogram (log2-exponent bins, histograms.jsonl's form) and the
    format's thresholds. `scale` must be a positive float32 value (a loss scale is)."""
    array, bits = _input(x)
    return _core.tensor_stats(array, bits, format, float(scale))


def analyze(x, format, scales=(1.0,)):
    """`mpverify analyze` on one tensor: for each scale S, what casting x * S to `format` does.

    The product is computed in the tensor's own type (float32 for float16/bfloat16/fp8/float32 tensors,
    as tensor.mul(S) does), then rounded once. Returns one dict per scale with the keys of `mpverify
    analyze --json`: scale, count, zeros_in, nan_or_inf_in, nonzero_finite, underflow_to_zero,
    subnormal, overflow, their *_rate, max_abs, headroom_log2, histogram."""
    array, bits = _input(x)
    return list(_core.analyze(array, bits, format, [float(s) for s in scales]))


def lost_updates(w, u, format="fp16"):
    """Lost updates (swamping) of w + u: updates u != 0 whose sum, rounded once to nearest even, equals w.

    Returns {"format", "without_master": counts with the weights stored in `format` (w rounded to it first),
    "with_master": counts with an fp32 master copy}; counts: elements, updates (the denominator), lost,
    lost_rate, ratio_needed(_rate) (|w|/|u| >= 2^p) and ratio_sufficient(_rate) (|w|/|u| > 2^(p+1))."""
    wa, wb = _input(w, "w")
    ua, ub = _input(u, "u")
    return _core.lost_updates(wa, wb, ua, ub, format)


def swamp(w, u, formats=("fp16", "bf16")):
    """`mpverify swamp` on one weight tensor and its update: lost_updates() in each format, by name."""
    return {f: lost_updates(w, u, f) for f in formats}


class Scaler:
    """A loss-scale (found_inf-driven) or FP8-scale (amax-driven) strategy, reproducing the framework's
    rule bit for bit: none, static, torch, apex, keras, deepspeed, megatron, delayed, current, mxfp8.

        s = mpverify.Scaler("torch", init=2**16, interval=2000)
        r = s.step(found_inf=True)      # {"scale_used", "skipped", "aborted"}
        s.scale, s.state()

    Options are the keys of `mpverify replay-scalers --help` (values as numbers or strings)."""

    def __init__(self, name, state=None, **options):
        """`state`: a framework's saved scaler state to continue from (torch's GradScaler.state_dict(), NeMo's,
        Megatron's DynamicGradScaler's, DeepSpeed's loss-scaler fields; `replay-scalers --initial-state`)."""
        self.name = name
        texts = {k: _option_text(v) for k, v in options.items()}
        self._s = _core.Scaler(name, texts) if state is None else _core.Scaler(name, texts, dict(state))

    def step(self, found_inf=None, amax=None):
        """One step: found_inf (bool) for a loss scaler, amax (float) for an FP8 scaler. Returns the scale
        the step ran with, whether it was skipped, and whether the framework would abort here."""
        if (found_inf is None) == (amax is None):
            raise ValueError("give found_inf (loss scalers) or amax (FP8 scalers), not both or neither")
        return self._s.step(bool(found_inf) if amax is None else float(amax))

    @property
    def scale(self):
        """The scale the next step runs with."""
        return self._s.scale

    def state(self):
        """The strategy's state: scale, floor, drive, and its counters (growth_tracker, hysteresis, ...)."""
        return self._s.state()

    def __repr__(self):
        return f"mpverify.Scaler({self.name!r}, scale={self.scale!r})"


def _option_text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return str(int(value))
    return str(value)


def scaler_names():
    """The strategies Scaler takes."""
    return list(_core.scaler_names())


def gate(baseline, candidate, metric="accuracy", margin=None, alpha=0.05, method="auto", loss_tail=0.1,
         loss_key="", accept_single_run=False):
    """The parity gate (`mpverify gate --json`) over two run or ensemble directories.

    Returns the result dict: verdict ("equivalent", "not equivalent", "inconclusive"), exit_code (0, 1, 3),
    line, difference, ci_lower, ci_upper, ... `margin` has no default: it says what "the same" means, in
    the metric's unit (accuracy: percentage points). metric: accuracy, fid, kid or loss. One run per side is
    inconclusive unless accept_single_run (FID: tested on its bootstrap standard errors, `mpverify gate
    --accept-single-run`). Value files (CSV, JSON) and the curve and steps-to-target modes are the command
    line's (`mpverify gate --help`). Unusable input raises ValueError."""
    if margin is None:
        raise ValueError("margin is required: what difference counts as the same, in the metric's unit")
    return _core.gate(str(baseline), str(candidate), metric, float(margin), float(alpha), method,
                      float(loss_tail), loss_key, bool(accept_single_run))


def write_ensemble_manifest(directory, seeds):
    """Writes DIRECTORY/ensemble.json over the runs DIRECTORY/seed-<s>/ (one per seed), so that gate()
    and `mpverify gate` take the directory as one side."""
    _core.write_ensemble_manifest(str(directory), [int(s) for s in seeds])


def fid(a, b):
    """Frechet distance between two feature sets (2-D arrays, rows are samples), with its terms."""
    import numpy as np
    return _core.fid(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))


def kid(a, b, subsets=100, subset_size=0, seed=0):
    """Kernel inception distance between two feature sets: {"kid", "kid_stderr"} (subset_size 0: min(1000, n))."""
    import numpy as np
    return _core.kid(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), subsets, subset_size, seed)
