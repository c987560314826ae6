"""Pointwise math with torch's names, dtype rules and in-place forms (kernels: elementwise.cl),
torch's special functions (erfinv, lgamma, digamma, polygamma, i0, igamma, ...) included (their
algorithms: special.cl)."""
import re

import numpy as np

from .. import dtypes as dt
from ..creation import full
from . import elementwise as ew
from .reduce import any as any_
from .reduce import return_types

# unary ops that need a floating-point input: integer and bool inputs give float32 results
FLOAT_UNARY = ("exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid",
               "reciprocal", "tan", "sinh", "cosh", "asin", "acos", "atan", "erf", "erfc", "log2",
               "log10", "exp2", "deg2rad", "rad2deg", "acosh", "asinh", "atanh", "erfinv",
               "lgamma", "digamma", "i0", "sinc")
# unary ops that keep the input's dtype; rounding is the identity on integers
SAME_UNARY = ("abs", "sign", "relu", "square")
ROUNDING = ("floor", "ceil", "round", "trunc")
# binary ops computed in floating point: integer and bool inputs give float32 results
FLOAT_BINARY = ("atan2", "hypot", "logaddexp", "logaddexp2", "copysign", "xlogy")
# bitwise ops on integer and bool tensors (the shifts on integers only)
BITWISE = ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
           "bitwise_right_shift")
# binary ops with floating results only (torch has no integer kernels for them)
FLOATING_BINARY = ("nextafter", "igamma", "igammac")
# torch.special's own kernel ops (cltensor/special.py; not cltensor functions or tensor
# methods, as in torch): float results, integer and bool inputs give float32
SPECIAL_UNARY = ("i0e", "i1e", "erfcx", "ndtr", "log_ndtr", "ndtri", "entr")
SPECIAL_BINARY = ("xlog1py", "zeta")
# ... and those without gradients, in torch too: results that do not require grad
SPECIAL_PLAIN_UNARY = ("spherical_bessel_j0", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1",
                       "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
                       "scaled_modified_bessel_k1", "airy_ai")
POLYNOMIALS = tuple(f"{kind}_polynomial_{letter}" for kind, letters in (
    ("chebyshev", "tuvw"), ("shifted_chebyshev", "tuvw"), ("hermite", ("h", "he")),
    ("laguerre", "l"), ("legendre", "p")) for letter in letters)
# the extremes that ignore NaN (any dtype), and integer-only gcd and lcm
FMAX_FMIN = ("fmax", "fmin")
GCD_LCM = ("gcd", "lcm")

__all__ = ["add", "sub", "rsub", "mul", "div", "true_divide", "floor_divide", "remainder", "pow", "neg",
           "clamp", "clip", "maximum", "minimum", "where", "eq", "ne", "lt", "le", "gt", "ge",
           "logical_and", "logical_or", "logical_xor", "logical_not", "isnan", "isinf",
           "isfinite", "elementwise", "negative", "subtract", "multiply", "divide",
           *FLOAT_UNARY, *SAME_UNARY, *ROUNDING, *FLOAT_BINARY, *BITWISE, "arctan2", "fmod",
           "heaviside", "frac", "sgn", "signbit", "nan_to_num", "logit", "isposinf",
           "isneginf", "isreal", "bitwise_not", *FLOATING_BINARY, *FMAX_FMIN, *GCD_LCM,
           "positive", "frexp"]


def int_divisor_check(b, rt, name, a=None):
    """Integer division by zero raises (as torch does on the CPU) rather than give garbage; not
    where the result is empty (an operand without elements broadcasts to none), as torch."""
    if dt.is_floating(rt) or any(ew.is_tensor(x) and x.numel() == 0 for x in (a, b)):
        return
    if ew.is_tensor(b):
        zero = b == 0
        if any_(zero).item():
            raise ZeroDivisionError(f"{name}: integer division by zero")
    elif b == 0:
        raise ZeroDivisionError(f"{name}: integer division by zero")


def _unary_float(name):
    def op(x, out=None):
        return ew.unary(name, x, out=out, float_only=True)
    op.__name__ = name
    op.__doc__ = f"Elementwise {name}; integer inputs give float32."
    return op


def _unary_same(name):
    def op(x, out=None):
        if (name in ROUNDING and not dt.is_floating(x.dtype)) or (name, x.dtype) == ("sign", dt.bool_):
            return x.clone() if out is None else out.copy_(x)
        if (name, x.dtype) == ("square", dt.bool_):  # torch: x ** 2, promoted to int64
            return x.to(dt.int64) if out is None else out.copy_(x)
        if x.dtype == dt.bool_ and name != "abs":
            raise TypeError(f"{name}: not supported on bool tensors")
        return ew.unary(name, x, out=out)
    op.__name__ = name
    op.__doc__ = f"Elementwise {name}; keeps the input's dtype."
    return op


