"""mpverify.torch under models and steps it was not first built for: a Dumper step that raises leaves nothing
that reads as a step; sparse gradients (nn.Embedding(sparse=True)) are dumped as the dense arrays they stand
for; a module called twice in one forward gives the Monitor one record per call, which compare-runs reads;
the Monitor records sparse gradients as the dense ones (its files byte for byte those of the same run with
sparse=False), finds and names an inf in one, and compare-runs reads the run.
Each case once left a partial, misleading, unreadable or no run.

Run with pytest (PYTHONPATH=build/python, MPVERIFY_BIN=build/mpverify).
"""
import json
import os
import subprocess

import numpy as np
import pytest
import torch

import mpverify.torch

BIN = os.environ.get("MPVERIFY_BIN", "mpverify")


def read_safetensors(path):
    """name -> float32 array, read here from the format's definition (8-byte header length, JSON, data)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        assert h["dtype"] == "F32", h
        begin, end = h["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype="<f4").reshape(h["shape"])
    return out


def test_a_step_that_raises_leaves_no_step_behind(tmp_path):
    torch.manual_seed(45)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    dumper = mpverify.torch.Dumper(model, tmp_path / "dump")
    model(torch.ones(3, 4)).sum().backward()
    with pytest.raises(RuntimeError, match="the optimizer failed"):
        with dumper.step(1):
            raise RuntimeError("the optimizer failed")
    # Once: weights and gradients stayed, with all-zero updates and a step.json marked skipped.
    assert not (tmp_path / "dump" / "step-000001").exists()
    with dumper.step(2):
        opt.step()
    dumper.close()
    step = json.loads((tmp_path / "dump" / "step-000002" / "step.json").read_text())
    assert step["skipped"] is False
    assert sorted(os.listdir(tmp_path / "dump")) == ["step-000002"]


def test_sparse_gradients_are_dumped_dense(tmp_path):
    torch.manual_seed(45)
    model = torch.nn.Sequential(torch.nn.Embedding(10, 3, sparse=True), torch.nn.Flatten(), torch.nn.Linear(6, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    dumper = mpverify.torch.Dumper(model, tmp_path / "dump")
    tokens = torch.tensor([[1, 4]])
    model(tokens).sum().backward()
    assert model[0].weight.grad.is_sparse
    want = model[0].weight.grad.to_dense().numpy().copy()  # torch's own densification, before the step
    with dumper.step(0):
        opt.step()
    dumper.close()
    step_dir = tmp_path / "dump" / "step-000000"
    grads = read_safetensors(step_dir / "grads.safetensors")
    np.testing.assert_array_equal(grads["0.weight"], want)
    assert np.count_nonzero(grads["0.weight"].any(axis=1)) == 2  # rows 1 and 4 only
    assert json.loads((step_dir / "step.json").read_text())["skipped"] is False
    r = subprocess.run([BIN, "analyze", str(tmp_path / "dump"), "--format", "fp16"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


class Shared(torch.nn.Module):
    """One Linear applied twice in each forward (weight sharing, as in a recurrent or tied block)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.a(torch.relu(self.a(x))).sum()


def monitor_run(directory, seed):
    torch.manual_seed(seed)
    model = Shared()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    monitor = mpverify.torch.Monitor(model, opt, out=directory, verbose=False, seed=seed)
    for _ in range(2):
        opt.zero_grad()
        loss = model(torch.randn(8, 4))
        loss.backward()
        opt.step()
        monitor.step(loss)
    monitor.close()


def test_a_module_called_twice_is_one_record_per_call(tmp_path):
    monitor_run(tmp_path / "a", 1)
    monitor_run(tmp_path / "b", 2)
    records = [json.loads(line) for line in (tmp_path / "a" / "tensors.jsonl").read_text().splitlines()]
    step0 = [(r["layer"], r["tensor"]) for r in records if r["step"] == 0 and r["layer"] == "a"]
    assert sorted(step0) == sorted(set(step0)), f"a (layer, tensor) recorded twice: {step0}"
    assert {("a", "y"), ("a", "y#2"), ("a", "dy"), ("a", "dy#2")} <= set(step0), step0
    # Once: 'layer "a" tensor "y" ... appears twice', exit 2.
    r = subprocess.run([BIN, "compare-runs", str(tmp_path / "a"), str(tmp_path / "b")], capture_output=True, text=True)
    assert r.returncode in (0, 1), r.stderr
    assert "appears twice" not in r.stderr


