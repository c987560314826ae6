"""Collectives with torch.distributed's names over MPI: each call stages its tensors in one host
array, starts one non-blocking MPI operation (or, for large float sums of ranks on one host,
sums through its shared memory: shm.py), and returns a Work whose wait() (bounded by the
group's timeout) finishes the reduction and writes the result back to the device."""
import collections
import enum
import threading
import time

import numpy as np

from . import group as pg
from . import shm
from .staging import Staged, check_tensors


class ReduceOp(enum.Enum):
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"


_BOOL_OPS = {ReduceOp.SUM: "LOR", ReduceOp.MAX: "LOR", ReduceOp.MIN: "LAND",
             ReduceOp.PRODUCT: "LAND"}
_OPS = {ReduceOp.SUM: "SUM", ReduceOp.AVG: "SUM", ReduceOp.PRODUCT: "PROD", ReduceOp.MIN: "MIN",
        ReduceOp.MAX: "MAX"}


def _mpi_op(op, dtype, name):
    from mpi4py import MPI
    if not isinstance(op, ReduceOp):
        raise ValueError(f"{name}: op must be a ReduceOp (SUM, AVG, PRODUCT, MIN, MAX), got {op!r}")
    if op is ReduceOp.AVG and np.dtype(dtype).kind != "f":
        raise ValueError(f"{name}: ReduceOp.AVG needs a floating-point tensor, got {dtype}")
    table = _BOOL_OPS if np.dtype(dtype).kind == "b" else _OPS
    return getattr(MPI, table[op])


# Works made but not started, in the order they were issued: every rank must start its
# collectives in the same order, so a work starts only after those issued before it.
_pending = collections.deque()
_pending_lock = threading.Lock()


class Work:
    """The handle of a collective started with async_op=True; wait() finishes it.

    The MPI operation starts once the tensors' copies to the host are done: at wait(), or
    earlier at is_completed() or when a later collective is issued and the copies are ready."""

    def __init__(self, name, start, staged=(), finish=()):
        self.name, self._start, self._staged = name, start, list(staged)
        self._finish, self._request, self._done = list(finish), None, False
        self.result = None
        with _pending_lock:
            _pending.append(self)

    def _ready(self):
        return all(s.ready() for s in self._staged)

    def _begin(self):
        for s in self._staged:
            s.wait()
        self._request = self._start()

    def is_completed(self):
        if self._done:
            return True
        start_ready()
        return self._request is not None and bool(self._request.Test())

    def wait(self, timeout=None):
        if self._done:
            return True
        g = pg.group()
        limit = g.timeout_s if timeout is None else _seconds(timeout)
        with _pending_lock:
            while self._request is None:  # this work and every one issued before it
                _pending.popleft()._begin()
        _wait_request(self._request, limit, self.name, g.rank)
        for step in self._finish:
            step()
        self._done = True
        return True


def start_ready():
    """Start, in issue order, the works whose host copies are done (without waiting)."""
    with _pending_lock:
        while _pending and _pending[0]._ready():
            _pending.popleft()._begin()


def _seconds(timeout):
    return timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)


def _wait_request(request, limit, name, rank):
    """Poll until done; past `limit` seconds raise, naming the collective (a peer probably failed)."""
    start, pause = time.monotonic(), 1e-5
    while not request.Test():
        if time.monotonic() - start > limit:
            raise pg.DistributedError(
                f"{name} timed out after {limit:g} s on rank {rank}: another rank failed or "
                f"did not call it (the timeout is init_process_group's `timeout`)")
        time.sleep(pause)
        pause = min(pause * 2, 1e-3)


def _run(name, start, staged, finish, async_op):
    work = Work(name, start, staged, finish)
    if async_op:
        start_ready()
        return work
    work.wait()
    return None


def _divide_if_avg(staged, op, size):
    return [lambda: np.divide(staged.host, size, out=staged.host)] if op is ReduceOp.AVG else []


def _check_rank(r, size, name, what):
    if not isinstance(r, int) or isinstance(r, bool) or not 0 <= r < size:
        raise ValueError(f"{name}: {what} must be a rank in [0, {size - 1}], got {r!r}")


def all_reduce_many(tensors, op=ReduceOp.SUM, async_op=False, name="all_reduce"):
    """all_reduce of several same-dtype tensors in one MPI call (a bucket)."""
    g = pg.group()
    _mpi_op(op, tensors[0].dtype if tensors else None, name)  # checked when called
    s = Staged(tensors)
    return _run(name, lambda: all_reduce_host(s.host, op, name), [s],
                _divide_if_avg(s, op, g.size) + [s.finish], async_op)


