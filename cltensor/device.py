"""OpenCL devices: discovery, the default device, one context/queue/memory pool per device."""
from __future__ import annotations

import os
import re
import sys
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyopencl as cl
import pyopencl.tools as cl_tools

from . import pocl_threads

NO_DEVICE_HELP = (
    "cltensor: no OpenCL device found. Install an OpenCL driver, for example PoCL for the CPU:\n"
    "  Debian/Ubuntu: apt-get install pocl-opencl-icd\n"
    "  anywhere else: pip install pocl-binary-distribution")


class DeviceError(RuntimeError):
    """No usable OpenCL device, or a device that does not match a request."""


class OutOfMemoryError(RuntimeError):
    """An allocation larger than the device allows, or one the device could not satisfy."""


@dataclass(frozen=True)
class DeviceInfo:
    index: str
    platform: str
    name: str
    type: str
    compute_units: int
    global_mem: int
    local_mem: int
    max_alloc: int
    max_work_group: int
    fp64: bool
    version: str
    driver: str


class _Capturing(threading.local):
    graph = None  # the cltensor.graphs.Graph this thread captures into


capturing = _Capturing()


class _Watching(threading.local):
    # while program.record() runs in this thread: (id of the Storage, id of its buffer, bytes,
    # launches recorded before it) of each Storage allocated since, and their ids; ids, so that
    # the block's scratch can die in it (and an id pass to a later buffer)
    fresh = None
    fresh_ids = None
    launches = None  # the block's recorded launches
    bumped = None  # the Storages allocated before it whose version it bumped (writes them)
    foreign = False  # set when this thread did what a replay would not (a copy, a cache fill)


watching = _Watching()


@dataclass(frozen=True)
class Description:
    """What a device reports that kernel defaults depend on (cltensor/defaults.py). It has
    Device's names for the limits (is_cpu, max_work_group, local_mem), so that the ops'
    choices accept it; tests describe devices that are not present with it."""
    name: str
    platform: str
    vendor: str  # the driver's vendor string
    driver: str
    kind: str  # "cpu", "gpu" or "other"
    compute_units: int
    local_mem: int
    max_work_group: int
    max_work_item_sizes: tuple
    vector_width: int  # float lanes the device prefers (the larger of preferred and native)
    simd_width: int  # work-items run in lockstep: a subgroup, warp or wavefront; CPUs: lanes
    fp64: bool
    arch: str = ""  # the GPU's architecture where the driver says it (sm_90, gfx90a), else ""

    @property
    def is_cpu(self):
        return self.kind == "cpu"

    @property
    def is_gpu(self):
        return self.kind == "gpu"


# The lockstep width's cl_device_info code, by the extension that defines it: Intel's subgroup
# sizes, NVIDIA's warp, AMD's wavefront
_SIMD_QUERIES = (("cl_intel_required_subgroup_size", 0x4108),
                 ("cl_nv_device_attribute_query", 0x4003),
                 ("cl_amd_device_attribute_query", 0x4043))


def _simd_width(cl_device, lanes):
    """The device's lockstep width; only the queries its extensions define are asked (a
    checking runtime such as Oclgrind reports any other as an error)."""
    extensions = cl_device.extensions.split()
    for extension, code in _SIMD_QUERIES:
        if extension not in extensions:
            continue
        try:
            value = cl_device.get_info(code)
        except (cl.Error, ValueError, TypeError):
            continue
        width = max(value) if isinstance(value, (list, tuple)) else value
        if isinstance(width, int) and width > 0:
            return width
    return lanes if cl_device.type & cl.device_type.CPU else 1


def _arch(cl_device):
    """The GPU architecture a tuned entry of a sibling device may serve (tunedb): NVIDIA's
    compute capability as sm_XY, AMD's gfx target (its OpenCL device name); else ""."""
    extensions = cl_device.extensions.split()
    if "cl_nv_device_attribute_query" in extensions:
        try:  # CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV, _MINOR_NV
            return f"sm_{cl_device.get_info(0x4000)}{cl_device.get_info(0x4001)}"
        except (cl.Error, ValueError, TypeError):
            return ""
    name = getattr(cl_device, "name", "").strip()
    if "cl_amd_device_attribute_query" in extensions and name.startswith("gfx"):
        return name.split(":")[0]
    return ""


