"""The Monitor under torch.distributed: two and four processes (gloo, CPU) training one model under
DistributedDataParallel write one run directory, and its figures equal those of one process on the
whole batch.

The worker (tests/python/ddp_worker.py) trains a model whose arithmetic is exact in float32 (dyadic weights,
inputs and targets with few bits; learning rate 0), so the sharded job and the single process hold the
same tensors bit for bit, whatever order DDP sums in. Each rank's loss is its shard's mean, so its
activation gradients are the world size W times those of one process taking the mean over the whole
batch: they are held against a single process whose loss is multiplied by W (the same weights: nothing
is updated). Everything else is held against the single process with the plain mean. The norm of the
summed records is combined as sqrt(sum of the ranks' squared norms). With u = 2^-53 and the sums of squares
exact here: each rank's norm is within u (its square root), its square within 3u, the sum of W of them
within 3u + (W - 1)u, its square root within half that plus u, and the single process's norm within u:
(W + 6)/2 u relative apart at most.

Run by ctest as: /usr/bin/python3 -m pytest -q tests/python/ddp_test.py with PYTHONPATH=BUILD/python.
"""
import json
import os
import socket
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.distributed.is_available():
    pytest.skip("this torch has no torch.distributed", allow_module_level=True)

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_worker.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(out, world, loss_factor=1.0, plant_rank=-1):
    port = free_port()
    procs = [subprocess.Popen([sys.executable, WORKER, str(r), str(world), str(port), str(out), str(loss_factor),
                               str(plant_rank)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(world)]
    for p in procs:
        stdout, stderr = p.communicate(timeout=240)
        assert p.returncode == 0, stderr


def lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module", params=[2, 4], ids=lambda w: f"{w}-ranks")
def jobs(tmp_path_factory, request):
    world = request.param
    root = tmp_path_factory.mktemp(f"ddp{world}")
    run_job(root / "ddp", world)
    run_job(root / "one", 1)
    run_job(root / "one-xW", 1, loss_factor=float(world))
    return root, world


def test_rank_0_alone_writes_one_run_directory(jobs):
    jobs, world = jobs
    assert sorted(os.listdir(jobs / "ddp")) == ["histograms.jsonl", "steps.jsonl", "summary.json", "tensors.jsonl"]
    summary = json.loads((jobs / "ddp" / "summary.json").read_text())
    assert summary["config"]["world_size"] == world and summary["config"]["batch_size"] == 8  # the global batch
    weights = [torch.load(jobs / f"ddp.weights-{r}.pt") for r in range(world)]
    assert all(torch.equal(weights[0][k], w[k]) for w in weights for k in w)


def test_the_jobs_figures_equal_one_process_on_the_whole_batch(jobs):
    jobs, world = jobs
    ddp, one, one_x2 = (lines(jobs / d / "tensors.jsonl") for d in ("ddp", "one", "one-xW"))
    assert len(ddp) == len(one) == len(one_x2) > 0
    for mine, plain, doubled in zip(ddp, one, one_x2):
        theirs = dict(doubled if mine["role"] == "activation_grad" else plain)
        mine = dict(mine)
        if mine["role"] in ("activation", "activation_grad"):  # summed over the ranks: the norm combined
            assert mine.pop("norm") == pytest.approx(theirs.pop("norm"), rel=(world + 6) / 2 * 2.0 ** -53, abs=0)
        assert mine == theirs
    assert {m["role"] for m in ddp} == {"activation", "activation_grad", "weight", "weight_grad"}
    steps, alone = lines(jobs / "ddp" / "steps.jsonl"), lines(jobs / "one" / "steps.jsonl")
    for mine, theirs in zip(steps, alone, strict=True):
        assert mine["loss"] == theirs["loss"]  # the mean of the shards' means: the whole batch's mean
        assert len(mine.pop("loss_by_rank")) == world
        assert mine["scale"] == theirs["scale"] and mine["found_inf"] == theirs["found_inf"]
    hist, hist_alone = lines(jobs / "ddp" / "histograms.jsonl"), lines(jobs / "one" / "histograms.jsonl")
    hist_x2 = lines(jobs / "one-xW" / "histograms.jsonl")
    for mine, plain, doubled in zip(hist, hist_alone, hist_x2, strict=True):
        assert mine == (doubled if mine["role"] == "activation_grad" else plain)


def test_the_first_non_finite_value_names_its_rank(tmp_path):
    """An inf made on rank 1 only (layer "0"'s output, step 2) reaches rank 0 through DDP's averaged
    gradients, where its parameter gradients are the first non-finite values it sees; the job names rank
    1's forward output."""
    run_job(tmp_path / "ddp", 2, plant_rank=1)
    steps = lines(tmp_path / "ddp" / "steps.jsonl")
    first = steps[2]["nonfinite"]
    assert (first["layer"], first["tensor"], first["pass"], first["rank"]) == ("0", "y", "forward", 1), first
    assert first["count"] == 4 * 6  # rank 1's shard of 4 rows times 6 outputs, each times inf
    assert steps[2]["skipped"] and steps[2]["found_inf"]
    assert [s["nonfinite"] is None for s in steps] == [True, True, False, True, True]
    assert steps[3]["scale"] == steps[2]["scale"] / 2
