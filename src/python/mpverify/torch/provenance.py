"""Which module produced a step's first non-finite value, and in which pass.

Hooks fire in execution order, so the first module whose output (forward), or
whose input or parameter gradient (backward), holds inf or NaN is where the
value appeared: its inputs were finite, or an earlier hook would have fired.
A gradient already non-finite where backward starts came from the loss.
"""
import math

import torch


def has_nonfinite(t):
    """True when t holds inf or NaN. One sum first (cheap); only a non-finite sum is checked element by
    element, since a sum of large finite values can itself overflow."""
    if t is None or not t.is_floating_point() or t.numel() == 0:
        return False
    if math.isfinite(t.sum().item()):  # a Python float test: cheaper than a tensor op and bool()
        return False
    return not bool(torch.isfinite(t).all())


class Provenance:
    def __init__(self):
        self.first = None  # {"layer", "tensor", "pass"} of this step

    def begin_step(self):
        self.first = None

    def check(self, layer, tensor, pass_, t):
        if self.first is None and has_nonfinite(t):
            self.first = {"layer": layer, "tensor": tensor, "pass": pass_,
                          "count": int((~torch.isfinite(t)).sum())}
