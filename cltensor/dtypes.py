"""cltensor's dtypes (torch's dtype objects over numpy dtypes) and torch's type-promotion rules.

One table, DTYPES, lists every supported dtype with its numpy storage dtype and its OpenCL C
type; the kernels' type mapping (program.ctype_of) and the promotion lattice are derived from
it. float16 is stored as OpenCL's "half" (read and written through vload_half/vstore_half)
and bfloat16 as "bf16" (a ushort holding the upper 16 bits of a float32; common.cl); kernels
compute both in float32 (compute_dtype).
"""
import builtins

import numpy as np

try:  # bfloat16 arrays in numpy, where the package is installed
    from ml_dtypes import bfloat16 as _BF16_NUMPY
except ImportError:
    _BF16_NUMPY = None


class DType:
    """A tensor dtype, as torch.dtype: cltensor.float32, cltensor.uint8, ...

    It hashes and compares equal to the matching numpy dtype, and numpy accepts it wherever it
    takes a dtype (through the `dtype` attribute): np.dtype(cltensor.float32) is float32.
    """

    __slots__ = ("name", "dtype", "itemsize", "kind", "type", "char", "ctype", "tensor_type",
                 "category", "is_floating_point", "is_complex", "is_signed", "index", "_hash",
                 "bits_only")

    def __init__(self, name, np_dtype, ctype, tensor_type, index):
        d = np.dtype(np_dtype)
        self.name, self.dtype, self.ctype, self.index = name, d, ctype, index
        self.tensor_type = tensor_type
        # bfloat16 without ml_dtypes: its bits in numpy's uint16, yet a float dtype here
        self.bits_only = name == "bfloat16" and _BF16_NUMPY is None
        kind = "f" if name == "bfloat16" else d.kind
        self.itemsize, self.kind, self.type, self.char = d.itemsize, kind, d.type, d.char
        self.category = 0 if kind == "b" else 2 if kind == "f" else 1  # bool, int, float
        self.is_floating_point = kind == "f"
        self.is_complex = False
        self.is_signed = kind in "if"
        self._hash = hash((name, d)) if self.bits_only else hash(d)

    def __getattr__(self, name):
        # the rest of numpy's dtype interface (str, newbyteorder, ...); only reached for
        # names the slots above lack
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(object.__getattribute__(self, "dtype"), name)

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if other.__class__ is DType:
            return self is other
        if other is None or isinstance(other, (builtins.int, builtins.float)):
            return False  # numpy would take None for float64
        if self.bits_only:
            return False  # bfloat16 stored as uint16 is not numpy's uint16
        try:
            return self.dtype == other
        except TypeError:
            return False

    def __ne__(self, other):
        return not self == other

    def __repr__(self):
        return f"cltensor.{self.name}"

    __str__ = __repr__

    def __format__(self, spec):
        # NOTE: f-strings (the error messages) show the bare name, "float32"
        return format(self.name, spec)

    def __reduce__(self):
        return self.name  # pickled as the module-level name: unpickles to the same object

    def to_real(self):
        return self

    def to_complex(self):
        raise TypeError(f"to_complex: cltensor has no complex dtypes ({self})")


# name, numpy storage dtype, OpenCL C type (bool is stored as one byte holding 0 or 1), the
# name of torch's legacy tensor type
_TABLE = (("bool", np.bool_, "uchar", "BoolTensor"), ("uint8", np.uint8, "uchar", "ByteTensor"),
          ("int8", np.int8, "char", "CharTensor"), ("int16", np.int16, "short", "ShortTensor"),
          ("int32", np.int32, "int", "IntTensor"), ("int64", np.int64, "long", "LongTensor"),
          ("float32", np.float32, "float", "FloatTensor"),
          ("float64", np.float64, "double", "DoubleTensor"),
          ("float16", np.float16, "half", "HalfTensor"),
          ("bfloat16", _BF16_NUMPY or np.uint16, "bf16", "BFloat16Tensor"))
DTYPES = tuple(DType(*row, i) for i, row in enumerate(_TABLE))
bool_, uint8, int8, int16, int32, int64, float32, float64, float16, bfloat16 = DTYPES
HALF_TYPES = (float16, bfloat16)  # stored in 16 bits, computed in float32

# torch's other names for them
bool = bool_  # noqa: A001
float = float32  # noqa: A001
double = float64
half = float16
short = int16
int = int32  # noqa: A001
long = int64
_ALIASES = {"float": float32, "double": float64, "short": int16, "int": int32, "long": int64,
           "bool": bool_, "half": float16, **{d.name: d for d in DTYPES}}
