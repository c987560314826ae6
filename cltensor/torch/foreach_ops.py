"""The `_foreach_*` pointwise ops on lists of tensors: torch.optim's default (foreach) steps and
clip_grad_norm_'s scaling. A list of like tensors (one floating dtype, one device, dense, equal
shapes across the lists) with number operands goes straight to cltensor's kernels, one launch a
tensor, torch's checks made once for the list; any other list runs the per-tensor aten op on
each element, as torch's own fallback does."""
import numbers

import torch

from ..ops import elementwise as ew
from ..ops import pointwise
from ._backend import TO_NUMPY, aten, unwrap, wrap
from .math_ops import raw

_aten = torch.ops.aten
_FLOATS = {torch.float32, torch.float64, torch.float16, torch.bfloat16}


def _binary_kernel(name):
    return lambda a, b, out=None: ew.binary(name, a, b, out=out)


# foreach name -> (cltensor's kernel taking out=, the per-tensor aten op of a Tensor operand,
# that of a number operand)
BINARY = {
    "add": (raw("add"), "add", "add"),
    "sub": (raw("sub"), "sub", "sub"),
    "mul": (raw("mul"), "mul", "mul"),
    "div": (raw("div"), "div", "div"),
    "pow": (raw("pow"), "pow", "pow"),
    "maximum": (_binary_kernel("maximum"), "maximum", "clamp_min"),
    "minimum": (_binary_kernel("minimum"), "minimum", "clamp_max"),
    "clamp_min": (_binary_kernel("clamp_min"), "clamp_min", "clamp_min"),
    "clamp_max": (_binary_kernel("clamp_max"), "clamp_max", "clamp_max"),
}
UNARY = ("sqrt", "rsqrt", "neg", "abs", "exp", "expm1", "log", "log1p", "log2", "log10",
         "reciprocal", "sign", "sigmoid", "tanh", "sin", "cos", "tan", "asin", "acos", "atan",
         "sinh", "cosh", "erf", "erfc", "ceil", "floor", "round", "trunc", "frac", "lgamma")
TERNARY = {"addcmul": pointwise.addcmul_kernel, "addcdiv": pointwise.addcdiv_kernel,
           "lerp": pointwise.lerp_kernel}


def _lengths(lists, scalars=None):
    """torch's list checks: none empty, all of one length (a scalar list's too)."""
    n = len(lists[0])
    if n == 0:
        raise RuntimeError("Tensor list must have at least one tensor.")
    for other in lists[1:]:
        if len(other) != n:
            raise RuntimeError(f"Tensor lists must have the same number of tensors, got {n} "
                               f"and {len(other)}")
    if scalars is not None and len(scalars) != n:
        raise RuntimeError("Tensor list must have same number of elements as scalar list.")


