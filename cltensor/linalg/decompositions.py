"""qr, eigh, eigvalsh, svd, svdvals and what is built on them: pinv, lstsq, matrix_rank; qr's
parts geqrf and householder_product (LAPACK's orgqr), not differentiable."""
import math
from collections import namedtuple

import numpy as np

from .. import dtypes as dt
from ..autograd import Function, needs_grad
from ..autograd.functions import _where  # the differentiable where
from ..autograd.namespace import cat
from ..ops import linalg as la
from ..ops.ranges import eye
from ..tensor import ClTensor
from .solve import _flag, solve_triangular

Qr = namedtuple("linalg_qr", "Q R")
QrLegacy = namedtuple("qr", "Q R")
Eigh = namedtuple("linalg_eigh", "eigenvalues eigenvectors")
Svd = namedtuple("linalg_svd", "U S Vh")
Lstsq = namedtuple("linalg_lstsq", "solution residuals rank singular_values")


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


def geqrf(A):
    """(a, tau): LAPACK's geqrf of A (*, m, n), as torch.geqrf: R on and above a's diagonal,
    the Householder reflectors' vectors below it (each one's leading 1 implied), their scales
    tau (*, min(m, n)). Not differentiable (as torch's).

    Example:
        >>> a, tau = cltensor.linalg.decompositions.geqrf(cltensor.tensor([[0.0], [2.0]]))
        >>> a.tolist(), tau.tolist()
        ([[-2.0], [1.0]], [1.0])
    """
    la.check_matrices(A, "A", "geqrf", square=False)
    *batch, m, n = A.shape
    a = la._fresh(A, A.shape)
    tau = ClTensor.empty_on((*batch, min(m, n)), A.dtype, A.device)
    if a.numel():
        la._launch("geqrf", a, math.prod(batch), np.int64(m), np.int64(n), a.storage.buf,
                   tau.storage.buf)
    return a, tau


def householder_product(A, tau):
    """The first n columns of H_0 ... H_{k-1}, H_i = I - tau_i v_i v_i^T, v_i below the
    diagonal of A (*, m, n)'s column i (v_i[i] = 1), tau (*, k), k <= n <= m: LAPACK's
    orgqr, as torch.linalg.householder_product. Not differentiable here."""
    op = "linalg.householder_product"
    la.check_matrices(A, "A", op, square=False)
    *batch, m, n = A.shape
    if tau.dtype != A.dtype or tuple(tau.shape[:-1]) != tuple(batch) or not (
            tau.shape[-1] <= n <= m):
        raise ValueError(f"{op}: expected A (*, m, n) with m >= n and tau (*, k) of its dtype, "
                         f"k <= n, got A {tuple(A.shape)} {A.dtype}, tau {tuple(tau.shape)} "
                         f"{tau.dtype}")
    q = ClTensor.empty_on(A.shape, A.dtype, A.device)
    if q.numel():
        a, t = la._fresh(A, A.shape), la._fresh(tau, tau.shape)
        la._launch("orgqr", q, math.prod(batch), np.int64(m), np.int64(n),
                   np.int64(tau.shape[-1]), a.storage.buf, t.storage.buf, q.storage.buf)
    return q


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
