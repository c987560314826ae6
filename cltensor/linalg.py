"""torch.linalg for cltensor: solve, inv, det, slogdet, cholesky, lu_factor, lu_solve,
solve_triangular, matrix_power, qr, eigh, eigvalsh, svd, svdvals, pinv, matrix_rank, lstsq and the
norms (vector_norm, matrix_norm, norm, cond) on batches of float32/float64 matrices, with
torch's names, signatures and errors (LinAlgError, a RuntimeError, for a singular or not
positive-definite matrix, or Jacobi sweeps that do not converge). Also torch's top-level forms
(inverse, det, logdet, slogdet, cholesky, cholesky_solve, cholesky_inverse, triangular_solve,
qr, pinverse), which cltensor/__init__.py binds as functions and ClTensor methods.

The kernels are in cltensor/ops/linalg.py (cl_kernels/linalg.cl). Here each op is a Function
whose backward is torch's formula, composed of differentiable ops (matmul, transposes, these
solves), so that create_graph=True records second-order graphs. Not differentiable, and
refused when a gradient is needed: lu_factor and lu_solve with respect to LU, qr in mode "r"
and in mode "complete" with more rows than columns (as torch).

Example:
    >>> A = cltensor.tensor([[2.0, 1.0], [1.0, 3.0]])
    >>> cltensor.linalg.solve(A, cltensor.tensor([4.0, 7.0])).tolist()
    [1.0, 2.0]
"""
import math
import numbers
from collections import namedtuple

import numpy as np

from . import dtypes as dt
from .autograd import Function, is_grad_enabled, needs_grad
from .autograd.engine import sum_to_shape
from .autograd.functions import _where  # the differentiable where
from .ops import linalg as la
from .ops.contract import matrix_power  # noqa: F401  (torch.linalg.matrix_power)
from .ops.composed import _check_tensor
from .ops.linalg import LinAlgError
from .ops.ranges import eye
from .tensor import _norm_dim

__all__ = ["solve", "inv", "inv_ex", "det", "slogdet", "cholesky", "cholesky_ex", "lu_factor",
           "lu_factor_ex", "lu_solve", "solve_triangular", "matrix_power", "vector_norm",
           "matrix_norm", "norm", "cond", "qr", "eigh", "eigvalsh", "svd", "svdvals", "pinv",
           "matrix_rank", "lstsq", "LinAlgError"]

LuFactor = namedtuple("linalg_lu_factor", "LU pivots")
LuFactorEx = namedtuple("linalg_lu_factor_ex", "LU pivots info")
Slogdet = namedtuple("linalg_slogdet", "sign logabsdet")
CholeskyEx = namedtuple("linalg_cholesky_ex", "L info")
InvEx = namedtuple("linalg_inv_ex", "inverse info")
TriangularSolve = namedtuple("triangular_solve", "solution cloned_coefficient")
Qr = namedtuple("linalg_qr", "Q R")
QrLegacy = namedtuple("qr", "Q R")
Eigh = namedtuple("linalg_eigh", "eigenvalues eigenvectors")
Svd = namedtuple("linalg_svd", "U S Vh")
Lstsq = namedtuple("linalg_lstsq", "solution residuals rank singular_values")


def _summed(g, shape):
    """A broadcast operand's gradient summed back to its shape (None stays None)."""
    return None if g is None else sum_to_shape(g, shape)


def _flag(value, name, op):
    if not isinstance(value, bool):
        raise TypeError(f"{op}: {name} must be a bool, got {value!r}")
    return value


# ---- Functions ----------------------------------------------------------------------------------

class _Solve(Function):
    @staticmethod
    def forward(ctx, A, B):
        X, LU, piv, info = la.solve(A, B)
        ctx.save_for_backward(A, X)
        ctx.factors, ctx.b_shape = (LU, piv), B.shape
        return X, info

    @staticmethod
    def backward(ctx, g, _g_info=None):
        A, X = ctx.saved_tensors
        if is_grad_enabled():  # create_graph: a solve that records its dependence on A
            gB = solve(A.mT, g)
        else:  # NOTE: A^-T g from the forward's LU, without factoring A^T
            gB = la.lu_solve(*ctx.factors, g, adjoint=True)
        gA = -gB.matmul(X.mT) if ctx.needs_input_grad[0] else None
        return _summed(gA, A.shape), _summed(gB, ctx.b_shape)


