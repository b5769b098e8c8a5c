#!/usr/bin/python3
"""The Monitor's overhead on a training step, as ratios to the plain step.

Usage: PYTHONPATH=build/python /usr/bin/python3 experiments/speed/bench_monitor.py [--repeats 9] [--steps 100]
           [--threads 1] [--model cnn|mlp50m|mlp100m] [--device cpu|cuda] [--loops KEY,...] [--json]
           [--markdown FILE]

The models: `cnn`, a small CNN on 28x28 images (the default, for a CPU); `mlp50m`, five 3584-wide linear
layers with ReLU (51.4M parameters, batch 8), a large model for a CPU, where recording costs most against
the step (the weights, their gradients and updates are per parameter, the step's arithmetic per parameter
and example); `mlp100m`, eight 3584-wide linear layers with ReLU (102.8M parameters, batch 64), for a GPU,
where the model and its data stay on the device and each timed step ends with torch.cuda.synchronize().
--loops names the loops to time (default all four, below).

Four monitored loops on the same model, data and seed: Monitor(every=10), Monitor(every=1), a Monitor that
records only its first step (what the hooks and the provenance checks of every step cost), and
Monitor(every=10, provenance="recorded_steps") (module hooks on recorded steps only). Each is timed against
its own plain twin (forward, backward, SGD step), the two stepped in turn, one step each, so that the
machine's drift and noise hit both alike (the same code in both twins measures 0.99-1.00). Each repeat times
`--steps` steps after 3 warm-up steps and gives each ratio monitored / plain; the median and the range over
repeats are printed. Runs go to a temporary directory that is removed.
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import torch

import mpverify.torch as mt


NEVER = 10**9  # every=NEVER: the Monitor records its step 0 only (outside the timed steps)
# The monitored loops: (key, every, provenance mode).
LOOPS = (("every_10", 10, "every_step"), ("every_1", 1, "every_step"), ("hooks_only", NEVER, "every_step"),
         ("every_10_recorded_steps", 10, "recorded_steps"))


MODELS = {"cnn": "a small CNN (two 3x3 convolutions with max pooling, two linear layers, batch 32 of 28x28)",
          "mlp50m": "an MLP of five 3584-wide linear layers with ReLU (51.4M parameters, batch 8)",
          "mlp100m": "an MLP of eight 3584-wide linear layers with ReLU (102.8M parameters, batch 64)"}


def mlp100m_and_data(seed, steps, device, width=3584, layers=8, batch=64):
    torch.manual_seed(seed)
    parts = []
    for i in range(layers):
        parts += [torch.nn.Linear(width, width if i + 1 < layers else 10)] + ([torch.nn.ReLU()] if i + 1 < layers else [])
    g = torch.Generator().manual_seed(seed)
    data = [(torch.randn(batch, width, generator=g).to(device), torch.randint(0, 10, (batch,), generator=g).to(device))
            for _ in range(steps)]
    return torch.nn.Sequential(*parts).to(device), data


def model_and_data(seed, steps, model_name="cnn", device="cpu", batch=32):
    if model_name == "mlp100m":
        return mlp100m_and_data(seed, steps, device)
    if model_name == "mlp50m":
        return mlp100m_and_data(seed, steps, device, layers=5, batch=8)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(16 * 7 * 7, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    g = torch.Generator().manual_seed(seed)
    data = [(torch.randn(batch, 1, 28, 28, generator=g).to(device),
             torch.randint(0, 10, (batch,), generator=g).to(device)) for _ in range(steps)]
    return model.to(device), data


class Loop:
    """One training loop of the bench's CNN: plain (every=None) or under a Monitor."""

    def __init__(self, every, steps, out, provenance="every_step", model_name="cnn", device="cpu"):
        self.model, self.data = model_and_data(0, steps, model_name, device)
        self.cuda = device != "cpu"
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self.monitor = (mt.Monitor(self.model, self.opt, out=out, every=every, verbose=False, provenance=provenance)
                        if every else None)

    def step(self, i):
        """Seconds of step i: forward, backward, SGD step and, monitored, Monitor.step."""
        x, y = self.data[i]
        if self.cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        self.opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        if self.monitor:
            self.monitor.step(loss)
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - start

    def close(self):
        if self.monitor:
            self.monitor.close()


def paired_ratio(every, steps, out, provenance="every_step", model_name="cnn", device="cpu"):
    """The monitored loop's time over the plain loop's, the two stepped in turn (the plain step first on even
    steps, the monitored one first on odd steps), so that the machine's drift and the order hit both alike.
    3 untimed steps first; step 0, which every Monitor records, is one of them."""
    plain = Loop(None, steps + 3, None, model_name=model_name, device=device)
    monitored = Loop(every, steps + 3, out, provenance, model_name, device)
    seconds = {id(plain): 0.0, id(monitored): 0.0}
    for i in range(steps + 3):
        for loop in ((plain, monitored) if i % 2 == 0 else (monitored, plain)):
            t = loop.step(i)
            if i >= 3:
                seconds[id(loop)] += t
    monitored.close()
    return seconds[id(monitored)] / seconds[id(plain)]