class Device:
    """One OpenCL device with its lazily made context, in-order queue and memory pool.

    Every thread's commands go to the one queue, so they run in the order they were issued.
    The queue has no profiling but while a thread profiles: the first launch inside
    cltensor.profile() moves the device to a queue with profiling (profiling_queue), the end of
    the last profile moves it back (stop_profiling); every thread's commands follow, in order
    (docs/threads.md).

    NOTE: profiling costs PoCL no host time we could measure, but NVIDIA's driver enqueued
    about 6 us slower with it (H200 host, 19 against 13 us a launch).
    """

    def __init__(self, index: str, cl_device: cl.Device) -> None:
        self.index = index
        self.cl_device = cl_device
        self.name = cl_device.name.strip()
        self.platform_name = cl_device.platform.name.strip()
        self.is_gpu = bool(cl_device.type & cl.device_type.GPU)
        self.is_cpu = bool(cl_device.type & cl.device_type.CPU)
        self.has_fp64 = "cl_khr_fp64" in cl_device.extensions
        # NOTE: OpenCL lets float division and sqrt be 2.5-3 ulp off unless the device offers
        # correct rounding and the build asks for it (program.py); torch's are exact (x / x is 1)
        self.exact_div_sqrt = bool(
            cl_device.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT)
        self.max_alloc = cl_device.max_mem_alloc_size
        self.max_work_group = cl_device.max_work_group_size
        self.local_mem = cl_device.local_mem_size
        self.compute_units = cl_device.max_compute_units
        self._context = self._queue = self._pool = self._description = None
        self.profiling = False  # whether the queue has profiling enabled
        self.launch_lock = threading.Lock()  # program.launch: a kernel's arguments and enqueue
        self._count_lock = threading.Lock()  # _count: folding the deltas into the counts
        self._deltas = []  # byte counts allocated (+) and released (-), in order, not yet counted
        self._allocated = 0
        self._peak = 0

    @property
    def context(self) -> cl.Context:
        if self._context is None:
            with _start_lock:
                if self._context is None:
                    self._context = cl.Context([self.cl_device])
        return self._context

    @property
    def queue(self) -> cl.CommandQueue:
        """The device's one in-order queue."""
        q = self._queue
        if q is None:
            with _start_lock:
                if self._queue is None:
                    self._queue = cl.CommandQueue(self.context, self.cl_device)
                q = self._queue
        return q

    def profiling_queue(self) -> cl.CommandQueue:
        """The queue, moved to one with profiling enabled if it has none yet; call it with
        launch_lock held. The old queue is drained first, so commands keep their order."""
        if not self.profiling:
            self._move_queue(cl.command_queue_properties.PROFILING_ENABLE)
            _profiled.add(self)
        return self._queue

    def _move_queue(self, properties):
        self.queue.finish()
        self._queue = cl.CommandQueue(self.context, self.cl_device, properties=properties)
        self.profiling = bool(properties)

    def enqueue(self, command: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """command(queue, *args, **kwargs) under launch_lock, so that it goes to the current
        queue (copies and fills; pass is_blocking=False and wait on the event outside); inside
        a graph capture, captured or refused (cltensor.graphs) and not run."""
        if watching.fresh is not None:
            watching.foreign = True
        if capturing.graph is not None:
            return capturing.graph._enqueue(self, command, args, kwargs)
        with self.launch_lock:
            return command(self.queue, *args, **kwargs)

    @property
    def pool(self) -> cl_tools.MemoryPool:
        if self._pool is None:
            with _start_lock:
                if self._pool is None:
                    self._pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(self.queue))
        return self._pool

    def allocate(self, nbytes: int, pool: Any = None) -> cl_tools.PooledBuffer:
        """A pooled buffer of at least nbytes (at least one byte), from `pool` or the device's;
        counted in memory_stats."""
        if nbytes > self.max_alloc:
            raise OutOfMemoryError(
                f"cannot allocate {nbytes} bytes on {self}: the device's largest allocation "
                f"is {self.max_alloc} bytes")
        try:
            # NOTE: no lock: pyopencl's pool allocates in C++ without releasing the GIL
            buf = (pool or self._pool or self.pool).allocate(max(nbytes, 1))
        except cl.Error as e:
            raise OutOfMemoryError(f"cannot allocate {nbytes} bytes on {self}: {e}") from None
        deltas = self._deltas
        deltas.append(nbytes)
        if len(deltas) >= COUNT_EVERY:
            self._count()
        return buf

    def _release(self, nbytes):
        # NOTE: called from __del__, in any thread and at any time (inside allocate too), so it
        # only appends: list.append is atomic, and no update is lost
        self._deltas.append(-nbytes)

    def _count(self):
        """(bytes held by live tensors, peak since the last reset)."""
        with self._count_lock:
            return self._fold(), self._peak

    def _fold(self):
        """Fold the pending deltas into the counts in the order they happened; the caller
        holds _count_lock. Returns the bytes held."""
        deltas = self._deltas
        n = len(deltas)
        pending = deltas[:n]
        del deltas[:n]  # appends made meanwhile stay, after the first n
        allocated, peak = self._allocated, self._peak
        for d in pending:
            allocated += d
            peak = allocated if allocated > peak else peak
        self._allocated, self._peak = allocated, peak
        return allocated

    def reset_peak(self) -> None:
        with self._count_lock:
            self._peak = self._fold()

    @property
    def allocated(self) -> int:
        return self._count()[0]

    @property
    def peak(self) -> int:
        return self._count()[1]

    def synchronize(self) -> None:
        self.queue.finish()

    def info(self) -> DeviceInfo:
        d = self.cl_device
        kind = "GPU" if self.is_gpu else "CPU" if self.is_cpu else "other"
        return DeviceInfo(self.index, self.platform_name, self.name, kind, d.max_compute_units,
                          d.global_mem_size, d.local_mem_size, d.max_mem_alloc_size,
                          d.max_work_group_size, self.has_fp64, d.version, d.driver_version)

    @property
    def type(self) -> str:
        """torch's device type: "cpu" for a CPU device, "cuda" for a GPU, else "opencl"."""
        return "cpu" if self.is_cpu else "cuda" if self.is_gpu else "opencl"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TorchDevice):
            return other == self
        return self is other

    __hash__ = object.__hash__  # devices are unique: identity, as before __eq__ was defined

    def __reduce__(self):
        # NOTE: unpickled on the default device of the same type (a context cannot be pickled)
        return device_of_type, (self.type,)

    def description(self) -> Description:
        """The device's Description (queried once)."""
        if self._description is None:
            d = self.cl_device
            lanes = max(d.preferred_vector_width_float, d.native_vector_width_float, 1)
            kind = "gpu" if self.is_gpu else "cpu" if self.is_cpu else "other"
            self._description = Description(
                self.name, self.platform_name, d.vendor.strip(), d.driver_version.strip(), kind,
                d.max_compute_units, self.local_mem, self.max_work_group,
                tuple(d.max_work_item_sizes), lanes, _simd_width(d, lanes), self.has_fp64,
                _arch(d))
        return self._description

    def __repr__(self) -> str:
        return f"Device('{self.index}', '{self.name}')"

    def __str__(self) -> str:
        return f"cl:{self.index} ({self.name})"


