"""mpverify.torch under models and steps it was not first built for: a Dumper step that raises leaves nothing
that reads as a step; sparse gradients (nn.Embedding(sparse=True)) are dumped as the dense arrays they stand
for; a module called twice in one forward gives the Monitor one record per call, which compare-runs reads.
Each case once left a partial, misleading or unreadable run.

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
