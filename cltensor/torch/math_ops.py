"""Pointwise, reduction and matrix-product aten ops on cltensor's kernels.

torch's Meta kernels run first on the operands' metadata: they raise torch's errors (shapes,
in-place casts, dtypes) and give the result's dtype and shape; cltensor computes the values.
"""
import contextlib
import inspect

import torch
from torch.utils._pytree import tree_map

import cltensor

from ..ops import pointwise
from ..tensor import ClTensor
from ._backend import NAME, TO_NUMPY, aten, cl_device_for, is_opencl, np_dtype, unwrap, wrap
from .factory import to_cl
from .fallback import cpu_fallback

UNARY = ("abs", "neg", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid",
         "relu", "ceil", "floor", "round", "trunc", "reciprocal", "expm1", "log1p", "log2", "log10",
         "erf", "sign", "logical_not", "bitwise_not", "isnan", "asin", "acos", "atan", "sinh",
         "cosh", "exp2", "frac", "erfinv", "isinf", "isneginf", "isposinf", "isfinite",
         "erfc", "lgamma", "digamma", "sinc", "i0", "asinh", "acosh", "atanh", "deg2rad",
         "rad2deg", "signbit")
BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt",
          "ge", "remainder", "fmod", "atan2", "floor_divide", "logical_and", "logical_or",
          "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "where", "clamp",
          "hypot", "logaddexp", "logaddexp2", "fmax", "fmin", "copysign", "heaviside",
          "nextafter", "gcd", "lcm", "bitwise_left_shift", "bitwise_right_shift")
# argument types a generic kernel passes through to cltensor's function of the same name
_PLAIN = {"Tensor", "number", "Optional[number]", "Optional[Tensor]", "Optional[str]"}
_COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isneginf", "isposinf", "isfinite"}


def to_meta(x):
    if isinstance(x, torch.Tensor):
        return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
    return x


_META_RESULTS = {}  # (op, operands' metadata) -> Meta result; torch's checks passed for it
_META_CACHE_SIZE = 4096
_MISSING = object()


def meta_result(op, args, kwargs):
    """op on Meta copies of the tensors: torch's checks, and the result's dtype and shape.
    Results are remembered by the operands' metadata (Meta kernels read nothing else, and many
    are Python decompositions costing a millisecond); a failing check raises every time. The
    metadata includes each tensor's device, so a remembered result also passed the device check."""
    try:
        # NOTE: id(op): aten overloads live as long as torch; hashing one runs Python code
        key = (id(op), *signature(*args), *(signature(*kwargs.items()) if kwargs else ()))
        out = _META_RESULTS.get(key, _MISSING)
    except TypeError:  # an argument without a stable hashable form
        key, out = None, _MISSING
    if out is not _MISSING:
        return out
    check_devices(args, kwargs, op)
    out = op(*tree_map(to_meta, args), **tree_map(to_meta, kwargs))
    if key is not None:
        if len(_META_RESULTS) >= _META_CACHE_SIZE:
            _META_RESULTS.clear()
        _META_RESULTS[key] = out
    return out


class Plans(dict):
    """Per-signature decisions of one kernel (its Meta result, cltensor's parameters), keyed by
    the operands' metadata (signature()); cleared when full. An entry exists only for a
    signature whose checks all passed once."""

    def __init__(self, size=_META_CACHE_SIZE):
        super().__init__()
        self.size = size

    def put(self, key, value):
        if len(self) >= self.size:
            self.clear()
        self[key] = value
        return value


def signature(*args):
    """The hashable metadata of kernel arguments that plans and Meta results are keyed by:
    tensors by shape, strides, dtype and device, lists of plain values by value and type, other
    values with their type (True, 1 and 1.0 promote differently). Flat, as each kernel's
    arguments have fixed positions and kinds."""
    key = []
    add = key.append
    for v in args:
        if isinstance(v, _Tensor):
            add(v.shape), add(v.stride()), add(v.dtype), add(v.device)
            continue
        cls = v.__class__
        add(cls)
        if cls is list or cls is tuple:
            types = tuple(map(type, v))
            if _PLAIN_VALUES.issuperset(types):
                add(tuple(v)), add(types)
            else:
                add(tuple(map(_signature_of, v)))
        else:
            add(v)
    return tuple(key)


