"""Which module produced a step's first non-finite value, and in which pass.

Hooks fire in execution order, so the first module whose output (forward), or
whose input or parameter gradient (backward), holds inf or NaN is where the
value appeared, unless that module was given it: then it was made outside the
checked modules' outputs (a functional op, a forward pre-hook, or a forward
hook registered after the Monitor's), and is named as the module's input "x",
after the module checked before it. A gradient already non-finite where
backward starts came from the loss; a loss already non-finite in forward came
first of all.

Modules that cannot make a non-finite value out of finite ones, forward or backward (passes_finite), are
not checked: where their output or its gradient is non-finite, so was what they were given, and the
module that made it is named (a ReLU after an overflowing Linear: the Linear).
"""
import torch

from .. import _core


def count_nonfinite(t):
    """The number of inf and NaN values in t (0 for None and non-float tensors). Dense CPU tensors of the
    IEEE float types are counted in place in C++ (record/nonfinite_count.h), in one call: the Monitor asks
    this on every step, where torch's sum and .item() cost several times as much."""
    if t is None:
        return 0
    n = _core._count_nonfinite_torch(t)
    return n if n >= 0 else torch_count_nonfinite(t)


def torch_count_nonfinite(t):
    """count_nonfinite with torch, for the tensors the C++ count does not read (-1 from it). A sparse tensor
    is counted as the dense tensor it stands for: torch.isfinite has no sparse kernel, and its stored values
    alone would miss an inf made by adding two of them at one index."""
    t = dense(t)
    if not t.is_floating_point():
        return 0
    return int((~torch.isfinite(t)).sum())


def dense(t):
    """A sparse gradient (nn.Embedding(sparse=True)) as the dense tensor it stands for, as the Dumper writes it
    (cost: the dense size); any other tensor itself. The in-place readers need an address and torch.isfinite a
    dense kernel, and a sparse tensor has neither; a dense one pays one attribute read."""
    return t if t.layout is torch.strided else t.to_dense()


def count_tensor(t):
    """count_nonfinite as a 0-dim tensor on t's device, computed without waiting for the device (None: 0)."""
    if t is None:
        return torch.zeros((), dtype=torch.long)
    t = dense(t)
    if not t.is_floating_point():
        return torch.zeros((), dtype=torch.long, device=t.device)
    return (~torch.isfinite(t)).sum()


def inputs_count_tensor(inputs, device):
    """The non-finite values of a module's floating-point tensor inputs, as count_tensor."""
    total = torch.zeros((), dtype=torch.long, device=device)
    for i in inputs:
        if isinstance(i, torch.Tensor) and i.is_floating_point():
            total = total + count_tensor(i).to(device)
    return total


class DeferredChecks:
    """A step's provenance checks on tensors that live on a device (the Monitor's statistics="torch", or
    a model on a GPU): each check's count stays a tensor on the device, so no check waits for it, and the
    step's counts cross to the host in one copy when the step ends, where the Monitor replays the checks in
    the order they were made, as it would have made them one by one."""

    def __init__(self):
        self.events = []  # (kind, what, count tensors), in the order of the checks

    def add(self, kind, what, *counts):
        self.events.append((kind, what, counts))

    def take(self, extra):
        """The events with their counts as numbers, and the numbers of `extra` (more count tensors), from one
        copy; the events are cleared."""
        tensors = [c for _, _, counts in self.events for c in counts] + list(extra)
        device = tensors[0].device if tensors else None
        values = torch.stack([c.to(device) for c in tensors]).tolist() if tensors else []
        events, self.events, out, i = self.events, [], [], 0
        for kind, what, counts in events:
            out.append((kind, what, values[i:i + len(counts)]))
            i += len(counts)
        return out, values[i:]


# Forward: max, 0 or the input itself; backward: the output gradient routed, masked or reshaped, never
# added to another (max pooling only when its windows do not overlap: overlapping ones add gradients).
_PASSIVE = (torch.nn.ReLU, torch.nn.Flatten, torch.nn.Unflatten, torch.nn.Identity)
_POOLS = (torch.nn.MaxPool1d, torch.nn.MaxPool2d, torch.nn.MaxPool3d)


def passes_finite(module):
    """True when the module cannot turn finite inputs (or finite output gradients) into inf or NaN."""
    if type(module) in _PASSIVE:
        return True
    if type(module) in _POOLS:
        dims = {torch.nn.MaxPool1d: 1, torch.nn.MaxPool2d: 2, torch.nn.MaxPool3d: 3}[type(module)]
        kernel, stride = _tuple(module.kernel_size, dims), _tuple(module.stride or module.kernel_size, dims)
        return all(s >= k for s, k in zip(stride, kernel)) and _tuple(module.dilation, dims) == (1,) * dims
    return False


def _tuple(v, dims):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * dims


class Provenance:
    def __init__(self):
        self.first = None  # {"layer", "tensor", "pass"} of this step

    def begin_step(self):
        self.first = None

    def check(self, layer, tensor, pass_, t):
        if self.first is None:
            count = count_nonfinite(t)
            if count:
                self.first = {"layer": layer, "tensor": tensor, "pass": pass_, "count": count}

    def found(self, layer, tensor, pass_, count):
        """check() with the count already made."""
        if self.first is None and count:
            self.first = {"layer": layer, "tensor": tensor, "pass": pass_, "count": count}

    def found_forward(self, layer, output_count, given_count, after):
        """check_forward() with the counts already made."""
        if self.first is not None or not output_count:
            return
        if given_count:
            self.first = {"layer": layer, "tensor": "x", "pass": "forward", "count": given_count, "after": after}
        else:
            self.first = {"layer": layer, "tensor": "y", "pass": "forward", "count": output_count}

    def check_forward(self, layer, output, inputs, after):
        """A module's output in forward. Non-finite with a non-finite input: the module was given the value,
        made after `after` (the module checked before it; None: before any module of this forward pass ran).
        The inputs are counted only then, so a finite step pays nothing for it. A module given -inf on
        purpose (a mask passed positionally) is named as given it, which is what happened."""
        if self.first is not None:
            return
        count = count_nonfinite(output)
        if not count:
            return
        given = sum(count_nonfinite(i) for i in inputs if isinstance(i, torch.Tensor) and i.is_floating_point())
        self.found_forward(layer, count, given, after)