class _Inv(Function):
    @staticmethod
    def forward(ctx, A):
        X, info = la.inv_ex(A, "linalg.inv")
        ctx.save_for_backward(X)
        return X, info

    @staticmethod
    def backward(ctx, g, _g_info=None):
        (X,) = ctx.saved_tensors
        return -X.mT.matmul(g).matmul(X.mT)


def _inverse_transposed(A, op):
    """inv(A)^T for det's and slogdet's backward, which cltensor has only for invertible A."""
    try:
        return inv(A).mT
    except LinAlgError:
        raise LinAlgError(f"{op}: the gradient at a singular matrix is not supported (it needs "
                          f"the adjugate, which cltensor computes only through the inverse)"
                          ) from None


def _matrix_scaled(g, A, op):
    """g (one number per matrix) times inv(A)^T: the gradient of log|det A| scaled by g."""
    return g.unsqueeze(-1).unsqueeze(-1) * _inverse_transposed(A, op)


class _Det(Function):
    @staticmethod
    def forward(ctx, A):
        d, _, _ = la.det(A)
        ctx.save_for_backward(A, d)
        return d

    @staticmethod
    def backward(ctx, g):
        A, d = ctx.saved_tensors
        return _matrix_scaled(g * d, A, "linalg.det")


class _Slogdet(Function):
    @staticmethod
    def forward(ctx, A):
        _, sign, logabs = la.det(A, "linalg.slogdet")
        ctx.save_for_backward(A)
        return sign, logabs

    @staticmethod
    def backward(ctx, _g_sign, g_logabs):
        (A,) = ctx.saved_tensors
        return None if g_logabs is None else _matrix_scaled(g_logabs, A, "linalg.slogdet")


class _Cholesky(Function):
    @staticmethod
    def forward(ctx, A, upper):
        L, info = la.cholesky_ex(A, upper, "linalg.cholesky")
        ctx.save_for_backward(L)
        ctx.upper = upper
        return L, info

    @staticmethod
    def backward(ctx, g, _g_info=None):
        # A = L L^T: gA = L^-T S L^-1, S the symmetric part of tril(L^T g) with its diagonal
        # halved (the gradient with respect to a symmetric A, as torch's)
        (L,) = ctx.saved_tensors
        if ctx.upper:
            L, g = L.mT, g.mT
        P = L.mT.matmul(g).tril()
        S = (P + P.tril(-1).mT) * 0.5
        gA = solve_triangular(L.mT, S, upper=True)
        return solve_triangular(L, gA, upper=False, left=False), None


class _SolveTriangular(Function):
    @staticmethod
    def forward(ctx, A, B, upper, left, unitriangular):
        X = la.solve_triangular(A, B, upper, left, unitriangular)
        ctx.save_for_backward(A, X)
        ctx.flags, ctx.b_shape = (upper, left, unitriangular), B.shape
        return X

    @staticmethod
    def backward(ctx, g):
        A, X = ctx.saved_tensors
        upper, left, unit = ctx.flags
        gB = solve_triangular(A.mT, g, upper=not upper, left=left, unitriangular=unit)
        gA = None
        if ctx.needs_input_grad[0]:
            gA = -(gB.matmul(X.mT) if left else X.mT.matmul(gB))
            gA = gA.triu(int(unit)) if upper else gA.tril(-int(unit))
        return _summed(gA, A.shape), _summed(gB, ctx.b_shape), None, None, None


class _LuSolve(Function):
    @staticmethod
    def forward(ctx, LU, pivots, B, adjoint):
        ctx.factors, ctx.adjoint, ctx.b_shape = (LU, pivots), adjoint, B.shape
        return la.lu_solve(LU, pivots, B, adjoint)

    @staticmethod
    def backward(ctx, g):
        gB = lu_solve(*ctx.factors, g, adjoint=not ctx.adjoint)
        return None, None, _summed(gB, ctx.b_shape), None


# ---- torch.linalg -------------------------------------------------------------------------------

