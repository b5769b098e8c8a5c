"""A GradScaler that runs anywhere torch does, with any of mpverify's loss-scale rules.

torch.cuda.amp.GradScaler disables itself without CUDA (torch < 2.3 has no CPU
kernels for its unscale and update), so a CPU run of a mixed-precision recipe
has no loss scaling at all. This class has GradScaler's interface (its
constructor's keywords, scale, unscale_, step, update, get_scale, is_enabled,
state_dict, load_state_dict) and takes its scale
rule from mpverify.Scaler: "torch" (GradScaler's own rule, bit for bit),
"apex", "deepspeed", "megatron", "keras", "static" or "none".

Unscaling follows torch's _unscale_grads_ (torch/cuda/amp/grad_scaler.py):
inv_scale = fp32(1 / fp64(scale)) computed in double and rounded once to
float32, each gradient multiplied by it in its own dtype, found_inf set when
any unscaled gradient holds inf or NaN.
"""
import torch

from .. import Scaler


# torch's GradScaler keywords, as the strategies' option names (torch/amp/grad_scaler.py, GradScaler.__init__).
TORCH_KEYWORDS = {"init_scale": "init", "growth_factor": "growth", "backoff_factor": "backoff",
                  "growth_interval": "interval"}
# What torch's GradScaler starts from when a keyword is left out (the same file).
TORCH_DEFAULTS = {"init_scale": 2.0 ** 16, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000}


class GradScaler:
    """GradScaler(strategy="torch", enabled=True, **options), or as torch's: GradScaler("cuda", init_scale=...,
    growth_factor=..., backoff_factor=..., growth_interval=..., enabled=...): a first argument "cuda" or
    "cpu" is torch's device (this scaler runs on any) and means the torch strategy."""

    def __init__(self, strategy="torch", enabled=True, **options):
        if strategy in ("cuda", "cpu"):
            strategy = "torch"
        self.strategy = strategy
        self._torch_settings = dict(TORCH_DEFAULTS)
        for torch_name, ours in TORCH_KEYWORDS.items():
            if torch_name in options:
                if ours in options:
                    raise ValueError(f"give {torch_name} or {ours}, not both")
                options[ours] = options.pop(torch_name)
            if ours in options:
                self._torch_settings[torch_name] = options[ours]
        self._options = options
        self._scaler = Scaler(strategy, **options)
        self._enabled = bool(enabled)
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
                    g = p.grad
                    if g.is_sparse:
                        # As torch's GradScaler._unscale_grads_ (torch/amp/grad_scaler.py): an fp16 sparse
                        # gradient is coalesced first (values at one index summed, which may overflow), and
                        # the stored values are what is unscaled and checked.
                        if g.dtype is torch.float16:
                            p.grad = g = g.coalesce()
                        g = g._values()
                    # In float32 and rounded once to the gradient's dtype, as torch's kernel computes it.
                    g.copy_(g.float() * inv)
                    found = found or not bool(torch.isfinite(g).all())
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
        """The framework's own fields, as its checkpoint holds them ({} when disabled, as torch's): for "torch",
        GradScaler.state_dict()'s scale, growth_factor, backoff_factor, growth_interval and _growth_tracker,
        which torch's GradScaler, this class and `mpverify replay-scalers --initial-state` all load."""
        if not self._enabled:
            return {}
        state = self._scaler.state()
        if self.strategy == "torch":
            return {"scale": float(state["scale"]), **{k: self._torch_settings[k] for k in
                                                       ("growth_factor", "backoff_factor", "growth_interval")},
                    "_growth_tracker": int(state["growth_tracker"])}
        if self.strategy == "megatron":
            return {"scale": float(state["scale"]), "growth_tracker": int(state["growth_tracker"]),
                    "hysteresis_tracker": int(state["hysteresis"])}
        if self.strategy == "deepspeed":
            return {"cur_scale": float(state["scale"]), "cur_iter": int(state["iteration"]),
                    "last_overflow_iter": int(state["last_overflow_iteration"]),
                    "cur_hysteresis": int(state["hysteresis"])}
        raise NotImplementedError(f"state_dict(): the {self.strategy} strategy has no saved state of its own "
                                  "(torch, megatron and deepspeed have)")

    def load_state_dict(self, state_dict):
        """Continues from a saved state: this class's state_dict(), or torch's GradScaler.state_dict() for the
        torch strategy. An empty one (a disabled scaler's) is refused, as torch refuses it."""
        if not self._enabled:
            return
        if not state_dict:
            raise RuntimeError("the state_dict is empty (saved from a disabled scaler?)")
        if self.strategy == "torch":
            for k in ("growth_factor", "backoff_factor", "growth_interval"):
                if k in state_dict:
                    self._torch_settings[k] = state_dict[k]
        self._scaler = Scaler(self.strategy, state=state_dict, **self._options)