def write_markdown(path, result):
    rows = "\n".join(
        f"| {label} | {result[key]['median']:.2f}x | {result[key]['min']:.2f}x to {result[key]['max']:.2f}x | {target} |"
        for key, label, target in (("every_10", "`Monitor(every=10)`", "1.10x"), ("every_1", "`Monitor(every=1)`", "2x"),
                                   ("hooks_only", "hooks and provenance checks only (no step recorded)", "-"),
                                   ("every_10_recorded_steps", '`Monitor(every=10, provenance="recorded_steps")`',
                                    "1.10x")) if key in result)
    missed = [f"{label} ({result[key]['median']:.2f}x against {t}x)"
              for key, label, t in (("every_10", "every=10", 1.10), ("every_1", "every=1", 2.0),
                                    ("every_10_recorded_steps", 'every=10 with provenance="recorded_steps"', 1.10))
              if key in result and result[key]["median"] > t]
    verdict = ("Targets missed: " + ", ".join(missed) + "." if missed else "Every target is met.")
    where = (f"a CPU without a GPU (torch {result['torch']}, {result['threads']} thread)" if result["device"] == "cpu"
             else f"{result['device_name']} (torch {result['torch']}; model and data on the device)")
    options = "" if (result["model"], result["device"]) == ("cnn", "cpu") else \
        f" --model {result['model']} --device {result['device']}"
    if result["loops"] != [key for key, _, _ in LOOPS]:
        options += " --loops " + ",".join(result["loops"])
    if (result["repeats"], result["steps"]) != (9, 100):
        options += f" --repeats {result['repeats']} --steps {result['steps']}"
    model = "" if result["model"] == "cnn" else f" of {MODELS[result['model']].split(' (')[0]}"
    text = f"""# The Monitor's overhead on a {"CPU" if result["device"] == "cpu" else "GPU"} training step{model}

Written by `PYTHONPATH=build/python /usr/bin/python3 experiments/speed/bench_monitor.py{options} --markdown
{result["report"]}` on {where}.
{MODELS[result['model']][0].upper() + MODELS[result['model']][1:]} trains with SGD
for {result['steps']} timed steps under `mpverify.torch.Monitor`, each step beside one of a plain twin loop
(the two stepped in turn, so that this machine's drift of 20-40% between runs hits both alike), {result['repeats']}
times; each ratio is the monitored loop's time over its twin's; the range is the spread over the repeats.

| loop | median ratio to the plain step | range | target |
|---|---|---|---|
{rows}

{verdict}

Recording a step measures every module output, output gradient, weight and weight gradient in C++ (one
pass over the float bits gives the rounding counters, the exponent histogram, the maximum and the norm;
the weights and their gradients go in one call each) and the lost updates of every parameter (decided
from the spacing of the study format and of fp32 around each weight, without an emulated addition). By
default every step, recorded or not, checks the outputs and output gradients of the modules that can make
a non-finite value (one count in C++ each), through Python hooks on those modules, and the parameter
gradients once after backward; with `provenance="recorded_steps"` those hooks are attached only for
recorded steps, and the other steps check only the loss and the parameter gradients.
"""
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--threads", type=int, default=1, help="torch's intra-op threads (default 1: less noise)")
    p.add_argument("--model", choices=sorted(MODELS), default="cnn", help="the model trained (see above)")
    p.add_argument("--device", default="cpu", help="where the model and its data live: cpu (default) or cuda")
    p.add_argument("--json", action="store_true")
    p.add_argument("--loops", default=",".join(key for key, _, _ in LOOPS),
                   help="the loops timed, comma-separated: " + ", ".join(key for key, _, _ in LOOPS))
    p.add_argument("--markdown", metavar="FILE", help="also write the result as a report (reports/monitor_overhead.md)")
    a = p.parse_args()
    loops = [loop for loop in LOOPS if loop[0] in a.loops.split(",")]
    unknown = set(a.loops.split(",")) - {key for key, _, _ in LOOPS}
    if unknown or not loops:
        p.error(f"--loops: unknown {', '.join(sorted(unknown)) or 'empty list'}; the loops are "
                + ", ".join(key for key, _, _ in LOOPS))
    if a.repeats < 1 or a.steps < 10:
        p.error("--repeats must be at least 1 and --steps at least 10")
    if a.device not in ("cpu", "cuda"):
        p.error(f"--device must be cpu or cuda, not {a.device!r}")
    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch sees no CUDA device here")
    torch.set_num_threads(a.threads)
    work = tempfile.mkdtemp(prefix="mpverify-bench-monitor-")
    ratios = {key: [] for key, _, _ in loops}
    try:
        for r in range(a.repeats):
            for key, every, provenance in loops:
                ratios[key].append(paired_ratio(every, a.steps, os.path.join(work, f"r{r}-{key}"), provenance,
                                                a.model, a.device))
            print(f"repeat {r + 1}/{a.repeats}: " + ", ".join(f"{key} {v[-1]:.3f}x" for key, v in ratios.items()),
                  file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {key: {"median": statistics.median(v), "min": min(v), "max": max(v), "ratios": v}
              for key, v in ratios.items()}
    result.update(repeats=a.repeats, steps=a.steps, threads=a.threads, torch=torch.__version__, model=a.model,
                  device=a.device, device_name=torch.cuda.get_device_name() if a.device == "cuda" else "cpu",
                  loops=[key for key, _, _ in loops], report=os.path.join("reports", os.path.basename(a.markdown or "")))
    if a.markdown:
        write_markdown(a.markdown, result)
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        for key, _, _ in loops:
            s = result[key]
            print(f"Monitor {key}: {s['median']:.3f}x the plain step (range {s['min']:.3f} to {s['max']:.3f} "
                  f"over {a.repeats} repeats of {a.steps} steps)")


if __name__ == "__main__":
    main()
