"""Host staging of device tensors for MPI: tensors are packed into one flat host array per call
(one MPI call per bucket), from reusable mapped buffers; a single contiguous tensor on a CPU
device is mapped in place instead, so MPI reads and writes its memory without a copy."""
import threading

import numpy as np
import pyopencl as cl

from ..tensor import ClTensor

_free = {}  # (context, dtype, capacity) -> [(cl.Buffer, mapped numpy array)]
_lock = threading.Lock()


def _capacity(n):
    return 1 << max(int(n - 1).bit_length(), 6)  # powers of two, so buffers get reused


def _acquire(device, dtype, n):
    key = (device.context, np.dtype(dtype), _capacity(n))
    with _lock:
        pool = _free.setdefault(key, [])
        if pool:
            return key, pool.pop()
    nbytes = key[2] * key[1].itemsize
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.ALLOC_HOST_PTR
    buf = cl.Buffer(device.context, flags, nbytes)
    host, ev = device.enqueue(cl.enqueue_map_buffer, buf, cl.map_flags.READ | cl.map_flags.WRITE,
                              0, (key[2],), key[1], is_blocking=False)
    ev.wait()
    return key, (buf, host)


class Staged:
    """The host array `host` (flat, numel elements) standing for `tensors`; finish() writes it
    back to them (when write_back) and gives the buffer back. The copies (or the map) to the
    host are enqueued without waiting: ready() says whether they are done, wait() waits."""

    def __init__(self, tensors, numel=None, write_back=True, copy_in=True):
        check_tensors(tensors)
        self.tensors, self.write_back = tensors, write_back
        self.device, self.dtype = tensors[0].device, tensors[0].dtype
        total = sum(t.numel() for t in tensors)
        numel = total if numel is None else numel
        self._mapped = self._key = None
        self._events = []
        if self._can_map(numel, total):
            self._map(tensors[0])
        else:
            self._key, (self._buf, self._whole) = _acquire(self.device, self.dtype, numel)
            self.host = self._whole[:numel]
            if copy_in:
                self._copy(to_host=True)

    def _can_map(self, numel, total):
        t = self.tensors[0]
        return self.device.is_cpu and len(self.tensors) == 1 and numel == total and t.numel() > 0

    def _map(self, t):
        itemsize = np.dtype(self.dtype).itemsize
        flags = cl.map_flags.READ | cl.map_flags.WRITE
        try:
            host, ev = self.device.enqueue(cl.enqueue_map_buffer, t.storage.buf, flags,
                                           t.offset * itemsize, (t.numel(),), self.dtype,
                                           is_blocking=False)
        except (cl.Error, TypeError, ValueError):
            self._key, (self._buf, self._whole) = _acquire(self.device, self.dtype, t.numel())
            self.host = self._whole[:t.numel()]
            self._copy(to_host=True)
            return
        self._events = [ev]
        self._mapped, self.host = host, host

    def ready(self):
        done = cl.command_execution_status.COMPLETE
        return all(e.command_execution_status == done for e in self._events)

    def wait(self):
        if self._events:
            cl.wait_for_events(self._events)
        self._events = []

    def _copy(self, to_host):
        events, pos = [], 0
        itemsize = np.dtype(self.dtype).itemsize
        for t in self.tensors:
            n = t.numel()
            if n:
                part = self.host[pos:pos + n]
                args = (part, t.storage.buf) if to_host else (t.storage.buf, part)
                off = {"src_offset" if to_host else "dst_offset": t.offset * itemsize}
                events.append(self.device.enqueue(cl.enqueue_copy, *args, is_blocking=False, **off))
            pos += n
        if to_host:
            self._events = events
        elif events:
            cl.wait_for_events(events)

    def finish(self):
        self.wait()
        if self._mapped is not None:
            self.device.enqueue(lambda q: self._mapped.base.release(queue=q)).wait()
            self._mapped = None
            return
        if self.write_back:
            self._copy(to_host=False)
        with _lock:
            _free[self._key].append((self._buf, self._whole))


def check_tensors(tensors):
    for t in tensors:
        if not isinstance(t, ClTensor):
            raise TypeError(f"cltensor.distributed: expected a cltensor tensor, got "
                            f"{type(t).__name__}")
        if not t.is_contiguous():
            raise ValueError("cltensor.distributed: tensors must be contiguous "
                             "(call .contiguous() first)")
    first = tensors[0]
    for t in tensors[1:]:
        if t.dtype != first.dtype or t.device is not first.device:
            raise ValueError(f"cltensor.distributed: tensors of one call must share dtype and "
                             f"device, got {first.dtype} on {first.device} and {t.dtype} on "
                             f"{t.device}")