def _binary(name, check, float_result, doc):
    """ew.binary(name, ...) after check(name, a, b); float_result as ew.binary's."""
    def op(a, b, out=None):
        check(name, a, b)
        return ew.binary(name, a, b, out=out, float_result=float_result)
    op.__name__ = name
    op.__doc__ = doc
    return op


def _expect_tensor(x, name):
    if not ew.is_tensor(x):
        raise TypeError(f"{name}: expected a tensor, got {type(x).__name__}")


def _check_numbers(name, *operands):
    """Operands that are not tensors must be real numbers (TypeError naming the op)."""
    for x in operands:
        if not ew.is_tensor(x):
            ew.check_scalar(x, name)


def _check_bitwise(name, *operands):
    """Bitwise ops take integer and bool operands (the shifts integers only), as torch."""
    _check_kinds(name, "i" if name.endswith("shift") else "ib", *operands)


def _check_kinds(name, allowed, *operands):
    """Numbers or tensors whose dtype kinds are in `allowed` ("i" integer, "b" bool)."""
    _check_numbers(name, *operands)
    for x in operands:
        d = x.dtype if ew.is_tensor(x) else dt.scalar_dtype(x)
        if d.kind.replace("u", "i") not in allowed:  # uint8 is an integer dtype too
            kinds = "integer" if allowed == "i" else "integer or bool"
            raise TypeError(f"{name}: expected {kinds} operands, got {d}")


def _check_integers(name, *operands):
    _check_kinds(name, "i", *operands)


def _check_floating(name, *operands):
    """Operands whose promoted dtype is floating point (TypeError naming the op otherwise)."""
    _check_numbers(name, *operands)
    rt = dt.result_type(*operands)
    if not dt.is_floating(rt):
        raise TypeError(f"{name}: expected floating point operands, got {rt}")


for _n in FLOAT_UNARY + SPECIAL_UNARY + SPECIAL_PLAIN_UNARY:
    globals()[_n] = _unary_float(_n)
for _n in SAME_UNARY + ROUNDING:
    globals()[_n] = _unary_same(_n)
_BINARY_FAMILIES = [
    (FLOAT_BINARY + SPECIAL_BINARY, _check_numbers, True,
     "Elementwise {}(a, b); integer inputs give float32."),
    (POLYNOMIALS, _check_numbers, True,
     "Elementwise {}(input, n), as torch.special's: the degree n truncated to an integer (0 "
     "where negative); integer inputs give float32."),
    (BITWISE, _check_bitwise, False, "Elementwise {} of integer or bool tensors (or numbers)."),
    (FLOATING_BINARY, _check_floating, True,
     "Elementwise {}(a, b) of floating point operands, as torch's."),
    (FMAX_FMIN, _check_numbers, False, "Elementwise {}: NaN only where both operands are NaN."),
    (GCD_LCM, _check_integers, False, "Elementwise {} of integer tensors (non-negative)."),
]
for _names, _check, _float_result, _doc in _BINARY_FAMILIES:
    for _n in _names:
        globals()[_n] = _binary(_n, _check, _float_result, _doc.format(_n))
arctan2 = globals()["atan2"]


def add(a, b, alpha=1, out=None):
    """a + alpha * b."""
    if alpha != 1:
        return ew.ternary("add_scaled", [a, b, alpha], dt.result_type(a, b), out=out)
    return ew.binary("add", a, b, out=out)


def sub(a, b, alpha=1, out=None):
    """a - alpha * b."""
    if alpha != 1:
        return ew.ternary("add_scaled", [a, b, -alpha], dt.result_type(a, b), out=out)
    return ew.binary("sub", a, b, out=out)


def mul(a, b, out=None):
    return ew.binary("mul", a, b, out=out)


def div(a, b, rounding_mode=None, out=None):
    """True division (integers give float32); rounding_mode 'floor' or 'trunc' as torch."""
    if rounding_mode == "floor":
        return floor_divide(a, b, out=out)
    if rounding_mode == "trunc":
        q = ew.binary("div", a, b, float_result=True)
        q = ew.unary("trunc", q)
        rt = dt.result_type(a, b)
        return q.to(rt) if out is None else out.copy_(q)
    if rounding_mode is not None:
        raise ValueError(f"div: rounding_mode must be None, 'floor' or 'trunc', got {rounding_mode!r}")
    return ew.binary("div", a, b, out=out, float_result=True)