_Tensor = torch.Tensor
_PLAIN_VALUES = frozenset((int, float, bool, str, type(None)))  # list elements keyed by value and type


def _signature_of(value):
    """signature() of one value, nested lists included."""
    if isinstance(value, torch.Tensor):
        return (value.shape, value.stride(), value.dtype, value.device)
    cls = value.__class__
    if cls is list or cls is tuple:
        return (cls, *map(_signature_of, value))
    return (cls, value)


@contextlib.contextmanager
def runtime_errors():
    """cltensor's argument and range errors (ValueError, TypeError, IndexError) raised as torch
    raises them: RuntimeError."""
    try:
        yield
    except (ValueError, TypeError, IndexError) as e:
        raise RuntimeError(str(e)) from e


def check_devices(args, kwargs, op):
    """torch's rule: operands on one device, except CPU tensors of 0 dimensions."""
    devs = {x.device for x in _tensors_in(args, kwargs)
            if not (x.device.type == "cpu" and x.dim() == 0)}
    if len(devs) > 1:
        names = " and ".join(sorted(str(d) for d in devs))
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two "
                           f"devices, {names}! ({op.name()})")


def _tensors_in(args, kwargs):
    """The tensors among aten arguments and in their Tensor[] lists (one level deep)."""
    for x in (*args, *kwargs.values()):
        if isinstance(x, torch.Tensor):
            yield x
        elif isinstance(x, (list, tuple)):
            yield from (y for y in x if isinstance(y, torch.Tensor))


def operand(x, dtype):
    """A ClTensor (or Python number) cast to the computing dtype (a numpy dtype)."""
    if isinstance(x, torch.Tensor):
        cl = unwrap(x) if is_opencl(x) else to_cl(x, None, cl_device_for(None, "operand"))
        return cl if cl.dtype is dtype else cl.to(dtype)
    if isinstance(x, (bool, int, float)):
        return {"f": float, "i": int, "b": bool}[dtype.kind](x)
    return x


def _compute_dtype(name, out, args):
    """Comparisons compute in the operands' promoted dtype, everything else in the result's."""
    if name in _COMPARISONS or (out.dtype == torch.bool and name not in ("where",)):
        tensors_and_scalars = [a for a in args if isinstance(a, (torch.Tensor, bool, int, float))]
        if len(tensors_and_scalars) > 1:
            return np_dtype(torch.result_type(*tree_map(to_meta, tensors_and_scalars)), name)
        if tensors_and_scalars and isinstance(tensors_and_scalars[0], torch.Tensor):
            return np_dtype(tensors_and_scalars[0].dtype, name)
    return np_dtype(out.dtype, name)


def _functional(name, op, fn):
    """The kernel of a functional overload: meta check, compute, cast to torch's dtype. Given
    `into` (an opencl tensor of the result's shape), a kernel whose cltensor function takes out=
    writes the result there in its own launch, converting to into's dtype as torch's in-place and
    out= forms do, and returns into; otherwise it returns a new tensor."""
    direct = "out" in inspect.signature(fn).parameters and name != "where"
    fast = name in _SAME_KIND

    def kernel(*args, into=None, **kwargs):
        if fast and into is None and not kwargs:
            res = _alike(fn, args)
            if res is not None:
                return res
        out = meta_result(op, args, kwargs)
        dtype = _compute_dtype(name, out, args)
        ops = [operand(a, dtype) for a in args]
        if name == "where":  # the condition stays bool
            ops[0] = operand(args[0], np_dtype(torch.bool, name))
        kwargs = {k: operand(v, dtype) for k, v in kwargs.items()}
        if (into is not None and direct and into.shape == out.shape
                and into.dtype in TO_NUMPY and out.dtype in TO_NUMPY):
            fn(*ops, **kwargs, out=unwrap(into))
            return into
        return finish(fn(*ops, **kwargs), out)
    return kernel


