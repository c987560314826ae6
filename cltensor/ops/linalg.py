"""Dense linear algebra on batches of matrices (kernels: cl_kernels/linalg.cl): LU with partial
pivoting and its solves, determinants, inverses, Cholesky and its solves, triangular solves,
Householder QR, symmetric eigendecomposition and SVD (Jacobi), with torch.linalg's semantics.
cltensor/linalg.py gives them torch's names and gradients.

Each op checks its operands (float32 or float64 batches of matrices, square where it must be,
one device and dtype), copies what a kernel overwrites into a fresh contiguous tensor (so any
strided or broadcast view may come in), and runs one work-group per matrix. The factorizations
report an int32 `info` per matrix; where torch raises on a singular or not positive-definite
matrix, or where Jacobi's sweeps do not converge, check_info reads it back and raises
LinAlgError.
"""
import math

import numpy as np

from .. import dtypes as dt
from ..creation import zeros
from ..program import ctype_of, get_kernel, launch
from ..tensor import ClTensor
from . import elementwise as ew
from .elementwise import expect_tensor as _check_tensor
from .ranges import eye

KERNEL_FILE = "linalg.cl"
GROUP = {True: 64, False: 256}  # LA_GROUP, by device.is_cpu: work-items per matrix
FLOATS = (dt.float32, dt.float64)

# why a factorization failed, by the kind of op (torch's words); k: the info (1-based)
FAILURES = {
    "inverse": "The diagonal element {k} is zero, the inversion could not be completed because "
               "the input matrix is singular.",
    "solve": "The solver failed because the input matrix is singular.",
    "cholesky": "The factorization could not be completed because the input is not "
                "positive-definite (the leading minor of order {k} is not positive-definite).",
    "lu_factor": "U[{k},{k}] is zero and using it on lu_solve would result in a division by "
                 "zero. If you still want to perform the factorization, consider calling "
                 "linalg.lu_factor_ex(A).",
    "eigh": "The algorithm failed to converge because the input matrix is ill-conditioned, not "
            "finite, or has too many repeated eigenvalues (error code: {k}).",
    "svd": "The algorithm failed to converge because the input matrix is ill-conditioned, not "
           "finite, or has too many repeated singular values (error code: {k}).",
}
QR_MODES = ("reduced", "complete", "r")


class LinAlgError(RuntimeError):
    """A matrix was singular or not positive-definite where the op needs it not to be (as
    torch.linalg.LinAlgError, a RuntimeError)."""


# ---- kernels and launches -----------------------------------------------------------------------

def _group(device):
    """Work-items per matrix: a power of two within the device's limit."""
    g = min(GROUP[device.is_cpu], device.max_work_group)
    return 1 << (g.bit_length() - 1)


def _kernel(device, name, dtype):
    defines = {"T": ctype_of(dtype), "LA_GROUP": _group(device)}
    return get_kernel(device, KERNEL_FILE, name, defines)


def _launch(name, like, count, *args):
    """Kernel `name` of like's dtype over `count` matrices, one work-group each (dim 1)."""
    device = like.device
    g = _group(device)
    launch(device, _kernel(device, name, like.dtype), (g, count), (g, 1), *args)


def _fresh(t, shape):
    """A new contiguous tensor holding t broadcast to shape (what a kernel may overwrite)."""
    out = ClTensor.empty_on(shape, t.dtype, t.device)
    if out.numel():
        ew.copy(t.expand(*shape), out)
    return out


def _operand(t, batch, core=2):
    """t (a batch of matrices, or of pivot rows with core=1) as a kernel reads a read-only
    operand: contiguous from its buffer's start, and the elements between consecutive ones
    (0 when one serves the whole batch, which is then not copied out)."""
    inner = tuple(t.shape[t.ndim - core:])
    if math.prod(t.shape[:t.ndim - core]) == 1:
        t, step = t.reshape(inner), 0
    else:
        t, step = t.expand(*batch, *inner), math.prod(inner)
    return (t if t.offset == 0 and t.is_contiguous() else _fresh(t, t.shape)), step