def solve(A, B, *, left=True):
    """X with A X = B (left=False: X A = B), A (*, n, n) invertible; B (*, n, k), or (*, n)
    (a vector each: B 1-d, or B's shape A's without the last dim). Batches broadcast.
    Raises LinAlgError for a singular A.

    Example:
        >>> A = cltensor.tensor([[2.0, 0.0], [0.0, 4.0]])
        >>> cltensor.linalg.solve(A, cltensor.tensor([2.0, 2.0])).tolist()
        [1.0, 0.5]
    """
    op = "linalg.solve"
    la.check_matrices(A, "A", op)
    la.check_pair(op, A, B)
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])
    B = B.unsqueeze(-1) if vector else B
    la.check_rhs(op, A, B, left=left or vector)
    if not left:  # X A = B  <=>  A^T X^T = B^T (x A = b: A^T x = b)
        A, B = A.mT, (B if vector else B.mT)
    X, info = _Solve.apply(A, B)
    la.check_info(info, op, "solve")
    if vector:
        return X.squeeze(-1)
    return X if left else X.mT


def inv_ex(A, *, check_errors=False):
    """(inverse, info) of A (*, n, n): info int32 per matrix, k > 0 when U[k, k] of its LU is
    zero (the inverse is then not finite); raises instead with check_errors."""
    X, info = _Inv.apply(A)
    if check_errors:
        la.check_info(info, "linalg.inv_ex", "inverse")
    return InvEx(X, info)


def inv(A):
    """The inverse of A (*, n, n), by LU with partial pivoting; LinAlgError when singular.

    Example:
        >>> cltensor.linalg.inv(cltensor.tensor([[2.0, 0.0], [0.0, 4.0]])).tolist()
        [[0.5, 0.0], [0.0, 0.25]]
    """
    X, info = _Inv.apply(A)
    la.check_info(info, "linalg.inv", "inverse")
    return X


def det(A):
    """The determinant of A (*, n, n) (0 when singular; 1 for 0 x 0). Its gradient needs an
    invertible A.

    Example:
        >>> cltensor.linalg.det(cltensor.tensor([[2.0, 1.0], [4.0, 4.0]])).item()
        4.0
    """
    return _Det.apply(A)


def slogdet(A):
    """(sign, logabsdet) of det(A), A (*, n, n): det = sign * exp(logabsdet), without its
    overflow; a singular A gives (0, -inf).

    Example:
        >>> cltensor.linalg.slogdet(cltensor.tensor([[-2.0, 0.0], [0.0, 1.0]])).sign.item()
        -1.0
    """
    return Slogdet(*_Slogdet.apply(A))


def logdet(A):
    """log(det(A)): NaN where det < 0, -inf where it is 0.

    Example:
        >>> A = cltensor.tensor([[2.0, 0.0], [0.0, 1.0]], dtype=cltensor.float64)
        >>> cltensor.logdet(A).item()
        0.6931471805599453
    """
    sign, logabs = slogdet(A)
    return logabs.masked_fill(sign < 0, float("nan"))


def cholesky_ex(A, *, upper=False, check_errors=False):
    """(L, info): cholesky's factor and, per matrix, the order of the first leading minor that
    is not positive-definite (0 when all are; L is then not meaningful)."""
    L, info = _Cholesky.apply(A, _flag(upper, "upper", "linalg.cholesky_ex"))
    if check_errors:
        la.check_info(info, "linalg.cholesky_ex", "cholesky")
    return CholeskyEx(L, info)


def cholesky(A, upper=False):
    """L, lower, with A = L L^T, A (*, n, n) symmetric positive-definite (only its lower
    triangle is read); upper=True: U, upper, with A = U^T U (from A's upper triangle).
    LinAlgError when A is not positive-definite.

    Example:
        >>> cltensor.linalg.cholesky(cltensor.tensor([[4.0, 2.0], [2.0, 5.0]])).tolist()
        [[2.0, 0.0], [1.0, 2.0]]
    """
    L, info = _Cholesky.apply(A, _flag(upper, "upper", "linalg.cholesky"))
    la.check_info(info, "linalg.cholesky", "cholesky")
    return L


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    """(LU, pivots, info) of A (*, m, n): P A = L U with L unit lower (below LU's diagonal)
    and U upper, partial pivoting; pivots int64 (torch's are int32), 1-based row swaps as
    LAPACK's; info int32 per matrix, k > 0 when U[k, k] is zero. Not differentiable."""
    op = "linalg.lu_factor_ex"
    if pivot is not True:
        raise NotImplementedError(f"{op}: only pivot=True (partial pivoting) is supported")
    if needs_grad((A,)):
        raise NotImplementedError(f"{op}: not differentiable in cltensor; use linalg.solve, "
                                  f"inv, det or slogdet, which are, or pass A.detach()")
    out = LuFactorEx(*la.lu_factor_ex(A, op))
    if check_errors:
        la.check_info(out.info, op, "lu_factor")
    return out