def all_reduce_host(host, op=ReduceOp.SUM, name="all_reduce"):
    """The request of an all-reduce of host array `host` in place (AVG: summed; the caller
    divides): through the host's shared memory where its ranks share one (shm.py; MPI where
    it has no room), else MPI's."""
    from mpi4py import MPI
    g = pg.group()
    mop = _mpi_op(op, host.dtype, name)

    def by_mpi():
        return g.comm.Iallreduce(MPI.IN_PLACE, host, mop)

    def wait(request, what):
        _wait_request(request, g.timeout_s, what, g.rank)

    if not shm.applies(g, host, op.value):
        return by_mpi()
    return g.reducer.all_reduce(host, wait, name, pg.DistributedError, by_mpi)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce `tensor` over all ranks, in place on every rank."""
    pg.group(group)
    return all_reduce_many([tensor], op, async_op)


def broadcast_many(tensors, src, async_op=False, name="broadcast"):
    g = pg.group()
    _check_rank(src, g.size, name, "src")
    s = Staged(tensors, write_back=g.rank != src)
    return _run(name, lambda: g.comm.Ibcast(s.host, root=src), [s], [s.finish], async_op)


def broadcast(tensor, src, group=None, async_op=False):
    """Copy rank src's `tensor` into `tensor` on every rank."""
    pg.group(group)
    return broadcast_many([tensor], src, async_op)


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce `tensor` over all ranks into rank dst's `tensor` (the others keep theirs)."""
    from mpi4py import MPI
    g = pg.group(group)
    _check_rank(dst, g.size, "reduce", "dst")
    mop = _mpi_op(op, tensor.dtype, "reduce")
    root = g.rank == dst
    s = Staged([tensor], write_back=root)
    send = MPI.IN_PLACE if root else s.host
    start = lambda: g.comm.Ireduce(send, s.host if root else None, mop, root=dst)
    return _run("reduce", start, [s], (_divide_if_avg(s, op, g.size) if root else []) +
                [s.finish], async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """tensor_list[r] gets rank r's `tensor`; sizes may differ between ranks, each entry of
    tensor_list having the size of its rank's tensor."""
    g = pg.group(group)
    if len(tensor_list) != g.size:
        raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors for "
                         f"{g.size} ranks")
    check_tensors(list(tensor_list) + [tensor])
    if tensor_list[g.rank].numel() != tensor.numel():
        raise ValueError(f"all_gather: tensor_list[{g.rank}] has {tensor_list[g.rank].numel()} "
                         f"elements, this rank's tensor {tensor.numel()}")
    counts = [t.numel() for t in tensor_list]
    src, out = Staged([tensor], write_back=False), Staged(list(tensor_list), copy_in=False)
    start = lambda: g.comm.Iallgatherv(src.host, [out.host, counts])
    return _run("all_gather", start, [src], [src.finish, out.finish], async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """output_tensor (world_size times input's elements) gets every rank's input, in rank order."""
    g = pg.group(group)
    check_tensors([output_tensor, input_tensor])
    if output_tensor.numel() != g.size * input_tensor.numel():
        raise ValueError(f"all_gather_into_tensor: output has {output_tensor.numel()} elements, "
                         f"needs {g.size} x {input_tensor.numel()}")
    src = Staged([input_tensor], write_back=False)
    out = Staged([output_tensor], copy_in=False)
    return _run("all_gather_into_tensor", lambda: g.comm.Iallgather(src.host, out.host), [src],
                [src.finish, out.finish], async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce `input` (world_size times output's elements) over ranks; rank r gets block r."""
    g = pg.group(group)
    check_tensors([output, input])
    if input.numel() != g.size * output.numel():
        raise ValueError(f"reduce_scatter_tensor: input has {input.numel()} elements, needs "
                         f"{g.size} x {output.numel()}")
    mop = _mpi_op(op, input.dtype, "reduce_scatter_tensor")
    src = Staged([input], write_back=False)
    out = Staged([output], copy_in=False)
    start = lambda: g.comm.Ireduce_scatter_block(src.host, out.host, mop)
    return _run("reduce_scatter_tensor", start, [src],
                [src.finish] + _divide_if_avg(out, op, g.size) + [out.finish], async_op)


def barrier(group=None, async_op=False):
    """Wait until every rank reaches the barrier."""
    g = pg.group(group)
    return _run("barrier", g.comm.Ibarrier, [], [], async_op)


def isend(tensor, dst, group=None, tag=0):
    g = pg.group(group)
    _check_rank(dst, g.size, "isend", "dst")
    s = Staged([tensor], write_back=False)
    return _run("send", lambda: g.comm.Isend(s.host, dest=dst, tag=tag), [s], [s.finish], True)


def irecv(tensor, src=None, group=None, tag=0):
    """Receive into `tensor` from rank src (any rank when None); wait() returns True and the
    handle's `result` is the sender's rank."""
    from mpi4py import MPI
    g = pg.group(group)
    if src is not None:
        _check_rank(src, g.size, "irecv", "src")
    s = Staged([tensor], copy_in=False)
    status = MPI.Status()
    source = MPI.ANY_SOURCE if src is None else src
    start = lambda: _StatusRequest(g.comm.Irecv(s.host, source=source, tag=tag), status)
    work = _run("recv", start, [s], [s.finish], True)
    work._finish.append(lambda: setattr(work, "result", status.Get_source()))
    return work


class _StatusRequest:
    """A request whose completion fills an MPI.Status (for recv's sender rank)."""

    def __init__(self, request, status):
        self.request, self.status = request, status

    def Test(self):
        return self.request.Test(self.status)


def send(tensor, dst, group=None, tag=0):
    isend(tensor, dst, group, tag).wait()


def recv(tensor, src=None, group=None, tag=0):
    """Receive into `tensor`; returns the sender's rank."""
    work = irecv(tensor, src, group, tag)
    work.wait()
    return work.result