_BY_NUMPY = {d.dtype: d for d in DTYPES if not d.bits_only}
_BY_TENSOR_TYPE = {d.tensor_type: d for d in DTYPES}
_default_float = [float32]


def as_dtype(dtype):
    """Normalize a dtype given as a cltensor dtype, a numpy dtype, a Python type or a name;
    reject unsupported ones."""
    if dtype is None or dtype.__class__ is DType:
        return dtype
    if isinstance(dtype, str) and dtype in _ALIASES:
        return _ALIASES[dtype]
    if dtype is builtins.float:
        return _default_float[0]
    if dtype is builtins.int:
        return int64
    if dtype is builtins.bool:
        return bool_
    if is_torch_dtype(dtype):
        raise TypeError(f"unsupported dtype {dtype}: a torch dtype; use cltensor's own "
                        f"(cltensor.float32, cltensor.int64, ...)")
    try:
        d = np.dtype(dtype)
    except TypeError:
        d = None
    if d not in _BY_NUMPY:
        names = ", ".join(x.name for x in DTYPES)
        what = repr(dtype) if d is None else str(d)  # numpy's name when numpy knows the type
        raise TypeError(f"unsupported dtype {what}; cltensor supports {names}")
    return _BY_NUMPY[d]


def tensor_type_dtype(t):
    """The dtype Tensor.type(t) names: a dtype, a tensor type (cltensor.FloatTensor) or its
    name ("cltensor.FloatTensor", "torch.FloatTensor")."""
    if isinstance(t, str) and t.rsplit(".", 1)[-1] in _BY_TENSOR_TYPE:
        return _BY_TENSOR_TYPE[t.rsplit(".", 1)[-1]]
    if isinstance(t, type) and getattr(t, "dtype", None).__class__ is DType:
        return t.dtype
    return as_dtype(t)


def is_torch_dtype(dtype):
    """True for torch.float32 and the like (without importing torch)."""
    return type(dtype).__module__ == "torch" and type(dtype).__name__ == "dtype"


def get_default_dtype():
    """The dtype of tensors made from Python floats and of the float factories (rand, zeros, ...)."""
    return _default_float[0]


def set_default_dtype(d):
    """Set get_default_dtype(): cltensor.float32 (the initial one) or cltensor.float64."""
    d = as_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"set_default_dtype: only floating-point types are supported as the "
                        f"default type, got {d}")
    _default_float[0] = d


def category(dtype):
    """0 for bool, 1 for integers, 2 for floating point."""
    return as_dtype(dtype).category


def is_floating(dtype):
    return dtype.kind == "f"


def compute_dtype(d):
    """The dtype kernels compute a dtype's values in: float32 for the 16-bit floats."""
    return float32 if d.itemsize == 2 and d.kind == "f" else d


def _promote(a, b):
    """torch.promote_types of two table rows."""
    if a.category != b.category:
        return a if a.category > b.category else b
    if a.category == 2 and a.itemsize == b.itemsize == 2:
        return float32  # float16 with bfloat16: neither holds the other
    if a.is_signed == b.is_signed or a.category != 1:
        return a if a.itemsize >= b.itemsize else b
    u, s = (a, b) if b.is_signed else (b, a)
    if s.itemsize > u.itemsize:
        return s
    return next(d for d in DTYPES if d.kind == "i" and d.itemsize == 2 * u.itemsize)


_PROMOTE = tuple(tuple(_promote(a, b) for b in DTYPES) for a in DTYPES)


def promote_types(a, b):
    """The smallest dtype both promote to, as torch.promote_types (bool < uint8, int8 < int16 <
    int32 < int64 < float16, bfloat16 < float32 < float64; uint8 with int8 gives int16, float16
    with bfloat16 float32)."""
    if a.__class__ is not DType or b.__class__ is not DType:
        a, b = as_dtype(a), as_dtype(b)
    return a if a is b else _PROMOTE[a.index][b.index]


def scalar_dtype(value):
    """The dtype a Python scalar takes when it stands alone (torch's wrapped-number rule)."""
    if isinstance(value, (builtins.bool, np.bool_)):
        return bool_
    if isinstance(value, (builtins.int, np.integer)):
        return int64
    if isinstance(value, (builtins.float, np.floating)):
        return _default_float[0]
    raise TypeError(f"expected a tensor or a Python number, got {type(value).__name__}")


def foreign_operand(x, op=None):
    """The TypeError for an array or tensor of another library met as an operand."""
    kind = f"{type(x).__module__.split('.')[0]}.{type(x).__name__}"
    return TypeError(f"{op + ': ' if op else ''}a {kind} cannot be an operand of cltensor "
                     f"ops{conversion_hint(x)}")


