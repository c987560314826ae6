"""vector_norm, matrix_norm, norm and cond."""
import math
import numbers

from .. import dtypes as dt
from ..autograd.functions import _where  # the differentiable where
from ..ops import linalg as la
from ..ops.elementwise import expect_tensor as _check_tensor
from ..tensor import _norm_dim
from .decompositions import svdvals
from .solve import inv_ex

MATRIX_ORDS = ("fro", "nuc", math.inf, -math.inf, 1, -1, 2, -2)


def _floating_input(x, name, op, dtype=None):
    """x, checked to be a floating-point tensor, cast to `dtype` when one is given."""
    _check_tensor(x, name, op)
    if not dt.is_floating(x.dtype):
        raise TypeError(f"{op}: {name} must be a floating-point tensor, got {x.dtype}")
    if dtype is None:
        return x
    dtype = dt.as_dtype(dtype)
    if not dt.is_floating(dtype):
        raise TypeError(f"{op}: dtype must be a floating-point dtype, got {dtype}")
    return x.to(dtype)


def _reduced(x, dim, op):
    """The dims (sorted) that dim (None: all, an int or a sequence) names."""
    if dim is None or dim == ():
        return tuple(range(x.ndim))
    dims = [_norm_dim(d, x.ndim, op) for d in (dim if isinstance(dim, (tuple, list)) else [dim])]
    if len(set(dims)) != len(dims):
        raise ValueError(f"{op}: dim {tuple(dims)} names a dim twice")
    return tuple(sorted(dims))


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The vector ord-norm of x over `dim` (None: all elements): (sum |x|^ord)^(1/ord), ord
    any real number; inf: max |x|, -inf: min |x|, 0: the count of non-zeros. dtype: x is cast
    to it first. Gradients as torch's (0 where the norm is 0; none for ord 0).

    Example:
        >>> cltensor.linalg.vector_norm(cltensor.tensor([3.0, -4.0])).item()
        5.0
    """
    op = "linalg.vector_norm"
    x = _floating_input(x, "x", op, dtype)
    if isinstance(ord, bool) or not isinstance(ord, numbers.Real):
        raise TypeError(f"{op}: ord must be a real number (inf, -inf and 0 included), got "
                        f"{ord!r}")
    return x.norm(ord, _reduced(x, dim, op), bool(keepdim))  # torch's gradients: Norm


def _matrix_dims(A, dim, op):
    if A.ndim < 2:
        raise ValueError(f"{op}: A must have at least 2 dims, got shape {tuple(A.shape)}")
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise ValueError(f"{op}: dim must be a 2-tuple of dims, got {dim!r}")
    d0, d1 = (_norm_dim(d, A.ndim, op) for d in dim)
    if d0 == d1:
        raise ValueError(f"{op}: dim must name two different dims, got {tuple(dim)}")
    return d0, d1


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """The matrix ord-norm of A's matrices in dims `dim` (rows, columns): "fro" (Frobenius),
    "nuc" (the sum of the singular values), 2 / -2 (the largest / smallest singular value),
    1 / -1 (the largest / smallest column sum of |A|), inf / -inf (the same of row sums).

    Example:
        >>> A = cltensor.tensor([[1.0, -2.0], [3.0, 4.0]])
        >>> cltensor.linalg.matrix_norm(A, ord=1).item()
        6.0
    """
    op = "linalg.matrix_norm"
    A = _floating_input(A, "A", op, dtype)
    rows, cols = _matrix_dims(A, dim, op)
    if not any(ord == o and type(ord) is not bool for o in MATRIX_ORDS):
        raise ValueError(f"{op}: ord must be one of {MATRIX_ORDS}, got {ord!r}")
    if ord == "fro":
        return vector_norm(A, 2, (rows, cols), keepdim)
    if ord in ("nuc", 2, -2):
        la.refuse_low_precision(A, "A", op)  # the singular values are
        rest = [d for d in range(A.ndim) if d not in (rows, cols)]
        S = svdvals(A.permute(*rest, rows, cols))
        out = S.sum(-1) if ord == "nuc" else S.amax(-1) if ord == 2 else S.amin(-1)
        for d in sorted((rows, cols)) if keepdim else ():
            out = out.unsqueeze(d)
        return out
    summed, over = (rows, cols) if ord in (1, -1) else (cols, rows)
    sums = A.abs().sum(summed, keepdim=True)
    out = sums.amax(over, keepdim=True) if ord > 0 else sums.amin(over, keepdim=True)
    return out if keepdim else out.squeeze((rows, cols))


def norm(x, ord=None, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.norm: a vector norm when dim is an int (or x is 1-d, dim None), a matrix
    norm when dim is a 2-tuple (or x is 2-d, dim None, ord given); ord None: the 2-norm of
    all elements over dim (Frobenius for matrices). A string ord needs a matrix.

    Example:
        >>> cltensor.linalg.norm(cltensor.tensor([[1.0, 2.0], [2.0, 4.0]])).item()
        5.0
    """
    op = "linalg.norm"
    x = _floating_input(x, "x", op, dtype)
    if isinstance(dim, int):
        dim = (dim,)
    if ord is None:
        return vector_norm(x, 2, dim, keepdim)
    if dim is None:
        if x.ndim not in (1, 2):
            raise ValueError(f"{op}: when ord is given and dim is not, x must be 1-d or 2-d, "
                             f"got shape {tuple(x.shape)}")
        dim = tuple(range(x.ndim))
    if len(dim) == 1:
        if isinstance(ord, str):
            raise ValueError(f"{op}: ord {ord!r} is a matrix norm, but dim {tuple(dim)} names "
                             f"one dim")
        return vector_norm(x, ord, dim, keepdim)
    return matrix_norm(x, ord, dim, keepdim)


def cond(A, p=None):
    """The condition number of A (*, m, n) in norm p: None or 2 (the largest singular value over
    the smallest), -2 (the inverse of that), or, for square A, "fro", "nuc", inf, -inf, 1, -1:
    norm(A) norm(A^-1) (inf for a singular A).

    Example:
        >>> cltensor.linalg.cond(cltensor.tensor([[2.0, 0.0], [0.0, 0.5]])).item()
        4.0
    """
    op = "linalg.cond"
    la.check_matrices(A, "A", op, square=p not in (None, 2, -2))
    if p in (None, 2, -2):
        S = svdvals(A)
        big, small = S.select(-1, 0), S.select(-1, -1)
        return big / small if p != -2 else small / big
    norm_a = matrix_norm(A, p)  # checks p
    X, info = inv_ex(A)
    return _where(info > 0, math.inf, norm_a * matrix_norm(X, p))
