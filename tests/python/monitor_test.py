"""The Python module and mpverify.torch against independent implementations.

Run by ctest as: /usr/bin/python3 -m pytest -q tests/python/monitor_test.py with PYTHONPATH=BUILD/python
and MPVERIFY_BIN=BUILD/mpverify. Skipped (exit 77 from the wrapper's --skip) when torch is missing.
Every expected value here is computed by torch's own casts, by the CLI, or by a transcription of
the upstream rule, never by the code under test.
"""
import json
import math
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import mpverify  # noqa: E402
import mpverify.torch as mt  # noqa: E402
from mpverify.torch.safetensors import write_safetensors  # noqa: E402

MPVERIFY = os.environ.get("MPVERIFY_BIN", "build/mpverify")


def cli(*args, check=True):
    r = subprocess.run([MPVERIFY, *map(str, args)], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"mpverify {' '.join(map(str, args))} exited {r.returncode}: {r.stderr}")
    return r


# --- a small CNN and a training loop, seeded --------------------------------------------------------

class Spike(torch.autograd.Function):
    """Identity forward; backward multiplies the gradient by `factor` (inf plants a non-finite dx)."""

    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g * ctx.factor, None


class SpikeModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.backward_factor = 1.0

    def forward(self, x):
        return Spike.apply(x, self.backward_factor)


class WeightSpikeLinear(torch.nn.Linear):
    """A Linear whose weight gradient is multiplied by backward_factor (inf plants a non-finite weight
    gradient; its dx stays finite)."""
    backward_factor = 1.0

    def forward(self, x):
        return torch.nn.functional.linear(x, Spike.apply(self.weight, self.backward_factor), self.bias)


def small_cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(inplace=True), SpikeModule(), torch.nn.Conv2d(4, 6, 3),
        torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(6 * 4 * 4, 10))


def batches(seed, steps, n=16):
    g = torch.Generator().manual_seed(1000 + seed)
    for _ in range(steps):
        x = torch.randn(n, 1, 8, 8, generator=g)
        yield x, (x[:, 0, :4, :].sum(dim=(1, 2)) > 0).long() + 2 * (x[:, 0, 4:, :].sum(dim=(1, 2)) > 0).long()


def train(out, seed, steps=50, autocast=False, scaler=None, every=1, loss_factor=1.0, hooks=None,
          provenance="every_step", evaluate=True, device="cpu", evaluation=None, **monitor_options):
    torch.manual_seed(seed)
    model = small_cnn().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    monitor = mt.Monitor(model, opt, scaler=scaler, out=out, every=every, seed=seed, name="small-cnn",
                         verbose=False, provenance=provenance, **monitor_options)
    if hooks:
        hooks(model, monitor)
    for step, (x, y) in enumerate(batches(seed, steps)):
        x, y = x.to(device), y.to(device)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = torch.nn.functional.cross_entropy(model(x), y) * loss_factor
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        monitor.step(loss)
    if evaluation is not None:
        monitor.evaluation(**evaluation)
    elif evaluate:
        with torch.no_grad():
            x, y = next(batches(seed + 500, 1, n=200))
            accuracy = float((model(x.to(device)).argmax(1) == y.to(device)).float().mean())
        monitor.evaluation(test_accuracy=accuracy, test_size=200)
    monitor.close()
    return model


def backward_inf_at(*steps):
    """hooks= for train(): the Spike module "2" multiplies its dx by inf on these steps (a non-finite
    gradient made in backward)."""
    def hooks(model, monitor):
        def pre(module, inputs):
            model[2].backward_factor = float("inf") if monitor._step in steps else 1.0
        model.register_forward_pre_hook(pre)
    return hooks


def read_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


# --- the run directory: read by compare-runs and gate unchanged ---------------------------------------

def test_monitor_directories_pass_compare_runs_and_gate(tmp_path):
    for seed in (1, 2, 3):
        train(tmp_path / "fp32" / f"seed-{seed}", seed)
        train(tmp_path / "bf16" / f"seed-{seed}", seed, autocast=True, scaler=mt.GradScaler("torch"))
    for side in ("fp32", "bf16"):
        mpverify.write_ensemble_manifest(tmp_path / side, [1, 2, 3])
    steps = read_lines(tmp_path / "fp32" / "seed-1" / "steps.jsonl")
    assert [s["step"] for s in steps] == list(range(50))
    for key in ("loss", "scale", "skipped", "found_inf", "underflow_rate", "lost_update_rate", "nonfinite"):
        assert key in steps[0], key
    cmp = cli("compare-runs", tmp_path / "fp32" / "seed-1", tmp_path / "bf16" / "seed-1", "--json")
    assert json.loads(cmp.stdout)  # parsed, exit 0
    for metric, margin in (("loss", 0.5), ("accuracy", 20)):
        r = cli("gate", "--baseline", tmp_path / "fp32", "--candidate", tmp_path / "bf16", "--metric", metric,
                "--margin", margin, "--json", check=False)
        assert r.returncode in (0, 1, 3), r.stderr  # a verdict, not bad input (2)
        verdict = json.loads(r.stdout)
        assert verdict["n_baseline"] == 3 and verdict["method"] == "paired"
        # The same through the module's gate().
        assert mpverify.gate(tmp_path / "fp32", tmp_path / "bf16", metric=metric, margin=margin)["verdict"] == \
            verdict["verdict"]
    # One run per side proves nothing about the spread: inconclusive (exit 3), from the module as from the CLI.
    one = cli("gate", "--baseline", tmp_path / "fp32" / "seed-1", "--candidate", tmp_path / "bf16" / "seed-1",
              "--metric", "accuracy", "--margin", 20, "--json", check=False)
    assert one.returncode == 3, one.stderr
    single = mpverify.gate(tmp_path / "fp32" / "seed-1", tmp_path / "bf16" / "seed-1", metric="accuracy", margin=20)
    assert single["verdict"] == "inconclusive" and single["exit_code"] == 3
    summary = json.load(open(tmp_path / "bf16" / "seed-1" / "summary.json"))
    assert summary["config"]["recipe"] == "autocast-bfloat16" and summary["config"]["scaler"] == "torch"


# --- the counts equal a brute-force recount with torch's casts --------------------------------------

def fp16_counts(v):
    """Underflow to zero, subnormal and overflow of float32 values v cast to fp16 by torch."""
    v = v.detach().float().flatten()
    nz = (v != 0) & torch.isfinite(v)
    h = v.half().float()
    return {"nonzero": int(nz.sum()), "underflow": int((nz & (h == 0)).sum()),
            "subnormal": int((nz & (h != 0) & (h.abs() < 2.0 ** -14)).sum()),
            "overflow": int((nz & torch.isinf(h)).sum())}


def test_monitor_counts_equal_torch_casts(tmp_path):
    check_counts_equal_torch_casts(tmp_path, "cpu")


