"""cltensor.nn.parallel: DistributedDataParallel over cltensor.distributed (MPI), and
DataParallel's interface on one device."""
from .data_parallel import DataParallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel"]
