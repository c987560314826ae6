"""Elementwise operations: broadcasting, dtype rules and launches of cl_kernels/elementwise.cl."""
import math
import numbers
from typing import NamedTuple

import numpy as np

from .. import caches
from .. import dtypes as dt
from ..program import MAX_DIMS, ctype_of, get_kernel, launch, read_sources, round_up, sizes_1d
from ..tensor import CHANNELS_LAST, CONTIGUOUS_FORMAT, ClTensor

KERNEL_FILE = "elementwise.cl"
HEADERS = ("special.cl",)  # prepended to KERNEL_FILE: torch.special's algorithms
SHAPE_T = np.dtype([("size", np.int64, MAX_DIMS)])
VIEW_T = np.dtype([("offset", np.int64), ("stride", np.int64, MAX_DIMS)])
_DUMMY_VIEW = np.zeros((), VIEW_T)
ROW_CHUNK = 4096  # elements of a row one CPU work-item handles in ew_rows
STRIDED_KERNEL = None  # None: ew_rows on CPUs, ew_strided elsewhere; tests force either one
# Elements per work-item of ew_contig, by device kind (None: CONTIG_ITEMS_BY_KIND; tests force
# a value). On the H200 four (loads in flight together) ran ReLU over 411 MB at 3.9 TB/s against
# one's 2.5; PoCL vectorizes across work-items, one each.
CONTIG_ITEMS = None
CONTIG_ITEMS_BY_KIND = {"cpu": 1, "gpu": 4}
# ew_rows's builds take at least this ND (fewer dims padded with leading ones), and ew_contig's
# with ew_rows share it, so that one program serves an op's contiguous, 2-d and 3-d launches.
# NOTE: PoCL builds an elementwise program in about 0.5 s, and separate builds per rank were
# most of a cold test run's builds (docs/performance.md); the padded dim costs ew_rows one more
# offset step per row of up to ROW_CHUNK elements.
ROWS_MIN_ND = 3
# ew_vec16 (16 elements per work-item as float16 vectors) serves contiguous launches on CPUs
# whose operands are float32, float16 or bfloat16, one at least float16, with an OP written with
# operators alone; on PoCL it ran float16 relu 3x faster than ew_contig (bfloat16 alone stays
# there: its shifts vectorize across work-items, at twice the speed of ushort16 vectors).
# VEC16_MIN: the fewest elements it takes (tests set 0 to reach its tails on small tensors).
VEC16_OPS = frozenset(f"OP_{name}" for name in (
    "copy", "neg", "add", "sub", "rsub", "mul", "div", "rdiv", "add_scaled", "relu", "square",
    "relu_backward", "leaky_relu", "leaky_relu_backward", "sigmoid_backward", "tanh_backward",
    "hardtanh_backward", "exp", "log", "sqrt", "rsqrt", "tanh"))
VEC16_MIN = 1 << 16
POW_OPS = ("OP_pow", "OP_rpow")
_VEC16_TYPES = ("float", "half", "bf16")
_kernels = caches.register("ops.elementwise.kernels", {})


def is_tensor(x):
    return isinstance(x, ClTensor)


def expect_tensor(x, name, op):
    """TypeError naming the op and the argument unless x is a tensor."""
    if not isinstance(x, ClTensor):
        raise TypeError(f"{op}: {name} must be a tensor, got {type(x).__name__}")


def check_scalar(x, op):
    if type(x) in (int, float, bool):  # the common case, without the ABC check below
        return
    if hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, np.generic):
        raise dt.foreign_operand(x, op)
    if not isinstance(x, (numbers.Number, np.bool_)) or isinstance(x, complex):
        raise TypeError(f"{op}: expected a tensor or a real Python number, got {type(x).__name__}")


def broadcast_shapes(*shapes):
    """numpy/torch broadcasting of shapes; ValueError naming the shapes when they do not fit."""
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for i, n in enumerate(s, nd - len(s)):
            if n != out[i] and out[i] != 1 and n != 1:
                raise ValueError("shapes " + " and ".join(str(tuple(x)) for x in shapes)
                                 + " cannot be broadcast together")
            if n != 1:
                out[i] = n
    return tuple(out)


def broadcasts_to(shape, target):
    """Whether `shape` broadcasts to `target` itself (target unchanged by the broadcast)."""
    try:
        return broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        return False