# ---- checks -------------------------------------------------------------------------------------

def refuse_low_precision(A, name, op):
    """TypeError for a float16/bfloat16 A: torch's CPU linear algebra refuses them too."""
    if getattr(A, "dtype", None) in dt.HALF_TYPES:
        raise TypeError(f"{op}: low precision dtypes are not supported, {name} is {A.dtype} "
                        f"(as in torch); convert it with .float() first")


def check_matrices(A, name, op, square=True):
    """A is a float32/float64 batch of (square) matrices, else TypeError / ValueError."""
    _check_tensor(A, name, op)
    refuse_low_precision(A, name, op)
    if A.dtype not in FLOATS:
        raise TypeError(f"{op}: {name} must be float32 or float64, got {A.dtype}")
    if A.ndim < 2:
        raise ValueError(f"{op}: {name} must be a matrix or a batch of matrices, got shape "
                         f"{tuple(A.shape)}")
    if square and A.shape[-1] != A.shape[-2]:
        raise ValueError(f"{op}: {name} must be a batch of square matrices, got shape "
                         f"{tuple(A.shape)} ({A.shape[-2]} by {A.shape[-1]} matrices)")


def check_pair(op, A, B, names=("A", "B")):
    """B is a tensor on A's device with A's dtype."""
    _check_tensor(B, names[1], op)
    ew.common_device([A, B], op)
    if A.dtype != B.dtype:
        raise TypeError(f"{op}: {names[0]} and {names[1]} must have the same dtype, got "
                        f"{A.dtype} and {B.dtype}")


def check_rhs(op, A, B, names=("A", "B"), left=True):
    """The batch shape of A and B (both batches of matrices) broadcast, after checking B and
    that its matrices fit A's in A X = B (left) or X A = B."""
    check_matrices(B, names[1], op, square=False)
    check_pair(op, A, B, names)
    if B.shape[-2 if left else -1] != A.shape[-1]:
        equation = "AX = B" if left else "XA = B"
        raise ValueError(f"{op}: incompatible shapes of {names[0]} {tuple(A.shape)} and "
                         f"{names[1]} {tuple(B.shape)} for the equation {equation}")
    try:
        return ew.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    except ValueError:
        raise ValueError(f"{op}: the batch dims of {names[0]} {tuple(A.shape)} and {names[1]} "
                         f"{tuple(B.shape)} do not broadcast") from None


def check_info(info, op, kind):
    """Raise LinAlgError, in torch's words for `kind` (FAILURES), for the first matrix whose
    info is not 0 (info is read back to the host)."""
    if not info.numel():
        return
    flat = info.numpy().reshape(-1)
    bad = np.flatnonzero(flat)
    if bad.size:
        i = int(bad[0])
        where = f"{op}: (Batch element {i})" if info.ndim else op
        raise LinAlgError(f"{where}: " + FAILURES[kind].format(k=int(flat[i])))


# ---- LU -----------------------------------------------------------------------------------------

def lu_factor_ex(A, op="linalg.lu_factor_ex"):
    """(LU, pivots, info) of A (*, m, n): P A = L U with partial pivoting, as LAPACK's getrf;
    pivots int64, 1-based; info int32, the first zero pivot (1-based) per matrix, else 0."""
    check_matrices(A, "A", op, square=False)
    *batch, m, n = A.shape
    lu = _fresh(A, A.shape)
    piv = ClTensor.empty_on((*batch, min(m, n)), dt.int64, A.device)
    info = zeros(tuple(batch), dtype=dt.int32, device=A.device)
    if lu.numel():
        _launch("lu_factor", lu, math.prod(batch), np.int64(m), np.int64(n), lu.storage.buf,
                piv.storage.buf, info.storage.buf)
    return lu, piv, info