# ops whose result, for float operands of one shape and dtype, has that shape and dtype
_SAME_KIND = {"add", "sub", "mul", "div", "maximum", "minimum", "neg", "abs", "exp", "log",
              "sqrt", "rsqrt", "sigmoid", "tanh", "relu", "reciprocal", "sin", "cos"}
_FLOATS = (torch.float32, torch.float64)


def _alike(fn, args):
    """fn's result on opencl float32/64 tensors of one shape, dtype and device, which torch's
    checks pass and whose result takes that shape and dtype: no Meta result, no casts. None
    for any other operands (the general path)."""
    ops = _alike_operands(args)
    return None if ops is None else wrap(fn(*ops))


def _alike_in_place(fn, self, args):
    """self, fn(self, *args) written into it in one launch, for alike operands (_alike) and a
    dense self (no element written twice: torch's overlap check passes); else None."""
    ops = _alike_operands((self, *args)) if self.is_contiguous() else None
    if ops is None:
        return None
    fn(*ops, out=ops[0])
    return self


def _alike_operands(args):
    """The ClTensors of opencl float32/64 tensors of one shape, dtype and device, else None."""
    first = args[0]
    for a in args:
        if not (isinstance(a, torch.Tensor) and a.dtype is first.dtype and a.shape == first.shape
                and a.device.type == NAME):
            return None
    if first.dtype not in _FLOATS:
        return None
    ops = [unwrap(a) for a in args]
    device = ops[0].device
    if any(x.device is not device for x in ops):
        return None
    return ops


def _written(dst, res):
    """dst, holding res: a kernel given into=dst wrote it already; else res is copied in."""
    return dst if res is dst else write_into(dst, res)


def finish(res, out):
    """res (a ClTensor or number) as an opencl tensor with the Meta result's dtype and shape."""
    want = TO_NUMPY.get(out.dtype) or np_dtype(out.dtype, "result")
    if res.__class__ is not ClTensor and not isinstance(res, ClTensor):
        res = cltensor.tensor(res, dtype=want, device=cl_device_for(None, "result"))
    if res.dtype is not want:
        res = res.to(want)
    if res.shape != out.shape:  # a 0-d result, or a number broadcast to the shape
        res = (res.reshape(tuple(out.shape)) if res.numel() == out.numel()
               else res.expand(*out.shape).contiguous())
    return wrap(res)


def write_into(dst, res):
    """Copy result res into opencl tensor dst (resized when its shape differs, as out= is)."""
    if dst.shape != res.shape:
        dst.resize_(res.shape)
    unwrap(dst).copy_(unwrap(res))
    return dst


def with_out(name, functional, out_arg="out"):
    """Register the out= overload `name` (its out argument named out_arg) of a functional kernel:
    torch's out= checks on Meta, then the result written into the out tensor."""
    op = getattr(getattr(torch.ops.aten, name.split(".")[0]), name.split(".")[1])

    def kernel(*args, **kwargs):
        out = kwargs.pop(out_arg)
        meta_result(op, args, dict(kwargs, **{out_arg: out}))
        return write_into(out, functional(*args, **kwargs))
    aten(name)(kernel)


def _schema_kind(op):
    """"out", "inplace", "functional" or None (an overload with arguments passed elsewhere)."""
    schema = op._schema
    args = [a for a in schema.arguments if not (a.kwarg_only and a.name == "out")]
    types = [str(a.type) for a in args]
    if "Tensor" not in types or any(t not in _PLAIN for t in types):
        return None
    if [str(r.type) for r in schema.returns] != ["Tensor"]:  # where(condition) -> Tensor[]
        return None
    if any(a.kwarg_only and a.name == "out" for a in schema.arguments):
        return "out"
    return "inplace" if schema.name.endswith("_") else "functional"


