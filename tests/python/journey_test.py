"""The whole journey on a user's own model, as docs/python.md tells it: a small GPT written here (not the
project's model code; character level, two blocks, on the CPU), 3 seeds in fp32 and 3 under bf16 autocast,
recorded by the Monitor at every=5 with the package's GradScaler (torch's rule), an inf planted at a known
step and module of one run; then `summarize`, `compare-runs`, `gate --metric test_loss` on the run
directories and on CSV files, and `replay-scalers --check torch` on the recorded trace, each held to its
documented output and exit code.

The expected figures come from the run files themselves or from a computation written here (the paired
TOST interval with scipy's t quantile, the GradScaler rule transcribed from torch's
aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp, _amp_update_scale_cpu_), never from the command under test.

Run by ctest as: /usr/bin/python3 -m pytest -q tests/python/journey_test.py with PYTHONPATH=BUILD/python and
MPVERIFY_BIN=BUILD/mpverify.
"""
import json
import math
import os
import subprocess

import pytest

torch = pytest.importorskip("torch")
stats = pytest.importorskip("scipy.stats")
import mpverify  # noqa: E402
import mpverify.torch as mt  # noqa: E402

MPVERIFY = os.environ.get("MPVERIFY_BIN", "build/mpverify")
TEXT = ("the quick brown fox jumps over the lazy dog. pack my box with five dozen liquor jugs. "
        "how vexingly quick daft zebras jump! sphinx of black quartz, judge my vow. ") * 8
CHARS = sorted(set(TEXT))
BLOCK, STEPS, EVERY = 16, 30, 5
PLANT = (12, "blocks.1.mlp.fc")  # step and module of the planted inf (bf16, seed 2)


def cli(*args):
    return subprocess.run([MPVERIFY, *map(str, args)], capture_output=True, text=True)


# --- a small GPT, written for this test --------------------------------------------------------------

class Attention(torch.nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, c))


class Mlp(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc, self.act, self.out = torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width)

    def forward(self, x):
        return self.out(self.act(self.fc(x)))


