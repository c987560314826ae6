"""All-reduce through shared memory for a group whose ranks share one host: each rank copies its
host array into its part of an MPI-3 shared window, sums its share of the elements across every
rank's part, and copies each rank's summed share back; three barriers in all. It moves each
byte a few times through memory, where MPI's all-reduce of host arrays between a host's
processes ran at 1.7-2.2 GB/s (docs/distributed.md), and its copies and sums run on several
threads (numpy lets go of the GIL for them).

Only float32/float64 sums (SUM, and AVG by a division after) of at least MIN_BYTES take it;
CLTENSOR_DIST_SHM=0 turns it off. Every rank must make the same choice for the same call, so it
depends only on what all ranks share: the group, the op, the dtype and the size, which are
checked to agree first."""
import os
import tempfile

import numpy as np

MIN_BYTES = 1 << 20  # smaller arrays go through MPI, whose latency is lower
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_PARALLEL_BYTES = 4 << 20  # arrays below this are copied and summed on the calling thread


def _rounded(nbytes):
    """A window's bytes a rank: nbytes up to a whole MiB (DDP's buckets repeat their sizes)."""
    return -(-nbytes // (1 << 20)) * (1 << 20)


class _Done:
    """A request that finished when it was made (the reduction runs at the collective's start)."""

    def Test(self):
        return True

    def Wait(self):
        return None


class Reducer:
    """The shared window of one group's ranks on one host, grown as arrays need."""

    def __init__(self, node):
        self.node, self.rank, self.size = node, node.Get_rank(), node.Get_size()
        self.window, self.capacity, self.parts = None, 0, []
        threads = max(1, min(8, (os.cpu_count() or 1) // self.size))
        self.pool = None
        if threads > 1:
            from concurrent.futures import ThreadPoolExecutor
            self.pool = ThreadPoolExecutor(threads, thread_name_prefix="cltensor-shm")
        self.threads = threads

    def all_reduce(self, host, wait, name, error, fallback):
        """Sum `host` (a flat float array) over the ranks, in place; wait(request, name) polls
        an MPI request within the group's timeout; `error` is the exception type raised on
        every rank when the ranks' arrays differ in size or dtype; fallback() starts MPI's
        all-reduce instead (its request returned) when the window cannot grow to the array."""
        if not self._agree(host, wait, name, error):
            return fallback()
        self._grow(host.nbytes)
        parts = [p[:host.nbytes].view(host.dtype) for p in self.parts]
        bounds = [host.size * k // self.size for k in range(self.size + 1)]
        mine, wide = parts[self.rank], host.nbytes >= _PARALLEL_BYTES
        self._split(lambda lo, hi: np.copyto(mine[lo:hi], host[lo:hi]), 0, host.size, wide)
        wait(self.node.Ibarrier(), name)

        def add(lo, hi):
            for k in range(self.size):
                if k != self.rank:
                    np.add(mine[lo:hi], parts[k][lo:hi], out=mine[lo:hi])
        self._split(add, bounds[self.rank], bounds[self.rank + 1], wide)
        wait(self.node.Ibarrier(), name)
        for k in range(self.size):
            self._split(lambda lo, hi, k=k: np.copyto(host[lo:hi], parts[k][lo:hi]),
                        bounds[k], bounds[k + 1], wide)
        wait(self.node.Ibarrier(), name)  # NOTE: no rank refills its part while others read it
        return _Done()

    def _agree(self, host, wait, name, error):
        """Whether every rank has room for the window this array needs; `error` on every rank
        when their (elements, dtype) differ."""
        from mpi4py import MPI
        mine = np.array([host.size, host.dtype.num, self._room(host.nbytes)], np.int64)
        every = np.empty(3 * self.size, np.int64)
        wait(self.node.Iallgather([mine, MPI.INT64_T], [every, MPI.INT64_T]), name)
        every = every.reshape(self.size, 3)
        room, every = bool(every[:, 2].all()), every[:, :2]
        if (every != every[0]).any():
            names = {t.num: t.name for t in _FLOATS}
            got = ", ".join(f"rank {r}: {n} x {names.get(int(d), 'another dtype')}"
                            for r, (n, d) in enumerate(every))
            raise error(f"{name}: the ranks passed different tensors ({got}); every "
                        f"rank must pass the same number of elements and dtype")
        return room

    def _room(self, nbytes):
        """Whether the window fits nbytes a rank, or the shared-memory filesystem has room to
        grow it (with a quarter to spare): a process that touches a page past a full tmpfs is
        killed (SIGBUS), so a window too large for it is never made."""
        if nbytes <= self.capacity:
            return True
        path = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
        try:
            st = os.statvfs(path)
        except OSError:
            return False
        free = st.f_bavail * st.f_frsize + self.capacity * self.size  # the old one is freed
        return free >= _rounded(nbytes) * self.size * 5 // 4

    def _grow(self, nbytes):
        """A window of at least nbytes per rank (collective: every rank agreed on nbytes)."""
        if nbytes <= self.capacity:
            return
        from mpi4py import MPI
        if self.window is not None:
            self.parts = []
            self.window.Free()
        capacity = _rounded(nbytes)
        self.window = MPI.Win.Allocate_shared(capacity, 1, comm=self.node)
        self.parts = [np.frombuffer(self.window.Shared_query(r)[0], np.uint8, capacity)
                      for r in range(self.size)]
        self.capacity = capacity

    def _split(self, fn, lo, hi, wide):
        """fn(lo, hi) over [lo, hi), in pieces on the pool's threads when `wide`."""
        if self.pool is None or not wide:
            fn(lo, hi)
            return
        step = -(-(hi - lo) // self.threads)
        list(self.pool.map(lambda i: fn(lo + i * step, min(hi, lo + (i + 1) * step)),
                           range(self.threads)))


def applies(group, host, op_name):
    """Whether an all-reduce of `host` by op `op_name` ("sum", "avg", ...) takes the shared
    window: the group's ranks share a host, a float sum, at least MIN_BYTES, not turned off."""
    return (group.reducer is not None and op_name in ("sum", "avg") and host.dtype in _FLOATS
            and host.size > 0 and host.nbytes >= MIN_BYTES)


def reducer_for(comm, size):
    """A Reducer when all `size` ranks of comm share this host (and CLTENSOR_DIST_SHM is not
    0), else None. Collective over comm."""
    from mpi4py import MPI
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    if size < 2 or node.Get_size() != size or os.environ.get("CLTENSOR_DIST_SHM") == "0":
        node.Free()
        return None
    return Reducer(node)
