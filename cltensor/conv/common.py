"""Helpers shared by the convolution algorithms: kernel getters, strided views, layouts."""
import itertools
import weakref

import numpy as np

from .. import backends, caches, program
from .. import dtypes as dt
from ..device import capturing
from ..ops import activation as act
from ..ops import elementwise as ew
from ..ops.reduce import placeholder_buffer
from ..ops.reduce import sum as sum_
from ..program import ctype_of, launch, round_up
from ..tensor import CHANNELS_LAST, CONTIGUOUS_FORMAT, ClTensor

def half_fallback(fn, input, weight, bias, *args, **kwargs):
    """fn on float32 copies of float16/bfloat16 operands, the result cast back to the input's
    dtype (differentiable casts): for the algorithms that do not read 16-bit tensors in place
    (dispatch.HALF_ALGORITHMS), the plug-ins' (their kernels read 32- or 64-bit floats)."""
    def widen(t):
        return t.to(dt.float32) if isinstance(t, ClTensor) and t.dtype in dt.HALF_TYPES else t
    out = fn(widen(input), widen(weight), widen(bias), *args, **kwargs)
    return out.to(input.dtype)


def is_half(t):
    return isinstance(t, ClTensor) and t.dtype in dt.HALF_TYPES


def compute_dtype(dtype):
    """The type a kernel sums a dtype's values in: float32 for float16 and bfloat16."""
    return dt.float32 if dtype in dt.HALF_TYPES else dtype


def bits_dtype(dtype):
    """The type whose copies move a dtype's elements exactly: int16 for 16-bit floats (zero
    is all zero bits), else the dtype."""
    return dt.int16 if dtype in dt.HALF_TYPES else dtype


def storage_define(dtype, name="TS"):
    """{name: dtype's C type} where the kernels' compute type differs from it (16-bit
    storage, read through common.cl's LD and stored through ST), else {}."""
    return {name: ctype_of(dtype)} if compute_dtype(dtype) != dtype else {}


LOCAL_1D = 256  # work-group size of the 1-d copy kernels off the CPU
# weight Storage -> {view key: (version, value)}
_per_weight = caches.register("conv.common.per_weight", weakref.WeakKeyDictionary())


def get_kernel(device, filename, name, defines, headers=()):
    """A kernel of cl_kernels/<filename> (after the files `headers`) built with `defines`, made
    once per device. The build defines KERNEL_<name>, which files holding many kernels use to
    compile just one."""
    source = program.read_sources(*headers, filename) if headers else None
    return program.get_kernel(device, filename, name, dict(defines, **{f"KERNEL_{name}": None}),
                              source)



def per_weight(w, key, make):
    """make(w), remembered for the weight view w and `key` while w's storage version is
    unchanged: an optimizer's in-place update (or any in-place write) makes it again. For
    weight transforms (Winograd's filters, implicit GEMM's packed panels). make takes the
    view alone (a replayed pass calls it for its own weight: conv/plans.py)."""
    full = (w.offset, w.shape, w.strides, w.dtype, *key)
    if capturing.graph is not None:
        return _captured(capturing.graph, w, full, make)
    per_storage = _per_weight.setdefault(w.storage, {})
    hit = per_storage.get(full)
    if hit is not None and hit[0] == w.storage.version:
        value = hit[1]
    else:
        with program.paused():  # NOTE: not part of a recorded pass, whose replay asks again
            value = make(w)
        per_storage[full] = (w.storage.version, value)
    program.derive(w, key, make, value)
    return value


def clear_per_weight():
    _per_weight.clear()


class _Transform:
    """A weight transform captured in a graph (a conditional block): a replay makes it again
    where eager code would, i.e. unless the cache holds this value for the weight's version
    at that point of the replay (its version as the replay begins plus the captured writes
    before the transform)."""

    def __init__(self, storage, full, graph, source):
        self.ref, self.full = weakref.ref(storage), full
        self.seen, self.bumps = storage.version, graph.bumps(storage)
        self.source = source  # the transform whose value this one transforms, or None
        self.value = None

    def needed(self):
        storage = self.ref()
        if storage is None or (self.source is not None and self.source.needed()):
            return True
        hit = _per_weight.get(storage, {}).get(self.full)
        return (hit is None or hit[1] is not self.value or
                hit[0] != storage.version + self.bumps)

    def made(self):
        """The replay makes the value again: a new version of it (as eager code's new tensor
        would be), then cached for the weight's."""
        self.value.storage._version += 1
        storage = self.ref()
        if storage is not None:
            _per_weight.setdefault(storage, {})[self.full] = (storage.version + self.bumps,
                                                              self.value)


