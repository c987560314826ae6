"""Building kernels from cl_kernels/*.cl: one build per (context, file, options), cached in memory
and on disk: by the driver where it caches builds from source itself (PoCL, NVIDIA; PoCL's
cache kept under cltensor's cache root and guarded, see pocl_cache.py), elsewhere by
cltensor's binary cache in a folder keyed by device name and driver version.

The binary cache holds one file per build, <sha256 of device key, options and source>.bin: a
magic line, a JSON header (the key, the binary's size and sha256) and the raw binary; no
pickle. Its folders are created 0700 and refused (diskfiles.private_dir) when another user
owns them or others can write them; a file that fails its checks or does not build is removed
with one CacheWarning and the program built from source again; files are written atomically.
"""
import contextlib
import hashlib
import json
import os
import re
import threading
import warnings
from pathlib import Path

import numpy as np
import pyopencl as cl
from pyopencl import _cl
import pyopencl.characterize as cl_characterize

from . import caches, pocl_cache, profiler
from . import dtypes as dt
from .device import Storage, capturing, watching
from .diskfiles import private_dirs, warn_once, write_atomic

_HERE = Path(__file__).resolve().parent
# An installed wheel carries the kernels as cltensor/cl_kernels; a source checkout has them beside.
KERNEL_DIR = _HERE / "cl_kernels" if (_HERE / "cl_kernels").is_dir() else _HERE.parent / "cl_kernels"

_programs = caches.register("program.programs", {})
_kernels = caches.register("program.kernels", {})
_sources = caches.register("program.sources", {})
# file names -> their sources joined (read_sources)
_joined = caches.register("program.joined", {})
# Device -> device_key(): its driver strings are fixed for the process
_device_keys = caches.register("program.device_keys", {})


class KernelBuildError(RuntimeError):
    """An OpenCL program failed to build; carries the file, the options and the compiler's log."""

    def __init__(self, filename, options, log):
        self.filename, self.options, self.log = filename, options, log
        super().__init__(f"OpenCL build of {filename} failed\n  options: {' '.join(options)}\n"
                         f"  compiler log:\n{log}")


def cache_root():
    """cltensor's per-user cache folder: $CLTENSOR_CACHE_DIR, else $XDG_CACHE_HOME/cltensor,
    else ~/.cache/cltensor."""
    env = os.environ
    return _cache_root(env.get("CLTENSOR_CACHE_DIR"), env.get("XDG_CACHE_HOME"), env.get("HOME"))


@caches.lru_cache(maxsize=16)
def _cache_root(own, xdg, home):
    # NOTE: memoized by the variables it reads (HOME through expanduser); GEMM's tuned-entry
    # lookup asks on every call
    return own or os.path.join(xdg or os.path.expanduser("~/.cache"), "cltensor")


# NOTE: before any platform is opened, so that PoCL reads its cache folder from here
pocl_cache.setup(cache_root())


def device_key(device):
    """A file-name-safe key of a device, its driver and platform versions (cache file names)."""
    key = _device_keys.get(device)
    if key is None:
        d = device.cl_device
        key = _device_keys[device] = re.sub(
            r"[^A-Za-z0-9_.-]+", "_", f"{d.name}-{d.driver_version}-{d.platform.version}")[:120]
    return key


def cache_dir(device):
    """The on-disk binary cache of one device: <cache root>/kernels/<device>-<driver>."""
    return os.path.join(cache_root(), "kernels", device_key(device))


# dims of the Shape and View structs of cl_kernels/common.cl; launchers check shapes against it
MAX_DIMS = 8
COMMON_INCLUDE = '#include "common.cl"'


def read_source(filename):
    """A kernel file's text, memoized, with its `#include "common.cl"` line replaced by
    MAX_DIMS's definition and common.cl's text (then a #line, so logs keep the file's lines)."""
    if filename not in _sources:
        text = _kernel_file(filename)
        head, sep, tail = text.partition(COMMON_INCLUDE + "\n")
        if sep:
            line = head.count("\n") + 2
            text = (f"{head}#define MAX_DIMS {MAX_DIMS}\n{_kernel_file('common.cl')}"
                    f"#line {line}\n{tail}")
        _sources[filename] = text
    return _sources[filename]


