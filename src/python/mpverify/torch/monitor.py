"""Monitor: mpverify's recorders on a user's PyTorch training loop.

    monitor = mpverify.torch.Monitor(model, optimizer, scaler=scaler, out="runs/mine")
    for x, y in batches:
        ...  # forward, backward, scaler.step(optimizer), scaler.update() as usual
        monitor.step(loss)

writes the run directory `mpverify train` writes (steps.jsonl, tensors.jsonl,
histograms.jsonl, summary.json; docs/python.md), so `mpverify compare-runs`,
`mpverify gate` and the study's report read it unchanged.

How it sees a step: forward hooks on every leaf module (activations), full
backward hooks (activation gradients, as backward computes them: at the loss
scale), and a wrapper around optimizer.step (weights and unscaled weight
gradients before the update, the update after it) and scaler.update (the
scale the step ran with, found_inf). Every tensor is measured by the same
C++ recorder as `mpverify train` (training/step_recorder.h): against its own
format, or against `study_format` where it is float32.
"""
import atexit
import math
import os
import sys
import weakref

import torch

from .. import _core
from .._tensors import as_input
from . import _device_stats
from ._ranks import Ranks, raw_counts
from ._formats import format_of
from .provenance import (DeferredChecks, Provenance, count_nonfinite, count_tensor, dense, inputs_count_tensor,
                         passes_finite, torch_count_nonfinite)
from .run_files import JsonLines, NullLines