def floor_divide(a, b, out=None):
    int_divisor_check(b, dt.result_type(a, b), "floor_divide", a)
    return ew.binary("floor_divide", a, b, out=out)


def remainder(a, b, out=None):
    """Python's modulo: the result has the divisor's sign."""
    int_divisor_check(b, dt.result_type(a, b), "remainder", a)
    return ew.binary("remainder", a, b, out=out)


def fmod(a, b, out=None):
    """C's fmod: the result has the dividend's sign (remainder's has the divisor's)."""
    _check_numbers("fmod", a, b)
    int_divisor_check(b, dt.result_type(a, b), "fmod", a)
    return ew.binary("fmod", a, b, out=out)


def heaviside(x, values, out=None):
    """0 where x < 0, 1 where x > 0, `values` where x == 0 (NaN gives 0, as torch)."""
    _check_numbers("heaviside", x, values)
    return ew.binary("heaviside", x, values, out=out)


# A floating tensor to these scalar powers takes torch's own forms (its CPU pow kernel's), so
# the special values are torch's (0.5 is sqrt for float32/64: -0 stays -0, -inf gives NaN;
# torch's 16-bit pow keeps C's pow there) and, on CPU devices, the time is an elementwise
# pass's (PoCL, 3.3M floats: x ** 2 took 159 ms, x * x 0.4).
SCALAR_POWS = {0.5: "sqrt", -0.5: "rsqrt", -1.0: "reciprocal", 2.0: "square", 3.0: "cube",
               -2.0: "rsquare", 1.0: "copy"}
ROOT_POWS = (0.5, -0.5)


def pow(a, b, out=None):
    rt = dt.result_type(a, b)
    if not dt.is_floating(rt) and not ew.is_tensor(b) and b < 0:
        raise ValueError("pow: integers to negative integer powers are not allowed")
    if (ew.is_tensor(a) and type(b) in (int, float) and a.dtype is rt and dt.is_floating(rt)
            and (out is None or out.dtype is rt)):
        form = SCALAR_POWS.get(float(b))
        if form is not None and not (rt in dt.HALF_TYPES and b in ROOT_POWS):
            return ew.unary(form, a, out=out)
    return ew.binary("pow", a, b, out=out)


def rsub(a, b, alpha=1):
    """b - alpha * a (torch.rsub)."""
    if alpha != 1:
        return ew.ternary("add_scaled", [b, a, -alpha], dt.result_type(a, b))
    return ew.binary("rsub", a, b)


def _rdiv(t, scalar):
    """scalar / t (the / operator with a number on the left)."""
    return ew.binary("rdiv", t, scalar, float_result=True)


def _rpow(t, scalar):
    """scalar ** t."""
    return reflected("pow", t, scalar)


def reflected(name, t, scalar):
    """scalar <op> t for //, % and ** with a Python number on the left."""
    ew.check_scalar(scalar, name)
    if name in ("floor_divide", "remainder"):
        int_divisor_check(t, dt.result_type(t, scalar), name, t)
    return ew.binary("r" + name, t, scalar)


def neg(x, out=None):
    if x.dtype == dt.bool_:
        raise TypeError("neg: negation of a bool tensor is not supported; use logical_not")
    return ew.unary("neg", x, out=out)


def clamp(x, min=None, max=None, out=None):
    """Limit x to [min, max]; NaN stays NaN; min > max gives max, as torch."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    if max is None:
        return ew.ternary("clamp_min", [x, min], dt.result_type(x, min), out=out)
    if min is None:
        return ew.ternary("clamp_max", [x, max], dt.result_type(x, max), out=out)
    return ew.ternary("clamp", [x, min, max], dt.result_type(x, min, max), out=out)


def addcmul_kernel(input, tensor1, tensor2, value=1, out=None):
    """input + value * tensor1 * tensor2 in one launch, outside cltensor's autograd (the torch
    device's kernel, where torch differentiates; cltensor.addcmul composes differentiable ops)."""
    return ew.ternary("addcmul", [input, tensor1, tensor2, value],
                      dt.result_type(input, tensor1, tensor2), out=out)


def addcdiv_kernel(input, tensor1, tensor2, value=1, out=None):
    """input + value * tensor1 / tensor2 in one launch, as addcmul_kernel."""
    return ew.ternary("addcdiv", [input, tensor1, tensor2, value],
                      dt.result_type(input, tensor1, tensor2), out=out)


