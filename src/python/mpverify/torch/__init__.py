"""mpverify for PyTorch models: Monitor (live recorders into a run directory),
Dumper (tensors per step for `mpverify analyze` and `swamp`) and emulate()
(a model's GEMMs through the emulated formats). Needs torch (python3-torch)."""
from .grad_scaler import GradScaler
from .monitor import Monitor
from .dumper import Dumper
from .emulate import emulate, emulated_matmul