# The same on CUDA tensors: the model, its data and every recorded tensor on the device (the GPU session runs
# it with the device's torch; skipped where torch sees no CUDA device).
@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device here")
def test_monitor_counts_on_cuda_tensors_equal_torch_casts(tmp_path):
    check_counts_equal_torch_casts(tmp_path, "cuda")


def check_counts_equal_torch_casts(tmp_path, device):
    captured = {}

    def hooks(model, monitor):
        # Registered after the Monitor's: they see the same outputs and gradients on step 3.
        def keep(name):
            def hook(module, inputs, output):
                if monitor._step == 3:
                    captured[name + ".y"] = output.detach().clone()
                    output.register_hook(lambda g: captured.__setitem__(name + ".dy", g.detach().clone()))
            return hook
        for name, m in model.named_modules():
            if name in ("0", "3", "6"):
                m.register_forward_hook(keep(name))

    # A loss factor of 2^-20 and a static scale of 2^10 put gradients where fp16 loses some.
    scaler = mt.GradScaler("static", scale=1024)
    model = train(tmp_path / "run", 7, steps=4, scaler=scaler, loss_factor=2.0 ** -20, hooks=hooks, device=device)
    lines = [t for t in read_lines(tmp_path / "run" / "tensors.jsonl") if t["step"] == 3]
    checked = 0
    for key, value in captured.items():
        layer, tensor = key.split(".")
        line = next(t for t in lines if t["layer"] == layer and t["tensor"] == tensor)
        assert line["format"] == "fp16" and line["stored_in"] == "fp32"
        c = fp16_counts(value)  # dy as backward computed it: already at the scale
        assert line["nonzero_finite"] == c["nonzero"], key
        assert round(line["underflow_to_zero_rate"] * c["nonzero"]) == c["underflow"], key
        assert round(line["subnormal_rate"] * c["nonzero"]) == c["subnormal"], key
        assert round(line["overflow_rate"] * c["nonzero"]) == c["overflow"], key
        checked += 1
    assert checked == 6
    # Flatten ("5") and Spike ("2") output views of their inputs: no new values, so no activation line (their
    # values are "4"'s and "1"'s outputs); their output gradients are recorded.
    for view_layer in ("5", "2"):
        assert {t["role"] for t in lines if t["layer"] == view_layer} == {"activation_grad"}, view_layer
    assert {t["role"] for t in lines if t["layer"] == "4"} == {"activation", "activation_grad"}
    # Weight gradients: measured unscaled at the scale; g * 1024 is exact in float32 (a power of two).
    grads = {t["layer"] + "." + t["tensor"]: t for t in lines if t["role"] == "weight_grad"}
    assert grads["6.weight.grad"]["scale"] == 1024
    # The step line's rate sums every gradient record of the step (activation and weight).
    total = {"nonzero": 0, "underflow": 0}
    for t in lines:
        if t["role"] in ("activation_grad", "weight_grad"):
            total["nonzero"] += t["nonzero_finite"]
            total["underflow"] += round(t["underflow_to_zero_rate"] * t["nonzero_finite"])
    step3 = read_lines(tmp_path / "run" / "steps.jsonl")[3]
    assert step3["underflow_rate"] == pytest.approx(total["underflow"] / total["nonzero"], rel=1e-12)
    assert step3["underflow_rate"] > 0, "the loss factor should make fp16 lose some gradients"
    # Unscaled: the weight gradients as the optimizer saw them on the last step (still in .grad) cast to fp16.
    unscaled = {"nonzero": 0, "underflow": 0}
    for p in model.parameters():
        c = fp16_counts(p.grad)
        unscaled["nonzero"] += c["nonzero"]
        unscaled["underflow"] += c["underflow"]
    assert step3["weight_grad_underflow_rate_unscaled"] == pytest.approx(
        unscaled["underflow"] / unscaled["nonzero"], rel=1e-12)
    assert step3["weight_grad_underflow_rate_unscaled"] > 0


# --- provenance: the module that produced the first non-finite value --------------------------------

@pytest.fixture(params=["auto", "torch"])
def statistics(request, monkeypatch):
    """Runs a test under each statistics mode of the Monitor: "auto" (on the CPU, each check counted in C++
    as it is made) and "torch" (what a model on a GPU does: each check's count left on the tensor's device,
    the step's counts copied at its end and the checks replayed in their order). Both must name the same."""
    original = mt.Monitor.__init__

    def init(self, *args, **kwargs):
        kwargs.setdefault("statistics", request.param)
        original(self, *args, **kwargs)
    monkeypatch.setattr(mt.Monitor, "__init__", init)
    return request.param


def test_provenance_names_the_module_in_forward_and_backward(tmp_path, statistics):
    def forward_inf(model, monitor):
        # Module "3"'s input turns non-finite on step 2 (a pre-hook, which is no module's output): the
        # first module output that is non-finite is "3"'s, in forward.
        def hook(module, inputs):
            if monitor._step == 2:
                return (inputs[0] * float("inf"),)
        model[3].register_forward_pre_hook(hook)

    train(tmp_path / "fwd", 1, steps=4, hooks=forward_inf, scaler=mt.GradScaler("torch"))
    steps = read_lines(tmp_path / "fwd" / "steps.jsonl")
    # Given the value: "3"'s input, made after the Spike "2" (the module checked before it; ReLU "1" is not).
    # The pre-hook multiplied a batch of 16 x 4 x 6 x 6 non-negative values by inf: the zeros became NaN,
    # the others inf, every one of them non-finite.
    assert steps[2]["nonfinite"] == {"layer": "3", "tensor": "x", "pass": "forward", "count": 16 * 4 * 6 * 6,
                                     "after": "2"}
    assert steps[2]["skipped"] and steps[2]["found_inf"]
    assert steps[1]["nonfinite"] is None and not steps[1]["skipped"]
    assert steps[3]["scale"] == steps[2]["scale"] / 2  # torch's backoff after the skipped step

    train(tmp_path / "bwd", 1, steps=3, hooks=backward_inf_at(1), scaler=mt.GradScaler("torch"))
    steps = read_lines(tmp_path / "bwd" / "steps.jsonl")
    first = steps[1]["nonfinite"]
    assert (first["layer"], first["pass"]) == ("2", "backward"), first  # the Spike module's dx
    assert steps[1]["skipped"] and not steps[0]["skipped"] and not steps[2]["skipped"]