def _kernel_file(filename):
    path = KERNEL_DIR / filename
    if not path.is_file():
        raise FileNotFoundError(f"kernel file {filename} not found in {KERNEL_DIR}")
    return path.read_text()


def read_sources(*filenames):
    """The sources of `filenames` joined in order, memoized: the same string object on every
    call, so the kernel caches keyed by it hash it once rather than on every lookup."""
    src = _joined.get(filenames)
    if src is None:
        src = _joined[filenames] = "".join(read_source(f) for f in filenames)
    return src


def _define(name, value):
    if isinstance(value, bool):
        value = int(value)
    return f"-D{name}" if value is None else f"-D{name}={value}"


def build_options(defines):
    """-D options from a dict; a None value defines the bare name."""
    return tuple(_define(k, v) for k, v in sorted(defines.items()))


def build_program(device, filename, defines=None, source=None, rebuild=None):
    """The built program of `filename` (or of `source`, named `filename`) with -D `defines`.

    rebuild: None, or a function of the built program's binary (bytes) that returns another
    binary, which is then built instead (the NVIDIA plug-in edits the PTX that NVIDIA's driver
    returns as the binary).
    """
    options = build_options(defines or {})
    key = (device, filename, source, options, rebuild)
    prog = _programs.get(key)
    if prog is None:
        src = source if source is not None else read_source(filename)
        prog = _build(device, filename, src, options)
        if rebuild is not None:
            prog = _build_binary(device, filename, rebuild(prog.binaries[0]), options)
        _programs[key] = prog
    return prog


# asked of devices that offer it (Device.exact_div_sqrt): float division and sqrt rounded as
# IEEE 754 and torch round them (NVIDIA's OpenCL divides to 2 ulp without it)
EXACT_DIV_SQRT = "-cl-fp32-correctly-rounded-divide-sqrt"


def _build(device, filename, src, options):
    if device.exact_div_sqrt:
        options = options + (EXACT_DIV_SQRT,)
    if device.has_fp64:
        src = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" + src
    # NOTE: where the driver caches source builds itself, asking it for binaries is costly:
    # PoCL compiles every kernel of the program up front for them (an xgemm build took 1.2 s,
    # its binaries 18 s more)
    if cl_characterize.has_src_build_cache(device.cl_device):
        if "portable computing language" in device.cl_device.platform.name.lower():
            pocl_cache.guard()
        return _source_build(device, filename, src, options)
    return _cached_build(device, filename, src, options)


def _quiet_build(program, **kwargs):
    """program.build(**kwargs) without pyopencl's CompilerWarning on success. NOTE: PoCL prints
    notes on source builds and Intel's CPU runtime its options on every build from a binary;
    failures still raise with the full log."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cl.CompilerWarning)
        return program.build(**kwargs)


def _source_build(device, filename, src, options):
    try:
        # NOTE: cache_dir=False: never pyopencl's binary cache, which unpickles its files
        return _quiet_build(cl.Program(device.context, src), options=list(options),
                            devices=[device.cl_device], cache_dir=False)
    except cl.Error as e:
        raise KernelBuildError(filename, options, str(e)) from None


BINARY_MAGIC = b"cltensor-binary 1\n"


def _binary_key(device, src, options):
    h = hashlib.sha256()
    for part in (device_key(device), "\0".join(options), src):
        h.update(part.encode())
        h.update(b"\0\0")
    return h.hexdigest()


def _cached_build(device, filename, src, options):
    """A build through the binary cache (module doc); from source when its folder is refused."""
    folder = private_dirs(cache_root(), "kernels", device_key(device))
    if folder is None:
        return _source_build(device, filename, src, options)
    key = _binary_key(device, src, options)
    path = os.path.join(folder, key + ".bin")
    binary = _read_binary(path, key)
    if binary is not None:
        try:
            return _quiet_build(cl.Program(device.context, [device.cl_device], [binary]),
                                options=list(options), devices=[device.cl_device])
        except cl.Error as e:
            _drop_binary(path, f"the driver refused it: {str(e).splitlines()[0][:120]}")
    prog = _source_build(device, filename, src, options)
    binary = prog.binaries[0]
    header = json.dumps({"key": key, "size": len(binary), "file": filename,
                         "sha256": hashlib.sha256(binary).hexdigest()}).encode()
    with contextlib.suppress(OSError):  # NOTE: a full disk costs the next process a build
        write_atomic(path, BINARY_MAGIC + header + b"\n" + binary)
    return prog


def _read_binary(path, key):
    """The binary stored at path for key; None when missing, or corrupt (then removed)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        _drop_binary(path, str(e))
        return None
    head, _, binary = data[len(BINARY_MAGIC):].partition(b"\n")
    try:
        header = json.loads(head) if data.startswith(BINARY_MAGIC) else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("key") != key or \
            header.get("size") != len(binary) or \
            header.get("sha256") != hashlib.sha256(binary).hexdigest():
        _drop_binary(path, "its header, size or checksum does not match")
        return None
    return binary


