"""2-d pooling (max, average, adaptive average), forward and backward: argument checks, output
sizes and launches of cl_kernels/pool.cl; fractional max pooling's forward
(cl_kernels/fractional_pool.cl). No autograd here (cltensor/nn/functional.py).

Inputs are 4-d NCHW views with any strides; outputs are contiguous, or channels_last when the
input is, so a channels_last network stays channels_last.
"""
import math
import numbers

import numpy as np

from .. import caches
from .. import dtypes as dt
from ..program import ctype_of, get_kernel, launch, read_sources, round_up, sizes_1d
from ..tensor import CHANNELS_LAST, CONTIGUOUS_FORMAT, ClTensor
from .activation import check_float

KERNEL_FILE = "pool.cl"
STRIPS_FILE = "pool_strips.cl"  # max_pool2d_fwd_strips, built appended to pool.cl
ADAPTIVE_FILE = "pool_adaptive.cl"  # the adaptive_* kernels, built appended to pool.cl
VIEW4_T = {off: np.dtype([(f, t) for f in ("off", "n", "c", "h", "w")])
           for off, t in (("int", np.int32), ("long", np.int64))}
POOL_T = np.dtype([(f, np.int32) for f in ("N", "C", "H", "W", "OH", "OW", "kh", "kw", "sh", "sw",
                                           "ph", "pw", "dh", "dw", "divisor", "include_pad")])
GROUP = {"cpu": 64, "gpu": 256}  # work-group size (fixed: PoCL compiles once per size)
ROWS_GROUP = 8  # work-group size of the rows form, whose work-items each walk a row or a plane
# max_pool2d forward's rows form gives a work-item consecutive rows up to this many outputs,
# keeping this many work-items per compute unit (pool.cl, max_pool2d_fwd_rows)
ITEM_OUTPUTS, ITEMS_PER_CU = 256, 64
# The form of the max and avg kernels by device kind (pool.cl's header): on CPUs a work-item
# that walks a row or a plane in order beats one per element (measured on PoCL: max_pool2d
# backward of AlexNet's pool1 0.3 ms against 9 ms); on GPUs one per element fills the device.
FORM = {"cpu": "rows", "gpu": "items"}
# Launches of fewer window taps than this (outputs x kh x kw) use the one build that reads the
# geometry at run time: a build per geometry (about 1.5 s on PoCL, then cached on disk) would
# cost more than such a launch gains from the constants (3-4x on PoCL forward).
BAKE_MIN_TAPS = 1 << 16
_INT_MAX = 2**31 - 1
# Launches whose buffers all hold fewer elements than this compute offsets in 32-bit ints
# (pool.cl's OFF; on the H200 GoogLeNet's max-pools ran 1.3-1.4x faster than with 64-bit
# offsets, forward and backward). A constant, so that tests can force the 64-bit build.
INT_OFFSETS_BELOW = 2**31


def _kernel(device, name, dtype, fields, off, idx_dtype=dt.uint8):
    """Kernel `name` for `dtype`, offset type `off` and max_pool2d argmax type `idx_dtype`;
    with the window `fields`, from a build with them as constants that holds only the kernels
    of name's form."""
    defines = {"T": ctype_of(dt.compute_dtype(dtype)), "OFF": off, "IDX_T": ctype_of(idx_dtype)}
    if dtype in dt.HALF_TYPES:  # 16-bit data through common.cl's LD/ST, computed in float
        defines.update({"DATA_T": ctype_of(dtype), "DATA_16": None})
        if dtype == dt.bfloat16:
            defines["DATA_BF16"] = None
        elif device.is_cpu and "oclgrind" not in device.name.lower():
            defines["HALF_VECTORS"] = None  # (Oclgrind's interpreter cannot convert half)
    if fields:
        defines.update((f.upper(), v) for f, v in fields.items())
        rows_form = name.endswith(("_rows", "_planes", "_ring", "_strips"))
        defines["FORM_ROWS" if rows_form else "FORM_ITEMS"] = None
    appended = STRIPS_FILE if name.endswith("_strips") else \
        ADAPTIVE_FILE if name.startswith("adaptive_") else None
    if appended:  # (named pool.cl: program.HALF_FILES lists it)
        return get_kernel(device, KERNEL_FILE, name, defines,
                          source=read_sources(KERNEL_FILE, appended))
    return get_kernel(device, KERNEL_FILE, name, defines)