def lu_factor(A, *, pivot=True):
    """(LU, pivots) of A (*, m, n) as lu_factor_ex; raises when U has a zero on its diagonal.

    Example:
        >>> LU, pivots = cltensor.linalg.lu_factor(cltensor.tensor([[0.0, 1.0], [2.0, 3.0]]))
        >>> pivots.tolist()
        [2, 2]
    """
    LU, pivots, info = lu_factor_ex(A, pivot=pivot)
    la.check_info(info, "linalg.lu_factor", "lu_factor")
    return LuFactor(LU, pivots)


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """X with A X = B from lu_factor's (LU, pivots) of A (left=False: X A = B; adjoint: A^T in
    place of A); B (*, n, k), batches broadcast. Differentiable with respect to B only.

    Example:
        >>> A = cltensor.tensor([[2.0, 0.0], [0.0, 4.0]])
        >>> cltensor.linalg.lu_solve(*cltensor.linalg.lu_factor(A), cltensor.ones(2, 1)).tolist()
        [[0.5], [0.25]]
    """
    op = "linalg.lu_solve"
    if needs_grad((LU,)):
        raise NotImplementedError(f"{op}: gradients with respect to LU are not supported; "
                                  f"solve A with linalg.solve instead")
    la.check_matrices(B, "B", op, square=False)
    la.check_pair(op, LU, B, ("LU", "B"))
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return lu_solve(LU, pivots, B.mT, adjoint=not adjoint).mT
    return _LuSolve.apply(LU, pivots, B, bool(adjoint))


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """X with A X = B (left=False: X A = B), A (*, n, n) upper or lower triangular: only that
    triangle is read, its diagonal taken as ones when unitriangular. B (*, n, k) (left=False:
    (*, k, n)); batches broadcast. A zero on A's diagonal gives inf or NaN, as in torch.

    Example:
        >>> A = cltensor.tensor([[2.0, 1.0], [0.0, 4.0]])
        >>> cltensor.linalg.solve_triangular(A, cltensor.ones(2, 1), upper=True).tolist()
        [[0.375], [0.25]]
    """
    op = "linalg.solve_triangular"
    flags = [_flag(v, k, op) for k, v in (("upper", upper), ("left", left),
                                          ("unitriangular", unitriangular))]
    return _SolveTriangular.apply(A, B, *flags)


# ---- torch's top-level forms --------------------------------------------------------------------

def cholesky_solve(input, input2, upper=False):
    """X with A X = input, A = L L^T given its Cholesky factor input2 = L (lower; upper=True:
    U with A = U^T U); batches broadcast. Differentiable, through triangular solves.

    Example:
        >>> L = cltensor.tensor([[2.0, 0.0], [1.0, 2.0]])
        >>> cltensor.cholesky_solve(cltensor.tensor([[4.0], [2.0]]), L).tolist()
        [[1.0], [0.0]]
    """
    op = "cholesky_solve"
    upper = _flag(upper, "upper", op)
    if not needs_grad((input, input2)):
        return la.cholesky_solve(input, input2, upper, op)
    la.check_matrices(input2, "L", op)
    lower = input2.mT if upper else input2
    Y = solve_triangular(lower, input, upper=False)
    return solve_triangular(lower.mT, Y, upper=True)


