#!/usr/bin/python3
"""Sweep throughput with N local workers, as a ratio to one worker's, on the same plan in the same sitting.

Usage: /usr/bin/python3 experiments/speed/bench_sweep.py [--mpverify build/mpverify] [--workers 2] [--runs 8]
           [--steps 60] [--repeats 3] [--json] [--markdown FILE]

The plan: `--runs` independent runs (the MLP on synthetic data, emulated, fp32 vs o2 over seeds), each a
few seconds. Each repeat times the whole `mpverify sweep` with one worker and with N workers, alternately (so
that the machine's drift hits both alike), each into a fresh directory, and gives the speed-up
t(1) / t(N) and the efficiency t(1) / (N t(N)) of that repeat; the median and the range over repeats are
printed. The target is an efficiency of at least 0.9: with R runs of equal length and R a multiple of N,
N workers that keep busy take R/N run-times (docs/sweep.md). The directories of the two are also compared
byte for byte: a speed-up that changed the results would be no speed-up.
"""
import argparse
import filecmp
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import re
import time

# The scheduler's simulated efficiency beyond this machine's cores: a plan of this many runs (the measured run
# lengths, repeated) on these many workers.
SIMULATED_RUNS = 240
SIMULATED_WORKERS = (2, 4, 8, 16, 32, 64)