def _baked(fields, out_shape):
    """The window fields to build into the kernels of a launch writing or reading `out_shape`
    outputs: all of them when the launch is large, else none."""
    return fields if math.prod(out_shape) * fields["kh"] * fields["kw"] >= BAKE_MIN_TAPS else None


def _form(device):
    return FORM["cpu" if device.is_cpu else "gpu"]


# ---- arguments --------------------------------------------------------------------------------

def pair(value, name, op):
    """An int or a pair of ints as a 2-tuple (torch's _pair)."""
    if type(value) is int:  # the common case, without the checks below
        return (value, value)
    items = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(items) == 1:
        items = items * 2
    if len(items) != 2 or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                                  for v in items):
        raise TypeError(f"{op}: {name} must be an int or a pair of ints, got {value!r}")
    return tuple(int(v) for v in items)


def output_size(size, k, s, p, d, ceil_mode):
    """torch's pooling_output_shape: the last window must start inside the input or its left
    padding."""
    span = size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = span // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def check_input(x, op):
    """A floating 3-d (C, H, W) or 4-d (N, C, H, W) tensor with non-empty C, H, W."""
    check_float(x, op)
    if x.ndim not in (3, 4) or any(n == 0 for n in x.shape[-3:]):
        raise ValueError(f"{op}: expected a 3-d (C, H, W) or 4-d (N, C, H, W) input with non-zero "
                         f"C, H and W, got shape {x.shape}")
    if x.shape[-1] * x.shape[-2] > _INT_MAX:
        raise ValueError(f"{op}: a {x.shape[-2]}x{x.shape[-1]} plane is too large for 32-bit "
                         f"window positions")


def window(op, x, kernel_size, stride, padding, dilation, ceil_mode):
    """Check the window arguments against the input; returns the POOL_T fields and (OH, OW)."""
    k = pair(kernel_size, "kernel_size", op)
    s = pair(stride, "stride", op) if stride is not None and stride != () and stride != [] else k
    p = pair(padding, "padding", op)
    d = pair(dilation, "dilation", op)
    if min(k) <= 0:
        raise ValueError(f"{op}: kernel_size must be greater than zero, got {k}")
    if min(s) <= 0:
        raise ValueError(f"{op}: stride must be greater than zero, got {s}")
    if min(d) <= 0:
        raise ValueError(f"{op}: dilation must be greater than zero, got {d}")
    if min(p) < 0:
        raise ValueError(f"{op}: padding must be non-negative, got {p}")
    for name, v in (("kernel_size", k), ("stride", s), ("padding", p), ("dilation", d)):
        if max(v) > _INT_MAX:
            raise ValueError(f"{op}: {name} {v} is too large: pooling takes values up to "
                             f"2**31 - 1")
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        raise ValueError(f"{op}: pad should be at most half of kernel size, but got "
                         f"padding={p} and kernel_size={k}")
    h, w = x.shape[-2:]
    oh = output_size(h, k[0], s[0], p[0], d[0], ceil_mode)
    ow = output_size(w, k[1], s[1], p[1], d[1], ceil_mode)
    if oh <= 0 or ow <= 0:
        raise ValueError(f"{op}: given input size {tuple(x.shape[-3:])}, the calculated output "
                         f"size ({x.shape[-3]}, {oh}, {ow}) is too small (kernel_size={k}, "
                         f"stride={s}, padding={p}, dilation={d})")
    fields = {"kh": k[0], "kw": k[1], "sh": s[0], "sw": s[1], "ph": p[0], "pw": p[1],
              "dh": d[0], "dw": d[1]}
    return fields, (oh, ow)


def adaptive_size(output_size_arg, x, op):
    """torch's rule: an int or a pair, None keeping the input's size."""
    items = output_size_arg if isinstance(output_size_arg, (tuple, list)) else \
        (output_size_arg, output_size_arg)
    if len(items) != 2:
        raise ValueError(f"{op}: output_size must be an int or a pair, got {output_size_arg!r}")
    out = []
    for v, n in zip(items, x.shape[-2:]):
        if v is None:
            v = n
        if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{op}: output_size must hold positive ints (or None), "
                             f"got {output_size_arg!r}")
        out.append(int(v))
    return tuple(out)


# ---- launches ---------------------------------------------------------------------------------