class Storage:
    """A device buffer of nbytes; the pool gets it back (and memory_stats forgets it) when it dies."""

    buf = None  # stays None when the allocation fails
    counted = True  # False: a graph holds the buffer and counts it (cltensor.graphs)

    def __init__(self, device, nbytes):
        self.device = device
        self.nbytes = nbytes
        graph = capturing.graph  # inside a capture, from the graph's pool, kept by the graph
        self.buf = device.allocate(nbytes) if graph is None else \
            graph._allocate(device, nbytes, self)
        self._version = 0
        fresh = watching.fresh
        if fresh is not None:
            fresh.append((id(self), id(self.buf), nbytes, len(watching.launches)))
            watching.fresh_ids.add(id(self))

    @property
    def version(self):
        """Bumped by every in-place write: autograd checks saved tensors with it, conv keeps
        weight transforms by it. Inside a graph capture the graph notes each bump, and every
        replay makes it again."""
        return self._version

    @version.setter
    def version(self, value):
        graph = capturing.graph
        if graph is not None:
            graph._written(self, value - self._version)
        if watching.bumped is not None and id(self) not in watching.fresh_ids:
            watching.bumped.append(self)
        self._version = value

    def __del__(self):
        # NOTE: __del__ rather than weakref.finalize, which costs microseconds per tensor
        if self.buf is not None:
            if self.counted:
                self.device._release(self.nbytes)
            elif capturing.graph is not None:
                capturing.graph._died(self)


