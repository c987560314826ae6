"""Graph capture and replay, with torch.cuda.graphs' names: `Graph` (alias `CUDAGraph`) and the
`graph(g)` context manager.

Inside `with cltensor.graph(g):` this thread's kernel launches, and the fills and copies that go
through Device.enqueue, are recorded and not run; `g.replay()` enqueues them all again, in order,
with the same buffers. Each recorded launch gets a Kernel object of its own whose arguments are
set once at capture, so a replay is one loop of enqueue calls into pyopencl, with no Python of
the ops, autograd or optimizers that made them (docs/graphs.md). Work that eager code skips
while a cache holds its result (conv's weight transforms) is captured in a conditional block,
which a replay enqueues only where eager code in its place would run it.

Memory: every tensor created during the capture takes its buffer from the graph's private pool,
and the graph keeps that buffer (counted in memory_stats) after the tensor dies, so it goes to
no other work while the graph lives; buffers of the tensors the launches use that were made
before (the static inputs, parameters, optimizer state) are kept alive too. Deleting the graph
(or g.reset()) gives the memory back, but for tensors still alive.

What cannot be captured raises GraphCaptureError: reading a tensor to the host (.item(),
.numpy(), .tolist(), printing), ops whose output shape depends on the data (nonzero,
masked_select, unique: they read a count to the host), tensors made from host data, and draws
of random numbers on the host. Random ops on the device advance per replay: each replay takes
fresh counters of their generator and sets them into their launches (random.py).
"""
import contextlib
import threading
import weakref

import numpy as np
import pyopencl as cl
import pyopencl.tools as cl_tools
from pyopencl import _cl

from . import profiler
from .device import capturing
from .program import arg_dtypes, launch_pieces

__all__ = ["Graph", "CUDAGraph", "graph", "GraphCaptureError", "is_current_stream_capturing",
           "current_graph", "on_replay", "last_launch"]

_enqueue_kernel = _cl.enqueue_nd_range_kernel  # NOTE: positional, the fastest call measured


class GraphCaptureError(RuntimeError):
    """An op that a graph cannot capture, or a graph used out of order."""


HOST_READ = ("cannot read device data to the host while capturing a graph (.item(), .numpy(), "
             ".tolist(), printing, and ops whose output shape depends on the data, such as "
             "nonzero, masked_select and unique): the recorded launches are not run until "
             "replay; do it outside the `with cltensor.graph(g):` block")
HOST_WRITE = ("cannot create a tensor from host data while capturing a graph (tensor, "
              "from_numpy, as_tensor, ...): a replay would not copy it again; create it before "
              "the capture and copy_() new data into it between replays")