def plan(runs, steps):
    seeds = list(range(1, runs // 2 + 1))
    return {"train": {"model": "mlp", "data": "synthetic", "backend": "emu", "steps": steps,
                      "train-size": 2048, "test-size": 512},
            "axes": {"recipe": ["fp32", "o2"], "scaler": ["torch"], "seed": seeds}}


def timed_sweep(mpverify, plan_file, out, workers):
    """Seconds for the whole sweep, and each run's seconds as the sweep reports them (in plan order)."""
    start = time.perf_counter()
    done = subprocess.run([mpverify, "sweep", plan_file, "--out", out, "--workers", str(workers)],
                          check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    # Not a terminal: one line per run, "sweep: [k/R] <candidate>/seed-<s> done in X s".
    runs = {}
    for line in done.stderr.splitlines():
        m = re.match(r"sweep: \[\d+/\d+\] (\S+) done in ([0-9.]+) s$", line)
        if m:
            runs[m.group(1)] = float(m.group(2))
    return seconds, [runs[k] for k in sorted(runs)]


def simulated_efficiency(durations, workers, runs):
    """The sweep's scheduler (each run, in plan order, to the first free worker) on `runs` runs whose lengths
    cycle through the measured ones: total work / (workers x the time the last worker ends)."""
    lengths = [durations[i % len(durations)] for i in range(runs)]
    free = [0.0] * workers
    for t in lengths:
        k = free.index(min(free))
        free[k] += t
    return sum(lengths) / (workers * max(free))


def same_tree(a, b):
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.diff_files or cmp.funny_files:
        return False
    for name in cmp.common_files:
        if not filecmp.cmp(os.path.join(a, name), os.path.join(b, name), shallow=False):
            return False
    return all(same_tree(os.path.join(a, d), os.path.join(b, d)) for d in cmp.common_dirs)


def measure(args):
    work = tempfile.mkdtemp(prefix="mpverify-bench-sweep-")
    try:
        plan_file = os.path.join(work, "plan.json")
        with open(plan_file, "w") as f:
            json.dump(plan(args.runs, args.steps), f)
        repeats = []
        for r in range(args.repeats):
            one = os.path.join(work, f"one-{r}")
            many = os.path.join(work, f"many-{r}")
            t1, durations = timed_sweep(args.mpverify, plan_file, one, 1)
            tn, _ = timed_sweep(args.mpverify, plan_file, many, args.workers)
            if not same_tree(one, many):
                sys.exit("bench_sweep: the two sweeps wrote different files")
            repeats.append({"one_worker_s": t1, "n_workers_s": tn, "speedup": t1 / tn,
                            "efficiency": t1 / (args.workers * tn), "run_seconds": durations})
            print(f"repeat {r + 1}/{args.repeats}: 1 worker {t1:.1f} s, {args.workers} workers {tn:.1f} s, "
                  f"speed-up {t1 / tn:.2f}", file=sys.stderr)
            shutil.rmtree(one)
            shutil.rmtree(many)
        return repeats
    finally:
        shutil.rmtree(work, ignore_errors=True)


def summary(args, repeats):
    eff = [r["efficiency"] for r in repeats]
    sp = [r["speedup"] for r in repeats]
    durations = [t for r in repeats for t in r["run_seconds"]]
    simulated = {str(n): simulated_efficiency(durations, n, SIMULATED_RUNS) for n in SIMULATED_WORKERS}
    return {"workers": args.workers, "runs": args.runs, "steps": args.steps, "cpus": os.cpu_count(),
            "simulated_runs": SIMULATED_RUNS, "simulated_efficiency": simulated,
            "speedup_median": statistics.median(sp), "speedup_min": min(sp), "speedup_max": max(sp),
            "efficiency_median": statistics.median(eff), "efficiency_min": min(eff), "efficiency_max": max(eff),
            "target_efficiency": 0.9, "repeats": repeats}


def markdown(s, command):
    return f"""# Sweep throughput: N local workers against one

Written by {command} on this machine ({s['cpus']} CPUs, no GPU used). A plan of {s['runs']} independent runs
(the MLP on synthetic data, emulated backend, {s['steps']} steps, fp32 and o2 over {s['runs'] // 2} seeds) is
run by `mpverify sweep` with one worker and with {s['workers']}, alternately, {len(s['repeats'])} times; each
ratio is taken within one repeat (the machine's speed moves by 20-40% between runs), and the two sweeps'
files were the same bytes every time.

| | median | range |
|---|---|---|
| speed-up t(1) / t({s['workers']}) | {s['speedup_median']:.2f} | {s['speedup_min']:.2f} - {s['speedup_max']:.2f} |
| efficiency t(1) / ({s['workers']} t({s['workers']})) | {s['efficiency_median']:.2f} | {s['efficiency_min']:.2f} - {s['efficiency_max']:.2f} |

Target: an efficiency of at least {s['target_efficiency']} ({'met' if s['efficiency_median'] >= s['target_efficiency'] else 'missed'} at the median).

Beyond {s['workers']} workers this machine has no cores to show. The sweep's scheduler (each run, in plan
order, to the first free worker), simulated on a plan of {s['simulated_runs']} runs whose lengths cycle through
the {len(s['repeats']) * s['runs']} run times measured above (from {min(t for r in s['repeats'] for t in r['run_seconds']):.1f} to {max(t for r in s['repeats'] for t in r['run_seconds']):.1f} s), gives these
efficiencies (total work / (N x the time the last worker ends); the simulation leaves out each run's process
start and the sweep's own start-up and end, which the measurement above includes):

| workers | {' | '.join(s['simulated_efficiency'])} |
|---|{'---|' * len(s['simulated_efficiency'])}
| efficiency | {' | '.join(f"{v:.3f}" for v in s['simulated_efficiency'].values())} |

Fewer runs than workers leave some idle: a plan of R runs of equal length on N workers takes ceil(R/N) run
times (docs/sweep.md).
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mpverify", default=os.path.join(os.path.dirname(__file__), "..", "..", "build", "mpverify"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    if args.workers < 2 or args.runs < 2 or args.runs % 2 or args.repeats < 1:
        ap.error("--workers >= 2, --runs an even number >= 2, --repeats >= 1")
    s = summary(args, measure(args))
    if args.json:
        print(json.dumps(s, indent=2))
    else:
        print(f"speed-up {s['speedup_median']:.2f} ({s['speedup_min']:.2f}-{s['speedup_max']:.2f}), efficiency "
              f"{s['efficiency_median']:.2f} ({s['efficiency_min']:.2f}-{s['efficiency_max']:.2f}) with "
              f"{args.workers} workers")
    if args.markdown:
        command = ("`experiments/regenerate-reports sweep_throughput` (`experiments/speed/bench_sweep.py --workers "
                   f"{args.workers} --runs {args.runs} --steps {args.steps} --repeats {args.repeats}`)")
        text = markdown(s, command)
        tmp = args.markdown + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, args.markdown)


if __name__ == "__main__":
    main()
