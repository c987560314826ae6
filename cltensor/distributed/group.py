"""The process group: MPI's world communicator, its rank and size, the collectives' timeout,
and each rank's choice of device by local rank."""
import importlib.util
import os
import sys
import traceback

from ..device import all_devices, set_default_device
from . import shm

MISSING_MPI4PY = ("cltensor.distributed needs mpi4py: pip install 'cltensor[distributed]' "
                  "(and an MPI library, e.g. apt-get install openmpi-bin libopenmpi-dev)")
MISSING_LIBMPI = ("cltensor.distributed: mpi4py is installed but no MPI library loads ({err}); "
                  "install Open MPI: apt-get install openmpi-bin libopenmpi-dev")
DEFAULT_TIMEOUT_S = 300.0


class DistributedError(RuntimeError):
    """A collective that failed or timed out, or a process group used wrongly."""


class _Group:
    def __init__(self, comm, timeout_s):
        self.comm, self.timeout_s = comm, timeout_s
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.reducer = None  # shm.Reducer when the ranks share one host


_group = None
WORLD = None  # the default group's handle, as torch.distributed.group.WORLD


def _load_mpi():
    try:
        import mpi4py
    except ImportError:
        raise ImportError(MISSING_MPI4PY) from None
    mpi4py.rc.initialize = True
    try:
        from mpi4py import MPI
    except (ImportError, RuntimeError, OSError) as e:
        raise ImportError(MISSING_LIBMPI.format(err=e)) from None
    return MPI


def _env_int(*names):
    for n in names:
        v = os.environ.get(n)
        if v not in (None, ""):
            try:
                return int(v)
            except ValueError:
                raise ValueError(f"init_process_group: {n}={v!r} is not an integer") from None
    return None


def _check_agrees(what, given, actual):
    if given is not None and given != -1 and given != actual:
        raise ValueError(f"init_process_group: {what} {given} disagrees with the MPI launcher's "
                         f"{actual}")


def _local_rank(MPI, comm):
    lr = _env_int("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "LOCAL_RANK")
    if lr is None:
        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        lr = node.Get_rank()
        node.Free()
    return lr


def _pick_device(local_rank):
    """GPU number local_rank (modulo their count) of this host; CLTENSOR_DEVICE wins."""
    if os.environ.get("CLTENSOR_DEVICE"):
        return
    gpus = [d for d in all_devices() if d.is_gpu]
    if gpus:
        set_default_device(gpus[local_rank % len(gpus)])


def _abort_on_error(comm, rank):
    """An uncaught exception prints with its rank and aborts the job, so no rank waits forever
    in a collective that the failed rank will never join."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        sys.stderr.write(f"cltensor.distributed: rank {rank} failed:\n")
        sys.stderr.write("".join(traceback.format_exception(kind, value, tb)))
        sys.stderr.flush()
        if _group is None:
            return previous(kind, value, tb)
        comm.Abort(1)

    sys.excepthook = hook


def init_process_group(backend="mpi", init_method=None, timeout=None, world_size=-1, rank=-1):
    """Join the job's process group; rank and size come from the MPI launcher (mpirun).

    torchrun-style variables (RANK, WORLD_SIZE, LOCAL_RANK; init_method='env://') are accepted and
    must agree with MPI. The rank's default device becomes GPU number local_rank of its host
    unless CLTENSOR_DEVICE is set. timeout (a timedelta or seconds, default 300 s) bounds every
    wait on a collective.

    Example:
        import cltensor.distributed as dist
        dist.init_process_group("mpi")     # mpirun -n 2 python train.py
    """
    global _group, WORLD
    if backend != "mpi":
        raise ValueError(f"init_process_group: backend {backend!r} is not supported; cltensor "
                         f"has backend='mpi'")
    if init_method not in (None, "env://"):
        raise ValueError(f"init_process_group: init_method {init_method!r} is not supported; "
                         f"use None or 'env://' under an MPI launcher")
    if _group is not None:
        raise DistributedError("init_process_group: the default process group is already "
                               "initialized")
    timeout_s = _timeout_seconds(timeout)
    MPI = _load_mpi()
    comm = MPI.COMM_WORLD
    r, n = comm.Get_rank(), comm.Get_size()
    _check_agrees("rank", rank, r)
    _check_agrees("world_size", world_size, n)
    _check_agrees("RANK", _env_int("RANK"), r)
    _check_agrees("WORLD_SIZE", _env_int("WORLD_SIZE"), n)
    _pick_device(_local_rank(MPI, comm))
    _group = _Group(comm, timeout_s)
    _group.reducer = shm.reducer_for(comm, n)
    WORLD = _group
    _abort_on_error(comm, r)


def _timeout_seconds(timeout):
    if timeout is None:
        return float(os.environ.get("CLTENSOR_DIST_TIMEOUT", DEFAULT_TIMEOUT_S))
    s = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
    if not s > 0:
        raise ValueError(f"init_process_group: timeout must be positive, got {timeout!r}")
    return s


def group(g=None):
    """The group to use: the default one (g None or WORLD); an error before init_process_group."""
    if _group is None:
        raise DistributedError("cltensor.distributed: call init_process_group() first "
                               "(the default process group is not initialized)")
    if g is not None and g is not _group:
        raise ValueError("cltensor.distributed: only the default group (None or WORLD) is "
                         "supported")
    return _group


def is_available():
    """Whether mpi4py is installed (checked without starting MPI)."""
    return importlib.util.find_spec("mpi4py") is not None


def is_initialized():
    return _group is not None


def get_rank(group_=None):
    return group(group_).rank


def get_world_size(group_=None):
    return group(group_).size


def get_backend(group_=None):
    group(group_)
    return "mpi"


def destroy_process_group(group_=None):
    """Leave the process group (MPI itself finalizes at exit); collectives then raise."""
    global _group, WORLD
    group(group_)
    _group = WORLD = None
