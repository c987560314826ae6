"""cltensor.nn.parallel: DistributedDataParallel over cltensor.distributed (MPI)."""
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