def conversion_hint(x):
    """'; convert it explicitly, ...' for a numpy array or another library's tensor, else ''."""
    if not (hasattr(x, "shape") and hasattr(x, "dtype")) or isinstance(x, np.generic):
        return ""
    how = "cltensor.from_numpy(a)" if isinstance(x, np.ndarray) else \
        "cltensor.from_numpy(t.numpy())"
    return f"; convert it explicitly, e.g. with {how}"


def result_type(*operands):
    """torch.result_type: tensors with dims outrank 0-dim tensors, which outrank Python scalars;
    a lower-priority operand only matters when its category (bool/int/float) is higher."""
    groups = [None, None, None]  # dimensioned tensors, 0-dim tensors, scalars
    for x in operands:
        if hasattr(x, "dtype") and hasattr(x, "shape") and not isinstance(x, np.generic):
            g, d = (0 if len(x.shape) else 1), x.dtype
            if d.__class__ is not DType:  # a torch tensor or a numpy array
                raise foreign_operand(x)
        else:
            g, d = 2, scalar_dtype(x)
        groups[g] = d if groups[g] is None else promote_types(groups[g], d)
    result = None
    for d in groups:
        if d is None:
            continue
        if result is None or d.category > result.category:
            result = d if result is None else promote_types(result, d)
    return result


class _Info:
    def __repr__(self):
        fields = ", ".join(f"{k}={v}" for k, v in vars(self).items() if k != "dtype")
        return f"{type(self).__name__}({fields}, dtype={self.dtype})"


class finfo(_Info):  # noqa: N801  (torch's name)
    """torch.finfo: machine limits of a floating dtype (the default dtype when none is given)."""

    def __init__(self, type=None):  # noqa: A002  (torch's keyword)
        d = as_dtype(type) if type is not None else get_default_dtype()
        if not d.is_floating_point:
            raise TypeError(f"finfo: {d} is not a floating-point dtype; use iinfo")
        if d is bfloat16:  # float32's exponent with 8 significant bits
            self.bits, self.eps, self.max = 16, 2.0 ** -7, (2 - 2.0 ** -7) * 2.0 ** 127
            self.min, self.tiny, self.resolution = -self.max, 2.0 ** -126, 0.01
            self.smallest_normal = self.tiny
            self.dtype = d.name
            return
        f = np.finfo(d.dtype)
        self.bits, self.eps, self.max, self.min = f.bits, builtins.float(f.eps), \
            builtins.float(f.max), builtins.float(f.min)
        self.tiny = self.smallest_normal = builtins.float(f.smallest_normal)
        self.resolution = 10.0 ** -f.precision
        self.dtype = d.name


class iinfo(_Info):  # noqa: N801  (torch's name)
    """torch.iinfo: the range of an integer dtype."""

    def __init__(self, type):  # noqa: A002  (torch's keyword)
        d = as_dtype(type)
        if d.category != 1:
            raise TypeError(f"iinfo: {d} is not an integer dtype")
        i = np.iinfo(d.dtype)
        self.bits, self.min, self.max = i.bits, builtins.int(i.min), builtins.int(i.max)
        self.dtype = d.name


# ---- bfloat16 on the host, as float32 arrays or as uint16 bit patterns ---------------------------

def bf16_bits(array):
    """uint16 bfloat16 bit patterns of a float array: float32's upper half, rounded to nearest
    even (NaN stays a quiet NaN of the same sign), as the kernels' stores round."""
    u = np.ascontiguousarray(array, np.float32).view(np.uint32)
    rounded = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    nan = np.isnan(u.view(np.float32))
    return np.where(nan, (u >> np.uint32(16)) | np.uint32(0x40), rounded).astype(np.uint16)


def bf16_to_float32(bits):
    """float32 values of uint16 bfloat16 bit patterns (exact)."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def to_storage(array, dtype):
    """array as the numpy array a tensor of `dtype` holds (bfloat16: bit patterns, unless
    ml_dtypes gives numpy the type)."""
    if dtype is bfloat16 and _BF16_NUMPY is None:
        return bf16_bits(array).reshape(np.shape(array))
    with np.errstate(over="ignore"):  # float16 overflows to infinity, as in torch
        return np.asarray(array, dtype=dtype)


def from_storage(host, dtype):
    """The numpy array of a tensor's storage: bfloat16 bit patterns become float32."""
    if dtype is bfloat16 and _BF16_NUMPY is None:
        return bf16_to_float32(host).reshape(host.shape)
    return host
