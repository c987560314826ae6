"""solve, inv, det, slogdet, cholesky, lu_factor, lu_solve, solve_triangular and torch's
top-level forms, each a Function with torch's backward formula."""
from collections import namedtuple

from ..autograd import Function, is_grad_enabled, needs_grad
from ..autograd.engine import sum_to_shape
from ..ops import linalg as la
from ..ops.linalg import LinAlgError
from ..ops.ranges import eye

LuFactor = namedtuple("linalg_lu_factor", "LU pivots")
LuFactorEx = namedtuple("linalg_lu_factor_ex", "LU pivots info")
Slogdet = namedtuple("linalg_slogdet", "sign logabsdet")
CholeskyEx = namedtuple("linalg_cholesky_ex", "L info")
InvEx = namedtuple("linalg_inv_ex", "inverse info")
TriangularSolve = namedtuple("triangular_solve", "solution cloned_coefficient")


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
    la.refuse_low_precision(A, "A", "logdet")
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
    la.refuse_low_precision(A, "A", "linalg.lu_factor")
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