def test_provenance_skips_modules_that_cannot_make_a_nonfinite_value(tmp_path, statistics):
    from mpverify.torch.provenance import passes_finite

    # Passive: ReLU, Flatten, Identity, max pooling whose windows do not overlap. Not passive: anything that
    # computes (Linear, Dropout's 1/(1-p) can overflow fp16), overlapping or dilated pools (backward adds
    # gradients), and subclasses (their forward is someone else's).
    class MyReLU(torch.nn.ReLU):
        pass
    assert all(passes_finite(m) for m in (torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Identity(),
                                          torch.nn.MaxPool2d(2), torch.nn.MaxPool2d((2, 3), stride=(2, 4)),
                                          torch.nn.MaxPool1d(3, stride=3)))
    assert not any(passes_finite(m) for m in (torch.nn.Linear(2, 2), torch.nn.Dropout(), MyReLU(),
                                              torch.nn.MaxPool2d(3, stride=2), torch.nn.MaxPool2d(2, dilation=2),
                                              torch.nn.AvgPool2d(2)))

    # An inf made between modules, before ReLU "4" (a pre-hook: no module's output). ReLU "4" and Flatten
    # "5" pass it on unchecked; the next module checked, Linear "6", is named, on recorded (step 2) and
    # unrecorded (step 3) steps alike.
    def between(model, monitor):
        def hook(module, inputs):
            if monitor._step in (2, 3):
                return (inputs[0] * float("inf"),)
        model[4].register_forward_pre_hook(hook)

    train(tmp_path / "fwd", 1, steps=5, every=2, hooks=between, scaler=mt.GradScaler("torch"))
    steps = read_lines(tmp_path / "fwd" / "steps.jsonl")
    for k in (2, 3):  # given to "6" as its input, made after Conv "3" (the passive modules are never "after")
        first = steps[k]["nonfinite"]
        assert (first["layer"], first["tensor"], first["pass"], first["after"]) == ("6", "x", "forward", "3"), first
    assert steps[1]["nonfinite"] is None and steps[4]["nonfinite"] is None

    # Backward on an unrecorded step: the Spike's dx is inf; ReLU "1"'s output gradient is not hooked
    # there, so Conv "0"'s output gradient is the first checked, and names the module whose backward ran
    # last, the Spike "2", as on recorded steps.
    train(tmp_path / "bwd", 1, steps=5, every=2, hooks=backward_inf_at(2, 3), scaler=mt.GradScaler("torch"))
    steps = read_lines(tmp_path / "bwd" / "steps.jsonl")
    for k in (2, 3):
        assert (steps[k]["nonfinite"]["layer"], steps[k]["nonfinite"]["pass"]) == ("2", "backward"), steps[k]


def test_provenance_names_a_value_made_by_a_hook_registered_after_the_monitors(tmp_path, statistics):
    # Hooks run in the order registered. A forward hook of the user's on Conv "3" registered after the
    # Monitor's makes its output infinite after the Monitor checked it: the value reaches Linear "6" (through
    # ReLU "4" and Flatten "5", not checked) as its input. It used to be named as "6"'s own output, as if the
    # Linear had overflowed; it is "6"'s input "x", made after "3".
    given = {}

    def late_hook(model, monitor):
        def hook(module, inputs, output):
            if monitor._step == 2:
                return output * float("inf")
        model[3].register_forward_hook(hook)

        def seen(module, inputs):  # what "6" was given, counted by torch
            if monitor._step == 2:
                given["count"] = int((~torch.isfinite(inputs[0])).sum())
        model[6].register_forward_pre_hook(seen)

    train(tmp_path / "late", 1, steps=4, hooks=late_hook, scaler=mt.GradScaler("torch"))
    steps = read_lines(tmp_path / "late" / "steps.jsonl")
    first = steps[2]["nonfinite"]
    assert (first["layer"], first["tensor"], first["pass"], first["after"]) == ("6", "x", "forward", "3"), first
    assert first["count"] == given["count"] > 0
    assert [s["nonfinite"] is None for s in steps] == [True, True, False, True]

    # Registered before the Monitor, the same hook's value is the Conv's own output when the Monitor sees it.
    torch.manual_seed(1)
    model = small_cnn()
    step = {"k": 0}
    model[3].register_forward_hook(lambda m, i, o: o * float("inf") if step["k"] == 2 else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    monitor = mt.Monitor(model, opt, scaler=None, out=tmp_path / "early", verbose=False)
    for step["k"], (x, y) in enumerate(batches(1, 4)):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        monitor.step(loss)
    monitor.close()
    first = read_lines(tmp_path / "early" / "steps.jsonl")[2]["nonfinite"]
    assert (first["layer"], first["tensor"], first["pass"]) == ("3", "y", "forward") and "after" not in first


@pytest.mark.parametrize("provenance", ["every_step", "recorded_steps"])
def test_provenance_names_a_loss_made_non_finite_after_the_last_module(tmp_path, provenance, statistics):
    # The loss turns infinite in a function after the last module ("6"), on step 1: forward had it before any
    # gradient backward made from it. It used to be named {"layer": "loss", "tensor": "dloss", "pass":
    # "backward"}, from the first non-finite gradient. Without module hooks (recorded_steps, step 1 not
    # recorded at every=2) nothing says which module ran last, so "after" is left out.
    torch.manual_seed(1)
    model = small_cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = mt.GradScaler("torch")
    monitor = mt.Monitor(model, opt, scaler=scaler, out=tmp_path / "run", every=2, verbose=False,
                         provenance=provenance)
    for step, (x, y) in enumerate(batches(1, 3)):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y) * (float("inf") if step == 1 else 1.0)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        monitor.step(loss)
    monitor.close()
    steps = read_lines(tmp_path / "run" / "steps.jsonl")
    expected = {"layer": "loss", "tensor": "loss", "pass": "forward", "count": 1}
    if provenance == "every_step":
        expected["after"] = "6"
    assert steps[1]["nonfinite"] == expected
    assert steps[1]["skipped"] and steps[0]["nonfinite"] is None and steps[2]["nonfinite"] is None


def test_deferred_checks_copy_the_counts_once_per_step(tmp_path, monkeypatch):
    """With statistics="torch" (a model on a GPU) no check reads its count when it is made: the one-by-one
    counts (which wait for the device) are never called, and each step's counts are copied once."""
    from mpverify.torch import monitor as monitor_module, provenance

    def refuse(*args, **kwargs):
        raise AssertionError("a check read its count at once")
    for name in ("count_nonfinite", "torch_count_nonfinite"):
        monkeypatch.setattr(monitor_module, name, refuse)
    monkeypatch.setattr(provenance.Provenance, "check", refuse)
    monkeypatch.setattr(provenance.Provenance, "check_forward", refuse)
    monkeypatch.setattr(monitor_module._core, "_count_nonfinite_grads", refuse)
    takes = []
    original_take = provenance.DeferredChecks.take
    monkeypatch.setattr(provenance.DeferredChecks, "take", lambda self, extra: takes.append(1) or original_take(self, extra))

    train(tmp_path / "run", 1, steps=4, every=2, hooks=backward_inf_at(2), scaler=mt.GradScaler("torch"),
          statistics="torch", evaluate=False)
    assert len(takes) == 4
    steps = read_lines(tmp_path / "run" / "steps.jsonl")
    assert (steps[2]["nonfinite"]["layer"], steps[2]["nonfinite"]["pass"]) == ("2", "backward")