def register_pointwise(name, fn):
    """Register every plain overload of aten `name`, `name_` and their out= forms."""
    packet = getattr(torch.ops.aten, name)
    for overload in packet.overloads():
        op = getattr(packet, overload)
        kind = _schema_kind(op)
        full = name if overload == "default" else f"{name}.{overload}"
        if kind == "functional":
            functional = _functional(name, op, fn)
            aten(full)(functional)
            _register_inplace(name, overload, op, functional, fn)
        elif kind == "out":
            _register_out(name, full, op, fn)


def _register_inplace(name, overload, op, functional, fn):
    packet = getattr(torch.ops.aten, name + "_", None)
    # floor_divide's in-place twin of the functional default is floor_divide_.Tensor
    twins = [o for o in (overload, "Tensor" if overload == "default" else None)
             if packet is not None and o in packet.overloads()
             and _signature(getattr(packet, o)) == _signature(op)]
    if not twins:
        return
    overload = twins[0]
    inplace = getattr(packet, overload)

    fast = name in _SAME_KIND

    def kernel(self, *args, **kwargs):
        if fast and not kwargs:
            done = _alike_in_place(fn, self, args)
            if done is not None:
                return done
        meta_result(inplace, (self, *args), kwargs)  # torch's in-place cast and shape checks
        return _written(self, functional(self, *args, into=self, **kwargs))
    aten(name + "_" if overload == "default" else f"{name}_.{overload}")(kernel)


def _signature(op):
    return [str(a.type) for a in op._schema.arguments if not (a.kwarg_only and a.name == "out")]


def _register_out(name, full, op, fn):
    packet = getattr(torch.ops.aten, name)
    twins = [o for o in packet.overloads() if _schema_kind(getattr(packet, o)) == "functional"
             and _signature(getattr(packet, o)) == _signature(op)]
    if not twins:
        return
    functional = _functional(name, getattr(packet, twins[0]), fn)

    def kernel(*args, out, **kwargs):
        meta_result(op, args, dict(kwargs, out=out))  # torch's out= checks (dtype casts, device)
        return _written(out, functional(*args, into=out, **kwargs))
    aten(full)(kernel)


def raw(name):
    """cltensor's op `name` without its autograd and autocast layers: the operands here never
    require grad, and torch applies its own autocast before the kernel runs."""
    return inspect.unwrap(getattr(cltensor, name))


for _name in UNARY + BINARY:
    register_pointwise(_name, raw(_name))
# the optimizers' steps, each in one launch
register_pointwise("addcmul", pointwise.addcmul_kernel)
register_pointwise("addcdiv", pointwise.addcdiv_kernel)
register_pointwise("lerp", pointwise.lerp_kernel)
register_pointwise("sgn", raw("sign"))  # sign, for real dtypes (abs's backward uses it)


# ---- reductions -------------------------------------------------------------------------------
def _dims(dim, ndim):
    return tuple(range(ndim)) if dim is None or len(dim) == 0 else tuple(dim)


def _dim_reduction(name, dim_overload, out_overload, fn):
    """sum/mean over dims (name.dim_overload), over everything (name), and the out= form."""
    packet = getattr(torch.ops.aten, name)

    def over_dims(self, dim, keepdim=False, dtype=None):
        out = meta_result(getattr(packet, dim_overload), (self, dim, keepdim), {"dtype": dtype})
        x = unwrap(self).to(np_dtype(out.dtype, name))  # torch accumulates in the result dtype
        return finish(fn(x, dim=_dims(dim, self.dim()), keepdim=keepdim), out)

    def out_form(self, dim, keepdim=False, dtype=None, *, out):
        meta_result(getattr(packet, out_overload), (self, dim, keepdim), {"dtype": dtype, "out": out})
        return write_into(out, over_dims(self, dim, keepdim, dtype))
    aten(f"{name}.{dim_overload}")(over_dims)
    aten(name)(lambda self, dtype=None: over_dims(self, None, False, dtype))
    aten(f"{name}.{out_overload}")(out_form)