def _drop_binary(path, reason):
    with contextlib.suppress(OSError):
        os.unlink(path)
    warn_once(("binary", path), f"cltensor: cached program binary {path} is corrupt "
                                f"({reason}); removed, building from source")


def _build_binary(device, filename, binary, options):
    try:
        return _quiet_build(cl.Program(device.context, [device.cl_device], [binary]))
    except cl.Error as e:
        raise KernelBuildError(filename, options + ("(rebuilt from its edited binary)",),
                               str(e)) from None


def get_kernel(device, filename, name, defines=None, source=None, rebuild=None):
    """Kernel `name` of the built program, memoized (pyopencl makes a new Kernel object, with a
    driver call, on every attribute access).

    NOTE: looked up first by the defines as given (in the caller's order, with the values'
    types, since 2 == 2.0 but -DX=2 is not -DX=2.0), which skips sorting and formatting them
    on every call; other orders reach the same kernel through the options.
    """
    defines = defines or {}
    fast = (device, filename, source, rebuild, name, tuple(defines.items()),
            tuple(map(type, defines.values())))
    try:
        kernel = _kernels.get(fast)
    except TypeError:  # an unhashable value: only the options key it
        fast = kernel = None
    if kernel is None:
        key = (device, filename, source, rebuild, build_options(defines), name)
        kernel = _kernels.get(key)
        if kernel is None:
            kernel = _make_kernel(key, device, filename, name, defines, source, rebuild)
        if fast is not None:
            _kernels[fast] = kernel
    return kernel


_make_lock = threading.RLock()  # one thread at a time builds programs and makes Kernels


# the kernel families that read and write float16/bfloat16 through common.cl's LD/ST macros;
# other files given a 16-bit float type would index `half` buffers directly (no such access
# without cl_khr_fp16) or compute on bfloat16's bits as integers
HALF_FILES = {"elementwise.cl", "ranges.cl", "random.cl", "reduce.cl", "amp.cl", "softmax.cl",
              "norm.cl", "pool.cl", "scan.cl", "sort.cl", "upsample.cl", "indexing.cl", "loss.cl",
              "optim.cl", "gemm_direct.cl", "gemm_rowdot.cl", "gemm_cpu.cl", "gemm_pack.cl",
              "gemm_xgemm.cl", "conv_im2col.cl", "conv_winograd.cl", "nvidia_mma.cl",
              "nvidia_wgmma.cl",
              "conv_implicit.cl", "conv_xgemm.cl"}
_HALF_CTYPES = {d.ctype for d in dt.HALF_TYPES}


def check_half_support(filename, defines):
    """TypeError when a kernel family without 16-bit float loads is built for one."""
    if filename not in HALF_FILES and any(isinstance(v, str) and v in _HALF_CTYPES
                                          for v in defines.values()):
        raise TypeError(f"{filename}: float16/bfloat16 tensors are not supported by this op's "
                        f"kernels yet; convert them with .float() first")


def _make_kernel(key, device, filename, name, defines, source, rebuild):
    """get_kernel's miss: looked up again under the lock, so threads that miss at once build
    the program and make the kernel once."""
    check_half_support(filename, defines)
    with _make_lock:
        kernel = _kernels.get(key)
        if kernel is None:
            prog = build_program(device, filename, defines, source, rebuild)
            kernel = _kernels[key] = getattr(prog, name)
        return kernel