def test_provenance_places_parameter_gradients_after_their_modules_backward(tmp_path, statistics):
    # A checked module's parameter gradients have no hook: they are checked once after backward and placed
    # right after the module's output-gradient hook, where torch computes them, so the step's first
    # non-finite value is the one hooks on them would name. Model: Conv "0", Spike "1", ReLU "2", Flatten
    # "3", WeightSpikeLinear "4", ReLU "5", Linear "6"; backward reaches "4" before the Spike "1".
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), SpikeModule(), torch.nn.ReLU(), torch.nn.Flatten(),
                                WeightSpikeLinear(4 * 6 * 6, 12), torch.nn.ReLU(), torch.nn.Linear(12, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = mt.GradScaler("torch")
    monitor = mt.Monitor(model, opt, scaler=scaler, out=tmp_path / "run", every=2, verbose=False)
    planted = {1: ("weight",), 2: ("weight", "dx"), 3: ("dx",)}  # step -> the infinities planted
    for step, (x, y) in enumerate(batches(3, 5)):
        model[4].backward_factor = float("inf") if "weight" in planted.get(step, ()) else 1.0
        model[1].backward_factor = float("inf") if "dx" in planted.get(step, ()) else 1.0
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        monitor.step(loss)
    monitor.close()
    steps = read_lines(tmp_path / "run" / "steps.jsonl")
    named = [s["nonfinite"] and (s["nonfinite"]["layer"], s["nonfinite"]["tensor"], s["nonfinite"]["pass"])
             for s in steps]
    # Step 1 (unrecorded): only the weight gradient. Step 2 (recorded): the weight gradient comes before the
    # Spike's dx, which Conv "0"'s output-gradient hook finds later. Step 3: the Spike's dx alone.
    assert named == [None, ("4", "weight.grad", "backward"), ("4", "weight.grad", "backward"),
                     ("1", "dx", "backward"), None], named
    assert steps[1]["nonfinite"]["count"] == model[4].weight.numel()  # inf times every gradient: inf or NaN
    assert all(steps[k]["skipped"] for k in (1, 2, 3)) and not steps[4]["skipped"]


# --- the GradScaler against torch's rule ---------------------------------------------------------

def test_compare_runs_reads_runs_recorded_every_third_step_with_a_skipped_step(tmp_path):
    """A Monitor at every=3 writes the rates on recorded steps only, and a skipped step has no lost-update
    rate: compare-runs reads both runs and compares those steps without the rates they lack."""
    train(tmp_path / "every3", 1, steps=8, every=3, scaler=mt.GradScaler("torch"), hooks=backward_inf_at(4),
          evaluate=False)
    train(tmp_path / "every1", 1, steps=8, scaler=mt.GradScaler("torch"), evaluate=False)
    steps = read_lines(tmp_path / "every3" / "steps.jsonl")
    assert any("underflow_rate" not in s for s in steps), "every=3 should leave the rates out of some steps"
    skipped = [s for s in steps if s["skipped"]]
    assert [s["step"] for s in skipped] == [4] and "lost_update_rate" not in skipped[0]
    r = cli("compare-runs", tmp_path / "every3", tmp_path / "every1", "--json")
    by_step = {s["step"]: s for s in json.loads(r.stdout)["steps"]}
    assert sorted(by_step) == list(range(8))
    assert by_step[0]["underflow_rate_a"] is not None and by_step[1]["underflow_rate_a"] is None
    assert by_step[4]["lost_update_rate_a"] is None and by_step[4]["lost_update_rate_b"] is not None


def test_summarize_reads_a_monitor_run_and_names_its_planted_inf(tmp_path):
    """`mpverify summarize` on a Monitor run at every=3 with an inf planted at step 4: the step counts, the
    skipped step, the first non-finite event with its module, and per tensor the pooled underflow rate
    recomputed here from tensors.jsonl."""
    train(tmp_path / "run", 1, steps=8, every=3, scaler=mt.GradScaler("torch"), hooks=backward_inf_at(4),
          evaluate=False)
    s = json.loads(cli("summarize", tmp_path / "run", "--json", "--report", tmp_path / "r" / "run.md").stdout)
    assert s["steps"] == 8 and s["skipped_steps"] == 1
    assert s["first_nonfinite"][0]["step"] == 4
    steps_file = read_lines(tmp_path / "run" / "steps.jsonl")
    assert s["first_nonfinite"][0]["layer"] == [x for x in steps_file if x["step"] == 4][0]["nonfinite"]["layer"]
    pooled = {}
    for t in read_lines(tmp_path / "run" / "tensors.jsonl"):
        k = pooled.setdefault((t["layer"], t["tensor"], t["role"]), [0, 0])
        k[0] += round(t["underflow_to_zero_rate"] * t["nonzero_finite"])
        k[1] += t["nonzero_finite"]
    assert {(k["layer"], k["tensor"], k["role"]): [k["underflow"], k["nonzero"]] for k in s["kinds"]} == pooled
    assert (tmp_path / "r" / "run.html").exists() and (tmp_path / "r" / "run-underflow.svg").exists()


def test_evaluation_without_accuracy_is_not_divergence_and_gates_by_name(tmp_path):
    """A language model's evaluation has a loss and a perplexity, no accuracy: the run is not diverged, and
    the gate reads its figures by name from the run directories."""
    lm = small_cnn()
    m = mt.Monitor(lm, torch.optim.SGD(lm.parameters(), lr=0.1), out=tmp_path / "lm", verbose=False)
    m.evaluation(test_loss=1.25, perplexity=3.5, test_size=100)
    evaluation = json.loads((tmp_path / "lm" / "summary.json").read_text())["evaluation"]
    assert evaluation == {"test_loss": 1.25, "perplexity": 3.5, "test_size": 100, "diverged": False}
    m.evaluation(test_loss=float("nan"), test_size=100)  # a non-finite figure: diverged, written as null
    evaluation = json.loads((tmp_path / "lm" / "summary.json").read_text())["evaluation"]
    assert evaluation == {"test_loss": None, "test_size": 100, "diverged": True}
    with pytest.raises(ValueError, match="at least one figure"):
        m.evaluation(test_size=100)
    m.close()
    # Three seeds a side, the candidate's perplexity 0.5 higher on average (per seed 0.53125, 0.46875, 0.5: a
    # spread, and dyadic, so the mean difference is exact): not equivalent at a margin of 0.2, named as
    # perplexity (lower is better); test_loss is a metric too.
    shifts = {"fp32": {1: 0.0, 2: 0.0, 3: 0.0}, "bf16": {1: 0.53125, 2: 0.46875, 3: 0.5}}
    for side in ("fp32", "bf16"):
        for seed in (1, 2, 3):
            train(tmp_path / side / f"seed-{seed}", seed, steps=3,
                  evaluation={"test_loss": 1.0 + 0.125 * seed, "perplexity": 3.0 + 0.0625 * seed + shifts[side][seed],
                              "test_size": 200})
        mpverify.write_ensemble_manifest(tmp_path / side, [1, 2, 3])
    args = ["gate", "--baseline", tmp_path / "fp32", "--candidate", tmp_path / "bf16", "--margin", "0.2", "--json"]
    r = cli(*args, "--metric", "perplexity", check=False)
    assert r.returncode == 1, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["verdict"] == "not equivalent" and result["direction"] == "lower" and result["unit"] == "perplexity"
    assert result["difference"] == pytest.approx(0.5, abs=1e-12)
    r = cli(*args, "--metric", "test_loss", check=False)
    assert r.returncode in (0, 1, 3), r.stderr  # a verdict, not bad input


def test_grad_scaler_follows_torch_rule():
    # Transcription of torch's _amp_update_scale_ (aten/src/ATen/native/cuda/AmpKernels.cu,
    # _amp_update_scale_cuda_kernel): found_inf -> scale *= backoff, tracker = 0; else tracker += 1 and
    # at growth_interval scale *= growth (kept only if finite), tracker = 0. Scale kept in float32.
    scale, tracker, interval = np.float32(2.0 ** 16), 0, 3
    ours = mt.GradScaler("torch", init=2 ** 16, interval=interval)
    w = torch.nn.Parameter(torch.ones(4))
    opt = torch.optim.SGD([w], lr=0.0)
    for found in [False, False, False, True, False, True, True, False, False, False, False]:
        assert ours.get_scale() == float(scale)
        opt.zero_grad()
        (ours.scale((w * (float("inf") if found else 1.0)).sum())).backward()
        ours.step(opt)
        ours.update()
        if found:
            scale, tracker = np.float32(scale * np.float32(0.5)), 0
        else:
            tracker += 1
            if tracker == interval:
                grown = np.float32(scale * np.float32(2.0))
                scale, tracker = (grown if np.isfinite(grown) else scale), 0
    assert ours.get_scale() == float(scale)


def torch_rule_scales(flags, scale, growth, backoff, interval, tracker=0):
    """The scale each step runs with under torch's rule (transcribed in test_grad_scaler_follows_torch_rule)."""
    scale, out = np.float32(scale), []
    for found in flags:
        out.append(float(scale))
        if found:
            scale, tracker = np.float32(scale * np.float32(backoff)), 0
        else:
            tracker += 1
            if tracker == interval:
                grown = np.float32(scale * np.float32(growth))
                scale, tracker = (grown if np.isfinite(grown) else scale), 0
    return out, float(scale), tracker


def run_scaler(scaler, flags):
    w = torch.nn.Parameter(torch.ones(4))
    opt = torch.optim.SGD([w], lr=0.0)
    scales = []
    for found in flags:
        scales.append(scaler.get_scale())
        opt.zero_grad()
        scaler.scale((w * (float("inf") if found else 1.0)).sum()).backward()
        scaler.step(opt)
        scaler.update()
    return scales


def test_grad_scaler_is_a_drop_in_for_torchs(tmp_path):
    # torch's constructor: GradScaler(device, init_scale, growth_factor, backoff_factor, growth_interval, enabled)
    # (torch/amp/grad_scaler.py, GradScaler.__init__); "cuda" as the device names the torch strategy.
    ours = mt.GradScaler("cuda", init_scale=2.0 ** 10, growth_factor=4.0, backoff_factor=0.25, growth_interval=2)
    flags = [False, False, True, False, True, False, False, False]
    expected, scale, tracker = torch_rule_scales(flags, 2.0 ** 10, 4.0, 0.25, 2)
    assert run_scaler(ours, flags) == expected
    # state_dict(): torch's own five fields (GradScaler.state_dict in the same file), nothing else.
    state = ours.state_dict()
    assert state == {"scale": scale, "growth_factor": 4.0, "backoff_factor": 0.25, "growth_interval": 2,
                     "_growth_tracker": tracker}
    # Loaded into a fresh scaler, it continues where the first one is.
    more = [False, True, False, False, False]
    again = mt.GradScaler()
    again.load_state_dict(state)
    assert run_scaler(again, more) == run_scaler(ours, more) == torch_rule_scales(more, scale, 4.0, 0.25, 2, tracker)[0]
    # replay-scalers --initial-state reads the same dict: the replay continues from it too.
    (tmp_path / "state.json").write_text(json.dumps(state))  # the saved state itself: one strategy replayed
    (tmp_path / "trace.txt").write_text("".join("1\n" if f else "0\n" for f in more))
    r = cli("replay-scalers", "--trace", tmp_path / "trace.txt", "--strategies", "torch", "--initial-state",
            tmp_path / "state.json", "--json")
    assert [step["scale"] for step in json.loads(r.stdout)["torch"]] == torch_rule_scales(more, scale, 4.0, 0.25, 2,
                                                                                          tracker)[0]
    # Disabled, as torch's: the loss passes through untouched, the scale is 1.0, step() steps, state_dict() is {}.
    off = mt.GradScaler(init_scale=2.0 ** 10, enabled=False)
    w = torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([w], lr=1.0)
    loss = (w * 3.0).sum()
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and not off.is_enabled()
    loss.backward()
    off.step(opt)
    off.update()
    assert torch.equal(w.detach(), torch.full((2,), -2.0)) and off.state_dict() == {}
    # The Monitor records a disabled scaler as disabled, not as a strategy that scaled.
    model = small_cnn()
    m = mt.Monitor(model, torch.optim.SGD(model.parameters(), lr=0.1), scaler=off, out=tmp_path / "off",
                   verbose=False)
    m.close()
    assert json.loads((tmp_path / "off" / "summary.json").read_text())["config"]["scaler"] == "torch (disabled)"
    with pytest.raises(ValueError, match="not both"):
        mt.GradScaler(init_scale=8.0, init=8)


def test_grad_scaler_unscales_like_torch():
    # torch/cuda/amp/grad_scaler.py, _unscale_grads_: inv_scale = self._scale.double().reciprocal().float().
    s = 3.0 * 2 ** 14  # not a power of two: the rounding of 1/s shows
    ours = mt.GradScaler("static", scale=s)
    w = torch.nn.Parameter(torch.linspace(-1, 1, 101))
    opt = torch.optim.SGD([w], lr=0.0)
    ours.scale((w * w).sum()).backward()
    scaled = w.grad.clone()
    ours.unscale_(opt)
    inverse = torch.tensor(s, dtype=torch.float64).reciprocal().float()
    assert torch.equal(w.grad, scaled * inverse)


# --- the module's round/quantize/analyze equal the CLI on the same data -----------------------------

def test_module_equals_cli(tmp_path):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(8, 64, generator=g) * 2.0 ** torch.randint(-12, 12, (8, 64), generator=g)
    xb = x.bfloat16()
    write_safetensors(str(tmp_path / "x.safetensors"), {"x": x, "xb": xb})
    for name, t in (("x", x), ("xb", xb)):
        for scheme in ("mxfp8-e4m3", "nvfp4", "fp8-tile1x128"):
            ours = mpverify.quantize(t, scheme)
            r = cli("quantize", f"{tmp_path}/x.safetensors:{name}", "--scheme", scheme, "--out", tmp_path / "q.npz",
                    "--json")
            theirs = np.load(tmp_path / "q.npz")
            assert np.array_equal(ours["values"], theirs["values"]), (name, scheme)
            assert np.array_equal(ours["codes"], theirs["codes"]), (name, scheme)
            assert np.array_equal(ours["scales"], theirs["scales"]), (name, scheme)
            counts = json.loads(r.stdout)
            for k in ("saturated", "underflow_to_zero", "inexact"):
                assert ours["counters"][k] == counts[k], (name, scheme, k)
    values = [1e-8, 0.1, 448.0, 500.0, -3.3, 2.0 ** -10]
    ours, _ = mpverify.round(np.array(values, dtype=np.float64), "fp8-e4m3")
    theirs = json.loads(cli("round", "--format", "fp8-e4m3", "--json", *values).stdout)
    # JSON has no NaN: the CLI writes "nan" (500 overflows E4M3, which has no infinity).
    assert np.array_equal(ours, np.array([float(t["value"]) for t in theirs], dtype=np.float32), equal_nan=True)
    # round() of a bfloat16 tensor by its bits equals torch's own cast of the same tensor to float16.
    v, counts = mpverify.round(xb, "fp16")
    assert torch.equal(torch.from_numpy(v), xb.float().half().float())
    # analyze() equals `mpverify analyze --json` on the file.
    ours = mpverify.analyze(x, "fp16", scales=[1, 1024])
    theirs = json.loads(cli("analyze", f"{tmp_path}/x.safetensors", "--format", "fp16", "--scales", "1,1024",
                            "--json", "--only", "x").stdout)["results"]
    for a, b in zip(ours, theirs):
        for k in ("underflow_to_zero", "subnormal", "overflow", "nonzero_finite"):
            assert a[k] == b[k], k


def test_errors_carry_the_core_message():
    with pytest.raises(ValueError, match="unknown format 'fp17'"):
        mpverify.round([1.0], "fp17")
    with pytest.raises(ValueError, match="unknown block scheme"):
        mpverify.quantize(np.ones(32, np.float32), "mxfp9")
    with pytest.raises(ValueError, match="margin is required"):
        mpverify.gate("a", "b")
    with pytest.raises(TypeError, match="not a floating-point type"):
        mpverify.round(torch.ones(3, dtype=torch.int32), "fp16")
    assert math.isclose(mpverify.format_info("bf16")["max_finite"], 3.3895313892515355e38)


def test_a_host_that_flushes_subnormals_neither_changes_results_nor_loses_its_setting():
    # torch.set_flush_denormal(True) sets MXCSR's FTZ and DAZ in this thread, as an extension built with
    # -ffast-math would. mpverify computes under the IEEE defaults for the call and gives the setting back.
    # Subnormals are made and compared as bits: under DAZ any float arithmetic or comparison reads them as 0.
    bits = 0x00080000  # binary32 2^-130 (2^19 x 2^-149): a bf16 subnormal too (bf16's smallest normal is 2^-126)
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush denormals (no SSE3)")
    try:
        subnormal = torch.tensor([bits], dtype=torch.int32).view(torch.float32)
        assert (subnormal * 1.0).item() == 0.0, "flushing is not in effect: the test proves nothing"
        values, counters = mpverify.round(np.array([bits], np.uint32).view(np.float32), "bf16")
        assert values.view(np.uint32)[0] == bits
        assert counters["subnormal"] == 1
        assert (subnormal * 1.0).item() == 0.0, "the caller's flush-to-zero was not restored"
    finally:
        torch.set_flush_denormal(False)
    assert (subnormal * 1.0).item() == 2.0 ** -130

# --- the Monitor on an emulated model ---------------------------------------------------------------

def test_monitor_records_an_emulated_model(tmp_path):
    torch.manual_seed(3)
    model = mt.emulate(small_cnn(), "bf16")
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    monitor = mt.Monitor(model, opt, out=tmp_path / "run", seed=3, verbose=False)
    for x, y in batches(3, 3):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        monitor.step(loss)
    monitor.close()
    lines = read_lines(tmp_path / "run" / "tensors.jsonl")
    layers = {t["layer"] for t in lines if t["role"] == "activation"}
    assert {"0", "3", "6"} <= layers  # the emulated Conv2d and Linear modules are recorded like any module
    steps = read_lines(tmp_path / "run" / "steps.jsonl")
    assert len(steps) == 3 and all(math.isfinite(s["loss"]) for s in steps)
    # Their outputs are float32 tensors: measured against the study format (fp16), as any fp32 tensor.
    assert all(t["format"] == "fp16" for t in lines if t["layer"] == "0" and t["tensor"] == "y")


# --- the files are the same bytes as before the recorder's fused pass ----------------------------------

GOLDEN = os.path.join(os.path.dirname(__file__), "data", "monitor_golden.json")


def torch_fingerprint():
    """SHA-256 of torch's own forward output and gradients of the small CNN: when torch computes other bits
    on this machine (another version, other kernels), the runs below differ for torch's sake, not ours."""
    import hashlib
    torch.manual_seed(1)
    model = small_cnn()
    x, y = next(batches(1, 1))
    torch.nn.functional.cross_entropy(model(x), y).backward()
    h = hashlib.sha256(model(x).detach().numpy().tobytes())
    for p in model.parameters():
        h.update(p.grad.numpy().tobytes())
    return h.hexdigest()


def torch_bf16_fingerprint():
    """The same under bf16 autocast, with every layer's output and the gradient reaching it: CPUs with native
    bf16 instructions (AVX-512 BF16) compute other bf16 bits than CPUs without, and torch_fingerprint()
    (float32 only) does not tell them apart."""
    import hashlib
    torch.manual_seed(1)
    model = small_cnn()
    x, y = next(batches(1, 1))
    outputs = []

    def keep(module, inputs, output):
        output.retain_grad()
        outputs.append(output)
    for layer in model:
        layer.register_forward_hook(keep)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        torch.nn.functional.cross_entropy(model(x), y).backward()
    h = hashlib.sha256()
    for t in outputs:
        h.update(t.detach().float().numpy().tobytes())
        h.update(t.grad.float().numpy().tobytes())
    for p in model.parameters():
        h.update(p.grad.numpy().tobytes())
    return h.hexdigest()


def golden_machine():
    """The entry of monitor_golden.json written on a machine where torch computes the same bits as here:
    the float32 fingerprint must match, and the bf16 one where the entry has it (the entries without it
    were written before it existed); an entry with both matching comes first."""
    fingerprint, bf16 = torch_fingerprint(), torch_bf16_fingerprint()
    machines = [m for m in json.load(open(GOLDEN))["machines"]
                if m["torch_fingerprint"] == fingerprint and m.get("torch_bf16_fingerprint", bf16) == bf16]
    machines.sort(key=lambda m: "torch_bf16_fingerprint" not in m)
    return machines[0] if machines else None


def golden_run(out, seed, every, scaler=None, autocast=False, loss_factor=1.0, inf_step=None, statistics="auto"):
    torch.manual_seed(seed)
    model = small_cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    monitor = mt.Monitor(model, opt, scaler=scaler, out=out, every=every, seed=seed, name="g", verbose=False,
                         statistics=statistics)
    if inf_step is not None:
        def hook(module, inputs):
            if monitor._step == inf_step:
                return (inputs[0] * float("inf"),)
        model[3].register_forward_pre_hook(hook)
    for x, y in batches(seed, 12):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = torch.nn.functional.cross_entropy(model(x), y) * loss_factor
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        monitor.step(loss)
    monitor.close()


def test_statistics_counted_with_torch_equal_the_recorders(tmp_path):
    """statistics="torch" counts every tensor with torch operations, as on a CUDA tensor (only the device
    differs): the five golden runs' files equal those of the C++ recorder reading the tensors in place, count
    for count and bin for bin, the norm within its summation bound. The C++ side sums the n squares in eight
    partial sums, torch in its own order; each sum is within (n - 1) 2^-53 relative of the exact one (the
    squares are exact in float64), so they differ by at most 2 (n - 1) 2^-53 and the square roots by half
    that. The static scale 3 x 2^14 is not a power of two: those weight gradients go to the host, as
    documented, and must still be equal."""
    runs = {"plain": dict(seed=1, every=1), "every3": dict(seed=2, every=3),
            "static3x": dict(seed=3, every=1, scaler=lambda: mt.GradScaler("static", scale=3 * 2 ** 14),
                             loss_factor=2.0 ** -20),
            "bf16": dict(seed=4, every=2, scaler=lambda: mt.GradScaler("torch"), autocast=True),
            "inf": dict(seed=5, every=1, scaler=lambda: mt.GradScaler("torch"), inf_step=4)}
    for name, kw in runs.items():
        for statistics in ("auto", "torch"):
            args = dict(kw)
            if "scaler" in args:
                args["scaler"] = args["scaler"]()
            golden_run(tmp_path / statistics / name, statistics=statistics, **args)
        for file in ("steps.jsonl", "histograms.jsonl", "summary.json"):
            assert (tmp_path / "auto" / name / file).read_bytes() == (tmp_path / "torch" / name / file).read_bytes(), \
                (name, file)
        auto, ours = (read_lines(tmp_path / s / name / "tensors.jsonl") for s in ("auto", "torch"))
        assert len(auto) == len(ours) > 0
        for a, b in zip(auto, ours):
            bound = max(a["count"] - 1, 0) * 2.0 ** -53
            assert b.pop("norm") == pytest.approx(a.pop("norm"), rel=bound, abs=0), (name, a)
            assert a == b, name


def test_monitor_files_are_the_same_bytes_as_before(tmp_path):
    # The digests were written by the Monitor before its recorder computed the statistics in one fused pass
    # and took several tensors per call (and, on a second machine, before it wrote its lines as text); every file of five runs (fp32, every 3rd step, a static scale that
    # is not a power of two with tiny gradients, bf16 autocast with torch's rule, an inf planted in forward)
    # must be the same bytes.
    import hashlib
    golden = golden_machine()
    if golden is None:
        pytest.skip(f"torch {torch.__version__} computes other bits here than on any machine the digests were written on")
    golden_run(tmp_path / "plain", 1, 1)
    golden_run(tmp_path / "every3", 2, 3)
    golden_run(tmp_path / "static3x", 3, 1, scaler=mt.GradScaler("static", scale=3 * 2 ** 14), loss_factor=2.0 ** -20)
    golden_run(tmp_path / "bf16", 4, 2, scaler=mt.GradScaler("torch"), autocast=True)
    golden_run(tmp_path / "inf", 5, 1, scaler=mt.GradScaler("torch"), inf_step=4)
    import re
    for run, files in golden["runs"].items():
        for name, digest in files.items():
            with open(tmp_path / run / name, "rb") as f:
                data = f.read()
            # Since the digests, a step that measured several formats (the bf16 autocast run) also writes its
            # rates per format; that key alone is taken out here, and its values are held by
            # test_autocast_rates_are_split_by_the_format_each_tensor_is_measured_against.
            if name == "steps.jsonl":
                data = re.sub(rb'"by_format":\{(?:[^{}]|\{[^{}]*\})*\},', b"", data)
            # Since the digests, a value a module was given (the pre-hook's inf, on "3"'s input) is named as that
            # input, made after the Spike "2", counted as given (16 x 4 x 6 x 6 non-negative values times inf),
            # where it was "3"'s output; the rest of the file is unchanged. The new record is held by
            # test_provenance_names_the_module_in_forward_and_backward.
            if (run, name) == ("inf", "steps.jsonl"):
                given = b'"nonfinite":{"layer":"3","tensor":"x","pass":"forward","count":2304,"after":"2"}'
                assert data.count(given) == 1
                data = data.replace(given, b'"nonfinite":{"layer":"3","tensor":"y","pass":"forward","count":1536}')
            assert hashlib.sha256(data).hexdigest() == digest, f"{run}/{name}"


# --- provenance="recorded_steps": module hooks on recorded steps only -----------------------------------

def test_provenance_on_recorded_steps_only(tmp_path, statistics):
    counted = {"hooks": 0}

    def count_hooks(model, monitor):
        # Counts the Monitor's forward hooks attached on each step (a pre-hook sees them before they run).
        def hook(module, inputs):
            counted["hooks"] += len(module._forward_hooks)
        model[0].register_forward_pre_hook(hook)

    def planted(model, monitor):
        count_hooks(model, monitor)

        def inf_input(module, inputs):  # step 3 (not recorded): a NaN in forward that ReLU keeps
            if monitor._step == 3:
                return (inputs[0] * float("nan"),)
        model[3].register_forward_pre_hook(inf_input)

    # The torch rule skips the step with NaN gradients: the weights stay finite.
    model = train(tmp_path / "run", seed=2, steps=6, scaler=mt.GradScaler("torch"), every=2, hooks=planted,
                  provenance="recorded_steps", evaluate=False)
    assert counted["hooks"] == 3  # steps 0, 2 and 4: one hook each on module 0; none on 1, 3, 5
    steps = read_lines(tmp_path / "run" / "steps.jsonl")
    # Step 3 is not recorded: without module hooks the loss (non-finite, and before every gradient) names it.
    assert steps[3]["nonfinite"] == {"layer": "loss", "tensor": "loss", "pass": "forward", "count": 1}
    assert steps[3]["found_inf"] and steps[3]["skipped"] and not steps[3]["recorded"]
    assert all(s["nonfinite"] is None for i, s in enumerate(steps) if i != 3)
    lines = read_lines(tmp_path / "run" / "tensors.jsonl")
    assert {t["step"] for t in lines} == {0, 2, 4}
    with pytest.raises(ValueError, match="provenance must be one of every_step, recorded_steps"):
        mt.Monitor(model, torch.optim.SGD(model.parameters(), lr=0.05), out=tmp_path / "bad", provenance="sometimes")


def test_provenance_modes_record_the_same_steps(tmp_path, statistics):
    # On recorded steps both modes hook every module: their tensors and histograms are the same bytes.
    for mode in ("every_step", "recorded_steps"):
        train(tmp_path / mode, seed=4, steps=7, every=3, provenance=mode, evaluate=False)
    for name in ("tensors.jsonl", "histograms.jsonl", "steps.jsonl"):
        with open(tmp_path / "every_step" / name, "rb") as a, open(tmp_path / "recorded_steps" / name, "rb") as b:
            assert a.read() == b.read(), name


def test_provenance_on_recorded_steps_only_checks_the_parameter_gradients(tmp_path, statistics):
    # Step 1 is not recorded (every=2): Spike's backward makes its dx infinite, the loss stays finite. Without
    # module hooks the first parameter, in the model's order, whose gradient is non-finite is named.
    model = train(tmp_path / "run", seed=1, steps=3, scaler=mt.GradScaler("torch"), every=2, hooks=backward_inf_at(1),
                  provenance="recorded_steps", evaluate=False)
    steps = read_lines(tmp_path / "run" / "steps.jsonl")
    first = steps[1]["nonfinite"]
    assert (first["layer"], first["tensor"], first["pass"]) == ("0", "weight.grad", "backward"), first
    assert first["count"] == model[0].weight.numel()  # dx of Spike is inf everywhere: so is conv 0's weight gradient
    assert steps[0]["nonfinite"] is None and steps[2]["nonfinite"] is None


# --- when steps.jsonl is written ---------------------------------------------------------------------

def test_steps_are_written_at_recorded_and_nonfinite_steps_and_at_least_once_a_second(tmp_path, monkeypatch):
    import mpverify.torch.run_files as run_files
    clock = {"now": 1000.0}
    monkeypatch.setattr(run_files.time, "monotonic", lambda: clock["now"])
    torch.manual_seed(0)
    model = small_cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    monitor = mt.Monitor(model, opt, out=tmp_path / "run", every=5, verbose=False)
    path = tmp_path / "run" / "steps.jsonl"

    def written():
        return [line["step"] for line in read_lines(path)]

    returned = []
    for step, (x, y) in enumerate(batches(0, 9)):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        returned.append(monitor.step(float("nan") if step == 3 else loss))
        returned[-1]["loss"] = "changed by the caller"  # the log keeps its own copy
        if step == 0:
            assert written() == [0]  # a recorded step: at once
        if step in (1, 2):
            assert written() == [0]  # unrecorded and finite, within the second: held
        if step == 3:
            assert written() == [0, 1, 2, 3]  # a non-finite step: at once, with those before it
        if step == 5:
            assert written() == [0, 1, 2, 3, 4, 5]
        if step == 6:
            assert written() == [0, 1, 2, 3, 4, 5]
            clock["now"] += 1.0
        if step == 7:
            assert written() == list(range(8))  # a second after the last write
    monitor.close()
    lines = read_lines(path)
    assert [line["step"] for line in lines] == list(range(9))
    assert all(isinstance(line["loss"], float) or line["loss"] is None for line in lines)
    assert lines[3]["loss"] is None and lines[3]["nonfinite"]["layer"] == "loss"


def test_autocast_rates_are_split_by_the_format_each_tensor_is_measured_against(tmp_path):
    """Under bf16 autocast a step's tensors are measured against two formats (bf16 tensors against bf16, fp32
    ones, the weight gradients and the loss gradient, against the study format fp16), and its pooled rates
    mix them. by_format splits them: each format's rates must equal the sums of that format's tensors.jsonl
    records (counts rebuilt from each record's rate and nonzero count, exact for n/d doubles), and together
    they must give the pooled rates. A run measured against one format writes no by_format."""
    train(tmp_path / "bf16", 1, steps=3, autocast=True, evaluate=False)
    train(tmp_path / "fp32", 1, steps=2, evaluate=False)
    assert all("by_format" not in s for s in read_lines(tmp_path / "fp32" / "steps.jsonl"))
    tensors = read_lines(tmp_path / "bf16" / "tensors.jsonl")
    for step in read_lines(tmp_path / "bf16" / "steps.jsonl"):
        by_format = step["by_format"]
        assert set(by_format) == {"bf16", "fp16"}, by_format
        pooled = {"nonzero": 0, "underflow": 0, "subnormal": 0}
        for fmt, rates in by_format.items():
            for roles, prefix in ((("activation_grad", "weight_grad"), ""), (("activation",), "activation_")):
                records = [t for t in tensors if t["step"] == step["step"] and t["format"] == fmt and t["role"] in roles]
                nonzero = sum(t["nonzero_finite"] for t in records)
                under = sum(round(t["underflow_to_zero_rate"] * t["nonzero_finite"]) for t in records)
                assert rates[prefix + "nonzero"] == nonzero, (fmt, roles)
                assert rates[prefix + "underflow_rate"] == (under / nonzero if nonzero else 0.0), (fmt, roles)
                if prefix == "":
                    sub = sum(round(t["subnormal_rate"] * t["nonzero_finite"]) for t in records)
                    assert rates["subnormal_rate"] == (sub / nonzero if nonzero else 0.0), fmt
                    pooled["nonzero"] += nonzero
                    pooled["underflow"] += under
                    pooled["subnormal"] += sub
        assert step["subnormal_rate"] == pytest.approx(pooled["subnormal"] / pooled["nonzero"], rel=1e-15)
        assert step["underflow_rate"] == pytest.approx(pooled["underflow"] / pooled["nonzero"], rel=1e-15)
    # compare-runs still reads the run.
    assert cli("compare-runs", tmp_path / "bf16", tmp_path / "bf16", check=False).returncode == 0