_dim_reduction("sum", "dim_IntList", "IntList_out", raw("sum"))
_dim_reduction("mean", "dim", "out", raw("mean"))


@aten("amax")
def amax(self, dim=(), keepdim=False):
    out = meta_result(torch.ops.aten.amax.default, (self, dim, keepdim), {})
    return finish(cltensor.amax(unwrap(self), _dims(dim, self.dim()), keepdim), out)


def _extreme(name, fn):
    op = getattr(torch.ops.aten, name).default

    def kernel(self):  # max() / min() over every element
        return finish(fn(unwrap(self), _dims(None, self.dim())), meta_result(op, (self,), {}))
    aten(name)(kernel)


_extreme("max", cltensor.amax)
_extreme("min", cltensor.amin)


@aten("argmax")
def argmax(self, dim=None, keepdim=False):
    out = meta_result(torch.ops.aten.argmax.default, (self, dim, keepdim), {})
    return finish(cltensor.argmax(unwrap(self), dim, keepdim), out)


# ---- matrix products --------------------------------------------------------------------------
def _products(name, fn, forms):
    packet = getattr(torch.ops.aten, name)

    def functional(*args, **kwargs):
        out = meta_result(packet.default, args, kwargs)
        _same_dtype(name, args)
        dtype = np_dtype(out.dtype, name)
        return finish(fn(*[operand(a, dtype) for a in args], **kwargs), out)

    def out_form(*args, out, **kwargs):
        meta_result(packet.out, args, dict(kwargs, out=out))
        return write_into(out, functional(*args, **kwargs))

    def in_place(self, *args, **kwargs):
        meta_result(getattr(torch.ops.aten, name + "_").default, (self, *args), kwargs)
        return write_into(self, functional(self, *args, **kwargs))
    aten(name)(functional)
    aten(f"{name}.out")(out_form)
    if "inplace" in forms:
        aten(f"{name}_")(in_place)


def _same_dtype(name, args):
    """torch's rule for matrix products (its Meta kernels do not check it): one dtype."""
    dtypes = [a.dtype for a in args if isinstance(a, torch.Tensor)]
    if any(d != dtypes[0] for d in dtypes):
        raise RuntimeError(f"{name}: expected the operands to have the same dtype, but got: "
                           f"{' != '.join(str(d).removeprefix('torch.') for d in dtypes)}")


for _name, _forms in (("mm", ("out",)), ("bmm", ("out",)), ("addmm", ("out", "inplace")),
                      ("baddbmm", ("out", "inplace")), ("mv", ("out",)),
                      ("addmv", ("out", "inplace")), ("dot", ("out",)), ("vdot", ("out",)),
                      ("addbmm", ("out", "inplace"))):
    _products(_name, raw(_name), _forms)



@aten("masked_select")
def masked_select(self, mask):
    check_devices((self, mask), {}, torch.ops.aten.masked_select.default)
    if mask.dtype != torch.bool:
        raise RuntimeError(f"masked_select: expected BoolTensor for mask, got {mask.dtype}")
    return wrap(cltensor.masked_select(unwrap(self), operand(mask, np_dtype(torch.bool, "mask"))))


# ---- joining and selecting --------------------------------------------------------------------
_cat, _index_select = raw("cat"), raw("index_select")


@aten("cat")
def cat(tensors, dim=0):
    out = meta_result(torch.ops.aten.cat.default, (tensors, dim), {})
    dtype = np_dtype(out.dtype, "cat")
    # torch skips 1-D empty tensors whatever the other shapes (its legacy rule)
    parts = [operand(t, dtype) for t in tensors if not (t.dim() == 1 and t.numel() == 0)]
    if out.numel() == 0 or not parts:
        return finish(ClTensor.empty_on(tuple(out.shape), dtype, cl_device_for(None, "cat")), out)
    return finish(_cat(parts, dim), out)