def _check_pivots(pivots, LU, op):
    if not isinstance(pivots, ClTensor) or pivots.dtype not in (dt.int32, dt.int64):
        got = pivots.dtype if isinstance(pivots, ClTensor) else type(pivots).__name__
        raise TypeError(f"{op}: pivots must be an int64 or int32 tensor, got {got}")
    if tuple(pivots.shape) != tuple(LU.shape[:-1]):
        raise ValueError(f"{op}: pivots of shape {tuple(pivots.shape)} do not match LU of shape "
                         f"{tuple(LU.shape)} (expected {tuple(LU.shape[:-1])})")
    ew.common_device([LU, pivots], op)
    return pivots if pivots.dtype == dt.int64 else pivots.to(dt.int64)


def _substitute(name, batch, factor, B, *rest):
    """X solving the system of kernel `name` (lu_solve, cholesky_solve, tri_solve) for B (*, n, k)
    broadcast to `batch`, the factor's matrices read from the kernel's arguments after B:
    the factor, its step, then `rest`."""
    n, k = B.shape[-2:]
    X = _fresh(B, (*batch, n, k))
    f, step = _operand(factor, batch)
    if X.numel():
        _launch(name, X, math.prod(batch), np.int64(n), np.int64(k), X.storage.buf,
                f.storage.buf, np.int64(step), *rest)
    return X


def lu_solve(LU, pivots, B, adjoint=False, op="linalg.lu_solve"):
    """A^-1 B (adjoint: A^-T B) from lu_factor's (LU, pivots) of A; batches broadcast."""
    check_matrices(LU, "LU", op)
    batch = check_rhs(op, LU, B, ("LU", "B"))
    piv, _ = _operand(_check_pivots(pivots, LU, op), batch, core=1)
    return _substitute("lu_solve", batch, LU, B, piv.storage.buf, np.int32(bool(adjoint)))


def solve(A, B, op="linalg.solve"):
    """(X, LU, pivots, info) with A X = B: A (*, n, n), B (*, n, k), batches broadcast; X is
    not checked for a singular A (info > 0: see check_info)."""
    check_matrices(A, "A", op)
    check_rhs(op, A, B)
    LU, piv, info = lu_factor_ex(A, op)
    return lu_solve(LU, piv, B, op=op), LU, piv, info


def inv_ex(A, op="linalg.inv_ex"):
    """(A^-1, info): A's LU solved for the identity."""
    check_matrices(A, "A", op)
    LU, piv, info = lu_factor_ex(A, op)
    one = eye(A.shape[-1], dtype=A.dtype, device=A.device).expand(*A.shape)
    return lu_solve(LU, piv, one, op=op), info


def det(A, op="linalg.det"):
    """(det, sign, log|det|) of A (*, n, n) from its LU: a singular A has det 0, sign 0 and
    log|det| -inf; an empty (0 x 0) matrix det 1."""
    check_matrices(A, "A", op)
    n = A.shape[-1]
    batch = tuple(A.shape[:-2])
    outs = [ClTensor.empty_on(batch, A.dtype, A.device) for _ in range(3)]
    if n == 0:
        for out, value in zip(outs, (1, 1, 0)):
            out.fill_(value)
    elif outs[0].numel():
        LU, piv, _ = lu_factor_ex(A, op)
        _launch("lu_det", LU, math.prod(batch), np.int64(n), LU.storage.buf, piv.storage.buf,
                *(o.storage.buf for o in outs))
    return tuple(outs)


# ---- Cholesky and triangular solves -------------------------------------------------------------