COUNT_EVERY = 1024  # pending allocation deltas that make allocate() fold them into the counts
_devices = None
_default = None
# NOTE: reentrant, as the default device is resolved through all_devices(); held only while a
# device, the default, or a device's context, queue or pool is first made
_start_lock = threading.RLock()


_profiled = set()  # devices moved to a profiling queue (Device.profiling_queue)


def stop_profiling() -> None:
    """Move the devices that profiled back to plain queues (profiler: when no thread profiles);
    a launch inside a later profile() moves them again."""
    for d in list(_profiled):
        with d.launch_lock:
            if d.profiling:
                d._move_queue(0)
        _profiled.discard(d)


def all_devices() -> list[Device]:
    """Every OpenCL device of every platform, as Device objects (made once)."""
    global _devices
    if _devices is None:
        with _start_lock:
            if _devices is None:
                _devices = _discover()
    return _devices


def _discover():
    with pocl_threads.pinned_start():
        try:
            platforms = cl.get_platforms()
        except cl.Error:
            platforms = []
        found = []
        for p, plat in enumerate(platforms):
            try:
                devs = plat.get_devices()
            except cl.Error:
                continue
            found.extend(Device(f"{p}:{d}", dev) for d, dev in enumerate(devs))
    return found


def devices() -> list[DeviceInfo]:
    """A DeviceInfo for every OpenCL device present."""
    return [d.info() for d in all_devices()]


def _pocl_version(dev):
    m = re.search(r"PoCL (\d+)\.(\d+)", dev.cl_device.platform.version)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _pick_default():
    devs = all_devices()
    if not devs:
        raise DeviceError(NO_DEVICE_HELP)
    gpus = [d for d in devs if d.is_gpu]
    rule = gpus[0] if gpus else _best_cpu([d for d in devs if d.is_cpu] or devs)
    spec = (os.environ.get("CLTENSOR_DEVICE") or "").strip()
    if spec and _is_torch_name(spec):  # "cpu", "cuda:1": named from the rule's choice
        return _resolve_torch(*_parse_torch_name(spec), default=rule)
    return get_device(spec) if spec else rule


def _best_cpu(cpus):
    """Of CPU devices, the newest PoCL, then the most compute units."""
    return max(cpus, key=lambda d: (_pocl_version(d), d.cl_device.max_compute_units))


def get_device(spec: DeviceLike = None) -> Device:
    """Resolve a device spec: None (the default), a Device, a torch-style name or device
    ("cpu", "cuda:0", "opencl:1", cltensor.device(...); see TorchDevice), 'p:d' indices, or a
    name substring."""
    if spec is None:
        return default_device()
    if isinstance(spec, Device):
        return spec
    if isinstance(spec, TorchDevice) or is_torch_device(spec):
        return _resolve_torch(spec.type, spec.index)
    if isinstance(spec, int) and not isinstance(spec, bool):
        return _resolve_torch("cuda", spec)  # torch: an int names an accelerator
    if not isinstance(spec, str):
        raise TypeError(f"device must be a Device, a device name such as 'cpu' or 'cuda:0', a "
                        f"'platform:device' index or a name, got {spec!r}")
    devs = all_devices()
    if not devs:
        raise DeviceError(NO_DEVICE_HELP)
    s = spec.strip()
    if _is_torch_name(s):
        return _resolve_torch(*_parse_torch_name(s))
    if s.startswith("cl:"):
        s = s[3:]
    for d in devs:
        if d.index == s:
            return d
    low = s.lower()
    for d in devs:
        if low in d.name.lower() or low in d.platform_name.lower():
            return d
    known = ", ".join(f"{d.index} {d.name}" for d in devs)
    raise DeviceError(f"no OpenCL device matches {spec!r}; devices: {known}")


def default_device() -> Device:
    global _default
    if _default is None:
        with _start_lock:
            if _default is None:
                _default = _pick_default()
    return _default


def set_default_device(spec: DeviceLike) -> Device:
    """Make `spec` (see get_device) the device that creation functions use by default (for
    every thread, as torch.set_default_device is not per thread either)."""
    global _default
    dev = get_device(spec)
    with _start_lock:
        _default = dev
    return dev