@aten("cat.out")
def cat_out(tensors, dim=0, *, out):
    meta_result(torch.ops.aten.cat.out, (tensors, dim), {"out": out})
    return write_into(out, cat(tensors, dim))


@aten("index_select")
def index_select(self, dim, index):
    out = meta_result(torch.ops.aten.index_select.default, (self, dim, index), {})
    idx = unwrap(index) if is_opencl(index) else operand(index, np_dtype(index.dtype, "index"))
    return finish(_index_select(unwrap(self), dim, idx), out)


def _integer_indices(self, indices, op):
    """indices as torch's CUDA kernels take them: index tensors on the CPU moved to self's
    device, and a boolean (or uint8) mask over k dimensions replaced by the k integer tensors of
    its nonzero() (torch's own rule), after torch's check of the mask's shape."""
    out, dim = [], 0
    for i in indices:
        if i is not None and i.device != self.device:
            i = i.to(self.device)
        if i is not None and i.dtype in (torch.bool, torch.uint8):
            for k, n in enumerate(i.shape):
                if dim + k < self.dim() and n != self.shape[dim + k]:
                    raise IndexError(f"{op}: the shape of the mask {list(i.shape)} at index {k} "
                                     f"does not match the shape of the indexed tensor "
                                     f"{list(self.shape)} at index {dim + k}")
            out.extend(i.nonzero().unbind(1))
            dim += i.dim()
            continue
        out.append(i)
        dim += 1
    return out


@aten("index.Tensor")
def index(self, indices):
    """Advanced indexing by integer tensors and boolean masks (None keeps a dimension)."""
    indices = _integer_indices(self, indices, "index")
    out = meta_result(torch.ops.aten.index.Tensor, (self, indices), {})
    key = tuple(slice(None) if i is None else operand(i, np_dtype(torch.int64, "index"))
                for i in indices)
    return finish(unwrap(self)[key], out)


@aten("_index_put_impl_")
def index_put_impl_(self, indices, values, accumulate=False, unsafe=False):
    """self[indices] = values (summed over repeats with accumulate) for integer indices and
    masks, skipped dimensions (None) only before them; other skips run through the CPU fallback."""
    indices = _integer_indices(self, indices, "index_put_")
    if not _leading_skips_only(indices):
        return cpu_fallback(torch.ops.aten._index_put_impl_.default, self, indices, values,
                            accumulate, unsafe)
    meta_result(torch.ops.aten._index_put_impl_.default,
                (self, indices, values, accumulate, unsafe), {})
    x = unwrap(self)
    key = [operand(i, np_dtype(torch.int64, "index_put_")) for i in indices if i is not None]
    x.index_put_(_with_ranges(x, len(indices) - len(key), key), operand(values, x.dtype),
                 accumulate=accumulate)
    return self


def _leading_skips_only(indices):
    kinds = ["skip" if i is None else "mask" if i.dtype in (torch.bool, torch.uint8) else "int"
             for i in indices]
    return "int" in kinds and "mask" not in kinds and \
        kinds == ["skip"] * kinds.count("skip") + ["int"] * kinds.count("int")


def _with_ranges(x, skips, key):
    """Integer indices equivalent to `skips` leading full slices followed by the tensors of key:
    an arange for each skipped dimension, broadcast ahead of the tensors' common shape."""
    common = torch.broadcast_shapes(*[tuple(k.shape) for k in key])
    lead = [cltensor.arange(x.shape[d], dtype=cltensor.int64, device=x.device).reshape(
        *[x.shape[d] if j == d else 1 for j in range(skips)], *[1] * len(common))
        for d in range(skips)]
    tail = [k.expand(*common).reshape(*[1] * skips, *common) for k in key]
    return tuple(lead + tail)