def _captured(graph, w, full, make):
    """per_weight inside a graph capture, launching what eager code would: nothing for a
    transform made earlier in the capture at this version; else make() as a conditional
    block, which writes the cached value's buffer where the cache holds the transform now."""
    storage = w.storage
    memo = graph.memo.setdefault("per_weight", {})
    done = memo.get((id(storage), full))
    if done is not None and done.ref() is storage and done.seen == storage.version:
        return done.value
    hit = _per_weight.get(storage, {}).get(full)
    cached = hit[1] if hit is not None and hit[0] == storage.version else None
    source = next((c for c in memo.values() if c.value.storage is storage), None)
    condition = _Transform(storage, full, graph, source)
    with graph.conditional(condition) as block:
        value = make(w)
    assert isinstance(value, ClTensor), f"per_weight: a transform is a tensor, got {value!r}"
    if cached is not None and _same_layout(value, cached):
        graph.retarget(block, value.storage.buf, cached.storage.buf)
        value = cached
    condition.value = value
    memo[(id(storage), full)] = condition
    return value


def _same_layout(a, b):
    return ((a.shape, a.strides, a.offset, a.dtype, a.storage.nbytes) ==
            (b.shape, b.strides, b.offset, b.dtype, b.storage.nbytes))


def shape_defines(p, dtype=None):
    """The -D shape constants most conv kernels take."""
    return {"T": ctype_of(dtype or p.dtype), "KH": p.kh, "KW": p.kw, "SH": p.sh, "SW": p.sw,
            "DH": p.dh, "DW": p.dw, "PT": p.pt, "PL": p.pl}


def launch_1d(device, kernel, n, *args):
    """One work-item per element of a flat range of n (rounded up to the work-group)."""
    if n <= 0:
        return None
    local = None if device.is_cpu else (min(LOCAL_1D, device.max_work_group),)
    gsize = round_up(n, local[0]) if local else n
    return launch(device, kernel, (gsize,), local, *args)


def view_args(t):
    """A 4-d tensor's buffer, offset and strides as kernel arguments."""
    return [t.storage.buf, *_int64s(t.offset, t.strides)]


@caches.lru_cache(maxsize=4096)
def _int64s(offset, strides):
    # NOTE: memoized: converting the five ints cost more than the rest of a launch's arguments
    return (np.int64(offset), *[np.int64(s) for s in strides])


def strided(t, shape, strides, offset=None):
    """A view of t's storage with the given shape, strides and offset (elements)."""
    return ClTensor(t.storage, tuple(shape), tuple(strides),
                    t.offset if offset is None else offset, t.dtype)


def transposed(t):
    """t with its last two dims swapped (t.mT without the tensor method's autograd checks)."""
    st = t.strides
    return strided(t, t.shape[:-2] + (t.shape[-1], t.shape[-2]), st[:-2] + (st[-1], st[-2]))


def empty(shape, like, memory_format=CONTIGUOUS_FORMAT):
    return ClTensor.empty_on(tuple(shape), like.dtype, like.device, memory_format)


def layout_of(x):
    """The memory format an output should take: channels_last for channels_last inputs."""
    if x.is_contiguous(CHANNELS_LAST) and not x.is_contiguous():
        return CHANNELS_LAST
    return CONTIGUOUS_FORMAT


def merged_stride(sizes, strides):
    """The single stride that walks dims of `sizes` in row-major order, or None."""
    dims = [(n, s) for n, s in zip(sizes, strides) if n != 1]
    for (_, s0), (n1, s1) in itertools.pairwise(dims):
        if s0 != s1 * n1:
            return None
    return dims[-1][1] if dims else 1


def spatial_stride(t):
    """The stride of a 4-d tensor's (H, W) dims merged into one, or None."""
    return merged_stride(t.shape[2:], t.strides[2:])


def with_merged_spatial(t):
    """t, or a contiguous copy of it when its (H, W) dims do not merge into one stride."""
    return t if spatial_stride(t) is not None else t.contiguous()


def to_cnhw(t, relu_y=None):
    """An (N, C, H, W) tensor as a contiguous (C, N, H, W) one, to be read: a (C, N*H*W)
    matrix (t's own view where it is laid out so already: one image, contiguous); with relu_y
    (a ReLU's output of t's shape), t taken back through that ReLU in the same pass."""
    swapped = _swap_nc(t)
    if relu_y is None and swapped.is_contiguous():
        return swapped
    out = ClTensor.empty_on(swapped.shape, t.dtype, t.device)
    if relu_y is None:
        ew.copy(swapped, out)
    else:
        act.relu_backward_into(swapped, _swap_nc(relu_y), out)
    return out


def _swap_nc(t):
    """The (C, N, H, W) view of an (N, C, H, W) tensor."""
    (n, c, *hw), (s0, s1, *shw) = t.shape, t.strides
    return strided(t, (c, n, *hw), (s1, s0, *shw))


def images_per_chunk(n, bytes_per_image):
    """How many images fit in the workspace budget at once (at least one)."""
    limit = backends.conv_workspace_limit
    return max(1, min(n, limit // max(bytes_per_image, 1)))


def bias_grad(gout):
    """The bias gradient: gout summed over batch and space."""
    return sum_(gout, dim=(0, 2, 3))


def bias_grad_buffers(device):
    """The buffers bias_grad's reduction passes its kernels besides its operands (a placeholder
    for the arguments a sum leaves unused), which a replayed pass (conv/plans.py) passes in
    their places as it does the pass's tensors."""
    return (placeholder_buffer(device),)
