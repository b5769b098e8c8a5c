"""Dumper: a PyTorch model's tensors per step, for `mpverify analyze` and `mpverify swamp`.

    dumper = mpverify.torch.Dumper(model, "dump/", scaler=scaler, every=10)
    for step, (x, y) in enumerate(batches):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        with dumper.step(step, loss=loss):   # weights and gradients on entry, updates on exit
            scaler.step(opt)
            scaler.update()
    dumper.close()

Layout (docs/analysing-dumps.md): DIR/step-NNNNNN/ holds weights.safetensors
(before the step), grads.safetensors (the weight gradients UNSCALED: with a
scaler, multiplied by fp32(1 / fp64(scale)) as torch's unscale does, whether
or not the step unscaled them yet), activation_grads.safetensors (the
gradient of each leaf module's output, named by module, unscaled the same
way), updates.safetensors (after - before in float64, stored as float32) and
step.json ({"step", "scale", "found_inf", "skipped", "loss"}). found_inf: a
gradient held inf or NaN, as GradScaler decides it; skipped: the weights did
not change at all although some gradient was non-zero.
"""
import contextlib
import json
import os
import shutil

import torch

from .safetensors import _atomic_write, write_npy_dir, write_safetensors


class Dumper:
    def __init__(self, model, out_dir, scaler=None, every=1, fmt="safetensors", activation_grads=True):
        if fmt not in ("safetensors", "npy"):
            raise ValueError("fmt must be 'safetensors' or 'npy'")
        if every < 1:
            raise ValueError(f"every must be at least 1, not {every}")
        self.model, self.out_dir, self.scaler, self.every, self.fmt = model, str(out_dir), scaler, every, fmt
        self.params = {n: p for n, p in model.named_parameters() if p.requires_grad}
        self._activation_grads = {}
        self._handles = []
        if activation_grads:
            for name, module in model.named_modules():
                if next(module.children(), None) is None:
                    if getattr(module, "inplace", False):
                        module.inplace = False  # the output's gradient hook needs the output unmodified
                    self._handles.append(module.register_forward_hook(self._forward_hook(name or "model")))
        os.makedirs(self.out_dir, exist_ok=True)

    def _forward_hook(self, name):
        def hook(module, inputs, output):
            if isinstance(output, torch.Tensor) and output.requires_grad:
                output.register_hook(lambda g: self._keep(name, g))
        return hook

    def _keep(self, name, grad):
        previous = self._activation_grads.get(name)  # a module called twice: its gradients add up, as .grad does
        self._activation_grads[name] = grad.detach().clone() if previous is None else previous + grad.detach()

    def _unscale(self, tensors, scale):
        """torch's unscale: g * fp32(1 / fp64(scale)), in float32, rounded once to g's dtype."""
        tensors = {n: _dense(t) for n, t in tensors.items()}
        if scale == 1.0:
            return {n: t.detach().clone() for n, t in tensors.items()}
        inverse = torch.tensor(1.0 / scale, dtype=torch.float64).float()
        return {n: (t.detach().float() * inverse).to(t.dtype) for n, t in tensors.items()}

    def _write(self, step_dir, what, tensors):
        if self.fmt == "safetensors":
            write_safetensors(os.path.join(step_dir, what + ".safetensors"), tensors)
        else:
            write_npy_dir(os.path.join(step_dir, what), tensors)

    @contextlib.contextmanager
    def step(self, step, loss=None):
        """Wrap the optimizer step (scaler.step and scaler.update included) of training step `step`."""
        dump = step % self.every == 0
        step_dir = os.path.join(self.out_dir, f"step-{step:06d}")
        scale = float(self.scaler.get_scale()) if self.scaler is not None else 1.0
        before, info = {}, {}
        if dump:
            os.makedirs(step_dir, exist_ok=True)
            before = {n: p.detach().clone() for n, p in self.params.items()}
            # The gradients as backward left them (scaled), whatever the step does to them afterwards.
            grads = self._unscale({n: p.grad for n, p in self.params.items() if p.grad is not None}, scale)
            self._write(step_dir, "weights", before)
            if grads:
                self._write(step_dir, "grads", grads)
            if self._activation_grads:
                self._write(step_dir, "activation_grads", self._unscale(self._activation_grads, scale))
            found_inf = any(not bool(torch.isfinite(g).all()) for g in grads.values())
            info = {"step": step, "scale": scale, "found_inf": found_inf,
                    "loss": float(loss.detach().float()) if isinstance(loss, torch.Tensor) else loss}
        try:
            yield
        except BaseException:
            # A step that raised is no step: what it half wrote (weights, gradients) is removed, so that no
            # reader takes it for a skipped step with all-zero updates.
            if dump:
                shutil.rmtree(step_dir, ignore_errors=True)
            self._activation_grads.clear()
            raise
        else:
            if dump:
                updates = {n: (p.detach().double() - before[n].double()).float() for n, p in self.params.items()}
                self._write(step_dir, "updates", updates)
                info["skipped"] = all(not bool(u.any()) for u in updates.values()) and any(
                    bool(_dense(p.grad).any()) for p in self.params.values() if p.grad is not None)
                if info["loss"] is not None and info["loss"] != info["loss"]:
                    info["loss"] = None  # JSON has no NaN
                _atomic_write(os.path.join(step_dir, "step.json"), [json.dumps(info).encode()])
            self._activation_grads.clear()

    def close(self):
        for h in self._handles:
            h.remove()
        self._handles = []


def _dense(t):
    """A sparse gradient (nn.Embedding(sparse=True)) as the dense tensor it stands for: the files hold arrays."""
    return t.to_dense() if t.is_sparse else t
