#!/usr/bin/python3
"""The effect on training of all-reducing gradients in bf16: the CNN trained data-parallel on N simulated ranks
(`train --data-parallel N`, each rank a shard of 2 examples, ring order, each rank's gradient divided by N
first), bf16 reduction against fp32 reduction, gated on test accuracy, for each N.

Usage: /usr/bin/python3 experiments/allreduce/training_report.py BUILD_DIR OUT.md [RUNS_DIR]
           [--ranks 64,256] [--seeds 1-5] [--steps 100] [--margin 1] [--workers 2]

Each N is one `mpverify sweep` (its plan is written to RUNS_DIR/plan-N.json and shown in the report), so the
runs resume when the command is started again; the report quotes each sweep's table and the reductions'
counters that summary.json records.
"""
import argparse
import json
import os
import subprocess
import sys


def plan(ranks, seeds, steps, margin):
    return {"train": {"model": "cnn", "data": "synthetic", "backend": "ref", "recipe": "fp32", "steps": steps,
                      "batch-size": 2 * ranks, "no-recorders": True, "data-parallel": ranks,
                      "reduce-algorithm": "ring"},
            "axes": {"reduce-format": ["fp32", "bf16"], "seed": seeds},
            "gate": {"baseline": {"reduce-format": "fp32"}, "metric": "accuracy", "margin": margin}}


def run_sweep(build, runs, ranks, args):
    os.makedirs(runs, exist_ok=True)
    plan_file = os.path.join(runs, f"plan-{ranks}.json")
    with open(plan_file, "w") as f:
        json.dump(plan(ranks, args.seeds, args.steps, args.margin), f, indent=1)
    out = os.path.join(runs, f"n{ranks}")
    done = subprocess.run([os.path.join(build, "mpverify"), "sweep", plan_file, "--out", out, "--workers",
                           str(args.workers), "--json"], stdout=subprocess.PIPE, check=False)
    if done.returncode not in (0, 1, 3):  # a verdict; 2 is an error
        sys.exit(f"training_report: the sweep for N = {ranks} failed ({done.returncode})")
    return plan_file, out, json.loads(done.stdout)


def counters_line(out, candidate, seed):
    with open(os.path.join(out, candidate, f"seed-{seed}", "summary.json")) as f:
        a = json.load(f)["all_reduce"]["additions"]
    swamped = a["swamped"] / a["elements"] if a["elements"] else 0
    return (f"{a['elements']:,} additions over the run, {a['inexact'] / a['elements']:.3g} inexact, "
            f"{swamped:.3g} swamped, {a['overflow']} overflowed")


def shown(path):
    """A path as the report shows it: relative to where the command ran (the source tree), not absolute."""
    return os.path.relpath(path)


def section(ranks, plan_file, out, summary, seed):
    table = open(os.path.join(out, "summary.md")).read().split("\n", 2)[2]  # without its "# Sweep" title
    s = f"## N = {ranks} ranks (batch {2 * ranks}, 2 examples per rank)\n\n"
    s += f"Plan `{shown(plan_file)}`, run by `mpverify sweep {shown(plan_file)} --out {shown(out)}`.\n\n" + table + "\n"
    for c in summary["candidates"]:
        s += f"- {c['name']}, seed {seed}: {counters_line(out, c['name'], seed)}.\n"
    return s + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("report")
    ap.add_argument("runs", nargs="?", default="runs/allreduce_training")
    ap.add_argument("--ranks", default="64,256")
    ap.add_argument("--seeds", default="1-5")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--margin", type=float, default=1.0)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    ranks = [int(n) for n in args.ranks.split(",")]
    command = (f"/usr/bin/python3 experiments/allreduce/training_report.py {shown(args.build)} {shown(args.report)} "
               f"{shown(args.runs)} "
               f"--ranks {args.ranks} --seeds {args.seeds} --steps {args.steps} --margin {args.margin:g}")
    first_seed = int(args.seeds.split(",")[0].split("-")[0])
    text = f"""# Does all-reducing gradients in bf16 change training?

Written by `{command}` (`experiments/regenerate-reports allreduce_training`), on a CPU: no GPU was involved;
every reduction is the emulator's (`src/collective/`), every gradient the FP32 reference backend's.

The CNN on the synthetic digits is trained data-parallel on N simulated ranks (`mpverify train
--data-parallel N`, docs/allreduce.md): each step's batch of 2N examples is cut into N shards of 2, every
shard's forward and backward runs on its own (batch norm with the shard's own statistics, as without
SyncBatchNorm), and the shards' gradients are all-reduced in the ring order, each divided by N first (PyTorch
DDP's hook), in fp32 or in bf16; the weights, the optimizer and everything else stay fp32. The gate asks
whether bf16 reduction is equivalent to fp32 reduction in test accuracy within ±{args.margin:g} point, over
the seeds {args.seeds}, {args.steps} steps each (`reports/allreduce.md` measures the same sums' error on one
step: bf16's ring error grows with N).

"""
    for n in ranks:
        plan_file, out, summary = run_sweep(args.build, args.runs, n, args)
        text += section(n, plan_file, out, summary, first_seed)
    text += """## What this does not cover

One model and data set, short runs, the ring order only, the gradients reduced in bf16 but everything else in
fp32, and a simulation of the sums: NCCL's own ring and chunking differ (docs/allreduce.md).
"""
    tmp = args.report + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, args.report)
    print(f"wrote {args.report}")


if __name__ == "__main__":
    main()
