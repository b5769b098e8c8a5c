"""The Monitor under torch.distributed (DDP): one run directory for the whole job.

Every rank records its own tensors; rank 0 alone writes. What differs between ranks is combined at the end
of each recorded step, in one collective: the activations and their gradients (each rank holds its shard of
the global batch) are summed, count for count and bin for bin, their largest |x| is the largest over the
ranks, and their norms are combined as sqrt(sum of the ranks' squared norms). What DDP makes equal on every
rank (weights, the averaged weight gradients, updates, the scale, found_inf) is rank 0's. Each step's loss is
the mean of the ranks' losses (the global batch's mean loss when the shards are equal), and the ranks' own
losses are kept as "loss_by_rank". The first non-finite value names its rank: of the ranks that found one,
the one where it came earliest in the step (forward before backward before the parameter gradients, which
DDP's averaging makes non-finite on every rank), the lowest rank among equals.
"""
import math

import torch

from . import _device_stats

# The histogram's 277 bins follow these counts in a record's row of integers.
_COUNT_KEYS = ("elements", "zeros_in", "nonfinite_in", "nans", "underflow_to_zero", "subnormal", "overflow",
               "below_range", "above_range")
SUMMED_ROLES = ("activation", "activation_grad")  # each rank's shard; the other roles are equal on every rank


class Ranks:
    """This process's place in the job: active when torch.distributed is initialised with several ranks."""

    def __init__(self):
        dist = torch.distributed
        self.active = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
        self.rank = dist.get_rank() if self.active else 0
        self.world = dist.get_world_size() if self.active else 1
        # NCCL reduces CUDA tensors only; gloo (and MPI) CPU ones.
        self.device = (torch.device("cuda", torch.cuda.current_device())
                       if self.active and dist.get_backend() == "nccl" else torch.device("cpu"))

    @property
    def writes(self):
        return self.rank == 0

    def combine_records(self, records):
        """records: the step's (layer, tensor, role, pass, format, scale, counts) in the order recorded, the
        same sequence on every rank. Returns them with the summed roles' counts combined over the ranks."""
        summed = [i for i, r in enumerate(records) if r[2] in SUMMED_ROLES]
        if not summed:
            return records
        ints = torch.tensor([[records[i][6].get(k, 0) for k in _COUNT_KEYS] + records[i][6]["bins"] for i in summed],
                            dtype=torch.long, device=self.device)
        squares = torch.tensor([records[i][6]["norm"] ** 2 for i in summed], dtype=torch.float64, device=self.device)
        maxima = torch.tensor([records[i][6]["max_abs"] for i in summed], dtype=torch.float64, device=self.device)
        dist = torch.distributed
        dist.all_reduce(ints, op=dist.ReduceOp.SUM)
        dist.all_reduce(squares, op=dist.ReduceOp.SUM)
        dist.all_reduce(maxima, op=dist.ReduceOp.MAX)
        out = list(records)
        for row, i, square, maximum in zip(ints.tolist(), summed, squares.tolist(), maxima.tolist()):
            counts = dict(zip(_COUNT_KEYS, row[:len(_COUNT_KEYS)]), bins=row[len(_COUNT_KEYS):],
                          norm=math.sqrt(square), max_abs=maximum)
            out[i] = (*records[i][:6], counts)
        return out

    def combine_step(self, loss, first):
        """(the mean loss, the ranks' losses, the job's first non-finite value with its rank) in one
        collective, and a second one only at a step where some rank found a non-finite value."""
        dist = torch.distributed
        row = torch.zeros(self.world + 1, dtype=torch.float64, device=self.device)
        row[self.rank] = loss
        row[self.world] = 1.0 if first is not None else 0.0
        dist.all_reduce(row, op=dist.ReduceOp.SUM)
        losses = row[:self.world].tolist()
        mean = sum(losses) / self.world
        if row[self.world].item() == 0:
            return mean, losses, None
        firsts = [None] * self.world
        dist.all_gather_object(firsts, first)
        found = [(_stage(f), r, f) for r, f in enumerate(firsts) if f is not None]
        _, rank, chosen = min(found, key=lambda x: (x[0], x[1]))
        return mean, losses, dict(chosen, rank=rank)


def _stage(first):
    """Where in a step a first non-finite value was found: forward 0, backward 1, a parameter gradient 2."""
    if first["pass"] == "forward":
        return 0
    return 2 if first["tensor"].endswith(".grad") else 1


def raw_counts(t, target, scale, counts_in_torch):
    """record_counted's counts of t against `target` at `scale`: on t's device where the torch path applies
    (and counts_in_torch), else from the C++ recorder on the host, with its histogram as the 277 bins."""
    if counts_in_torch:
        counts = _device_stats.tensor_counts(t, target, scale)
        if counts is not None:
            return counts
    from .. import _core
    from .._tensors import as_input
    array, bits = as_input(t)
    s = _core.tensor_stats(array, bits, target, scale)
    h = s["histogram"]
    bins = [0] * _device_stats.BINS
    if h["first_exponent"] is not None:
        for i, c in enumerate(h["counts"]):
            bins[h["first_exponent"] + i - _device_stats.MIN_EXPONENT] = c
    return {"elements": s["count"], "zeros_in": s["zeros_in"], "nonfinite_in": s["nonfinite_in"],
            "nans": h["nans"], "underflow_to_zero": s["underflow_to_zero"], "subnormal": s["subnormal"],
            "overflow": s["overflow"], "below_range": h["below_range"], "above_range": h["above_range"],
            "max_abs": s["max_abs"], "norm": s["norm"], "bins": bins}