class Block(torch.nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln1, self.attn = torch.nn.LayerNorm(width), Attention(width, heads)
        self.ln2, self.mlp = torch.nn.LayerNorm(width), Mlp(width)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Gpt(torch.nn.Module):
    def __init__(self, vocab, width=32, heads=2, layers=2):
        super().__init__()
        self.tokens, self.positions = torch.nn.Embedding(vocab, width), torch.nn.Embedding(BLOCK, width)
        self.blocks = torch.nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln, self.head = torch.nn.LayerNorm(width), torch.nn.Linear(width, vocab)

    def forward(self, idx):
        x = self.tokens(idx) + self.positions(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def batches(seed, n, batch=8, split="train"):
    data = torch.tensor([CHARS.index(c) for c in TEXT])
    data = data[: len(data) * 9 // 10] if split == "train" else data[len(data) * 9 // 10:]
    g = torch.Generator().manual_seed(seed)
    for _ in range(n):
        start = torch.randint(0, len(data) - BLOCK - 1, (batch,), generator=g)
        yield (torch.stack([data[s:s + BLOCK] for s in start]), torch.stack([data[s + 1:s + BLOCK + 1] for s in start]))


def train(out, seed, bf16, plant=None):
    """One run, recorded; returns the GradScaler's scales and found_inf per step as the loop saw them."""
    torch.manual_seed(seed)
    model = Gpt(len(CHARS))
    step = {"k": 0}
    if plant is not None:  # registered before the Monitor: the inf is the module's own output when it looks
        model.get_submodule(plant[1]).register_forward_hook(
            lambda m, i, o: o * float("inf") if step["k"] == plant[0] else None)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    scaler = mt.GradScaler("torch", init_scale=2.0 ** 12, growth_interval=10)
    monitor = mt.Monitor(model, opt, scaler=scaler, every=EVERY, out=out, seed=seed, name="gpt", data="pangrams",
                         verbose=False)
    seen = []
    for step["k"], (x, y) in enumerate(batches(seed, STEPS)):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = torch.nn.functional.cross_entropy(model(x).float().view(-1, len(CHARS)), y.view(-1))
        seen.append(scaler.get_scale())
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        monitor.step(loss)
    with torch.no_grad():
        x, y = next(batches(seed + 100, 1, batch=64, split="test"))
        test_loss = float(torch.nn.functional.cross_entropy(model(x).view(-1, len(CHARS)), y.view(-1)))
    monitor.evaluation(test_loss=test_loss, perplexity=math.exp(test_loss), test_size=64 * BLOCK)
    monitor.close()
    return seen, test_loss


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("journey")
    out = {"root": root, "test_loss": {}, "scales": {}}
    for side, bf16 in (("fp32", False), ("bf16", True)):
        for seed in (1, 2, 3):
            plant = PLANT if (side, seed) == ("bf16", 2) else None
            scales, test_loss = train(root / side / f"seed-{seed}", seed, bf16, plant)
            out["test_loss"][side, seed] = test_loss
            out["scales"][side, seed] = scales
        mpverify.write_ensemble_manifest(root / side, [1, 2, 3])
    return out


def read_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def test_summarize_names_the_planted_inf_and_pools_the_recorded_steps(runs):
    run = runs["root"] / "bf16" / "seed-2"
    r = cli("summarize", run, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["steps"] == STEPS and s["recorded_steps"] == STEPS // EVERY
    assert s["skipped_steps"] == 1
    first = s["first_nonfinite"][0]
    assert (first["step"], first["layer"], first["tensor"], first["pass"]) == (PLANT[0], PLANT[1], "y", "forward")
    # Per layer and tensor: the underflow counts pooled over the recorded steps, recomputed from tensors.jsonl.
    pooled = {}
    for t in read_lines(run / "tensors.jsonl"):
        k = pooled.setdefault((t["layer"], t["tensor"], t["role"]), [0, 0])
        k[0] += round(t["underflow_to_zero_rate"] * t["nonzero_finite"])
        k[1] += t["nonzero_finite"]
    assert {(k["layer"], k["tensor"], k["role"]): [k["underflow"], k["nonzero"]] for k in s["kinds"]} == pooled
    text = cli("summarize", run)
    assert text.returncode == 0 and f"step {PLANT[0]}: {PLANT[1]} y (forward" in text.stdout
    assert max(len(line) for line in text.stdout.splitlines()) <= 100  # a terminal of 100 columns
    # The other runs had no non-finite value.
    clean = json.loads(cli("summarize", runs["root"] / "fp32" / "seed-2", "--json").stdout)
    assert clean["skipped_steps"] == 0 and clean["first_nonfinite"] == []


def test_compare_runs_reads_monitor_runs_recorded_every_fifth_step(runs):
    r = cli("compare-runs", runs["root"] / "fp32" / "seed-1", runs["root"] / "bf16" / "seed-1", "--json")
    assert r.returncode == 0, r.stderr
    steps = {s["step"]: s for s in json.loads(r.stdout)["steps"]}
    assert sorted(steps) == list(range(STEPS))
    losses = [line["loss"] for line in read_lines(runs["root"] / "fp32" / "seed-1" / "steps.jsonl")]
    assert [steps[k]["loss_a"] for k in range(STEPS)] == losses
    assert all((steps[k]["underflow_rate_a"] is None) == (k % EVERY != 0) for k in range(STEPS))


def paired_tost(base, cand, alpha=0.05):
    """The paired TOST's (1 - 2 alpha) interval of cand - base, written here with scipy's t quantile."""
    d = [c - b for b, c in zip(base, cand)]
    n = len(d)
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    half = stats.t.ppf(1 - alpha, n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def expected_exit(lower, upper, margin):
    if -margin < lower and upper < margin:
        return 0
    if lower > margin or upper < -margin:
        return 1
    return 3


@pytest.mark.parametrize("margin", [0.005, 0.01, 0.05])  # the observed difference is about 0.01
def test_gate_on_the_run_directories_and_on_csv_agrees_with_the_tost_written_here(runs, margin, tmp_path):
    base = [runs["test_loss"]["fp32", s] for s in (1, 2, 3)]
    cand = [runs["test_loss"]["bf16", s] for s in (1, 2, 3)]
    mean, lower, upper = paired_tost(base, cand)
    for side, values in (("fp32", base), ("bf16", cand)):
        (tmp_path / f"{side}.csv").write_text("seed,value\n" + "".join(f"{s},{v!r}\n" for s, v in zip((1, 2, 3), values)))
    for b, c in ((runs["root"] / "fp32", runs["root"] / "bf16"), (tmp_path / "fp32.csv", tmp_path / "bf16.csv")):
        r = cli("gate", "--baseline", b, "--candidate", c, "--metric", "test_loss", "--margin", margin, "--json")
        assert r.returncode == expected_exit(lower, upper, margin), (r.returncode, lower, upper, r.stderr)
        g = json.loads(r.stdout)
        assert g["method"] == "paired" and g["n_baseline"] == g["n_candidate"] == 3
        # 1e-12: scipy's and Boost's t quantiles at 2 df agree to about 1e-15 relative; the interval's
        # half-width is below 10 here, so 1e-12 absolute is a thousand times the rounding.
        assert g["difference"] == pytest.approx(mean, abs=1e-12)
        assert g["ci_lower"] == pytest.approx(lower, abs=1e-12) and g["ci_upper"] == pytest.approx(upper, abs=1e-12)
        if r.returncode == 3:  # inconclusive: it says which verdict the observed difference points to
            assert g["leaning_toward"] == ("equivalent" if abs(mean) < margin else "not equivalent")
            assert ("so more seeds would point to " + ("EQUIVALENT" if abs(mean) < margin else "NOT EQUIVALENT")) in \
                cli("gate", "--baseline", b, "--candidate", c, "--metric", "test_loss", "--margin", margin).stdout
    # The run directories' test_loss is what the loop evaluated (written by Monitor.evaluation).
    summary = json.loads((runs["root"] / "bf16" / "seed-3" / "summary.json").read_text())
    assert summary["evaluation"]["test_loss"] == runs["test_loss"]["bf16", 3]
    assert summary["evaluation"]["diverged"] is False


def torch_rule(found_inf, scale=2.0 ** 12, growth=2.0, backoff=0.5, interval=10):
    """torch's _amp_update_scale_cpu_ (aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp), the scale each
    step ran with: on found_inf, scale * backoff and the tracker to 0; else the tracker + 1, and at the
    interval scale * growth (kept only while finite) and the tracker to 0. Scales are fp32."""
    import numpy as np
    s, tracker, out = np.float32(scale), 0, []
    for inf in found_inf:
        out.append(float(s))
        if inf:
            s, tracker = np.float32(s * np.float32(backoff)), 0
        else:
            tracker += 1
            if tracker == interval:
                grown = np.float32(s * np.float32(growth))
                s = grown if np.isfinite(grown) else s
                tracker = 0
    return out


def test_replay_scalers_checks_the_recorded_trace_against_torchs_rule(runs):
    run = runs["root"] / "bf16" / "seed-2"
    steps = read_lines(run / "steps.jsonl")
    found_inf = [s["found_inf"] for s in steps]
    assert found_inf == [k == PLANT[0] for k in range(STEPS)]
    assert [s["scale"] for s in steps] == torch_rule(found_inf) == runs["scales"]["bf16", 2]
    r = cli("replay-scalers", "--trace", run, "--check", "torch", "--strategy-opt", "torch.init=2^12",
            "--strategy-opt", "torch.interval=10", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    check = json.loads(r.stdout)
    assert check["agrees"] is True and check["steps"] == STEPS and check["first_difference"] is None
    # torch's default interval (2000) does not grow the scale after the first 10 clean steps (0-9), where
    # the run did: the check names step 10 and exits 1.
    r = cli("replay-scalers", "--trace", run, "--check", "torch", "--strategy-opt", "torch.init=2^12", "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["first_difference"]["step"] == 10