def common_device(tensors, op):
    dev = tensors[0].device
    for t in tensors[1:]:
        if t.device is not dev:
            raise RuntimeError(f"{op}: expected all tensors on the same device, got {dev} and {t.device}")
    return dev


def broadcast_strides(t, shape):
    """t's strides seen over `shape` (stride 0 on broadcast dims)."""
    return _broadcast_strides(t.shape, t.strides, shape)


def _broadcast_strides(t_shape, t_strides, shape):
    lead = len(shape) - len(t_shape)
    st = [0] * lead
    for n, s, full in zip(t_shape, t_strides, shape[lead:]):
        st.append(s if n == full else 0)
    return st


def collapse(shape, stride_lists):
    """Drop size-1 dims and merge neighbours that are contiguous for every operand."""
    dims = [(n, [s[i] for s in stride_lists]) for i, n in enumerate(shape) if n != 1]
    merged = []
    for n, st in dims:
        if merged:
            pn, pst = merged[-1]
            if all(p == s * n for p, s in zip(pst, st)):
                merged[-1] = (pn * n, st)
                continue
        merged.append((n, st))
    return [n for n, _ in merged], [[st[k] for _, st in merged] for k in range(len(stride_lists))]


def shape_arg(sizes):
    """The Shape struct argument (MAX_DIMS sizes) of the kernels that use View/Shape."""
    return _shape_struct(tuple(sizes))


def view_arg(offset, strides):
    """The View struct argument: an element offset and one stride per dim."""
    return _view_struct(offset, tuple(strides))


# NOTE: memoized (a struct costs a few microseconds to fill); read-only, as they are shared
@caches.lru_cache(maxsize=4096)
def _shape_struct(sizes):
    s = np.zeros((), SHAPE_T)
    s["size"][:len(sizes)] = sizes
    s.flags.writeable = False
    return s


@caches.lru_cache(maxsize=4096)
def _view_struct(offset, strides):
    v = np.zeros((), VIEW_T)
    v["offset"] = offset
    v["stride"][:len(strides)] = strides
    v.flags.writeable = False
    return v


def overlaps_differently(out, t):
    """True when t reads the storage `out` writes, through a different view (a hazard)."""
    return (t.storage is out.storage and
            (t.offset != out.offset or t.strides != out.strides or t.shape != out.shape))


def check_writable(out, op):
    """Refuse an output with several elements in one location; else mark its storage written
    (a version bump: saved tensors and weight-transform caches see the change)."""
    if any(s == 0 and n > 1 for n, s in zip(out.shape, out.strides)):
        raise RuntimeError(f"{op}: the output has several elements in one memory location "
                           f"(an expanded view); call .clone() first")
    out.storage.version += 1


