"""The Monitor's JSON Lines files, appended.

`mpverify train` republishes each log whole through a rename (record/run_log.h), which costs the file's
size per publication: fine for its short runs, quadratic over the thousands of steps of a user's run. The
Monitor instead appends: lines are buffered and written every `every_steps` steps in one os.write to a
file opened with O_APPEND, and fsync'ed at close(). A killed process leaves every line written before it
complete (a write is not split by a signal); only a crash of the machine itself can leave a partial last
line, which mpverify's readers report as "truncated?" rather than misread.
"""
import json
import math
import os


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
    def __init__(self, path, every_steps):
        self.path, self.every_steps = path, every_steps
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        self._pending, self._steps = [], 0

    def append(self, line):
        try:  # almost every line is finite: serialized as it is, and walked only when json refuses it
            text = _ENCODER.encode(line)
        except ValueError:
            text = _ENCODER.encode(_finite_or_null(line))
        self._pending.append(text)

    def append_text(self, text):
        """A line already serialized (by the C++ recorder, which writes non-finite numbers as null)."""
        self._pending.append(text)

    def end_step(self):
        self._steps += 1
        if self._steps % self.every_steps == 0:
            self.flush()

    def flush(self):
        if self._pending and self._fd is not None:
            os.write(self._fd, ("\n".join(self._pending) + "\n").encode())
            self._pending = []

    def close(self):
        if self._fd is None:
            return
        self.flush()
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = None