def memo_with(cache, key, anchor, make):
    """make(), remembered in `cache` under key and anchor's id (the parameter sets it is
    computed from, which need not be hashable) while anchor is the same object: the cache keeps
    anchor alive, so its id cannot pass to another object."""
    full = key + (id(anchor),)
    hit = cache.get(full)
    if hit is None or hit[0] is not anchor:
        hit = remember(cache, full, (anchor, make()))
    return hit[1]


MEMO_LIMIT = 4096  # entries a memo cache holds at most


def remember(cache, key, value):
    """cache[key] = value, the cache emptied first when full (a program of ever-new shapes
    starts afresh rather than growing without bound); returns value."""
    if len(cache) >= MEMO_LIMIT:
        cache.clear()
    cache[key] = value
    return value


# id(kernel) -> kernel, for kernels whose argument types are declared (see _declare_arg_types)
_typed = caches.register("program.typed", {})


def _declare_arg_types(kernel, args):
    """Declare a kernel's scalar and struct argument types from its first launch's arguments.

    NOTE: pyopencl sets an undeclared numpy scalar argument through a generic path that costs
    about 10 us per argument (100 us for a typical launch here, measured on PoCL and on
    NVIDIA's driver); declared, the arguments are packed in about 1 us in all.
    """
    if _typed.get(id(kernel)) is not kernel:
        kernel.set_scalar_arg_dtypes(arg_dtypes(args))
        _typed[id(kernel)] = kernel


def arg_dtypes(args):
    """The dtypes of a launch's scalar and struct arguments, None for the others (buffers,
    local memory), as Kernel.set_scalar_arg_dtypes takes them."""
    return [a.dtype if isinstance(a, np.generic) or
            (isinstance(a, np.ndarray) and a.dtype.kind == "V") else None for a in args]


# NVIDIA's OpenCL, like CUDA, allows at most this many work-groups along dims 1 and 2
MAX_GROUPS = 65535


def launch(device, kernel, global_size, local_size, *args):
    """Enqueue `kernel` on the device's queue, recording it when this thread's profiler is
    active (and in the list of record(), inside one); inside a graph capture (cltensor.graphs)
    the launch is captured and not run.

    A launch whose outermost dim (of two or three) needs more than MAX_GROUPS work-groups is cut
    into several, told apart by their global offset (kernels read get_global_id, which includes
    it). Returns the last event (None when captured).

    NOTE: a Kernel object holds its arguments until the next launch sets others, so setting
    them and enqueueing happen under the device's launch lock: another thread launching the
    same kernel object in between would run it with its own arguments (docs/threads.md).
    """
    if _state.recording is not None:
        _state.recording.append((kernel, tuple(global_size), local_size, _recorded(args)))
    if capturing.graph is not None:
        return capturing.graph._launch(device, kernel, global_size, local_size, args)
    gsize = tuple(global_size)
    outer = len(gsize) - 1
    if outer == 0 or gsize[outer] // (local_size[outer] if local_size else 1) <= MAX_GROUPS:
        if profiler._state.active:
            with device.launch_lock:
                _declare_arg_types(kernel, args)
                event = kernel(device.profiling_queue(), gsize, local_size, *args)
            profiler.record(kernel, gsize, local_size, event)
            return event
        with device.launch_lock:
            if _typed.get(id(kernel)) is not kernel:  # NOTE: _declare_arg_types, inlined
                _declare_arg_types(kernel, args)
            return kernel(device._queue or device.queue, gsize, local_size, *args)
    for size, offset in launch_pieces(gsize, local_size):
        with device.launch_lock:
            _declare_arg_types(kernel, args)
            queue = device.profiling_queue() if profiler._state.active else device.queue
            event = kernel(queue, size, local_size, *args, global_offset=offset)
        profiler.record(kernel, size, local_size, event)
    return event