def cholesky_inverse(input, upper=False):
    """The inverse of A = L L^T from its Cholesky factor input = L (lower; upper=True: U with
    A = U^T U); LinAlgError when the factor has a zero on its diagonal.

    Example:
        >>> cltensor.cholesky_inverse(cltensor.tensor([[2.0, 0.0], [0.0, 1.0]])).tolist()
        [[0.25, 0.0], [0.0, 1.0]]
    """
    op = "cholesky_inverse"
    la.check_matrices(input, "input", op)
    zero = input.detach().diagonal(0, -2, -1) == 0
    if zero.numel() and bool(zero.any()):
        la.check_info((zero.long().argmax(-1) + 1) * zero.any(-1), op, "inverse")
    one = eye(input.shape[-1], dtype=input.dtype, device=input.device)
    return cholesky_solve(one.expand(*input.shape), input, _flag(upper, "upper", op))


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):
    """(solution, cloned_coefficient): X with A X = b (transpose: A^T X = b), A upper or lower
    triangular, and a copy of A (torch's deprecated form of linalg.solve_triangular).

    Example:
        >>> A = cltensor.tensor([[2.0, 1.0], [0.0, 4.0]])
        >>> cltensor.triangular_solve(cltensor.ones(2, 1), A).solution.tolist()
        [[0.375], [0.25]]
    """
    op = "triangular_solve"
    la.check_matrices(A, "A", op)
    flags = [_flag(v, k, op) for k, v in (("upper", upper), ("transpose", transpose))]
    X = solve_triangular(A.mT if transpose else A, b, upper=flags[0] != flags[1],
                         unitriangular=unitriangular)
    return TriangularSolve(X, A.clone())



# ---- norms --------------------------------------------------------------------------------------

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


# ---- QR -----------------------------------------------------------------------------------------

def _qr_square_grad(Q, R, gQ, gR):
    """torch's gradient of A = Q R for Q (*, m, n) with orthonormal columns, R (*, n, n) upper:
    (gQ + Q copyltu(M)) R^-T, M = R gR^T - gQ^T Q, copyltu: M's lower triangle mirrored."""
    M = R.matmul(gR.mT) - gQ.mT.matmul(Q)
    M = M.tril() + M.tril(-1).mT
    return solve_triangular(R.mT, gQ + Q.matmul(M), upper=False, left=False)


class _Qr(Function):
    @staticmethod
    def forward(ctx, A, mode):
        Q, R = la.qr(A, mode)
        ctx.save_for_backward(Q, R)
        return Q, R

    @staticmethod
    def backward(ctx, gQ, gR):
        Q, R = ctx.saved_tensors
        gQ = Q.new_zeros(*Q.shape) if gQ is None else gQ
        gR = R.new_zeros(*R.shape) if gR is None else gR
        m, n = Q.shape[-2], R.shape[-1]
        if m >= n:
            return _qr_square_grad(Q, R, gQ, gR), None
        # A = [X | Y] = Q [U | V] with U square: Y = Q V adds Y gV^T to Q's gradient
        V, gV = R.narrow(-1, m, n - m), gR.narrow(-1, m, n - m)
        gX = _qr_square_grad(Q, R.narrow(-1, 0, m), gQ + Q.matmul(V).matmul(gV.mT),
                             gR.narrow(-1, 0, m))
        return _cat_last(gX, Q.matmul(gV)), None


def _cat_last(a, b):
    from . import cat  # NOTE: the differentiable one
    return cat([a, b], -1)


def qr(A, mode="reduced"):
    """(Q, R) with A = Q R, A (*, m, n): Householder QR as LAPACK's (geqrf, orgqr), so R's
    diagonal has LAPACK's (and torch's) signs, negative where the reflector flips them.
    mode "reduced": Q (*, m, k), R (*, k, n), k = min(m, n); "complete": Q (*, m, m),
    R (*, m, n); "r": Q empty, R (*, k, n). Differentiable as torch's ("reduced", and
    "complete" for m <= n).

    Example:
        >>> Q, R = cltensor.linalg.qr(cltensor.tensor([[3.0, 0.0], [4.0, 5.0]]))
        >>> R.tolist()
        [[-5.0, -4.0], [0.0, 3.0]]
    """
    op = "linalg.qr"
    la.check_matrices(A, "A", op, square=False)  # mode: checked by la.qr
    if needs_grad((A,)) and (mode == "r" or (mode == "complete" and A.shape[-2] > A.shape[-1])):
        why = ("Q, which mode='r' does not compute" if mode == "r" else
               "mode='complete' with more rows than columns (Q's extra columns are not unique)")
        raise NotImplementedError(f"{op}: not differentiable with {why}; use mode='reduced'")
    return Qr(*_Qr.apply(A, mode))