def lerp_kernel(input, end, weight, out=None):
    """torch.lerp in one launch (weight a number or a tensor), as addcmul_kernel."""
    return ew.ternary("lerp", [input, end, weight], dt.result_type(input, end), out=out)


def maximum(a, b, out=None):
    return ew.binary("maximum", a, b, out=out)


def minimum(a, b, out=None):
    return ew.binary("minimum", a, b, out=out)


def where(condition, x, y, out=None):
    """x where condition is true, else y (all broadcast together)."""
    if not ew.is_tensor(condition) or condition.dtype != dt.bool_:
        raise TypeError("where: condition must be a bool tensor")
    rt = dt.result_type(x, y)
    return ew.ternary("where", [condition, x, y], rt, out=out)


def _predicate(name):
    def op(a, b, out=None):
        return ew.predicate(name, [a, b], out=out)
    op.__name__ = name
    return op


eq, ne, lt, le, gt, ge = (_predicate(n) for n in ("eq", "ne", "lt", "le", "gt", "ge"))
logical_and, logical_or, logical_xor = (_predicate(n) for n in
                                        ("logical_and", "logical_or", "logical_xor"))


def logical_not(x, out=None):
    return ew.predicate("logical_not", [x], out=out)


def _float_test(name, for_ints):
    def op(x):
        if not dt.is_floating(x.dtype):
            return full(x.shape, for_ints, dtype=dt.bool_, device=x.device)
        return ew.predicate(name, [x])
    op.__name__ = name
    return op


isnan = _float_test("isnan", False)
isinf = _float_test("isinf", False)
isfinite = _float_test("isfinite", True)
isposinf = _float_test("isposinf", False)
isneginf = _float_test("isneginf", False)


def isreal(x):
    """True everywhere: cltensor's tensors are real."""
    return full(x.shape, True, dtype=dt.bool_, device=x.device)


def signbit(x, out=None):
    """True where the sign bit is set (-0.0 and negative NaN included)."""
    _expect_tensor(x, "signbit")
    return ew.predicate("signbit", [x], out=out)


def sgn(x, out=None):
    """sign(x): the two agree on real tensors."""
    return globals()["sign"](x, out=out)


def frac(x, out=None):
    """x - trunc(x), with x's sign; floating-point tensors only, as torch."""
    _expect_tensor(x, "frac")
    if not dt.is_floating(x.dtype):
        raise TypeError(f"frac: expected a floating-point tensor, got {x.dtype}")
    return ew.unary("frac", x, out=out)


def logit(x, eps=None, out=None):
    """log(x / (1 - x)), x clamped to [eps, 1 - eps] first when eps is given."""
    _expect_tensor(x, "logit")
    rt = x.dtype if dt.is_floating(x.dtype) else dt.get_default_dtype()
    return ew.ternary("logit", [x, -1.0 if eps is None else eps], rt, out=out)


def nan_to_num(x, nan=0.0, posinf=None, neginf=None, out=None):
    """NaN, +inf and -inf replaced by `nan`, `posinf` and `neginf` (by default 0 and the
    dtype's largest and lowest finite values); integer and bool tensors are copied."""
    _expect_tensor(x, "nan_to_num")
    if not dt.is_floating(x.dtype):
        return x.clone() if out is None else out.copy_(x)
    info = dt.finfo(x.dtype)
    values = [0.0 if nan is None else nan, info.max if posinf is None else posinf,
              info.min if neginf is None else neginf]
    return ew.ternary("nan_to_num", [x, *values], x.dtype, out=out)


def _polygamma(x, n, out=None):
    """polygamma(n, x): the kernel op behind cltensor.polygamma and ClTensor.polygamma."""
    _expect_tensor(x, "polygamma")
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError(f"polygamma: n must be an int, got {type(n).__name__}")
    if n < 0:
        raise ValueError(f"polygamma: n must be non-negative, got {n}")
    return ew.binary("polygamma", x, int(n), out=out, float_result=True)


def i1(x):
    """The modified Bessel function I1 (torch.special.i1): i0's derivative."""
    return ew.unary("i1", x, float_only=True)


def frexp(x):
    """(mantissa, exponent) with x = mantissa * 2 ** exponent, |mantissa| in [0.5, 1) and an
    int32 exponent; 0, inf and NaN give themselves and exponent 0, as torch.

    Example:
        >>> [t.tolist() for t in cltensor.frexp(cltensor.tensor([3.0, -0.5]))]
        [[0.75, -0.5], [2, 0]]
    """
    _expect_tensor(x, "frexp")
    if not dt.is_floating(x.dtype):
        raise TypeError(f"frexp: expected a floating point tensor, got {x.dtype}")
    exponent = ew.launch_elementwise("OP_frexp_exponent", [x], ew.ClTensor.empty_on(
        x.shape, dt.int32, x.device), x.dtype)
    return return_types.frexp(ew.unary("frexp_mantissa", x), exponent)