def launch_pieces(gsize, lsize):
    """(global size, global offset) of each launch that a launch of gsize is cut into: one
    (offset None) unless its outermost dim needs more than MAX_GROUPS work-groups."""
    gsize = tuple(gsize)
    outer = len(gsize) - 1
    if outer == 0 or gsize[outer] // (lsize[outer] if lsize else 1) <= MAX_GROUPS:
        return [(gsize, None)]
    if lsize is None or any(g // lsize[k] > MAX_GROUPS for k, g in enumerate(gsize[1:outer], 1)):
        raise ValueError(f"a launch of {gsize} work-items needs more than {MAX_GROUPS} "
                         f"work-groups along an inner dim")
    step = MAX_GROUPS * lsize[outer]
    return [(gsize[:outer] + (min(step, gsize[outer] - start),), (0,) * outer + (start,))
            for start in range(0, gsize[outer], step)]


class _ThreadState(threading.local):
    recording = None  # while record() runs in this thread: its Recording


_state = _ThreadState()


class Recording(list):
    """record()'s launches, in order, with the Storages allocated in the block (fresh, as
    device.watching notes them) and whether the block did what a replay would not (foreign:
    it enqueued a copy or fill itself, or wrote a storage it did not allocate), once the
    block has ended; derived: the cached values it read (derive()); bumped: those storages
    it wrote (a caller that bumps their versions itself after each replay may still replay
    the block: Replay.make's writes), and whether it was foreign for another reason
    (own_foreign)."""

    fresh = ()
    own_foreign = False
    bumped = ()
    derived = ()  # derive(): (source Storage, (shape, strides, offset, dtype), key, make,
    # value, index of the next launch)

    @property
    def foreign(self):
        return self.own_foreign or bool(self.bumped)


def derive(w, key, make, value):
    """Note in the block being recorded (if any) that `value` is make(w) cached for the view w
    and key (conv's weight transforms, common.per_weight): a replay looks it up again for its
    own weight rather than reading the recorded buffer (conv/plans.py)."""
    recording = _state.recording
    if recording is not None:
        recording.derived.append((w.storage, (w.shape, w.strides, w.offset, w.dtype), key,
                                  make, value, len(recording)))


@contextlib.contextmanager
def paused():
    """Launches and allocations inside the block are not the recorded block's (a cache fill
    that a replay repeats by itself, derive())."""
    w = watching
    saved = (_state.recording, w.fresh, w.fresh_ids, w.bumped, w.foreign, w.launches)
    _state.recording = w.fresh = w.fresh_ids = w.bumped = w.launches = None
    try:
        yield
    finally:
        _state.recording, w.fresh, w.fresh_ids, w.bumped, w.foreign, w.launches = saved


@contextlib.contextmanager
def record():
    """Collect the launches this thread makes inside the block, in order, as Replay.make takes
    them (other threads' launches are not theirs to replay), each buffer argument as a
    RecordedBuffer. Only launch() records: a block that also enqueues copies or fills itself
    is marked foreign and cannot be replayed. Blocks nest: an inner block's launches,
    allocations and marks are the outer one's too."""
    w = watching
    outer, saved = _state.recording, (w.fresh, w.fresh_ids, w.bumped, w.foreign, w.launches)
    out = _state.recording = w.launches = Recording()
    out.derived = []
    w.fresh, w.fresh_ids, w.bumped, w.foreign = [], set(), [], False
    try:
        yield out
    finally:
        out.fresh, out.own_foreign, out.bumped = w.fresh, w.foreign, tuple(w.bumped)
        _state.recording = outer
        if outer is not None:
            base = len(outer)
            outer.extend(out)
            outer.derived.extend(d[:5] + (d[5] + base,) for d in out.derived)
            saved[0].extend((s, b, n, at + base) for s, b, n, at in w.fresh)
            saved[1].update(w.fresh_ids)
            saved[2].extend(s for s in w.bumped if id(s) not in saved[1])
            saved = saved[:3] + (saved[3] or w.foreign, saved[4])
        w.fresh, w.fresh_ids, w.bumped, w.foreign, w.launches = saved


class RecordedBuffer:
    """A buffer argument of a recorded launch: its id only, so that a buffer the block lets go
    is freed in it (a chunked algorithm's scratch)."""

    __slots__ = ("id",)

    def __init__(self, buf):
        self.id = id(buf)


def _recorded(args):
    return tuple([RecordedBuffer(a) if isinstance(a, cl.MemoryObjectHolder) else a
                  for a in args])


class Replay:
    """Recorded launches, enqueued again with other buffers in the recorded ones' roles.

    A caller whose launches are fixed by a key it keeps (shapes, strides, offsets, the flags and
    tunables that choose kernels) replays them for the next call with that key: the host work
    that chose the kernels, sizes and arguments is skipped (Winograd's three launches on the
    H200's host: about 90 us of Python for kernels of 0.1 ms). Only buffers change: the
    caller's tensors, and scratch the block allocated, which each replay allocates again.
    """

    def __init__(self, launches, scratch=(), outputs=()):
        self.launches = launches  # [(kernel, global, local, arguments, ((position, role), ...))]
        self.scratch = scratch  # bytes of each scratch buffer; role ("scratch", i) is the i-th
        # per launch: the scratch buffers to allocate before it and to let go after it
        self.lifetimes = _lifetimes(launches, len(scratch))
        self.outputs = outputs  # make()'s outputs' scratch indexes (None: not scratch)
        self.own = None  # _direct_steps: Kernel objects of its own, made on the first replay

    @classmethod
    def make(cls, launches, roles, outputs=(), writes=(), since=None):
        """A Replay of record()'s launches, each buffer argument replaced by its role in
        `roles` ({role: buffer}, roles not tuples) or, for a buffer allocated inside the block,
        by a scratch role; None when an argument is another buffer (a cache of its own, which
        a replay could not know), one buffer plays two roles, or the block was foreign
        (Recording) other than by writing Storages of `writes` (the caller's, whose versions
        it bumps after each replay as the block did). `outputs`: Storages the block made for
        its caller, whose scratch indexes the Replay's outputs give. `since`: {role: index of
        the launch from which its buffer plays it} for buffers made during the block outside
        its recording (derive()), whose buffer object a scratch that died earlier may have
        had."""
        by_id = {id(buf): role for role, buf in roles.items()}
        if len(by_id) != len(roles) or not _replayable(launches, writes):
            return None
        late = sorted(((at, id(roles[role]), role) for role, at in (since or {}).items()),
                      key=lambda e: e[0], reverse=True)
        for _, buf_id, _ in late:
            del by_id[buf_id]
        callers, scratch, index = set(by_id), [], {}
        fresh = list(getattr(launches, "fresh", ()))[::-1]

        def allocated(upto):
            """Give the buffers allocated before launch `upto` their scratch roles, and the
            late roles theirs."""
            while fresh and fresh[-1][3] <= upto:
                storage_id, buf_id, nbytes, _ = fresh.pop()
                if buf_id not in callers:  # NOTE: else a caller's buffer the block made
                    by_id[buf_id] = ("scratch", len(scratch))
                    index[storage_id] = len(scratch)
                    scratch.append(nbytes)
            while late and late[-1][0] <= upto:
                _, buf_id, role = late.pop()
                by_id[buf_id] = role
        out = []
        for j, (kernel, gsize, lsize, args) in enumerate(launches):
            allocated(j)
            args, slots = list(args), []
            for i, a in enumerate(args):
                if a.__class__ is RecordedBuffer or isinstance(a, cl.MemoryObjectHolder):
                    role = by_id.get(a.id if a.__class__ is RecordedBuffer else id(a))
                    if role is None:
                        return None
                    slots.append((i, role))
                    args[i] = None  # NOTE: holding the recorded buffers would keep them alive
            out.append((kernel, gsize, lsize, args, tuple(slots)))
        allocated(len(launches))
        outputs = tuple(index.get(id(s)) for s in outputs)
        return cls(out, tuple(scratch), outputs)

    def __call__(self, device, buffers, keep=()):
        """Enqueue the launches with buffers[role] in each role's places (buffers: a mapping,
        or a sequence where the roles are its indexes), each scratch buffer allocated before
        its first launch and let go after its last (as the recorded block did), but those of
        the scratch indexes in `keep`: returns their Storages."""
        # NOTE: straight to the queue unless launch() has more to do (recording, capturing,
        # profiling: per thread, so unchanged during the loop, or pieces of a large launch)
        if (_state.recording is None and capturing.graph is None and
                not profiler._state.active and self.lifetimes.direct):
            return self._direct(device, buffers, keep)
        held = {}
        for (kernel, gsize, lsize, template, slots), (new, done, _) in zip(
                self.launches, self.lifetimes):
            for i in new:
                held[i] = Storage(device, self.scratch[i])
            args = template.copy()
            for i, role in slots:
                args[i] = buffers[role] if role.__class__ is not tuple else held[role[1]].buf
            launch(device, kernel, gsize, lsize, *args)
            for i in done:
                if i not in keep:
                    del held[i]
        return [held[i] if i in held else Storage(device, self.scratch[i]) for i in keep]

    def _direct(self, device, buffers, keep):
        """__call__ on Kernel objects of the Replay's own, each launch setting only its buffer
        arguments, under the launch lock (a Kernel holds its arguments until the enqueue);
        scratch is allocated outside it (an allocation may enqueue, as a poisoning one does)."""
        steps = self.own
        if steps is None:
            steps = self.own = _direct_steps(self.launches, self.lifetimes)
        held, scratch, lock = {}, self.scratch, device.launch_lock
        for kernel, gsize, lsize, new, done, callers, scratches in steps:
            for i in new:
                held[i] = Storage(device, scratch[i])
            with lock:
                for i, role in callers:
                    kernel.set_arg(i, buffers[role])
                for i, k in scratches:
                    kernel.set_arg(i, held[k].buf)
                _enqueue(device._queue or device.queue, kernel, gsize, lsize, None, None,
                         False, False)
            for i in done:
                if i not in keep:
                    del held[i]
        return [held[i] if i in held else Storage(device, scratch[i]) for i in keep]


def _replayable(launches, writes):
    """Whether a Recording was not foreign, or only by writing Storages of `writes`."""
    if not getattr(launches, "foreign", False):
        return True
    allowed = {id(s) for s in writes}
    return not launches.own_foreign and all(id(s) in allowed for s in launches.bumped)


_enqueue = _cl.enqueue_nd_range_kernel  # NOTE: positional, the fastest call (cltensor.graphs)


def _own_kernel(kernel, template):
    """A Kernel object of a recorded launch's own, its arguments but the buffers set once (a
    replay sets only the buffers: pyopencl's call sets every argument, in Python)."""
    own = cl.Kernel(kernel.program, kernel.function_name)
    own.set_scalar_arg_dtypes(arg_dtypes(template))
    own.set_args(*template)
    return own


def _direct_steps(launches, lifetimes):
    """Replay._direct's steps: per launch its own Kernel, sizes, the scratch indexes to
    allocate before it and let go after it, and its buffer slots split into the caller's
    (position, role) and the scratch's (position, scratch index)."""
    out = []
    for (kernel, gsize, lsize, template, slots), (new, done, _) in zip(launches, lifetimes):
        callers = tuple((i, r) for i, r in slots if r.__class__ is not tuple)
        scratches = tuple((i, r[1]) for i, r in slots if r.__class__ is tuple)
        out.append((_own_kernel(kernel, template), gsize, lsize, tuple(new), tuple(done),
                    callers, scratches))
    return out


class _Lifetimes(list):
    """_lifetimes' list, with `direct`: whether every launch is a single piece (none is cut
    by launch_pieces), so that a replay may enqueue them straight."""

    direct = True


def _lifetimes(launches, nscratch):
    """[(scratch indexes first used by launch j, those last used by it, whether it is one
    launch_pieces piece)] for each launch j."""
    first, last = {}, {}
    for j, (*_, slots) in enumerate(launches):
        for _, role in slots:
            if role.__class__ is tuple:
                first.setdefault(role[1], j)
                last[role[1]] = j
    out = _Lifetimes(([], [], len(launch_pieces(gsize, lsize)) == 1)
           for _, gsize, lsize, *_ in launches)
    out.direct = all(single for *_, single in out)
    for i in range(nscratch):
        if i in first:
            out[first[i]][0].append(i)
            out[last[i]][1].append(i)
    return out


def sizes_1d(device, n, group=None):
    """(global, local) sizes for n work-items of a kernel that ignores the ones past n.

    NOTE: a fixed group size on CPUs too: with local size None, PoCL picks one from the global
    size (1 for a prime n: 50x slower) and compiles the kernel again for every new choice.
    """
    group = min(group or (1024 if device.is_cpu else 256), device.max_work_group)
    return (round_up(max(n, 1), group),), (group,)


def round_up(n, m):
    return (n + m - 1) // m * m


def ctype_of(dtype):
    """The OpenCL C type of a dtype (cltensor's, numpy's or a name), from the dtypes table."""
    return dt.as_dtype(dtype).ctype