class Graph:
    """A captured list of launches and the memory they use; replay() enqueues them again.

    Example:
        g = cltensor.Graph()
        with cltensor.graph(g):
            static_out = model(static_in)
        static_in.copy_(new_batch)
        g.replay()
    """

    def __init__(self):
        self._lock = threading.Lock()  # one replay at a time: the updates set kernel arguments
        self._reset_state()

    def _reset_state(self):
        self._device = None
        self._segments = []  # [(launches, call, condition)]: launches [(kernel, global, local,
        # offset)], then a fill or copy call [command, [args], kwargs] or None
        self._launches = []  # the segment being filled
        self._keep = []  # the arguments of the launches, fills and copies (their buffers)
        self._buffers = {}  # id(buffer) -> [buffer, bytes, weak reference to its last Storage]
        self._free = {}  # pool bin -> buffers whose storages died during the capture
        self._updates = []  # functions run before each replay (on_replay)
        self._last = None  # (Kernel, arguments) of the last launch captured
        self._writes = {}  # id(Storage) -> [weak reference, version bumps in the capture]
        self._pools = {}
        self._shared = None  # the graph whose pool this one shares (capture_begin's pool)
        self._conditions = []  # [(condition, its block's version bumps)], in capture order
        self._condition = None  # the conditional() block being captured: its condition
        self._block = None  # ... and its launches' [(Kernel, arguments)], calls and bumps
        self.memo = {}  # the ops' own notes for the rest of this capture (conv's transforms)
        self._state = "new"

    # ---- capture -------------------------------------------------------------------------------
    def capture_begin(self, pool=None, capture_error_mode=None):
        """Start capturing this thread's launches (graph() calls it).

        pool: None, or another graph's pool() (torch's pool sharing): buffers of that graph
        whose tensors die during this capture serve this one's allocations too, which holds
        only if the graphs are always replayed in the order they were captured (a forward
        graph, then a backward graph that frees its saved activations). capture_error_mode:
        accepted for torch compatibility."""
        if self._state != "new":
            raise GraphCaptureError("this graph was captured already; call reset() first")
        if capturing.graph is not None:
            raise GraphCaptureError("this thread is capturing a graph already; graphs do not nest")
        if pool is not None and (not isinstance(pool, Graph) or pool is self or
                                 pool._state != "captured"):
            raise GraphCaptureError("pool: expected another, captured graph's pool() (torch's "
                                    f"pool sharing), got {pool!r}")
        self._shared = pool  # NOTE: kept alive by this graph, which may use its buffers
        self._state = "capturing"
        capturing.graph = self

    def capture_end(self):
        if capturing.graph is not self:
            raise GraphCaptureError("capture_end: this graph is not capturing in this thread")
        capturing.graph = None
        self._end_segment(None)
        self._launches = None
        self._state = "captured"

    def _abort(self):
        capturing.graph = None
        self.reset()

    def _check_device(self, device):
        if self._device is None:
            self._device = device
        elif device is not self._device:
            raise GraphCaptureError(f"a graph captures the work of one device: it holds "
                                    f"{self._device}'s, and an op ran on {device}")

    def _launch(self, device, kernel, gsize, lsize, args):
        """program.launch inside a capture: a Kernel object of the launch's own, its arguments
        set now."""
        self._check_device(device)
        own = cl.Kernel(kernel.program, kernel.function_name)
        own.set_scalar_arg_dtypes(arg_dtypes(args))  # NOTE: set_args packs them in C then
        own.set_args(*args)
        self._keep.append(args)
        if self._block is not None:
            self._block[0].append((own, args))
        for size, offset in launch_pieces(gsize, lsize):
            self._launches.append((own, size, lsize, offset))
        self._last = (own, args)

    def _enqueue(self, device, command, args, kwargs):
        """Device.enqueue inside a capture: fills and copies between buffers are recorded; a
        command that reads or writes host memory is refused."""
        self._check_device(device)
        if command is cl.enqueue_copy and args and isinstance(args[0], np.ndarray):
            raise GraphCaptureError(HOST_READ)
        if command is cl.enqueue_copy and len(args) > 1 and isinstance(args[1], np.ndarray):
            raise GraphCaptureError(HOST_WRITE)
        if command not in (cl.enqueue_copy, cl.enqueue_fill_buffer):
            raise GraphCaptureError(f"graph capture: {getattr(command, '__name__', command)} "
                                    f"cannot be captured (only launches, fills and copies "
                                    f"between device buffers)")
        self._keep.append((args, kwargs))
        call = [command, list(args), kwargs]
        if self._block is not None:
            self._block[1].append(call)
        self._end_segment(call)

    def _end_segment(self, call):
        if self._launches or call is not None:
            self._segments.append((self._launches, call, self._condition))
        self._launches = []

    @contextlib.contextmanager
    def conditional(self, condition):
        """Inside a capture: the launches, fills and copies captured in the block are enqueued
        at a replay only where condition.needed() is true as the replay begins (then
        condition.made() is called), as eager code skips work whose result it cached (conv's
        weight transforms). Allocations in the block take buffers of their own, so what it
        makes outlives the replays that skip it. Yields the block, for retarget()."""
        if capturing.graph is not self or self._block is not None:
            raise GraphCaptureError("conditional: outside this graph's capture, or nested")
        self._end_segment(None)
        self._condition, self._block = condition, ([], [], {})
        self._conditions.append((condition, self._block[2]))
        try:
            yield self._block
        finally:
            self._end_segment(None)
            self._condition, self._block = None, None

    def retarget(self, block, old, new):
        """Point the launches, fills and copies of a conditional() block at buffer `new`
        wherever they use `old` (conv makes a cached transform again in the cached buffer)."""
        kernels, calls, _ = block
        for kernel, args in kernels:
            for i, a in enumerate(args):
                if a is old:
                    kernel.set_arg(i, new)
        for call in calls:
            call[1] = [new if a is old else a for a in call[1]]
        self._keep.append(new)

    def bumps(self, storage):
        """The in-place writes of storage captured so far (Storage.version's bumps)."""
        entry = self._writes.get(id(storage))
        return entry[1] if entry is not None and entry[0]() is storage else 0

    def _allocate(self, device, nbytes, storage):
        """A buffer for a Storage made inside the capture: one of this capture's of the same
        pool bin whose storage died, else a new one from the graph's pool. The graph keeps it,
        its bytes counted in memory_stats, until the graph is reset or deleted.

        NOTE: the graph holds the buffer, not the Storage: autograd tells a gradient it may
        take over by its storage's references."""
        self._check_device(device)
        pool = self._pool(device)
        free = self._free.get(pool.bin_number(max(nbytes, 1))) if self._block is None else None
        if free:  # NOTE: a pool bin's buffers all have its size, at least nbytes
            buf = free.pop()
            self._owner(buf)._buffers[id(buf)][2] = weakref.ref(storage)
        else:
            buf = device.allocate(nbytes, pool)
            self._buffers[id(buf)] = [buf, nbytes, weakref.ref(storage)]
        storage.counted = False
        return buf

    def _died(self, storage):
        """Storage.__del__, in the capturing thread, of a storage a graph holds the buffer of:
        a buffer this capture made serves its later allocations of that size. (No launch
        captured after this point can use the dead storage; replays keep the order.)"""
        owner = self._owner(storage.buf)
        if owner is not None:
            nbytes = owner._buffers[id(storage.buf)][1]
            size = self._pool(storage.device).bin_number(max(nbytes, 1))
            self._free.setdefault(size, []).append(storage.buf)

    def _pool(self, device):
        pool = self._pools.get(device)
        if pool is None:
            pool = self._pools[device] = cl_tools.MemoryPool(
                cl_tools.ImmediateAllocator(device.queue))
        return pool

    def _owner(self, buf):
        """This graph, or the graph whose pool it shares, when that one holds buf; else None."""
        for g in (self, self._shared):
            entry = g._buffers.get(id(buf)) if g is not None else None
            if entry is not None and entry[0] is buf:
                return g
        return None

    def _written(self, storage, bumps):
        """Storage.version inside the capture: `bumps` more in-place writes of storage (told
        at the replays that run it, for a write in a conditional block)."""
        writes = self._writes if self._block is None else self._block[2]
        entry = writes.get(id(storage))
        if entry is None or entry[0]() is not storage:
            entry = writes[id(storage)] = [weakref.ref(storage), 0]
        entry[1] += bumps

    def _bump_versions(self, writes=None):
        """The in-place writes of a replay, told to the storages' versions as eager ops do
        (weight-transform caches and autograd's saved-tensor checks see them)."""
        for ref, bumps in (self._writes if writes is None else writes).values():
            storage = ref()
            if storage is not None:
                storage._version += bumps

    # ---- replay --------------------------------------------------------------------------------
    def replay(self):
        """Enqueue the captured launches (without waiting for them)."""
        if self._state != "captured":
            raise GraphCaptureError(f"replay: the graph is {self._state}; capture it first")
        if capturing.graph is not None:
            raise GraphCaptureError("replay inside a capture: graphs do not nest")
        device = self._device
        if device is None:
            return
        with self._lock:
            skip = self._skipped()
            self._bump_versions()
            for update in self._updates:
                update()
            if profiler._state.active:
                return self._replay_profiled(device, skip)
            with device.launch_lock:
                queue = device.queue
                for launches, call, condition in self._segments:
                    if condition is not None and id(condition) in skip:
                        continue
                    for kernel, gsize, lsize, offset in launches:
                        _enqueue_kernel(queue, kernel, gsize, lsize, offset, None, False, False)
                    if call is not None:
                        call[0](queue, *call[1], **call[2])

    def _skipped(self):
        """The ids of the conditions whose blocks this replay skips. Asked in capture order as
        the replay begins; a block that runs has made() and its writes told first (a
        transform of a transform sees the first one made again)."""
        skip = set()
        for condition, writes in self._conditions:
            if condition.needed():
                condition.made()
                self._bump_versions(writes)
            else:
                skip.add(id(condition))
        return skip

    def _replay_profiled(self, device, skip):
        """replay() inside cltensor.profile(): every launch recorded with its event."""
        done = []
        with device.launch_lock:
            queue = device.profiling_queue()
            for launches, call, condition in self._segments:
                if condition is not None and id(condition) in skip:
                    continue
                for kernel, gsize, lsize, offset in launches:
                    done.append((kernel, gsize, lsize, _enqueue_kernel(
                        queue, kernel, gsize, lsize, offset, None, False, False)))
                if call is not None:
                    call[0](queue, *call[1], **call[2])
        for entry in done:
            profiler.record(*entry)

    def launches(self):
        """The number of kernel launches the next replay enqueues (conditional() blocks
        counted where their condition holds now)."""
        return sum(len(launches) for launches, _, c in self._segments
                   if c is None or c.needed())

    def reset(self):
        """Forget the capture and give its memory back (the graph can capture again)."""
        with self._lock:
            pools, held, device = list(self._pools.values()), self._buffers, self._device
            self._reset_state()
        for buf, nbytes, ref in held.values():
            storage = ref()
            if storage is not None and storage.buf is buf:
                storage.counted = True  # a tensor still holds it: counted until it dies
            else:
                device._release(nbytes)
        held.clear()  # the buffers go back to the pools, which give them to the driver
        for pool in pools:
            pool.free_held()

    def __del__(self):
        if getattr(self, "_buffers", None):
            self.reset()

    def pool(self):
        """torch's pool handle, for another capture's pool argument: this graph."""
        return self

    def debug_dump(self, path):
        raise NotImplementedError("Graph.debug_dump: cltensor graphs have no dump format")

    def __repr__(self):
        return f"Graph({self._state}, {self.launches()} launches)"