def qr_legacy(input, some=True):
    """torch.qr: (Q, R) as linalg.qr with mode "reduced" (some) or "complete"."""
    return QrLegacy(*qr(input, "reduced" if _flag(some, "some", "qr") else "complete"))


# ---- eigh ---------------------------------------------------------------------------------------

def _uplo(UPLO, op):
    if UPLO not in ("L", "U"):
        raise ValueError(f"{op}: UPLO must be 'L' or 'U', got {UPLO!r}")
    return UPLO == "U"


def _gap_inverse(values, squared=False):
    """1 / (v_j - v_i) at [i, j] (v squared first), 1 on the diagonal."""
    v = values * values if squared else values
    one = eye(v.shape[-1], dtype=v.dtype, device=v.device)
    return 1 / (v.unsqueeze(-2) - v.unsqueeze(-1) + one)


class _Eigh(Function):
    @staticmethod
    def forward(ctx, A, upper):
        w, V, info = la.eigh(A, upper, op="linalg.eigh")
        ctx.save_for_backward(w, V)
        return w, V, info

    @staticmethod
    def backward(ctx, gw, gV, _g_info=None):
        # torch's: V (diag(gw) + skew(V^T gV) / E) V^T, E[i, j] = w_j - w_i
        w, V = ctx.saved_tensors
        inner = 0
        if gV is not None:
            VtgV = V.mT.matmul(gV)
            inner = (VtgV - VtgV.mT) * 0.5 * _gap_inverse(w)
        if gw is not None:
            inner = inner + gw.unsqueeze(-1) * eye(w.shape[-1], dtype=w.dtype, device=w.device)
        return V.matmul(inner).matmul(V.mT), None


def eigh(A, UPLO="L"):
    """(eigenvalues, eigenvectors) of the symmetric A (*, n, n), read from its lower triangle
    (UPLO "U": upper): eigenvalues (*, n) ascending, eigenvectors the columns of (*, n, n),
    orthonormal, each with its largest-magnitude entry (the first such) positive (torch's,
    from LAPACK, may differ in sign). Jacobi's method; LinAlgError when it does not converge
    (a non-finite A). Gradients as torch's (not finite for repeated eigenvalues).

    Example:
        >>> cltensor.linalg.eigh(cltensor.tensor([[2.0, 1.0], [1.0, 2.0]])).eigenvalues.tolist()
        [1.0, 3.0]
    """
    op = "linalg.eigh"
    upper = _uplo(UPLO, op)
    la.check_matrices(A, "A", op)
    w, V, info = _Eigh.apply(A, upper)
    la.check_info(info, op, "eigh")
    return Eigh(w, V)


def eigvalsh(A, UPLO="L"):
    """The eigenvalues (*, n), ascending, of the symmetric A (*, n, n) as eigh's; its gradient
    V diag(g) V^T.

    Example:
        >>> cltensor.linalg.eigvalsh(cltensor.tensor([[2.0, 0.0], [0.0, 1.0]])).tolist()
        [1.0, 2.0]
    """
    op = "linalg.eigvalsh"
    upper = _uplo(UPLO, op)
    if needs_grad((A,)):
        return eigh(A, UPLO).eigenvalues
    w, _, info = la.eigh(A, upper, vectors=False, op=op)
    la.check_info(info, op, "eigh")
    return w


# ---- SVD ----------------------------------------------------------------------------------------

def _svd_grad(U, S, Vh, gU, gS, gVh):
    """torch's gradient of A = U diag(S) Vh (reduced; Townsend's): U [(F o skew(U^T gU)) S +
    diag(gS) + S (F o skew(V^T gV))] Vh + (I - U U^T) gU S^-1 Vh + U S^-1 gV^T (I - V V^T),
    F[i, j] = 1 / (S_j^2 - S_i^2)."""
    k = S.shape[-1]
    inner = 0 if gS is None else gS.unsqueeze(-1) * eye(k, dtype=S.dtype, device=S.device)
    out = 0
    F = _gap_inverse(S, squared=True) if gU is not None or gVh is not None else None
    if gU is not None:
        UtgU = U.mT.matmul(gU)
        inner = inner + (UtgU - UtgU.mT) * F * S.unsqueeze(-2)
        out = ((gU - U.matmul(UtgU)) / S.unsqueeze(-2)).matmul(Vh)
    if gVh is not None:
        V, gV = Vh.mT, gVh.mT
        VtgV = V.mT.matmul(gV)
        inner = inner + S.unsqueeze(-1) * ((VtgV - VtgV.mT) * F)
        out = out + U.matmul(((gV - V.matmul(VtgV)) / S.unsqueeze(-2)).mT)
    return U.matmul(inner).matmul(Vh) + out