# --- the Monitor and sparse gradients ------------------------------------------------------------------------

# Each step's tokens are distinct: SGD then updates a weight by the same float operations whichever the layout
# (with a repeated token a sparse gradient is added once per occurrence, a dense one once, rounded otherwise).
# Row 0 is never used: the dense gradient's zeros are recorded too.
DISTINCT_TOKENS = [torch.tensor([[1, 4, 7], [2, 9, 5]]), torch.tensor([[3, 8, 6], [1, 2, 4]]),
                   torch.tensor([[9, 7, 5], [3, 6, 8]])]


class StubScaler:
    """A fixed loss scale the loop never applies: the Monitor measures the gradients at 1024 and again at 1."""

    def get_scale(self):
        return 1024.0

    def update(self):
        pass

    def found_inf(self, optimizer):
        return False


def embedding_run(directory, sparse, tokens, lr=0.5, scaler=None, setup=None, loss_of=lambda out: out.pow(2).sum(),
                  **monitor_options):
    """A 10-token embedding, flattened, into a Linear, trained by SGD under the Monitor; the final parameters."""
    torch.manual_seed(7)
    model = torch.nn.Sequential(torch.nn.Embedding(10, 3, sparse=sparse), torch.nn.Flatten(), torch.nn.Linear(9, 1))
    if setup is not None:
        setup(model)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    monitor = mpverify.torch.Monitor(model, opt, scaler=scaler, out=directory, verbose=False, seed=7, **monitor_options)
    for step, batch in enumerate(tokens):
        model.step_number = step  # read by plant_inf
        opt.zero_grad()
        loss = loss_of(model(batch))
        loss.backward()
        assert model[0].weight.grad.is_sparse == sparse
        opt.step()
        if scaler is not None:
            scaler.update()
        monitor.step(loss)
    monitor.close()
    return [p.detach().clone() for p in model.parameters()]


def jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("scaler", [None, StubScaler()], ids=["scale1", "scale1024"])
def test_sparse_gradients_are_recorded_as_the_dense_gradients(tmp_path, scaler):
    sparse = embedding_run(tmp_path / "sparse", True, DISTINCT_TOKENS, scaler=scaler)
    dense = embedding_run(tmp_path / "dense", False, DISTINCT_TOKENS, scaler=scaler)
    for s, d in zip(sparse, dense):
        assert torch.equal(s, d)  # the same training: any difference below is the Monitor's
    # The Monitor writes no clock: every file holds the same bytes. Line by line, to name the first that differs.
    files = sorted(os.listdir(tmp_path / "dense"))
    assert files == sorted(os.listdir(tmp_path / "sparse")) == \
        ["histograms.jsonl", "steps.jsonl", "summary.json", "tensors.jsonl"]
    for name in files:
        want = (tmp_path / "dense" / name).read_text().splitlines()
        got = (tmp_path / "sparse" / name).read_text().splitlines()
        assert len(got) == len(want), name
        for i, (g, w) in enumerate(zip(got, want)):
            assert g == w, f"{name} line {i + 1}"
    # The comparison above holds something: the embedding's gradient on every step, zeros (row 0) included.
    grads = [r for r in jsonl(tmp_path / "sparse" / "tensors.jsonl") if (r["layer"], r["tensor"]) == ("0", "weight.grad")]
    assert [r["step"] for r in grads] == [0, 1, 2]
    assert all(r["count"] == 30 and r["zeros_in"] >= 3 and r["nonzero_finite"] > 0 for r in grads), grads
    summary = json.loads((tmp_path / "sparse" / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["aborted"] is False and summary["skipped_steps"] == 0
    assert [line["step"] for line in jsonl(tmp_path / "sparse" / "steps.jsonl")] == [0, 1, 2]


def plant_inf(model):
    """An inf in the embedding's weight gradient at step 1, added by a hook in the gradient's own layout."""
    def hook(grad):
        if model.step_number != 1:
            return None
        extra = torch.zeros(grad.shape)
        extra[4, 1] = float("inf")
        return grad + (extra.to_sparse(1) if grad.is_sparse else extra)  # rows, as the embedding's gradient
    model[0].weight.register_hook(hook)


def overflow_by_summing(model):
    """Embedding weights of 1e-30 and Linear weights of 3e38: the loss and every gradient of an output are finite,
    and a token used twice (step 1) has an embedding gradient of 3e38 + 3e38 = inf: in a sparse gradient only the
    dense tensor it stands for holds the inf, its stored values are finite."""
    with torch.no_grad():
        model[0].weight.fill_(1e-30)
        model[2].weight.fill_(3e38)
        model[2].bias.zero_()


INF_CASES = {
    "planted": dict(tokens=DISTINCT_TOKENS[:2], setup=plant_inf, lr=0.5, loss_of=lambda out: out.pow(2).sum(),
                    count=1),
    "summed": dict(tokens=[DISTINCT_TOKENS[0], torch.tensor([[1, 1, 2], [3, 4, 5]])], setup=overflow_by_summing,
                   lr=0.0, loss_of=lambda out: out.sum(), count=3),
}


@pytest.mark.parametrize("provenance", ["every_step", "recorded_steps"])
@pytest.mark.parametrize("case", sorted(INF_CASES))
def test_an_inf_in_a_sparse_gradient_is_found_and_named(tmp_path, case, provenance):
    c = INF_CASES[case]
    # every=2: step 1 is not recorded, so that provenance="recorded_steps" checks it without hooks.
    options = dict(setup=c["setup"], lr=c["lr"], loss_of=c["loss_of"], every=2,
                   provenance=provenance)
    embedding_run(tmp_path / "sparse", True, c["tokens"], **options)
    embedding_run(tmp_path / "dense", False, c["tokens"], **options)
    sparse = jsonl(tmp_path / "sparse" / "steps.jsonl")
    dense = jsonl(tmp_path / "dense" / "steps.jsonl")
    assert [line["nonfinite"] for line in sparse] == [line["nonfinite"] for line in dense]
    assert [line["found_inf"] for line in sparse] == [line["found_inf"] for line in dense] == [False, True]
    assert sparse[1]["nonfinite"] == {"layer": "0", "tensor": "weight.grad", "pass": "backward", "count": c["count"]}


def test_compare_runs_reads_a_run_with_sparse_gradients(tmp_path):
    embedding_run(tmp_path / "sparse", True, DISTINCT_TOKENS)
    embedding_run(tmp_path / "dense", False, DISTINCT_TOKENS)
    r = subprocess.run([BIN, "compare-runs", str(tmp_path / "sparse"), str(tmp_path / "dense")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_grad_scaler_unscales_sparse_gradients_as_torch_does():
    """mpverify.torch.GradScaler on a sparse gradient, held against torch's rule written out here
    (torch/amp/grad_scaler.py, GradScaler._unscale_grads_): an fp16 sparse gradient is coalesced first, then
    its stored values are multiplied by fl32(1/scale) in float32 and rounded once to fp16."""
    torch.manual_seed(47)
    scale = 1024.0
    for dtype in (torch.float32, torch.float16):
        emb = torch.nn.Embedding(6, 2, sparse=True).to(dtype)
        opt = torch.optim.SGD(emb.parameters(), lr=0.1)
        scaler = mpverify.torch.GradScaler("static", scale=scale)
        # Token 1 twice: two stored rows at one index.
        (emb(torch.tensor([1, 4, 1])).float().sum() * scale).backward()
        grad = emb.weight.grad
        assert grad.is_sparse and not grad.is_coalesced()
        expected = grad.coalesce() if dtype is torch.float16 else grad
        inv = torch.tensor(1.0 / scale, dtype=torch.float64).float()
        expected_values = (expected._values().float() * inv).to(dtype)
        scaler.unscale_(opt)
        got = emb.weight.grad
        assert got.is_sparse
        assert got.is_coalesced() == (dtype is torch.float16)
        assert torch.equal(got._indices(), expected._indices())
        assert torch.equal(got._values(), expected_values)
        assert scaler.found_inf(opt) is False


def test_grad_scaler_finds_an_inf_made_by_coalescing_an_fp16_sparse_gradient():
    """Two stored fp16 values of 40000 at one index sum to inf (fp16's largest finite value is 65504): torch
    coalesces fp16 sparse gradients before its check, so the step overflows."""
    emb = torch.nn.Embedding(4, 1, sparse=True).half()
    opt = torch.optim.SGD(emb.parameters(), lr=0.1)
    scaler = mpverify.torch.GradScaler("static", scale=1.0)
    emb.weight.grad = torch.sparse_coo_tensor(torch.tensor([[2, 2]]), torch.full((2, 1), 40000.0), (4, 1)).half()
    assert bool(torch.isfinite(emb.weight.grad._values()).all())
    scaler.unscale_(opt)
    assert scaler.found_inf(opt) is True
    assert torch.isinf(emb.weight.grad.to_dense()[2, 0])