def memory_stats(device: DeviceLike = None) -> dict[str, int]:
    """Bytes held by live tensors on the device now, the peak since the last reset, and the pool's size."""
    d = get_device(device)
    pool = d._pool
    allocated, peak = d._count()
    return {"allocated": allocated, "peak": peak,
            "pool_held": pool.managed_bytes if pool is not None else 0}


def empty_cache(device: DeviceLike = None) -> None:
    """Give the memory pool's unused buffers back to the driver, as torch.cuda.empty_cache
    does; live tensors keep theirs. The pool otherwise keeps every freed buffer for reuse (on
    a CPU device that is host memory)."""
    pool = get_device(device)._pool
    if pool is not None:
        pool.free_held()


def reset_peak_memory_stats(device: DeviceLike = None) -> None:
    get_device(device).reset_peak()


def synchronize(device: DeviceLike = None) -> None:
    get_device(device).synchronize()


# ---- torch's device names ---------------------------------------------------------------------
TORCH_TYPES = ("cpu", "cuda", "opencl")
# names torch knows that no OpenCL device stands for here: a clear error rather than a guess
_OTHER_TORCH_TYPES = ("mps", "xpu", "hip", "meta", "mtia", "hpu", "xla", "ipu", "vulkan",
                      "privateuseone", "lazy", "ve", "fpga", "maia", "mkldnn", "opengl", "ideep")
_TORCH_NAME = re.compile(r"([a-z]+)(:-?\d*)?")


class TorchDevice:
    """torch.device's counterpart: cltensor.device("cpu"), ("cuda:0"), ("opencl:1"),
    ("cuda", 1) or (a Device). It names a device; get_device() resolves it to a Device:

        "cpu"        the CPU OpenCL device (the default device's rule among CPU devices), or the
                     default device on a machine without one; "cpu:i" the i-th CPU device
        "cuda"       the default device if it is a GPU, else the first GPU; "cuda:i" the i-th
                     GPU; no GPU: DeviceError
        "opencl"     the default device; "opencl:i" the i-th of all_devices()

    Attributes type and index (None where unnumbered), str() "cuda:0", == and hash as torch.
    """

    __slots__ = ("type", "index")

    def __init__(self, type: str | int | Device | TorchDevice,  # noqa: A002 - torch's name
                 index: int | None = None) -> None:
        type, index = _type_and_index(type, index)
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "index", index)

    def __setattr__(self, name, value):
        raise AttributeError("device objects are immutable")

    def __eq__(self, other):
        if isinstance(other, TorchDevice):
            return (self.type, self.index) == (other.type, other.index)
        if isinstance(other, Device):
            try:
                return get_device(self) is other
            except DeviceError:
                return False
        return NotImplemented

    def __hash__(self):
        return hash((self.type, self.index))

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        index = "" if self.index is None else f", index={self.index}"
        return f"device(type='{self.type}'{index})"

    def __reduce__(self):
        return TorchDevice, (self.type, self.index)


# what get_device and the device= arguments take: a Device, a torch-style device or name ("cpu",
# "cuda:0"), an accelerator index, a 'platform:device' index or a name substring; None: the default
DeviceLike = Device | TorchDevice | str | int | None


def _type_and_index(spec, index):
    """(type, index) from TorchDevice's arguments, checked."""
    if isinstance(spec, TorchDevice) or is_torch_device(spec):
        return spec.type, spec.index
    if isinstance(spec, Device):
        return _torch_name(spec)
    if isinstance(spec, int) and not isinstance(spec, bool) and index is None:
        spec, index = "cuda", spec  # torch: an index alone names an accelerator
    if not isinstance(spec, str):
        raise TypeError(f"device(): expected a string, a device or an index, got {spec!r}")
    if index is None:
        return _parse_torch_name(spec.strip())
    if ":" in spec:
        raise ValueError(f"device(): type {spec!r} has an index already; pass it alone")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise ValueError(f"device(): the index must be an int >= 0, got {index!r}")
    return _parse_torch_name(spec.strip())[0], index