class _Svd(Function):
    @staticmethod
    def forward(ctx, A, full_matrices):
        U, S, Vh, info = la.svd(A, full_matrices)
        ctx.save_for_backward(U, S, Vh)
        ctx.full = full_matrices
        return U, S, Vh, info

    @staticmethod
    def backward(ctx, gU, gS, gVh, _g_info=None):
        U, S, Vh = ctx.saved_tensors
        if ctx.full:  # the columns past k do not enter A: only the first k's gradients count
            k = S.shape[-1]
            U, Vh = U.narrow(-1, 0, k), Vh.narrow(-2, 0, k)
            gU = None if gU is None else gU.narrow(-1, 0, k)
            gVh = None if gVh is None else gVh.narrow(-2, 0, k)
        return _svd_grad(U, S, Vh, gU, gS, gVh), None


def svd(A, full_matrices=True):
    """(U, S, Vh) with A = U diag(S) Vh, A (*, m, n), k = min(m, n): S (*, k) descending;
    U (*, m, k) and Vh (*, k, n) orthonormal ((*, m, m) and (*, n, n) with full_matrices).
    One-sided Jacobi; U's columns for non-zero singular values each have their largest-
    magnitude entry positive (torch's, from LAPACK, may differ in sign, with Vh's rows).
    LinAlgError when it does not converge (a non-finite A). Gradients as torch's.

    Example:
        >>> cltensor.linalg.svd(cltensor.tensor([[0.0, 2.0], [1.0, 0.0]])).S.tolist()
        [2.0, 1.0]
    """
    op = "linalg.svd"
    la.check_matrices(A, "A", op, square=False)
    U, S, Vh, info = _Svd.apply(A, _flag(full_matrices, "full_matrices", op))
    la.check_info(info, op, "svd")
    return Svd(U, S, Vh)


def svdvals(A):
    """The singular values (*, k) of A (*, m, n), descending, as svd's; gradient U diag(g) Vh.

    Example:
        >>> cltensor.linalg.svdvals(cltensor.tensor([[3.0, 0.0], [0.0, -4.0]])).tolist()
        [4.0, 3.0]
    """
    op = "linalg.svdvals"
    if needs_grad((A,)):
        return svd(A, full_matrices=False).S
    _, S, _, info = la.svd(A, vectors=False, op=op)
    la.check_info(info, op, "svd")
    return S


def _tolerance(A, values, atol, rtol):
    """torch's cut-off for pinv and matrix_rank: max(atol, rtol * the largest value), rtol by
    default eps * max(m, n) (0 when only atol > 0 is given), one per matrix (keepdim)."""
    if rtol is None:
        rtol = 0.0 if atol is not None and atol > 0 else (
            float(np.finfo(A.dtype).eps) * max(A.shape[-2:]))
    big = values.detach().abs().amax(-1, keepdim=True)
    return (big * rtol).clamp_min(0.0 if atol is None else float(atol))


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """The pseudo-inverse (*, n, m) of A (*, m, n): V diag(1/S) U^T over the singular values
    above max(atol, rtol * S_max) (default rtol: eps * max(m, n)); hermitian: from eigh of
    the symmetric A. Differentiable through svd (eigh).

    Example:
        >>> cltensor.linalg.pinv(cltensor.tensor([[2.0, 0.0], [0.0, 0.0]])).tolist()
        [[0.5, 0.0], [0.0, 0.0]]
    """
    op = "linalg.pinv"
    la.check_matrices(A, "A", op, square=bool(hermitian))
    if min(A.shape[-2:]) == 0:
        return A.new_zeros(*A.shape[:-2], A.shape[-1], A.shape[-2])
    if hermitian:
        w, V = eigh(A)
        U, S, Vh = V, w, V.mT
    else:
        U, S, Vh = svd(A, full_matrices=False)
    keep = S.abs() > _tolerance(A, S, atol, rtol)
    inverse = _where(keep, 1 / _where(keep, S, 1.0), 0.0)
    return Vh.mT.matmul(inverse.unsqueeze(-1) * U.mT)


LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares solution X (*, n, k) of A X = B, A (*, m, n), B (*, m, k) or, with
    one dim fewer than A as in torch, (*, m); batches broadcast. Any shape and rank: the
    minimum-norm solution pinv(A, rtol=rcond) B
    (rcond by default eps * max(m, n)), differentiable. `driver` picks which of torch's other
    fields are filled, as torch on CPUs (default "gelsy"): residuals, the squared column norms
    of A X - B, for "gels", "gelsd" and "gelss" when m > n and every A has full rank; rank for
    "gelsy", "gelsd" and "gelss"; singular values for "gelsd" and "gelss"; empty otherwise.
    NOTE: torch's "gels" and "gelsy" may return another solution of a rank-deficient A.

    Example:
        >>> A = cltensor.tensor([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]])
        >>> X = cltensor.linalg.lstsq(A, cltensor.tensor([1.0, 2.0, 4.0])).solution
        >>> [round(v, 4) for v in X.tolist()]
        [0.8333, 1.5]
    """
    op = "linalg.lstsq"
    if driver is not None and driver not in LSTSQ_DRIVERS:
        raise ValueError(f"{op}: driver must be one of {', '.join(LSTSQ_DRIVERS)} or None, "
                         f"got {driver!r}")
    driver = driver or "gelsy"
    la.check_matrices(A, "A", op, square=False)
    la.check_pair(op, A, B)
    vector = B.ndim == A.ndim - 1
    Bm = B.unsqueeze(-1) if vector else B
    la.check_matrices(Bm, "B", op, square=False)
    if Bm.shape[-2] != A.shape[-2]:
        raise ValueError(f"{op}: A {tuple(A.shape)} has {A.shape[-2]} rows but B "
                         f"{tuple(B.shape)} has {Bm.shape[-2]}")
    rtol = rcond if rcond is not None and rcond > 0 else None
    X = pinv(A, rtol=rtol).matmul(Bm)
    m, n = A.shape[-2:]
    empty = A.new_zeros(0)
    ranks = matrix_rank(A, rtol=rtol) if driver != "gels" or m > n else None
    residuals = empty
    if driver != "gelsy" and m > n and bool((ranks == n).all()):
        residuals = (A.matmul(X) - Bm).square().sum(-2)
    rank = ranks if driver != "gels" else empty.to(dt.int64)
    values = svdvals(A) if driver in ("gelsd", "gelss") else empty
    return Lstsq(X.squeeze(-1) if vector else X, residuals, rank, values)


def pinverse(input, rcond=1e-15):
    """torch.pinverse: linalg.pinv with rtol=rcond."""
    return pinv(input, rtol=rcond)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False):
    """The number (int64, *) of singular values of A (*, m, n) (hermitian: |eigenvalues|)
    above max(atol, rtol * the largest), rtol by default eps * max(m, n).

    Example:
        >>> cltensor.linalg.matrix_rank(cltensor.tensor([[1.0, 2.0], [2.0, 4.0]])).item()
        1
    """
    op = "linalg.matrix_rank"
    la.check_matrices(A, "A", op, square=bool(hermitian))
    if min(A.shape[-2:]) == 0:
        return A.new_zeros(*A.shape[:-2]).to(dt.int64)
    A = A.detach()
    S = eigvalsh(A).abs() if hermitian else svdvals(A)
    return (S > _tolerance(A, S, atol, rtol)).sum(-1)

inverse = inv
TENSOR_METHODS = {"inverse": inv, "det": det, "logdet": logdet, "slogdet": slogdet,
                  "cholesky": cholesky, "cholesky_solve": cholesky_solve,
                  "cholesky_inverse": cholesky_inverse, "triangular_solve": triangular_solve,
                  "qr": qr_legacy, "pinverse": pinverse}
