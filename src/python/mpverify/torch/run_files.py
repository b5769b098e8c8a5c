"""The Monitor's JSON Lines files, appended.

`mpverify train` republishes each log whole through a rename (record/run_log.h), which costs the file's
size per publication: fine for its short runs, quadratic over the thousands of steps of a user's run. The
Monitor instead appends: lines are buffered and written in one os.write to a file opened with O_APPEND
every `every_steps` steps, or (steps.jsonl) at least once every `seconds` and at the steps the caller marks
urgent, and fsync'ed at close(). A write per step costs a system call and the encoder's cold start, about
0.5% of a small CPU training step. A killed process leaves every line written before it
complete (a write is not split by a signal); only a crash of the machine itself can leave a partial last
line, which mpverify's readers report as "truncated?" rather than misread.
"""
import json
import math
import os
import time


def _finite_or_null(obj):
    """JSON has no NaN or infinity: they become null, as the C++ run log writes them."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite_or_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite_or_null(v) for v in obj]
    return obj


# Made once: json.dumps with options builds an encoder per call, which costs more than the line.
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


class JsonLines:
    def __init__(self, path, every_steps=None, seconds=None):
        self.path, self.every_steps, self.seconds = path, every_steps, seconds
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        self._pending, self._steps = [], 0
        self._written_at = time.monotonic()

    def append(self, line):
        """A line as a dict, serialized when the lines are written: the caller hands over its own copy."""
        self._pending.append(line)

    def append_text(self, text):
        """A line already serialized (by the C++ recorder, which writes non-finite numbers as null)."""
        self._pending.append(text)

    def end_step(self, urgent=False):
        """Ends a step's lines; writes them when the step is urgent, every `every_steps` steps, or when
        `seconds` have passed since the last write."""
        self._steps += 1
        if (urgent or (self.every_steps and self._steps % self.every_steps == 0)
                or (self.seconds is not None and time.monotonic() - self._written_at >= self.seconds)):
            self.flush()

    def flush(self):
        if self._pending and self._fd is not None:
            text = "\n".join(line if isinstance(line, str) else _encode(line) for line in self._pending)
            os.write(self._fd, (text + "\n").encode())
            self._pending = []
        self._written_at = time.monotonic()

    def close(self):
        if self._fd is None:
            return
        self.flush()
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = None


class NullLines:
    """JsonLines' interface, writing nothing: a rank other than 0 under torch.distributed."""

    def append(self, line):
        pass

    def append_text(self, text):
        pass

    def end_step(self, urgent=False):
        pass

    def flush(self):
        pass

    def close(self):
        pass


def _encode(line):
    try:  # almost every line is finite: serialized as it is, and walked only when json refuses it
        return _ENCODER.encode(line)
    except ValueError:
        return _ENCODER.encode(_finite_or_null(line))