def layout_of(x):
    """channels_last when x is laid out so (and not also contiguous), else contiguous."""
    if x.ndim == 4 and x.is_contiguous(CHANNELS_LAST) and not x.is_contiguous():
        return CHANNELS_LAST
    return CONTIGUOUS_FORMAT


def _offset_type(*tensors):
    """pool.cl's OFF for a launch over `tensors`: int when every buffer is small enough."""
    small = all(t.storage.nbytes // t.dtype.itemsize < INT_OFFSETS_BELOW for t in tensors)
    return "int" if small else "long"


def _view4(t, off):
    return _view4_struct(t.offset, t.shape, t.strides, off)


def _pool(x_shape, out_hw, fields=None, divisor=0, include_pad=1):
    if abs(divisor) > _INT_MAX:
        raise ValueError(f"avg_pool: divisor_override {divisor} is too large: pooling takes "
                         f"values up to 2**31 - 1")
    return _pool_struct(tuple(x_shape) + tuple(out_hw), tuple((fields or {}).items()), divisor,
                        include_pad)


# NOTE: the structs are memoized (filling one costs microseconds) and read-only, being shared
@caches.lru_cache(maxsize=1024)
def _view4_struct(offset, shape, strides, off):
    """A View4 with `off` fields. A size-1 dim's stride that no int holds is given as 0: any
    value is allowed there, and only index 0 multiplies it. (Others stay: the planes kernels
    step through a dense gx by its w stride, whatever W is.)"""
    v = np.zeros((), VIEW4_T[off])
    v["off"] = offset
    for name, n, st in zip(("n", "c", "h", "w"), shape, strides):
        v[name] = 0 if n == 1 and abs(st) > _INT_MAX else st
    v.flags.writeable = False
    return v


@caches.lru_cache(maxsize=256)
def _pool_struct(sizes, fields, divisor, include_pad):
    p = np.zeros((), POOL_T)
    for name, n in zip(("N", "C", "H", "W", "OH", "OW"), sizes):
        p[name] = n
    for name, v in fields:
        p[name] = v
    p["divisor"], p["include_pad"] = divisor, include_pad
    p.flags.writeable = False
    return p


def grid(dims, device, group):
    """(global, local) sizes of a launch over `dims` (innermost first): the work-group takes up
    to `group` work-items, filling the inner dims first (at most 64 along dim 2, which every
    device allows); the global size is rounded up to it."""
    left = min(group, device.max_work_group)
    local = []
    for k, d in enumerate(dims):
        n = min(left, _pow2_at_least(d), 64 if k == 2 else left)
        local.append(n)
        left //= n
    return tuple(round_up(d, n) for d, n in zip(dims, local)), tuple(local)


def _pow2_at_least(n):
    return 1 << max(0, int(n) - 1).bit_length()


def launch_grid(device, kernel, dims, group, *args):
    """Launch `kernel` over `dims` with the sizes grid() picks."""
    launch(device, kernel, *grid(dims, device, group), *args)


def _launch(name, written, pool_arg, fields, off, *args, dtype=None, idx_dtype=dt.uint8):
    """Kernel `name` (items form) over the elements of `written`, walked in its layout, built
    for data of `dtype` (written's by default)."""
    device = written.device
    if written.numel() == 0:
        return
    N, C, Y, X = written.shape
    c_last = layout_of(written) == CHANNELS_LAST
    if max(N * C, N * Y) > _INT_MAX:
        raise ValueError(f"pooling: {written.shape} has too many planes for 32-bit indices")
    kernel = _kernel(device, name, dtype or written.dtype, fields, off, idx_dtype)
    launch_grid(device, kernel,
                (C, X, N * Y) if c_last else (X, Y, N * C), GROUP["cpu" if device.is_cpu else "gpu"],
                pool_arg, np.int32(c_last), *args)


def _launch_rows(name, t, n_items, pool_arg, fields, off, *args, idx_dtype=dt.uint8):
    """Kernel `name` (rows form) with n_items work-items, over the rows or planes of t."""
    if n_items == 0:
        return
    if n_items > _INT_MAX:
        raise ValueError(f"pooling: {t.shape} has too many rows for 32-bit indices")
    launch(t.device, _kernel(t.device, name, t.dtype, fields, off, idx_dtype),
           *sizes_1d(t.device, n_items, ROWS_GROUP), pool_arg, *args)


def _rows_per_item(device, rows, width):
    """Output rows per work-item of max_pool2d's rows form: rows of ITEM_OUTPUTS outputs or
    more alone, shorter ones together, while every compute unit keeps ITEMS_PER_CU items."""
    spare = rows // (ITEMS_PER_CU * device.cl_device.max_compute_units)
    return max(1, min(ITEM_OUTPUTS // max(width, 1), spare))


# max_pool2d forward by strips (pool_strips.cl) where the windows overlap down the columns:
# the largest window height it takes, and its outputs a strip. STRIPS off: the rows form.
STRIPS, STRIP_MAX_ROWS, STRIP = True, 8, 16
# A band's input rows take about this many bytes (PoCL, one thread, 3x3 windows over 128
# columns: float32 stride 1 took 9.5 ms in bands of 2 rows (2 KiB of input), 14 in bands of 8)
STRIP_BAND_BYTES = 2048


def _strips_fit(fields, w, ow):
    """Whether a row of ow outputs from w inputs holds a strip inside (pool_strips.cl's last_strip)."""
    kw, sw, pw = fields["kw"], fields["sw"], fields["pw"]
    begin = min((pw + sw - 1) // sw, ow)
    last = w - 1 + pw - (kw - 1)
    end = min(max(last // sw + 1 if last >= 0 else 0, begin), ow)
    last_load = kw - 1 if sw == 1 else (kw - 1) & ~1
    return min(end - STRIP, (w + pw - last_load) // sw - STRIP) >= begin


def _strip_band(x, y, idx, fields, baked):
    """Output rows per work-item of max_pool2d_fwd_strips, or 0 where the strips do not
    apply: baked windows of unit dilation, stride 1 or 2 across, taller than their stride
    down, of at most 255 taps (one-byte taps), rows contiguous. A band's input rows take about
    STRIP_BAND_BYTES (each band computes its first window's rows again), and bands are short
    enough for every compute unit to keep ITEMS_PER_CU work-items."""
    f = fields
    if not (STRIPS and baked and f["dw"] == 1 and f["dh"] == 1 and f["sw"] in (1, 2)
            and f["sh"] < f["kh"] <= STRIP_MAX_ROWS and tap_dtype(f) == dt.uint8):
        return 0
    if x.strides[3] != 1 or y.strides[3] != 1 or idx.strides[3] != 1:
        return 0
    if not _strips_fit(f, x.shape[3], y.shape[3]):
        return 0
    planes, oh = y.shape[0] * y.shape[1], y.shape[2]
    bands = -(-ITEMS_PER_CU * x.device.cl_device.max_compute_units // planes)
    rows = STRIP_BAND_BYTES // (x.shape[3] * x.dtype.itemsize) - (f["kh"] - f["sh"])
    return max(1, min(-(-oh // min(bands, oh)), max(2, rows // f["sh"])))


def _forward_by_rows(y):
    """Whether forward pooling into y takes the rows form: on CPUs, unless y is channels_last,
    whose items form walks the channels in order (PoCL vectorizes it)."""
    return _form(y.device) == "rows" and layout_of(y) != CHANNELS_LAST


def _overlapping(pool_arg):
    """Whether an input can lie in two windows of the geometry in POOL_T `pool_arg`."""
    return any((int(pool_arg["k" + a]) - 1) * max(int(pool_arg["d" + a]), 1) + 1
               > pool_arg["s" + a] for a in "hw")


def _backward(name, gx, pool_arg, fields, off, *args, idx_dtype=dt.uint8):
    """Backward kernel `name` into gx in the device's form: one work-item per (n, c) plane
    (rows form: gx must be dense in its layout), or one per element."""
    if _form(gx.device) == "items":
        _launch(name, gx, pool_arg, fields, off, *args, idx_dtype=idx_dtype)
        return
    N, C, _, W = gx.shape
    assert gx.numel() == 0 or gx.strides[2] == W * gx.strides[3], "gx must be dense"
    # NOTE: the planes form adds into gx, which would round every sum of 16-bit data: 16-bit
    # gradients take it where no input gets two, else the ring form, which sums in float rows
    # (the items form ran them 4-15x slower than float32's planes on PoCL)
    if gx.dtype in dt.HALF_TYPES and _overlapping(pool_arg):
        rows = (int(pool_arg["kh"]) - 1) * max(int(pool_arg["dh"]), 1) + 1
        ring = ClTensor.empty_on((N * C * rows * W,), dt.float32, gx.device)
        _launch_rows(name + "_ring", gx, N * C, pool_arg, fields, off, *args, ring.storage.buf,
                     idx_dtype=idx_dtype)
        return
    _launch_rows(name + "_planes", gx, N * C, pool_arg, fields, off, *args, idx_dtype=idx_dtype)


def _empty(shape, like_layout, x):
    return ClTensor.empty_on(shape, x.dtype, x.device, like_layout)


def _views(off, *tensors):
    """The (buffer, View4) argument pairs of `tensors`."""
    return [a for t in tensors for a in (t.storage.buf, _view4(t, off))]


# max_pool2d forward's flags (pool.cl)
POOL_IDX, POOL_RELU = 1, 2


def tap_dtype(fields):
    """The type of max_pool2d's argmax, a tap of the window (pool.cl's IDX_T): the smallest that
    holds every tap and, as its all-ones value, the mark of a window with no tap inside."""
    taps = fields["kh"] * fields["kw"]
    return dt.uint8 if taps <= 255 else dt.int16 if taps <= 2**15 - 1 else dt.int32


def max_pool2d(x, fields, out_hw, with_indices, relu=False):
    """(y, argmax or None) of a 4-d input, the argmax as window taps of tap_dtype(fields)
    (max_pool2d_indices gives torch's); relu: y clamped at 0 as it is stored (the argmax is the
    window's, as relu(max_pool2d(x)) keeps it)."""
    layout = layout_of(x)
    shape = x.shape[:2] + tuple(out_hw)
    y = _empty(shape, layout, x)
    taps = tap_dtype(fields)
    idx = ClTensor.empty_on(shape, taps, x.device, layout) if with_indices else y
    pool_arg, baked = _pool(x.shape, out_hw, fields), _baked(fields, shape)
    off = _offset_type(x, y, idx)
    flags = (POOL_IDX if with_indices else 0) | (POOL_RELU if relu else 0)
    views = _views(off, x, y, idx)
    band = _strip_band(x, y, idx, fields, baked) if _forward_by_rows(y) else 0
    if band:
        n_items = shape[0] * shape[1] * -(-shape[2] // band)
        _launch_rows("max_pool2d_fwd_strips", y, n_items, pool_arg, baked, off,
                     np.int32(flags), np.int32(band), *views, idx_dtype=taps)
    elif _forward_by_rows(y):
        rows = math.prod(shape[:3])
        per = _rows_per_item(x.device, rows, shape[3])
        _launch_rows("max_pool2d_fwd_rows", y, -(-rows // per), pool_arg, baked, off,
                     np.int32(flags), np.int32(per), *views, idx_dtype=taps)
    else:
        _launch("max_pool2d_fwd", y, pool_arg, baked, off, np.int32(flags), *views,
                idx_dtype=taps)
    return y, (idx if with_indices else None)


def max_pool2d_backward(g, idx, x_shape, layout, fields):
    """Input gradient of max_pool2d from the output gradient g and its argmax taps idx."""
    assert idx.dtype == tap_dtype(fields), f"max_pool2d's argmax must be taps, got {idx.dtype}"
    gx = ClTensor.empty_on(x_shape, g.dtype, g.device, layout)
    off = _offset_type(g, idx, gx)
    _backward("max_pool2d_bwd", gx, _pool(x_shape, g.shape[2:], fields), _baked(fields, g.shape),
              off, *_views(off, g, idx, gx), idx_dtype=idx.dtype)
    return gx


def max_pool2d_indices(idx, x_shape, fields):
    """torch's int64 indices h * W + w of max_pool2d's argmax taps idx (in idx's layout)."""
    out = ClTensor.empty_on(idx.shape, dt.int64, idx.device, layout_of(idx))
    off = _offset_type(idx, out)
    _launch("max_pool2d_indices", out, _pool(x_shape, idx.shape[2:], fields), None, off,
            *_views(off, idx, out), dtype=dt.float32, idx_dtype=idx.dtype)
    return out


def max_pool2d_taps(indices, x_shape, fields):
    """max_pool2d's argmax taps from torch's int64 indices (an index that names no tap of its
    window marks the window as sending no gradient)."""
    taps = ClTensor.empty_on(indices.shape, tap_dtype(fields), indices.device,
                             layout_of(indices))
    off = _offset_type(indices, taps)
    _launch("max_pool2d_taps", taps, _pool(x_shape, indices.shape[2:], fields), None, off,
            *_views(off, indices, taps), dtype=dt.float32, idx_dtype=taps.dtype)
    return taps


def avg_pool2d(x, fields, out_hw, divisor, include_pad):
    y = _empty(x.shape[:2] + tuple(out_hw), layout_of(x), x)
    pool_arg = _pool(x.shape, out_hw, fields, divisor, include_pad)
    off = _offset_type(x, y)
    args = (pool_arg, _baked(fields, y.shape), off, *_views(off, x, y))
    if _forward_by_rows(y):
        _launch_rows("avg_pool2d_fwd_rows", y, math.prod(y.shape[:3]), *args)
    else:
        _launch("avg_pool2d_fwd", y, *args)
    return y


def avg_pool2d_backward(g, x_shape, layout, fields, divisor, include_pad):
    gx = ClTensor.empty_on(x_shape, g.dtype, g.device, layout)
    off = _offset_type(g, gx)
    _backward("avg_pool2d_bwd", gx, _pool(x_shape, g.shape[2:], fields, divisor, include_pad),
              _baked(fields, g.shape), off, *_views(off, g, gx))
    return gx


def adaptive_avg_pool2d(x, out_hw):
    y = _empty(x.shape[:2] + tuple(out_hw), layout_of(x), x)
    off = _offset_type(x, y)
    _launch("adaptive_avg_pool2d_fwd", y, _pool(x.shape, out_hw), None, off, *_views(off, x, y))
    return y


def adaptive_avg_pool2d_backward(g, x_shape, layout):
    gx = ClTensor.empty_on(x_shape, g.dtype, g.device, layout)
    off = _offset_type(g, gx)
    _launch("adaptive_avg_pool2d_bwd", gx, _pool(x_shape, g.shape[2:]), None, off,
            *_views(off, g, gx))
    return gx


def adaptive_max_pool2d(x, out_hw, with_indices):
    """(y, int32 argmax or None) of a 4-d input over adaptive windows."""
    layout = layout_of(x)
    shape = x.shape[:2] + tuple(out_hw)
    y = _empty(shape, layout, x)
    idx = ClTensor.empty_on(shape, dt.int32, x.device, layout) if with_indices else y
    off = _offset_type(x, y, idx)
    _launch("adaptive_max_pool2d_fwd", y, _pool(x.shape, out_hw), None, off,
            np.int32(with_indices), *_views(off, x, y, idx))
    return y, (idx if with_indices else None)


def adaptive_max_pool2d_backward(g, idx, x_shape, layout):
    gx = ClTensor.empty_on(x_shape, g.dtype, g.device, layout)
    off = _offset_type(g, idx, gx)
    _launch("adaptive_max_pool2d_bwd", gx, _pool(x_shape, g.shape[2:]), None, off,
            *_views(off, g, idx, gx))
    return gx


# ---- fractional max pooling (cl_kernels/fractional_pool.cl) -------------------------------------

def fractional_max_pool(x, samples, kernel_size, size, keep_bits=None):
    """(maxima, int64 indices) of fractional max pooling of (P, D, H, W) planes with windows
    kernel_size (kd, kh, kw) to size (od, oh, ow) placed by samples (P, 2) (W, H: 2-d, depth
    1) or (P, 3) (D, H, W); keep_bits: the windows computed with that many significant bits
    (float16's or bfloat16's rounding)."""
    x, u = x.contiguous(), samples.contiguous().to(x.dtype)
    p, d, h, w = x.shape
    y = ClTensor.empty_on((p, *size), x.dtype, x.device)
    idx = ClTensor.empty_on((p, *size), dt.int64, x.device)
    total = y.numel()
    if total == 0:
        return y, idx
    ns = u.shape[-1]
    at = (-1, 1, 0) if ns == 2 else (0, 1, 2)  # the samples' order: torch's for 2-d and 3-d
    defines = {"T": ctype_of(x.dtype), **({"KEEP_BITS": keep_bits} if keep_bits else {})}
    k = get_kernel(x.device, "fractional_pool.cl", "fractional_max_pool", defines)
    i64, i32 = np.int64, np.int32
    launch(x.device, k, *sizes_1d(x.device, total), i64(total), i64(d), i64(h), i64(w),
           *map(i64, size), *map(i64, kernel_size), i32(ns), *map(i32, at),
           x.storage.buf, i64(x.offset), u.storage.buf, i64(u.offset), y.storage.buf,
           i64(y.offset), idx.storage.buf, i64(idx.offset))
    return y, idx
