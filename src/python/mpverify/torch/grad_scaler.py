"""A GradScaler that runs anywhere torch does, with any of mpverify's loss-scale rules.

torch.cuda.amp.GradScaler disables itself without CUDA (torch < 2.3 has no CPU
kernels for its unscale and update), so a CPU run of a mixed-precision recipe
has no loss scaling at all. This class has GradScaler's interface (scale,
unscale_, step, update, get_scale, is_enabled, state_dict) and takes its scale
rule from mpverify.Scaler: "torch" (GradScaler's own rule, bit for bit),
"apex", "deepspeed", "megatron", "keras", "static" or "none".

Unscaling follows torch's _unscale_grads_ (torch/cuda/amp/grad_scaler.py):
inv_scale = fp32(1 / fp64(scale)) computed in double and rounded once to
float32, each gradient multiplied by it in its own dtype, found_inf set when
any unscaled gradient holds inf or NaN.
"""
import torch

from .. import Scaler


class GradScaler:
    def __init__(self, strategy="torch", enabled=True, **options):
        self.strategy = strategy
        self._scaler = Scaler(strategy, **options)
        self._enabled = enabled
        self._found_inf = {}   # id(optimizer) -> bool, this step
        self._unscaled = set()  # id(optimizer) already unscaled this step
        self.last_step = None   # the strategy's result of the last update(): scale_used, skipped, aborted

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        """The scale the current step runs with (a Python float, as GradScaler.get_scale)."""
        return float(self._scaler.scale) if self._enabled else 1.0

    def scale(self, outputs):
        if not self._enabled:
            return outputs
        s = torch.tensor(self._scaler.scale, dtype=torch.float32)
        if isinstance(outputs, torch.Tensor):
            return outputs * s.to(outputs.device)
        return type(outputs)(self.scale(o) for o in outputs)

    def unscale_(self, optimizer):
        if not self._enabled:
            return
        if id(optimizer) in self._unscaled:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update()")
        inv = torch.tensor(1.0 / float(self._scaler.scale), dtype=torch.float64).float()
        found = False
        with torch.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    # In float32 and rounded once to the gradient's dtype, as torch's kernel computes it.
                    p.grad.copy_(p.grad.float() * inv)
                    found = found or not bool(torch.isfinite(p.grad).all())
        self._found_inf[id(optimizer)] = found
        self._unscaled.add(id(optimizer))

    def found_inf(self, optimizer):
        """Whether this step's unscaled gradients of `optimizer` held inf or NaN (None before unscale_)."""
        return self._found_inf.get(id(optimizer))

    def step(self, optimizer, *args, **kwargs):
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if id(optimizer) not in self._unscaled:
            self.unscale_(optimizer)
        if self._found_inf[id(optimizer)]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        if not self._enabled:
            return
        if new_scale is not None:
            raise NotImplementedError("update(new_scale): set the scale through the strategy's options instead")
        found = any(self._found_inf.values())
        self.last_step = self._scaler.step(found_inf=found)
        self._found_inf.clear()
        self._unscaled.clear()

    def state_dict(self):
        return dict(self._scaler.state(), strategy=self.strategy) if self._enabled else {}
