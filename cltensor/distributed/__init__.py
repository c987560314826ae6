"""cltensor.distributed: torch.distributed's names over MPI (mpi4py), for data-parallel training.

Launch with an MPI launcher; every rank calls init_process_group("mpi") first. Device tensors
are staged through reused host buffers, one MPI call per call (or per DDP bucket).

Example:
    # mpirun -n 2 python train.py
    import cltensor.distributed as dist
    dist.init_process_group("mpi")
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
"""
from .collectives import (ReduceOp, Work, all_gather, all_gather_into_tensor,  # noqa: F401
                          all_reduce, barrier, broadcast, irecv, isend, recv, reduce,
                          reduce_scatter_tensor, send)
from .group import (DistributedError, destroy_process_group, get_backend,  # noqa: F401
                    get_rank, get_world_size, init_process_group, is_available, is_initialized)