CUDAGraph = Graph


@contextlib.contextmanager
def graph(cuda_graph, pool=None, stream=None, capture_error_mode=None):
    """Capture this thread's launches inside the block into `cuda_graph` (torch.cuda.graph's
    signature; pool: another graph's pool() to share, see Graph.capture_begin; stream:
    accepted and unused). An error inside the block ends the capture and resets the graph."""
    cuda_graph.capture_begin(pool, capture_error_mode)
    try:
        yield cuda_graph
    except BaseException:
        cuda_graph._abort()
        raise
    cuda_graph.capture_end()


def is_current_stream_capturing():
    """Whether this thread is capturing a graph."""
    return capturing.graph is not None


def current_graph():
    """The graph this thread captures into, or None."""
    return capturing.graph


def on_replay(update):
    """Inside a capture: call update() before each replay of the graph (an optimizer that keeps
    a step count on the host advances it and sets its launch's arguments again); outside one,
    nothing."""
    g = capturing.graph
    if g is not None:
        g._updates.append(update)


def last_launch():
    """Inside a capture: (Kernel object, arguments) of the last launch captured in this thread;
    an on_replay update may set the Kernel's arguments again (all of them, with set_args)."""
    g = capturing.graph
    if g is None or g._last is None:
        raise GraphCaptureError("last_launch: no launch captured in this thread")
    return g._last