def _parse_torch_name(name):
    """(type, index) of "cuda", "cuda:1", ...; ValueError for anything else."""
    m = _TORCH_NAME.fullmatch(name)
    if not m or m.group(1) not in TORCH_TYPES + _OTHER_TORCH_TYPES:
        raise ValueError(f"device(): expected one of {', '.join(TORCH_TYPES)} (optionally with "
                         f":index), got {name!r}")
    index = m.group(2)
    if index is not None and not index[1:].isdigit():
        raise ValueError(f"device(): invalid device string {name!r}: the index must be an int >= 0")
    return m.group(1), None if index is None else int(index[1:])


def _is_torch_name(s):
    m = _TORCH_NAME.fullmatch(s)
    return bool(m) and m.group(1) in TORCH_TYPES + _OTHER_TORCH_TYPES


def is_torch_device(spec: object) -> bool:
    """A torch.device (torch itself need not be imported here to recognise one)."""
    return type(spec).__name__ == "device" and hasattr(spec, "type") and hasattr(spec, "index")


def cpu_devices() -> list[Device]:
    return [d for d in all_devices() if d.is_cpu]


def gpu_devices() -> list[Device]:
    return [d for d in all_devices() if d.is_gpu]


def preferred_cpu(default: Device | None = None) -> Device:
    """The device "cpu" names: the default device if it is a CPU, else the CPU device the
    default rule would pick, else (no CPU OpenCL device) the default device."""
    default = default or default_device()
    cpus = cpu_devices()
    return default if default.is_cpu or not cpus else _best_cpu(cpus)


def default_gpu(default: Device | None = None) -> Device | None:
    """The device "cuda" names: the default device if it is a GPU, else the first GPU, else None."""
    default = default or default_device()
    gpus = gpu_devices()
    return default if default.is_gpu else gpus[0] if gpus else None


def _resolve_torch(type, index, default=None):  # noqa: A002
    """The Device a torch name stands for; `default` stands in for the default device (while
    it is being picked)."""
    if type not in TORCH_TYPES:
        raise DeviceError(f"device type {type!r} has no OpenCL device here: cltensor runs on "
                          f"{', '.join(repr(t) for t in TORCH_TYPES)} devices")
    if index is None:
        if type == "cpu":
            return preferred_cpu(default)
        if type == "opencl":
            return default or default_device()
        gpu = default_gpu(default)
        if gpu is None:
            raise DeviceError(no_gpu_message("cuda"))
        return gpu
    pool = {"cpu": cpu_devices, "cuda": gpu_devices, "opencl": all_devices}[type]()
    if index >= len(pool):
        if type == "cuda" and not pool:
            raise DeviceError(no_gpu_message(f"cuda:{index}"))
        raise DeviceError(f"device {type}:{index}: there are {len(pool)} {type} devices "
                          f"(indices 0..{len(pool) - 1})")
    return pool[index]


def no_gpu_message(name: str) -> str:
    return (f"device {name!r}: no OpenCL GPU was found, and cltensor's 'cuda' names an OpenCL "
            f"GPU (torch: 'Torch not compiled with CUDA enabled'); use 'cpu', or check "
            f"`python -m cltensor` for the devices present")


def _torch_name(dev):
    """(type, index) that names dev: "cpu" for the preferred CPU device, "cpu:i" for another
    CPU, "cuda:i" for the i-th GPU, "opencl:i" for any other device."""
    kind = dev.type
    if kind == "cpu" and dev is preferred_cpu():
        return "cpu", None
    pool = {"cpu": cpu_devices, "cuda": gpu_devices, "opencl": all_devices}[kind]()
    if dev in pool:
        return kind, next(i for i, d in enumerate(pool) if d is dev)
    return kind, None


def device_of_type(kind: str) -> Device:
    """The default device of a torch type, for unpickling; the default device where the
    machine has none of that type."""
    try:
        return _resolve_torch(kind, None)
    except DeviceError:
        return default_device()


class _DeviceModule(types.ModuleType):
    """cltensor.device is this module and, as torch.device, callable: cltensor.device("cuda:0")
    makes a TorchDevice, and isinstance(x, cltensor.device) tests for one."""

    def __call__(self, type: str | int | Device | TorchDevice,  # noqa: A002
                 index: int | None = None) -> TorchDevice:
        return TorchDevice(type, index)

    def __instancecheck__(self, obj):
        return isinstance(obj, TorchDevice)


sys.modules[__name__].__class__ = _DeviceModule