class Monitor:
    """Records a training run into `out`; call step(loss) once per optimizer step.

    model, optimizer: the user's. scaler: a torch GradScaler or mpverify.torch.GradScaler (None: scale 1,
    found_inf from the gradients). study_format: what float32 tensors are measured against (fp16).
    every: record tensors every N-th step (every step still logs loss, scale, skipped, found_inf and the
    first non-finite value). histograms: write histograms.jsonl. seed, name, data, config: written into
    summary.json's config (the parity gate pairs runs by seed and requires equal model, data, steps,
    batch_size and optimizer on both sides). provenance: "every_step" (hooks on every step find the module
    of any step's first non-finite value) or "recorded_steps" (module hooks only on recorded steps; the
    other steps check only the loss and the parameter gradients, and cost no hook at all). statistics:
    "auto" (a dense float32 CPU tensor is read in place by the C++ recorder, any other tensor is counted
    with torch operations on its own device, and only the counts cross to the host) or "torch" (every
    tensor counted with torch operations: what a CUDA run computes, on any device). Both give the same
    counts and histograms; a tensor the torch path cannot count exactly (a scale that is not a power of
    two, a product outside float's range, a format its thresholds cannot describe) is copied to the host."""

    def __init__(self, model, optimizer, scaler=None, study_format="fp16", every=1, out="runs/monitor",
                 histograms=True, seed=None, name=None, data="user", config=None, verbose=True,
                 provenance="every_step", statistics="auto"):
        if every < 1:
            raise ValueError(f"every must be at least 1, not {every}")
        if provenance not in PROVENANCE_MODES:
            raise ValueError(f"provenance must be one of {', '.join(PROVENANCE_MODES)}, not {provenance!r}")
        if statistics not in STATISTICS_MODES:
            raise ValueError(f"statistics must be one of {', '.join(STATISTICS_MODES)}, not {statistics!r}")
        self.statistics = statistics
        _core.format_info(study_format)  # raises on an unknown name before anything is written
        self.model, self.optimizer, self.scaler = model, optimizer, scaler
        self.study_format, self.every, self.out, self.histograms = study_format, every, str(out), histograms
        self.verbose, self.provenance = verbose, provenance
        self._ranks = Ranks()  # under torch.distributed: rank 0 writes the job's one run directory
        inner = model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model
        self._config = {"model": name or type(inner).__name__, "data": data, "seed": seed,
                        "optimizer": type(optimizer).__name__.lower(), "scaler": _scaler_name(scaler),
                        "backend": "torch", "study_format": study_format, "record_every": every,
                        "recipe": None, "batch_size": None,
                        **({"world_size": self._ranks.world} if self._ranks.active else {}), **(config or {})}
        self._recorder = _core.StepRecorder(study_format)
        # steps.jsonl: written at recorded steps, at a non-finite step, and at least once a second.
        lines = JsonLines if self._ranks.writes else (lambda path, **kw: NullLines())
        self._steps = lines(os.path.join(self.out, "steps.jsonl"), seconds=1.0)
        self._tensors = lines(os.path.join(self.out, "tensors.jsonl"), every_steps=10)
        self._histograms = lines(os.path.join(self.out, "histograms.jsonl"), every_steps=10)
        self._provenance = Provenance()
        # Named as in the user's model: a DistributedDataParallel wrapper's "module." is left out.
        self._names = {m: n or "model" for n, m in inner.named_modules()}
        self._params = {p: n for n, p in inner.named_parameters() if p.requires_grad}
        self._pending = []  # under torch.distributed: the step's records, combined over the ranks at its end
        # Provenance checks without a wait for the device at each: on a model off the CPU, or statistics="torch".
        self._defer = statistics == "torch" or any(p.device.type != "cpu" for p in self._params)
        self._deferred = DeferredChecks()
        self._deferred_grads = []
        self._weight_buffers = {}  # parameter -> its copy before a recorded step (on the CPU: _copy_of)
        self._handles = []
        self._batch_handle = None  # the model's forward pre-hook, until the batch size and the recipe are known
        self._step = 0
        self._skipped = 0
        self._last_loss = None
        self._printed_nonfinite = False
        self._evaluation = None
        self._closed = False
        self._attach()
        self._begin_step()
        atexit.register(_close_at_exit, weakref.ref(self))

    # --- public -------------------------------------------------------------------------------

    def step(self, loss):
        """Ends the step: logs it (loss: the unscaled loss, a tensor or a float) and starts the next."""
        value = loss.item() if isinstance(loss, torch.Tensor) else float(loss)  # exact for every float dtype
        if self._defer:
            self._resolve_deferred()
        first = self._provenance.first
        if not _finite(value) and (first is None or first["pass"] == "backward" or not self._hook_handles["checks"]):
            # The loss was non-finite in forward, before every gradient backward made from it (a function
            # after the last module made it): it comes first. Without module hooks nothing else was checked.
            self._provenance.first = {"layer": "loss", "tensor": "loss", "pass": "forward", "count": 1}
            if self._hook_handles["checks"]:
                self._provenance.first["after"] = self._last_forward
        self._check_param_grads()  # when neither the optimizer's step nor the scaler's update ran
        losses = None
        if self._ranks.active:
            value, losses, self._provenance.first = self._combine_ranks(value)
        line = self._step_line(value)
        if losses is not None:
            line["loss_by_rank"] = losses
        if self._recording:
            for t in self._recorder.take_tensor_lines_text():
                self._tensors.append_text(t)
            for h in self._recorder.take_histogram_lines_text():
                self._histograms.append_text(h)
        first = line["nonfinite"]
        self._steps.append(dict(line, nonfinite=dict(first) if first else None))  # ours: the caller gets line
        self._tensors.end_step()
        self._histograms.end_step()
        self._steps.end_step(urgent=self._recording or first is not None)
        self._drop_batch_hook()
        self._report_nonfinite(line)
        self._last_loss = value
        self._skipped += bool(line["skipped"])
        self._step += 1
        self._begin_step()
        return line

    def evaluation(self, test_accuracy=None, test_loss=None, test_size=None, **extra):
        """Your held-out evaluation, for `mpverify gate --metric accuracy|test_loss|NAME`: test_accuracy in
        [0, 1], test_loss, test_size (the number of test examples; equal on every run gated) and any figure of
        your own by name (perplexity=..., bleu=...). Give those you have: one left out is absent from
        summary.json (a language model has no accuracy). A non-finite figure (nan, inf) marks the run
        diverged and is written as null."""
        figures = {k: v for k, v in dict(test_accuracy=test_accuracy, test_loss=test_loss, **extra).items()
                   if v is not None}
        numbers = {k: v for k, v in figures.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if not numbers:
            raise ValueError("evaluation() needs at least one figure: test_accuracy, test_loss or one of your own "
                             "(perplexity=...)")
        if test_accuracy is not None and math.isfinite(test_accuracy) and not 0 <= test_accuracy <= 1:
            raise ValueError(f"test_accuracy is a fraction in [0, 1], not {test_accuracy}")
        diverged = any(not math.isfinite(v) for v in numbers.values())
        self._evaluation = {**figures, **({"test_size": test_size} if test_size is not None else {}),
                            "diverged": diverged}
        self._write_summary()

    def close(self):
        """Publishes every file and writes summary.json; removes the hooks. Also runs at interpreter exit."""
        if self._closed:
            return
        for group in self._hook_handles:
            self._set_hooks(group, False)
        for h in self._handles:
            h.remove()
        self._handles = []
        self._drop_batch_hook(always=True)
        self._restore_wrappers()
        for log in (self._tensors, self._histograms, self._steps):
            log.close()
        self._write_summary()
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- one step -----------------------------------------------------------------------------

    def _begin_step(self):
        self._recording = self._step % self.every == 0
        if not self._closed:
            self._set_hooks("checks", self._recording or self.provenance == "every_step")
            self._set_hooks("passive", self._recording)
        self._recorder.begin_step(self._step, self._recording, self._recording and self.histograms)
        self._provenance.begin_step()
        self._scale = float(self.scaler.get_scale()) if self.scaler is not None else 1.0
        self._found_inf = None
        self._optimizer_stepped = False
        self._last_backward = None  # the module whose output gradient backward reached last
        self._backward_calls = 0  # output-gradient hooks fired so far this step
        self._backward_index = {}  # module name -> the order of its output-gradient hook's last firing
        self._first_backward_index = None  # that order for the hook that found this step's first non-finite value
        self._last_forward = None  # the checked module whose forward hook ran last in the current forward pass
        self._in_backward = False  # backward ran since that forward pass (a next forward starts afresh)
        self._params_checked = False
        self._deferred.events.clear()
        self._deferred_grads = []
        self._grads_recorded = False
        self._lost = {}
        self._calls = {}  # (layer, tensor) -> records made of it this step
        self._unscaled = [0, 0]  # weight gradients' non-zero finite values, and those that become 0 at scale 1

    def _step_line(self, loss):
        found_inf = self._found_inf if self._found_inf is not None else self._provenance.first is not None
        line = {"step": self._step, "loss": loss, "scale": self._scale,
                "skipped": not self._optimizer_stepped, "found_inf": bool(found_inf),
                "recorded": self._recording}
        if self._recording:
            g, a = self._recorder.gradients(), self._recorder.activations()
            line.update(underflow_rate=g["underflow_rate"], subnormal_rate=g["subnormal_rate"],
                        overflow_rate=g["overflow_rate"], activation_underflow_rate=a["underflow_rate"],
                        activation_overflow_rate=a["overflow_rate"],
                        weight_grad_underflow_rate_unscaled=_rate(self._unscaled[1], self._unscaled[0]))
            by_format = self._recorder.by_format()
            if len(by_format) > 1:  # the rates above pool the formats (bf16 autocast: bf16 and the study format)
                line["by_format"] = by_format
            line.update(self._lost_update_fields())
        line["nonfinite"] = self._provenance.first
        return line

    def _lost_update_fields(self):
        w, s = self._lost.get("with_master"), self._lost.get("without_master")
        if w is None:
            return {}
        return {"lost_update_rate": _rate(w["lost"], w["updates"]),
                "lost_update_rate_without_master": _rate(s["lost"], s["updates"]),
                "lost_update_ratio_needed_rate_without_master": _rate(s["ratio_needed"], s["updates"]),
                "lost_update_ratio_sufficient_rate_without_master": _rate(s["ratio_sufficient"], s["updates"])}

    def _combine_ranks(self, loss):
        """Under torch.distributed, at the end of every step on every rank: the step's records combined over
        the ranks and recorded by rank 0; (the mean loss, the ranks' losses, the job's first non-finite
        value)."""
        records, self._pending = self._ranks.combine_records(self._pending), []
        if self._ranks.writes:
            for layer, tensor, role, pass_, fmt, scale, counts in records:
                self._recorder.record_counted(layer, tensor, role, pass_, fmt, scale, counts)
        return self._ranks.combine_step(loss, self._provenance.first)

    def _report_nonfinite(self, line):
        first = line["nonfinite"]
        if first is None or self._printed_nonfinite or not self.verbose or not self._ranks.writes:
            return
        self._printed_nonfinite = True
        print(f"mpverify: step {line['step']}: the first non-finite value came from '{first['layer']}' "
              f"({first['tensor']}, {first['pass']}); later ones are in {self.out}/steps.jsonl", file=sys.stderr)

    # --- hooks --------------------------------------------------------------------------------

    def _attach(self):
        self._leaves = [(m, n) for m, n in self._names.items() if next(m.children(), None) is None]  # containers: their leaves are recorded
        for module, _ in self._leaves:
            if getattr(module, "inplace", False):
                module.inplace = False  # an in-place op would rewrite the output whose gradient we hook; same values
        self._forward_hooks = {name: self._forward_hook(name, module) for module, name in self._leaves}  # made once
        passive = [passes_finite(module) for module, _ in self._leaves]
        checked = {n for (_, n), p in zip(self._leaves, passive) if not p}
        # A parameter of a checked leaf module has no hook: its gradient is checked once after backward
        # (_check_param_grads), placed where its hook would have fired. The others keep a hook.
        self._placed_params = [(p, n) for p, n in self._params.items() if _owner(n) in checked]
        self._placed_tensors = [p for p, _ in self._placed_params]
        self._param_tensors = list(self._params)
        hooked = [(p, n) for p, n in self._params.items() if _owner(n) not in checked]
        # Two groups, attached per step by _begin_step: the checks (the forward hooks of the modules that can
        # make a non-finite value, and the other parameters' gradient hooks; provenance="recorded_steps":
        # recorded steps only) and the passive modules' forward hooks, which only record (passes_finite:
        # nothing to check), so that on an unrecorded step those modules keep torch's call path without hooks.
        self._hook_targets = {
            "checks": [(m.register_forward_hook, self._forward_hooks[n]) for (m, n), p in zip(self._leaves, passive) if not p]
                      + [(p.register_hook, self._param_grad_hook(n)) for p, n in hooked],
            "passive": [(m.register_forward_hook, self._forward_hooks[n]) for (m, n), p in zip(self._leaves, passive) if p]}
        self._hook_handles = {"checks": [], "passive": []}
        self._batch_handle = self.model.register_forward_pre_hook(self._batch_hook)
        self._wrap_optimizer()
        if self.scaler is not None:
            self._wrap_scaler()

    def _set_hooks(self, group, on):
        """Attaches (on) or removes one group of hooks ("checks" or "passive")."""
        handles = self._hook_handles[group]
        if on == bool(handles):
            return
        if on:
            handles.extend(register(hook) for register, hook in self._hook_targets[group])
        else:
            for h in handles:
                h.remove()
            handles.clear()

    def _drop_batch_hook(self, always=False):
        """Removes the model's forward pre-hook once it has seen the batch size and the recipe (a hook on the
        model takes it off torch's call path without hooks). Not from inside the hook: torch is iterating
        over the hooks then."""
        if self._batch_handle is not None and (always or (self._config["batch_size"] is not None
                                                          and self._config["recipe"] is not None)):
            self._batch_handle.remove()
            self._batch_handle = None

    def _check_param_grads(self):
        """Once per step, after backward: the gradients of the parameters without a hook. Backward computes a
        module's parameter gradients right after its output-gradient hook fires (the hook runs as the module's
        backward starts, and torch accumulates parameter gradients as soon as they are ready), so each is
        placed there: the step's first non-finite value is the one the hooks would have named (of one
        module's parameters, the first in the model's order). Without module hooks on this step
        (provenance="recorded_steps"), _first_unhooked names the first in the model's order. With deferred checks
        (a model off the CPU, statistics="torch") the counts are taken here and placed when the step ends."""
        if self._params_checked:
            return
        self._params_checked = True
        tensors = self._placed_tensors if self._hook_handles["checks"] else self._param_tensors
        if self._defer:  # counted on the device; placed when the step ends (_resolve_deferred)
            self._deferred_grads = [count_tensor(p.grad) for p in tensors]
            return
        counts = [c if c >= 0 else torch_count_nonfinite(p.grad)  # -1: not read in place by the C++ count
                  for p, c in zip(tensors, _core._count_nonfinite_grads(tensors))]  # one call for every gradient
        if self._hook_handles["checks"]:
            self._place_param_grads(counts)
        else:
            self._first_unhooked(counts)

    def _place_param_grads(self, counts):
        """The placed parameters' non-finite counts, each placed right after its module's output-gradient hook."""
        first = self._provenance.first
        if first is not None and self._first_backward_index is None:
            return  # found in forward: before every gradient
        limit = self._first_backward_index if first is not None else float("inf")
        best = None
        for (p, name), count in zip(self._placed_params, counts):
            # A parameter whose module backward never reached has a stale or no gradient: after everything.
            at = self._backward_index.get(_owner(name), float("inf"))
            if (best is None or at < best[0]) and at < limit and count > 0:
                best = (at, name, count)
        if best is not None:
            self._provenance.first = None  # the parameter's gradient came before what the hooks found
            layer, _, tensor = best[1].rpartition(".")
            self._provenance.found(layer or "model", tensor + ".grad", "backward", best[2])

    def _first_unhooked(self, counts):
        """A step without module hooks: its first non-finite parameter gradient, in the model's order."""
        if self._provenance.first is not None:
            return
        for name, count in zip(self._params.values(), counts):
            if count > 0:
                layer, _, tensor = name.rpartition(".")
                self._provenance.found(layer or "model", tensor + ".grad", "backward", count)
                return

    def _batch_hook(self, module, inputs):
        if self._config["batch_size"] is None and inputs and isinstance(inputs[0], torch.Tensor) and inputs[0].dim():
            self._config["batch_size"] = int(inputs[0].shape[0]) * self._ranks.world  # the global batch
        if self._config["recipe"] is None:
            self._config["recipe"] = _recipe_name(self.model)

    def _forward_hook(self, name, module):
        grad_hook = self._output_grad_hook(name)  # made once: a closure per forward would cost every step
        passive = passes_finite(module)

        def hook(module, inputs, output):
            if not isinstance(output, torch.Tensor):
                return
            if self._in_backward:  # the next forward pass of gradient accumulation
                self._in_backward, self._last_forward = False, None
            if not passive:  # a passive module's output is not checked, so "after" never names one
                if self._defer:
                    self._deferred.add("forward", (name, self._last_forward), count_tensor(output),
                                       inputs_count_tensor(inputs, output.device))
                else:
                    self._provenance.check_forward(name, output, inputs, self._last_forward)
                self._last_forward = name
            if self._recording and not _is_view_of_input(output, inputs):
                self._record(name, "y", "activation", "forward", output)
            if output.requires_grad and (self._recording or not passive):
                output.register_hook(grad_hook)
        return hook

    def _output_grad_hook(self, name):
        """The gradient of a module's output (its dy, at the loss scale), as backward reaches it."""
        def hook(grad):
            index = self._backward_calls
            self._backward_calls += 1
            self._in_backward = True
            self._backward_index[name] = index  # the last: a module called twice has its weights' gradients after both
            if self._defer:
                self._deferred.add("output_grad", (self._last_backward, index), count_tensor(grad))
            elif self._provenance.first is None:
                self._found_output_grad(self._last_backward, index, count_nonfinite(grad))
            self._last_backward = name
            if self._recording:
                self._record(name, "dy", "activation_grad", "backward", grad)
        return hook

    def _param_grad_hook(self, name):
        layer, _, tensor = name.rpartition(".")

        def hook(grad):
            if self._defer:
                self._deferred.add("param", (layer or "model", tensor + ".grad"), count_tensor(grad))
            else:
                self._provenance.check(layer or "model", tensor + ".grad", "backward", grad)
        return hook

    def _found_output_grad(self, previous, index, count):
        """A non-finite gradient where a module's backward starts: the loss produced it when no module went
        backward before, else the module whose backward ran last (its dx is this dy)."""
        if self._provenance.first is None and count:
            self._provenance.found(previous or "loss", "dx" if previous else "dloss", "backward", count)
            self._first_backward_index = index

    def _resolve_deferred(self):
        """At the end of a step with deferred checks: the step's counts in one copy, the checks replayed in
        their order, then the parameter gradients placed, as the checks one by one would have done."""
        self._check_param_grads()  # takes the parameters' counts when nothing did yet
        events, grads = self._deferred.take(self._deferred_grads)
        for kind, what, counts in events:
            if kind == "forward":
                self._provenance.found_forward(what[0], counts[0], counts[1], what[1])
            elif kind == "output_grad":
                self._found_output_grad(what[0], what[1], counts[0])
            else:
                self._provenance.found(what[0], what[1], "backward", counts[0])
        if self._hook_handles["checks"]:
            self._place_param_grads(grads)
        else:
            self._first_unhooked(grads)

    def _record(self, layer, tensor, role, pass_, t, scale=1.0):
        """Measures t (nothing for a dtype without a format); a dense float32 CPU tensor is read in place.

        A module called more than once in a step (a shared block) records each call: the second record of
        its "y" is "y#2", and so on, in the order recorded (backward reaches the last call first), so that
        every (layer, tensor) of a step is one record, as compare-runs requires."""
        key = (layer, tensor)
        calls = self._calls.get(key, 0) + 1
        self._calls[key] = calls
        if calls > 1:
            tensor = f"{tensor}#{calls}"
        self._record_in_order([(layer, tensor, role, pass_, t, scale)])

    def _counts_in_torch(self, t):
        """True where t is counted with torch operations on its own device (statistics, above)."""
        return self.statistics == "torch" or t.device.type != "cpu"

    def _record_in_order(self, entries):
        """Records each (layer, tensor, role, pass, t, scale) in order, where it lives: counted with torch on
        its device (_device_stats), else in C++ (dense float32 CPU tensors read in place, in one call for
        consecutive ones; others copied). Returns each recorded entry's (nonzero_finite, underflow_to_zero),
        in order; an entry whose dtype has no format is not recorded and has none."""
        out, batch = [], []
        for layer, tensor, role, pass_, t, scale in entries:
            fmt = format_of(t.dtype)
            if fmt is None:
                continue
            if self._ranks.active:  # counted now, recorded once combined over the ranks (_combine_ranks)
                counts = raw_counts(dense(t), self._recorder.target_format(fmt), scale, self._counts_in_torch(t))
                self._pending.append((layer, tensor, role, pass_, fmt, scale, counts))
                out.append((counts["elements"] - counts["zeros_in"] - counts["nonfinite_in"],
                            counts["underflow_to_zero"]))
                continue
            counts = None
            if self._counts_in_torch(t):
                counts = _device_stats.tensor_counts(dense(t), self._recorder.target_format(fmt), scale)
            if counts is not None:
                out.extend(self._recorder.record_many(batch))  # the lines stay in the order of the entries
                batch = []
                out.append(self._recorder.record_counted(layer, tensor, role, pass_, fmt, scale, counts))
            else:
                batch.append(_many_item(layer, tensor, role, pass_, t, scale))
        out.extend(self._recorder.record_many(batch))
        return out

    # --- optimizer and scaler ---------------------------------------------------------------------

    def _wrap_optimizer(self):
        original = self.optimizer.step
        self._original_step = original

        def step(*args, **kwargs):
            self._optimizer_stepped = True
            self._record_weight_grads()
            before = self._record_weights() if self._recording else None
            result = original(*args, **kwargs)
            if before is not None:
                self._record_updates(before)
            return result
        self.optimizer.step = step

    def _wrap_scaler(self):
        original = self.scaler.update
        self._original_update = original

        def update(*args, **kwargs):
            self._scale = float(self.scaler.get_scale())
            self._found_inf = _scaler_found_inf(self.scaler, self.optimizer)
            self._record_weight_grads()  # a skipped step: the optimizer never ran
            return original(*args, **kwargs)
        self.scaler.update = update

    def _restore_wrappers(self):
        if getattr(self.optimizer, "step", None) is not self._original_step:
            self.optimizer.step = self._original_step
        if self.scaler is not None:
            self.scaler.update = self._original_update

    def _record_weight_grads(self):
        """The weight gradients as the optimizer sees them (unscaled), measured at the step's scale, in one
        call. At scale 1 that measure is also the unscaled one; at another scale each is measured again at 1."""
        if self._grads_recorded:
            return
        self._grads_recorded = True
        self._check_param_grads()
        if not self._recording:
            return
        entries, grads = [], []
        for p, name in self._params.items():
            if p.grad is not None and format_of(p.grad.dtype) is not None:
                layer, _, tensor = name.rpartition(".")
                g = dense(p.grad)  # sparse (nn.Embedding(sparse=True)): recorded as the dense gradient
                entries.append((layer or "model", tensor + ".grad", "weight_grad", "backward", g, self._scale))
                grads.append(g)
        counts = self._record_in_order(entries)
        for g, (nonzero, to_zero) in zip(grads, counts, strict=True):
            if self._scale != 1.0:
                nonzero, to_zero = self._unscaled_counts(g)
            self._unscaled[0] += nonzero
            self._unscaled[1] += to_zero

    def _unscaled_counts(self, g):
        """(nonzero finite, underflowing to zero) of a weight gradient at scale 1, where it lives."""
        target = self._recorder.target_format(format_of(g.dtype))
        c = _device_stats.tensor_counts(g, target, 1.0) if self._counts_in_torch(g) else None
        if c is not None:
            return c["elements"] - c["zeros_in"] - c["nonfinite_in"], c["underflow_to_zero"]
        array, bits = as_input(g)
        s = _core.tensor_stats(array, bits, target, 1.0)
        return s["nonzero_finite"], s["underflow_to_zero"]

    def _record_weights(self):
        before, entries = {}, []
        for p, name in self._params.items():
            layer, _, tensor = name.rpartition(".")
            entries.append((layer or "model", tensor, "weight", "optimizer", p, 1.0))
            before[p] = self._copy_of(p)
        self._record_in_order(entries)
        return before

    def _copy_of(self, p):
        """The weights before the optimizer's step. On the CPU, into a buffer kept from one recorded step to
        the next: a fresh copy of a large model's weights is fresh memory each time, whose first touch of
        each page cost more than the copy (0.56 s of a 1.4 s step at 51M parameters); the memory held is the
        copy every recorded step needs anyway. On a GPU, a clone: its caching allocator reuses the memory,
        and a copy of the weights is not held between recorded steps."""
        if not p.is_cpu:
            return p.detach().clone()
        buffer = self._weight_buffers.get(p)
        if buffer is None or buffer.shape != p.shape or buffer.dtype != p.dtype:
            buffer = self._weight_buffers[p] = torch.empty_like(p, memory_format=torch.contiguous_format)
        return buffer.copy_(p.detach())

    def _record_updates(self, before):
        """The update each weight received (after - before, in float64, as float32) and the lost updates it
        would suffer: with an fp32 master copy, and stored in the weights' format (study_format for fp32)."""
        for p, w in before.items():
            own = format_of(w.dtype)
            stored = own if own not in (None, "fp32") else self.study_format
            if self._counts_in_torch(w):
                counts = _device_stats.lost_update_counts(w, p, stored)  # on their device
            else:
                counts = _core._lost_updates_of_step_torch(w, p, stored)  # float32 on the CPU: read in place
            if counts is None:
                (b, b_bits), (a, a_bits) = as_input(w), as_input(p)
                counts = _core.lost_updates_of_step(b, b_bits, a, a_bits, stored)
            _add_counts(self._lost, "with_master", counts["with_master"])
            _add_counts(self._lost, "without_master", counts["without_master"])

    def _write_summary(self):
        if not self._ranks.writes:
            return
        config = dict(self._config, steps=self._step)
        summary = {"config": config, "steps": self._step, "skipped_steps": self._skipped, "aborted": False,
                   "final_loss": self._last_loss, "final_scale": float(self.scaler.get_scale()) if self.scaler else 1.0,
                   "thresholds": self._recorder.thresholds()}
        if self._evaluation is not None:
            summary["evaluation"] = self._evaluation
        _core.write_summary(self.out, summary)


PROVENANCE_MODES = ("every_step", "recorded_steps")
STATISTICS_MODES = ("auto", "torch")


def _record_item(layer, tensor, role, pass_, t, scale):
    """The arguments of StepRecorder.record for t, or None for a dtype without a format. A sparse t (an
    activation gradient made by an op with a sparse backward) is recorded as the dense tensor it stands for:
    only tensors the in-place readers refused reach here, so a dense float32 one never pays the check."""
    fmt = format_of(t.dtype)
    if fmt is None:
        return None
    array, bits = as_input(dense(t))
    return layer, tensor, role, pass_, array, bits, fmt, scale


def _many_item(layer, tensor, role, pass_, t, scale):
    """record_many's item for t: the tensor itself where the core reads it in place (dense float32 on the
    CPU), else record()'s arguments; None for a dtype without a format."""
    if t.dtype is torch.float32 and t.is_cpu and t.layout is torch.strided and t.is_contiguous():
        return layer, tensor, role, pass_, t, scale
    return _record_item(layer, tensor, role, pass_, t, scale)


def _owner(param_name):
    """The name of the module a parameter belongs to, as Monitor._names names modules ("model": the root)."""
    return param_name.rpartition(".")[0] or "model"


def _is_view_of_input(output, inputs):
    """True for a module whose output is its input or a reshape of it (Flatten, Identity, Dropout in eval):
    no new values, measured where they were made. Its output's gradient is still recorded: a custom
    autograd function can pass values through in forward and change them in backward."""
    ptr, n = output.data_ptr(), output.numel()
    return any(isinstance(i, torch.Tensor) and i.data_ptr() == ptr and i.numel() == n for i in inputs)


def _finite(v):
    return v == v and v not in (float("inf"), float("-inf"))


def _rate(n, d):
    return n / d if d else 0.0


def _add_counts(into, key, counts):
    total = into.setdefault(key, {"updates": 0, "lost": 0, "ratio_needed": 0, "ratio_sufficient": 0})
    for k in total:
        total[k] += counts[k]


def _scaler_name(scaler):
    """The strategy's name; a disabled scaler (torch's CUDA GradScaler on a CPU run disables itself) is named
    as such, since it scales nothing."""
    if scaler is None:
        return "none"
    name = getattr(scaler, "strategy", None) or "torch"
    is_enabled = getattr(scaler, "is_enabled", None)
    return f"{name} (disabled)" if callable(is_enabled) and not is_enabled() else name


def _scaler_found_inf(scaler, optimizer):
    """found_inf of this step: mpverify's GradScaler says it; torch's keeps it per optimizer and device."""
    if hasattr(scaler, "found_inf") and callable(scaler.found_inf):
        return bool(scaler.found_inf(optimizer))
    state = getattr(scaler, "_per_optimizer_states", {}).get(id(optimizer), {})
    return any(float(v) > 0 for v in state.get("found_inf_per_device", {}).values())


def _recipe_name(model):
    """torch's recipe as far as a forward pass shows it: autocast and its dtype, or the parameters' dtype."""
    if torch.is_autocast_enabled():
        return "autocast-" + str(torch.get_autocast_gpu_dtype()).replace("torch.", "")
    if torch.is_autocast_cpu_enabled():
        return "autocast-" + str(torch.get_autocast_cpu_dtype()).replace("torch.", "")
    p = next(model.parameters(), None)
    return str(p.dtype).replace("torch.", "") if p is not None else "float32"


def _close_at_exit(ref):
    monitor = ref()
    if monitor is not None:
        monitor.close()