def launch_elementwise(op_macro, operands, out, compute_dtype, user_op=None):
    """out[...] = OP(operands...), operands being tensors (broadcast to out.shape) or scalars."""
    compute_dtype = dt.compute_dtype(compute_dtype)
    tensors = [x for x in operands if isinstance(x, ClTensor)]
    device = out.device
    if any(overlaps_differently(out, t) for t in tensors):
        tmp = out.__class__.empty_on(out.shape, out.dtype, device)
        launch_elementwise(op_macro, operands, tmp, compute_dtype, user_op)
        return copy(tmp, out)
    if 0 in out.shape:
        return out
    name = _strided_kernel(device)
    plan = _plan(device, name, ROW_CHUNK, _contig_items(device), out.shape, out.strides,
                 tuple([(t.shape, t.strides) for t in tensors]))
    sig = tuple([x.dtype if isinstance(x, ClTensor) else None for x in operands])
    vec16 = _vec16(device, op_macro, sig, out.dtype, user_op)
    if vec16 and plan.layout == "contig" and plan.head[0] >= VEC16_MIN:
        plan = plan._replace(items=16, gsize=sizes_1d(device, -(-int(plan.head[0]) // 16))[0])
        name = "ew_vec16"
    elif plan.layout == "contig":
        name = "ew_contig"
    kernel = _get_kernel(device, op_macro, sig, out.dtype, compute_dtype, user_op, plan.layout,
                         name, plan.items, vec16)
    args = [*plan.head, out.storage.buf, view_arg(out.offset, plan.strides[0])]
    views = iter(plan.strides[1:])
    ct = compute_dtype.type if compute_dtype is not dt.bool_ else np.uint8
    for x in operands:
        if isinstance(x, ClTensor):
            args += [x.storage.buf, view_arg(x.offset, next(views))]
        else:
            args += [scalar_arg(ct, x), _DUMMY_VIEW]
    launch(device, kernel, plan.gsize, plan.local, *args, *plan.tail)
    return out


def scalar_arg(ct, x):
    """x as numpy scalar type ct; an integer that does not fit wraps around (two's complement),
    as in torch (a uint8 tensor + 300 adds 44)."""
    try:
        return ct(x)
    except OverflowError:
        if not -2**63 <= int(x) < 2**64:
            raise OverflowError(f"the number {x} does not fit in 64 bits") from None
        bits = 8 * np.dtype(ct).itemsize
        return np.array(int(x) % (1 << bits), np.uint64).astype(ct)[()]


def check_fill_value(value, dtype, op):
    """OverflowError for a fill value out of an integer dtype's range (torch's rule: unsigned
    dtypes also take negatives down to -max, which wrap)."""
    if dtype.category != 1 or not isinstance(value, numbers.Real):
        return
    info = np.iinfo(dtype.dtype)
    lo = -info.max if info.min == 0 else info.min
    if not lo <= value <= info.max:
        raise OverflowError(f"{op}: value {value} cannot be converted to {dtype} without "
                            f"overflow (range {info.min} .. {info.max})")


class _Plan(NamedTuple):
    """How launch_elementwise runs one layout: the leading kernel arguments (n, nd, Shape),
    the collapsed strides of out and of each tensor operand, the kernel's ND (or "contig"),
    the work sizes, the trailing arguments (ew_rows' chunk) and ew_contig's ITEMS."""
    head: tuple
    strides: tuple
    layout: object
    gsize: tuple
    local: tuple
    tail: tuple
    items: int


@caches.lru_cache(maxsize=4096)
def _plan(device, name, row_chunk, items, out_shape, out_strides, views):
    """The launch plan of out (shape, strides) from tensor operands `views` ((shape, strides)
    each) with strided kernel `name` (and ew_rows' ROW_CHUNK, ew_contig's `items`); memoized, as
    training repeats the same layouts."""
    n = math.prod(out_shape)
    stride_lists = [list(out_strides)] + [_broadcast_strides(*v, out_shape) for v in views]
    # NOTE: dims walked in the output's memory order (any order gives the same elements), so
    # that operands laid out as the output (channels_last ones, say) collapse to one dim
    order = sorted(range(len(out_shape)), key=lambda d: -out_strides[d])
    shape, strides = collapse([out_shape[d] for d in order],
                              [[st[d] for d in order] for st in stride_lists])
    if len(shape) > MAX_DIMS:
        raise ValueError(f"elementwise ops support at most {MAX_DIMS} non-mergeable dims, got {len(shape)}")
    if len(shape) == 1 and any(st != [1] for st in strides):
        shape, strides = [1] + shape, [[0] + st for st in strides]  # the strided kernel's 2-d form
    layout = len(shape) if len(shape) > 1 else "contig"
    if name == "ew_rows" and layout != "contig" and layout < ROWS_MIN_ND:
        pad = ROWS_MIN_ND - layout
        shape, strides = [1] * pad + shape, [[0] * pad + st for st in strides]
        layout = ROWS_MIN_ND
    tail = ()
    if layout == "contig":
        gsize, local = sizes_1d(device, -(-n // items))
    elif name == "ew_rows":  # a work-item per chunk of a row
        inner = shape[-1]
        chunk = min(inner, row_chunk)
        tail = (np.int64(chunk),)
        gsize, local = sizes_1d(device, (n // inner) * -(-inner // chunk), group=16)
    else:
        inner, rows = shape[-1], n // shape[-1]
        local = (256, 1) if inner >= 256 else (32, 8) if inner >= 32 else (4, 64)
        local = (min(local[0], device.max_work_group), 1) if local[0] * local[1] > \
            device.max_work_group else local
        gsize = (round_up(inner, local[0]), round_up(rows, local[1]))
    head = (np.int64(n), np.int32(len(shape)), shape_arg(shape))
    return _Plan(head, tuple(tuple(st) for st in strides), layout, gsize, local, tail,
                 items if layout == "contig" else 1)


def _strided_kernel(device):
    return STRIDED_KERNEL or ("ew_rows" if device.is_cpu else "ew_strided")


def _contig_items(device):
    return CONTIG_ITEMS or CONTIG_ITEMS_BY_KIND["cpu" if device.is_cpu else "gpu"]


@caches.lru_cache(maxsize=1024)
def _vec16(device, op_macro, sig, out_dtype, user_op):
    """Whether the program of this op and these dtypes gets ew_vec16 (VEC16_OPS)."""
    types = [ctype_of(d) for d in (*sig, out_dtype) if d is not None]
    return (device.is_cpu and user_op is None and op_macro in VEC16_OPS
            and all(t in _VEC16_TYPES for t in types) and "half" in types)


def _get_kernel(device, op_macro, sig, out_dtype, compute_dtype, user_op, layout, name, items,
                vec16=False):
    """The elementwise kernel for operand dtypes `sig` (None for a scalar operand)."""
    key = (device, op_macro, sig, out_dtype, compute_dtype, user_op, layout, name, items)
    k = _kernels.get(key)
    if k is None:
        defines = {"OP": op_macro, "NARGS": len(sig), "CT": ctype_of(compute_dtype),
                   "OUT_T": ctype_of(out_dtype)}
        if vec16:
            defines["VEC16"] = None
        if device.is_cpu and "Portable Computing Language" in device.platform_name:
            defines["WHOLE_GROUPS"] = None  # PoCL's masked stores (elementwise.cl, ew_contig)
        if dt.is_floating(compute_dtype):
            defines["CT_FLOAT"] = None
            if op_macro in POW_OPS and device.is_cpu and device.has_fp64 and \
                    compute_dtype == dt.float32:
                defines["POW_VIA_DOUBLE"] = None  # elementwise.cl's pow_ct
        if out_dtype == dt.bool_:
            defines["OUT_BOOL"] = None
        if layout != "contig":
            defines["ND"] = layout
        elif _strided_kernel(device) == "ew_rows":
            defines["ND"] = ROWS_MIN_ND  # the program of the strided launches (ROWS_MIN_ND)
        if items > 1 and name != "ew_vec16":
            defines["ITEMS"] = items
        for i, d in enumerate(sig):
            if d is None:
                defines[f"SCALAR{i}"] = None
            else:
                defines[f"T{i}"] = ctype_of(d)
        source = read_sources(*HEADERS, KERNEL_FILE)
        if user_op is not None:
            source = user_op + source
        k = _kernels[key] = get_kernel(device, KERNEL_FILE, name, defines, source)
    return k


def clear_kernels():
    _kernels.clear()
    _plan.cache_clear()
    _vec16.cache_clear()


# ---- the ops, with torch's dtype rules --------------------------------------------------------

def _new_out(tensors, dtype, op):
    """The result of an op on `tensors`, laid out as torch's TensorIterator lays it out in the
    common cases: as the first operand of the result's shape (preserve_format), else
    contiguous."""
    device = common_device(tensors, op)
    shape = _result_shape([t.shape for t in tensors])
    for t in tensors:
        if t.shape == shape:
            return ClTensor.empty_on(shape, dtype, device) if t.is_contiguous() else \
                t._new_like(dtype, device)
    return ClTensor.empty_on(shape, dtype, device)


def _result_shape(shapes):
    """broadcast_shapes(*shapes), with a shortcut for the common case of one shape."""
    first = shapes[0]
    for s in shapes:
        if s != first:
            return broadcast_shapes(*shapes)
    return first


def _prepare(op, operands, out):
    """Check the operands (and out); returns the tensor operands."""
    tensors = []
    for x in operands:
        if isinstance(x, ClTensor):
            tensors.append(x)
        else:
            check_scalar(x, op)
    if not tensors:
        raise TypeError(f"{op}: expected at least one tensor operand")
    if out is not None:
        common_device(tensors + [out], op)
        shape = _result_shape([t.shape for t in tensors] + [out.shape])
        if shape != out.shape:
            raise ValueError(f"{op}: the result's shape {shape} does not match the output's "
                             f"shape {out.shape}")
        check_writable(out, op)
    return tensors


def _finish(op_macro, operands, compute_dtype, out_dtype, out, op, user_op=None):
    if out is not None and out_dtype.category > out.dtype.category:
        raise TypeError(f"{op}: result type {out_dtype} can't be cast to the output's dtype {out.dtype}")
    tensors = _prepare(op, operands, out)  # checks last: it marks out written
    if out is None:
        out = _new_out(tensors, out_dtype, op)
    return launch_elementwise(op_macro, operands, out, compute_dtype, user_op)


def binary(name, a, b, out=None, float_result=False):
    """a <name> b with torch's promotion; float_result promotes integer results to the default
    dtype (float32 unless set_default_dtype changed it)."""
    rt = dt.result_type(a, b)
    if float_result and not dt.is_floating(rt):
        rt = dt.get_default_dtype()
    if rt is dt.bool_ and name in ("sub", "rsub", "neg"):
        raise TypeError(f"{name}: subtraction of bool tensors is not supported; use logical_xor")
    return _finish(f"OP_{name}", [a, b], rt, rt, out, name)


def unary(name, x, out=None, float_only=False):
    """OP_<name>(x); float_only ops turn integer and bool inputs into default-dtype results."""
    if not is_tensor(x):
        raise TypeError(f"{name}: expected a tensor, got {type(x).__name__}")
    rt = x.dtype
    if float_only and not dt.is_floating(rt):
        rt = dt.get_default_dtype()
    return _finish(f"OP_{name}", [x], rt, rt, out, name)


def predicate(name, operands, out=None):
    """A comparison or logical op: computed in the promoted type, stored as bool."""
    rt = dt.result_type(*operands)
    return _finish(f"OP_{name}", list(operands), rt, dt.bool_, out, name)


def ternary(name, operands, rt, out=None):
    return _finish(f"OP_{name}", list(operands), rt, rt, out, name)


def sum_of(tensors):
    """((t0 + t1) + t2) + ... of tensors of one shape, dtype and device, in one launch per up
    to four operands (each launch's result the next one's first): the sums and their order of
    adding them one by one."""
    total, rest = tensors[0], list(tensors[1:])
    while rest:
        ops, rest = [total, *rest[:3]], rest[3:]
        name = "add" if len(ops) == 2 else f"sum{len(ops)}"
        total = _finish(f"OP_{name}", ops, total.dtype, total.dtype, None, "add")
    return total


def copy(src, out):
    """out[...] = src, converting in src's type (so a float becomes a bool by != 0)."""
    return launch_elementwise("OP_copy", [src], out, src.dtype)


def copy_into(out, src):
    """out[...] = src (a tensor broadcast to out's shape, or a number); checks first."""
    if is_tensor(src):
        _prepare("copy_", [src], out)
        return copy(src, out)
    check_scalar(src, "fill_")
    check_fill_value(src, out.dtype, "fill_")
    check_writable(out, "fill_")
    value = bool(src) if out.dtype is dt.bool_ else src
    return launch_elementwise("OP_copy", [value], out, out.dtype)


def user_elementwise(expr, operands, names, out_dtype, compute_dtype, out=None):
    """Compile `out = <expr>` over named operands (once per expression and dtypes) and run it,
    into `out` when given (a tensor of out_dtype)."""
    params = ", ".join([f"const CT {n}" for n in names] +
                       [f"const CT _unused{i}" for i in range(len(names), 4)])
    user_op = (f"inline CT user_fn({params}) {{ return {expr}; }}\n"
               "#define OP_user(a, b, c, d) user_fn(a, b, c, d)\n")
    return _finish("OP_user", operands, compute_dtype, out_dtype, out, "elementwise", user_op)


# ---- ClTensor's copies (installed by autograd/namespace.py, listed in cltensor/methods.py) -----

def clone(self, memory_format=None):
    """A copy in new storage, channels_last where self is (and not also contiguous)."""
    fmt = memory_format or (CHANNELS_LAST if self.ndim == 4 and self.is_contiguous(CHANNELS_LAST)
                            and not self.is_contiguous() else CONTIGUOUS_FORMAT)
    out = ClTensor.empty_on(self.shape, self.dtype, self.device, fmt)
    return copy(self, out)


def _cast(self, dtype):
    """self in dtype, laid out as torch's .to(dtype) lays it out (preserve_format)."""
    return copy(self, self._new_like(dtype))


def copy_(self, src):
    """Copy src (a tensor, broadcast to this shape, or a scalar) into this tensor in place."""
    if isinstance(src, ClTensor) and src.device is not self.device:
        src = src.to(self.device)
    copy_into(self, src)
    return self


def fill_(self, value):
    check_writable(self, "fill_")
    copy_into(self, value)
    return self


TENSOR_METHODS = {"clone": clone, "_cast": _cast, "copy_": copy_, "fill_": fill_}
