"""The dtypes cltensor supports (numpy dtypes) and torch's type-promotion rules."""
import builtins

import numpy as np

float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)

float = float32
double = float64
int = int32
long = int64

DTYPES = (bool_, int32, int64, float32, float64)
_RANK = {d: i for i, d in enumerate(DTYPES)}
_ALIASES = {"float32": float32, "float": float32, "float64": float64, "double": float64,
            "int32": int32, "int": int32, "int64": int64, "long": int64, "bool": bool_}


def as_dtype(dtype):
    """Normalize a dtype given as a numpy dtype, a Python type or a name; reject unsupported ones."""
    if dtype is None:
        return None
    if isinstance(dtype, str) and dtype in _ALIASES:
        return _ALIASES[dtype]
    if dtype is builtins.float:
        return float32
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
    if d not in _RANK:
        names = ", ".join(str(x) for x in DTYPES)
        what = repr(dtype) if d is None else str(d)  # numpy's name when numpy knows the type
        raise TypeError(f"unsupported dtype {what}; cltensor supports {names}")
    return d


def is_torch_dtype(dtype):
    """True for torch.float32 and the like (without importing torch)."""
    return type(dtype).__module__ == "torch" and type(dtype).__name__ == "dtype"


def category(dtype):
    """0 for bool, 1 for integers, 2 for floating point."""
    return 0 if dtype == bool_ else 2 if dtype.kind == "f" else 1


def is_floating(dtype):
    return dtype.kind == "f"


def promote_types(a, b):
    """The smallest dtype both promote to (bool < int32 < int64 < float32 < float64), as torch."""
    return a if _RANK[a] >= _RANK[b] else b


def scalar_dtype(value):
    """The dtype a Python scalar takes when it stands alone (torch's wrapped-number rule)."""
    if isinstance(value, (builtins.bool, np.bool_)):
        return bool_
    if isinstance(value, (builtins.int, np.integer)):
        return int64
    if isinstance(value, (builtins.float, np.floating)):
        return float32
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
        if hasattr(x, "dtype") and hasattr(x, "shape"):
            g, d = (0 if len(x.shape) else 1), x.dtype
            if d not in _RANK:  # a torch tensor or an array of another dtype
                raise foreign_operand(x)
        else:
            g, d = 2, scalar_dtype(x)
        groups[g] = d if groups[g] is None else promote_types(groups[g], d)
    result = None
    for d in groups:
        if d is None:
            continue
        if result is None or category(d) > category(result):
            result = d if result is None else promote_types(result, d)
    return result