def positive(x):
    """x itself (torch.positive); bool tensors raise, as torch."""
    _expect_tensor(x, "positive")
    if x.dtype == dt.bool_:
        raise TypeError("positive: not supported on bool tensors")
    return x


def bitwise_not(x, out=None):
    """~x for integer tensors; logical not for bool ones."""
    _expect_tensor(x, "bitwise_not")
    _check_bitwise("bitwise_not", x)
    return ew.unary("logical_not" if x.dtype == dt.bool_ else "bitwise_not", x, out=out)


clip, negative, subtract, multiply, divide, true_divide = clamp, neg, sub, mul, div, div


# "out = <expr>": out as a whole word, then one "=" (not "=="), so operands such as `outer` and
# expressions such as "out == 0" are left alone
_OUT_ASSIGNMENT = re.compile(r"\s*out\s*=(?!=)(.*)\Z", re.S)


def elementwise(expr, dtype=None, **operands):
    """A user-defined elementwise op from a C expression, compiled once per expression and dtypes.

    `expr` is `"out = <C expression>"` (or just the expression) over the keyword operands, which
    are tensors (broadcast together) or Python numbers; at most four.

    Example:
        y = cltensor.elementwise("out = a * exp(-b * x)", x=x, a=2.0, b=0.5)
    """
    assignment = _OUT_ASSIGNMENT.match(expr)
    body = (assignment.group(1) if assignment else expr).strip().rstrip(";")
    if not operands or len(operands) > 4:
        raise ValueError(f"elementwise: expected 1 to 4 named operands, got {len(operands)}")
    names = list(operands)
    values = [operands[n] for n in names]
    rt = dt.result_type(*values)
    if not dt.is_floating(rt):
        rt = dt.get_default_dtype()
    out_dtype = dt.as_dtype(dtype) or rt
    return ew.user_elementwise(body, values, names, out_dtype, rt)


def _inplace(fn):
    def op(self, *args, **kwargs):
        return fn(self, *args, out=self, **kwargs)
    op.__name__ = fn.__name__ + "_"
    return op


_METHOD_FNS = [add, sub, mul, div, floor_divide, remainder, pow, neg, clamp, maximum, minimum,
               eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_xor, logical_not,
               fmod, heaviside, sgn, frac, logit, nan_to_num, bitwise_not, _polygamma,
               *(globals()[n] for n in FLOAT_UNARY + SAME_UNARY + ROUNDING + FLOAT_BINARY +
                 BITWISE + FLOATING_BINARY + FMAX_FMIN + GCD_LCM)]
TENSOR_METHODS = {f.__name__: f for f in _METHOD_FNS}
# NOTE: the comparisons' in-place forms store 0 or 1 in the tensor's own dtype, as torch's
TENSOR_METHODS.update({f.__name__ + "_": _inplace(f) for f in _METHOD_FNS
                       if f.__name__ not in FMAX_FMIN})
TENSOR_METHODS.update(rsub=rsub, _rdiv=_rdiv, _rpow=_rpow, isnan=isnan, isinf=isinf,
                      isfinite=isfinite, clip=clamp,
                      clip_=TENSOR_METHODS["clamp_"], true_divide=div, isposinf=isposinf,
                      isneginf=isneginf, isreal=isreal, signbit=signbit, arctan2=arctan2,
                      positive=positive, frexp=frexp,
                      arctan2_=TENSOR_METHODS["atan2_"],
                      where=lambda self, condition, other: where(condition, self, other))


def _comparison(name):
    def op(self, o):
        return ew.predicate(name, [self, o])
    op.__name__ = f"__{name}__"
    return op


# Python's operators on ClTensor that call these ops directly, not through the (autograd
# wrapped) methods: they have no gradient. The rest are in cltensor/operators.py.
OPERATORS = {
    "__floordiv__": floor_divide, "__mod__": remainder,
    "__rfloordiv__": lambda self, o: reflected("floor_divide", self, o),
    "__rmod__": lambda self, o: reflected("remainder", self, o),
    "__rlshift__": lambda self, o: globals()["bitwise_left_shift"](o, self),
    "__rrshift__": lambda self, o: globals()["bitwise_right_shift"](o, self),
    **{f"__{n}__": _comparison(n) for n in ("eq", "ne", "lt", "le", "gt", "ge")}}
TENSOR_METHODS.update(OPERATORS)