def cholesky_ex(A, upper=False, op="linalg.cholesky_ex"):
    """(L, info): A = L L^T with L lower, from A's lower triangle; upper: (U, info), A = U^T U
    with U upper, from A's upper triangle. info: the order of the first leading minor that is
    not positive-definite per matrix, else 0."""
    check_matrices(A, "A", op)
    L = _fresh(A.mT if upper else A, A.shape)  # NOTE: A^T's lower triangle is A's upper one
    info = zeros(tuple(A.shape[:-2]), dtype=dt.int32, device=A.device)
    if L.numel():
        _launch("cholesky", L, info.numel(), np.int64(A.shape[-1]), L.storage.buf,
                info.storage.buf)
    return (L.mT if upper else L), info


def _lower_strides(n, transposed):
    """(row, column) strides that read a contiguous n x n matrix, or its transpose."""
    return (np.int64(1), np.int64(n)) if transposed else (np.int64(n), np.int64(1))


def cholesky_solve(B, L, upper=False, op="cholesky_solve"):
    """X with (L L^T) X = B, L (*, n, n) lower (upper: U^T U X = B, U upper); batches
    broadcast. Only L's triangle is read."""
    check_matrices(L, "L", op)
    batch = check_rhs(op, L, B, ("L", "B"))
    return _substitute("cholesky_solve", batch, L, B, *_lower_strides(L.shape[-1], upper))


def solve_triangular(A, B, upper, left=True, unitriangular=False, op="linalg.solve_triangular"):
    """X with A X = B (left) or X A = B, A (*, n, n) upper or lower triangular (only that
    triangle is read; its diagonal taken as ones when unitriangular); batches broadcast. No
    check for a zero on the diagonal (as torch: the result has inf or NaN)."""
    check_matrices(A, "A", op)
    batch = check_rhs(op, A, B, left=left)
    # NOTE: X A = B is solved as A^T X^T = B^T: A read transposed, its triangle the other one
    rhs, up = (B, upper) if left else (B.mT, not upper)
    X = _substitute("tri_solve", batch, A, rhs, *_lower_strides(A.shape[-1], not left),
                    np.int32(bool(up)), np.int32(bool(unitriangular)))
    return X if left else X.mT


# ---- QR, eigh, svd ------------------------------------------------------------------------------

def _empty(shape, like, dtype=None):
    return ClTensor.empty_on(tuple(shape), dtype or like.dtype, like.device)