def _number(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _alike(lists, numbers_=(), tensor=None):
    """True when every tensor of `lists` is a dense opencl tensor of the first's floating dtype
    and device, the tensors at one index share a shape, the operands in numbers_ are real
    numbers and `tensor` (an operand for every index) is None or a 0-d tensor like them."""
    first = lists[0][0]
    if not isinstance(first, torch.Tensor):
        return False
    dtype, device = first.dtype, first.device
    if dtype not in _FLOATS or device.type != "opencl":
        return False
    if not all(_number(v) for v in numbers_):
        return False
    if tensor is not None and not (isinstance(tensor, torch.Tensor) and tensor.dim() == 0
                                   and tensor.dtype == dtype and tensor.device == device):
        return False
    for column in zip(*lists):
        shape = column[0].shape
        for t in column:
            if (not isinstance(t, torch.Tensor) or t.dtype != dtype or t.device != device
                    or t.shape != shape or not t.is_contiguous()):
                return False
    return True


def _operands(column):
    """A column's tensors as ClTensors, its numbers as they are."""
    return [unwrap(a) if isinstance(a, torch.Tensor) else a for a in column]


def _run(kernel, columns, inplace):
    """kernel(*column) for each column (tensors, then numbers), into the column's first tensor
    when in place: None in place, else the list of new tensors."""
    if inplace:
        for column in columns:
            ops = _operands(column)
            kernel(*ops, out=ops[0])
        return None
    return [wrap(kernel(*_operands(column))) for column in columns]


def _fallback(op, columns, inplace):
    """The per-tensor aten op on each column."""
    results = [op(*column) for column in columns]
    return None if inplace else results


def _register_binary(name):
    kernel, tensor_op, number_op = BINARY[name]
    alpha = name in ("add", "sub")
    for suffix in ("", "_"):
        inplace = suffix == "_"
        packet = getattr(_aten, f"_foreach_{name}{suffix}")
        by_tensor = _per_tensor(tensor_op, inplace)
        by_number = _per_tensor(number_op, inplace)

        def lists(self, other, alpha=1, *, _op=by_tensor, _inplace=inplace):
            _lengths([self, other])
            extra = (alpha,) if alpha != 1 else ()
            if _alike([self, other], extra):
                return _run(kernel, [(a, b, *extra) for a, b in zip(self, other)], _inplace)
            kw = {"alpha": alpha} if extra else {}
            return _fallback(lambda a, b: _op(a, b, **kw), list(zip(self, other)), _inplace)

        def scalar(self, value, *, _op=by_number, _inplace=inplace):
            _lengths([self])
            columns = [(t, value) for t in self]
            if _alike([self], (value,)):
                return _run(kernel, columns, _inplace)
            return _fallback(_op, columns, _inplace)

        def scalars(self, values, *, _op=by_number, _inplace=inplace):
            _lengths([self], values)
            columns = list(zip(self, values))
            if _alike([self], values):
                return _run(kernel, columns, _inplace)
            return _fallback(_op, columns, _inplace)

        def one_tensor(self, other, alpha=1, *, _op=by_tensor, _inplace=inplace):
            _lengths([self])
            extra = (alpha,) if alpha != 1 else ()
            if _alike([self], extra, tensor=other):
                return _run(kernel, [(t, other, *extra) for t in self], _inplace)
            kw = {"alpha": alpha} if extra else {}
            return _fallback(lambda a: _op(a, other, **kw), [(t,) for t in self], _inplace)

        forms = {"List": lists, "Scalar": scalar, "ScalarList": scalars, "Tensor": one_tensor}
        for overload, fn in forms.items():
            if overload not in packet.overloads():
                continue
            if not alpha and overload in ("List", "Tensor"):
                fn = _without_alpha(fn)
            aten(f"_foreach_{name}{suffix}.{overload}")(fn)


def _per_tensor(name, inplace):
    """The per-tensor aten op of the fallback (an in-place form torch lacks, as maximum_,
    writes the functional form's result into the tensor)."""
    if not inplace:
        return getattr(_aten, name)
    op = getattr(_aten, name + "_", None)
    if op is not None:
        return op
    functional = getattr(_aten, name)
    return lambda self, *args, **kwargs: self.copy_(functional(self, *args, **kwargs))


def _without_alpha(fn):
    """A List or Tensor form of an op without alpha (mul, div, ...)."""
    return lambda self, other: fn(self, other)


def _register_unary(name):
    kernel = raw(name)
    for suffix in ("", "_"):
        op = _per_tensor(name, suffix == "_")

        def fn(self, *, _op=op, _inplace=suffix == "_"):
            _lengths([self])
            columns = [(t,) for t in self]
            if _alike([self]):
                return _run(kernel, columns, _inplace)
            return _fallback(_op, columns, _inplace)
        aten(f"_foreach_{name}{suffix}")(fn)


def _register_ternary(name):
    """addcmul/addcdiv (value a number or one per tensor) and lerp (weights a list of
    tensors, a number or one number per tensor)."""
    kernel = TERNARY[name]
    for suffix in ("", "_"):
        inplace = suffix == "_"
        packet = getattr(_aten, f"_foreach_{name}{suffix}")
        op = _per_tensor(name, inplace)
        # the per-tensor op of a column (self, a, b, last operand)
        per = op if name == "lerp" else (lambda a, b, c, v, _op=op: _op(a, b, c, value=v))
        lists_of = 2 if name == "lerp" else 3  # the tensor lists before the last operand

        def lists(*args, _op=op, _inplace=inplace):  # lerp's weights a list of tensors
            _lengths(args)
            columns = list(zip(*args))
            if _alike(args):
                return _run(kernel, columns, _inplace)
            return _fallback(_op, columns, _inplace)

        def scalar(*args, value=1, _per=per, _n=lists_of, _inplace=inplace):
            tensors, last = args[:_n], (args[_n] if len(args) > _n else value)
            _lengths(tensors)
            columns = [(*column, last) for column in zip(*tensors)]
            if _alike(tensors, (last,)):
                return _run(kernel, columns, _inplace)
            return _fallback(_per, columns, _inplace)

        def scalars(*args, _per=per, _n=lists_of, _inplace=inplace):
            tensors, values = args[:_n], args[_n]
            _lengths(tensors, values)
            columns = [(*column, v) for column, v in zip(zip(*tensors), values)]
            if _alike(tensors, values):
                return _run(kernel, columns, _inplace)
            return _fallback(_per, columns, _inplace)
        forms = {"List": lists if name == "lerp" else None, "Scalar": scalar,
                 "ScalarList": scalars}
        for overload, fn in forms.items():
            if fn is not None and overload in packet.overloads():
                aten(f"_foreach_{name}{suffix}.{overload}")(fn)


@aten("_foreach_zero_")
def foreach_zero_(self):
    _lengths([self])
    for t in self:
        if t.dtype in TO_NUMPY:
            ew.fill_(unwrap(t), 0)
        else:
            _aten.zero_(t)


for _name in BINARY:
    _register_binary(_name)
for _name in UNARY:
    _register_unary(_name)
for _name in TERNARY:
    _register_ternary(_name)