def qr(A, mode="reduced", op="linalg.qr"):
    """(Q, R) of A (*, m, n) by Householder reflections, as LAPACK's geqrf and orgqr (R's
    diagonal may be negative): reduced: Q (*, m, k), R (*, k, n), k = min(m, n); complete:
    Q (*, m, m), R (*, m, n); r: Q empty, R (*, k, n)."""
    check_matrices(A, "A", op, square=False)
    if mode not in QR_MODES:
        raise ValueError(f"{op}: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    *batch, m, n = A.shape
    k = min(m, n)
    qc = {"reduced": k, "complete": m, "r": 0}[mode]
    R = _fresh(A, A.shape)
    if n == 0:  # no reflectors: Q is the identity's first columns
        one = eye(m, qc, dtype=A.dtype, device=A.device)
        Q = _fresh(one, (*batch, m, qc))
    else:
        Q = _empty((*batch, m, qc), A)
        tau = _empty((*batch, k), A)
        if R.numel():
            _launch("qr", R, math.prod(batch), np.int64(m), np.int64(n), R.storage.buf,
                    tau.storage.buf, (Q if Q.numel() else tau).storage.buf, np.int64(qc))
    if mode == "r":
        Q = _empty((0,), A)
    return Q, (R if mode == "complete" else R.narrow(-2, 0, k))


def _sweeps_in_float64(A):
    """Whether eigh's and svd's Jacobi sweeps take float32 A in float64 (devices with it): in
    float32 every rotation rounds, and the errors add up over the sweeps (svdvals of a 256 x 256
    matrix 2.6e-5 relative off, LAPACK's float32 1.1e-6; in float64, then rounded, 1e-7), for
    about a fifth more time on PoCL."""
    return A.dtype == dt.float32 and A.device.has_fp64


def eigh(A, upper=False, vectors=True, op="linalg.eigh"):
    """(w, V, info): the eigenvalues w (*, n) ascending of the symmetric A (*, n, n), read from
    its lower (upper: upper) triangle, and (vectors) the eigenvectors as V's columns, each
    with its largest-magnitude entry positive; info 1 where Jacobi did not converge."""
    check_matrices(A, "A", op)
    if _sweeps_in_float64(A):
        w, V, info = eigh(A.double(), upper, vectors, op)
        return w.float(), None if V is None else V.float(), info
    *batch, n = A.shape[:-1]
    a = _fresh(A, A.shape)  # scratch
    w = _empty((*batch, n), A)
    V = _empty(A.shape, A) if vectors else None
    info = zeros(tuple(batch), dtype=dt.int32, device=A.device)
    count = math.prod(batch)
    if count and n:
        vt = _empty(A.shape, A) if vectors else a
        rot = _empty((count, 2 * (n + n % 2)), A)
        _launch("eigh", a, count, np.int64(n), a.storage.buf, vt.storage.buf, rot.storage.buf,
                w.storage.buf, (V if vectors else a).storage.buf, info.storage.buf,
                np.int32(bool(upper)), np.int32(bool(vectors)))
    return w, V, info


def _orthonormal_columns(X, S, full):
    """X (*, c, r): orthonormal columns, zero ones where S (*, r, descending) is 0, completed
    (full: with c - r columns more) to orthonormal ones by a complete QR of X, the columns
    that were orthonormal kept (Q's columns times the signs of R's diagonal)."""
    c, r = X.shape[-2:]
    if not full and not (S.numel() and bool((S == 0).any())):
        return X
    Q, R = qr(X, "complete" if full else "reduced")
    if r:
        sign = 1 - 2 * (R.diagonal(0, -2, -1) < 0).to(X.dtype)
        Q.narrow(-1, 0, r).mul_(sign.unsqueeze(-2))
    return Q


def svd(A, full_matrices=True, vectors=True, op="linalg.svd"):
    """(U, S, Vh, info): A (*, m, n) = U diag(S) Vh, S (*, k) descending (k = min(m, n)), U's
    columns and Vh's rows orthonormal, (*, m, k) and (*, k, n) ((*, m, m) and (*, n, n) with
    full_matrices); U and Vh None unless vectors. One-sided Jacobi on the rows of A^T (m >= n)
    or A; info 1 where it did not converge."""
    check_matrices(A, "A", op, square=False)
    if _sweeps_in_float64(A):
        U, S, Vh, info = svd(A.double(), full_matrices, vectors, op)
        return (None if U is None else U.float()), S.float(), \
            (None if Vh is None else Vh.float()), info
    *batch, m, n = A.shape
    tall = m >= n
    r, c = min(m, n), max(m, n)
    W = _fresh(A.mT if tall else A, (*batch, r, c))  # scratch: its rows are orthogonalized
    S = _empty((*batch, r), A)
    info = zeros(tuple(batch), dtype=dt.int32, device=A.device)
    wo = _empty((*batch, r, c), A) if vectors else W
    jo = _empty((*batch, r, r), A) if vectors else W
    count = math.prod(batch)
    if count and r:
        jt = _empty((*batch, r, r), A) if vectors else W
        nrm = _empty((count, r), A)
        _launch("svd", W, count, np.int64(r), np.int64(c), W.storage.buf, jt.storage.buf,
                nrm.storage.buf, S.storage.buf, wo.storage.buf, jo.storage.buf,
                info.storage.buf, np.int32(bool(vectors)), np.int32(tall))
    if not vectors:
        return None, S, None, info
    uhat = _orthonormal_columns(wo.mT, S, full_matrices and m != n)
    return (uhat, S, jo, info) if tall else (jo.mT, S, uhat.mT, info)
