"""Linear algebra, pairwise distances, cross products, take/put and adaptive max pooling on the
opencl device: torch.linalg's aten ops (det, slogdet, solve, inv, cholesky, qr, svd, eigh, the
LU family, triangular and Cholesky solves, lstsq), _cdist_forward/_cdist_backward, pdist's,
linalg_cross, take, put_ and adaptive_max_pool2d with its backward, and their out= forms.

torch's Meta kernels check the arguments and give each result's dtype, shape and strides;
cltensor's kernels (cltensor/ops/linalg.py) compute the values. The factorizations hand back
what torch's backward formulas read: LU and int32 pivots as LAPACK's, of A^T where torch
factors A^T (a contiguous A in det and slogdet, whose backward then solves with
adjoint=False), and `info` per matrix; check_errors raises torch's LinAlgError through torch's
own _linalg_check_errors."""
import contextlib
import re

import numpy as np
import torch

from .. import dtypes as dt
from ..composed.contract import cdist as _cdist
from ..composed.contract import cross as _cross
from ..creation import tensor, zeros
from ..linalg import cholesky_inverse as _cholesky_inverse
from ..linalg import lstsq as _lstsq
from ..ops import linalg as la
from ..ops import pool
from ..ops.indexing.keys import put_ as _put_
from ..ops.indexing.slices import index_add_
from ..ops.pointwise import where
from ..ops.ranges import arange, eye
from ..tensor import ClTensor
from ._backend import aten, np_dtype, unwrap, wrap
from .math_ops import check_devices, meta_result, operand, with_out, write_into
from .sort_ops import _with_outs

_aten = torch.ops.aten
_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                "donot_use_mm_for_euclid_dist")


# ---- results and errors ------------------------------------------------------------------------
def _result(cl, meta):
    """ClTensor cl as an opencl tensor with the dtype, shape and strides of Meta result meta
    (torch's factorizations give column-major LU, Q and the like)."""
    want = np_dtype(meta.dtype, "result")
    cl = cl if cl.dtype is want else cl.to(want)
    if tuple(cl.shape) != tuple(meta.shape):
        cl = cl.reshape(tuple(meta.shape))
    if meta.numel() > 1 and tuple(cl.strides) != tuple(meta.stride()):
        order = sorted(range(meta.dim()), key=lambda d: -meta.stride(d))
        cl = cl.permute(*order).contiguous().permute(*[order.index(d) for d in range(meta.dim())])
    return wrap(cl)


def _results(cls, metas):
    """Several results as _result's; None (a result not computed) as an empty one."""
    device = next(c for c in cls if c is not None).device
    return tuple(_result(_empty(m, device) if c is None else c, m) for c, m in zip(cls, metas))


def _empty(meta, device):
    return ClTensor.empty_on(tuple(meta.shape), np_dtype(meta.dtype, "result"), device)


_DTYPE_REPR = re.compile(r"torch\.(float16|bfloat16|float32|float64|int64|int32|int16|int8"
                         r"|uint8|bool|complex64|complex128)\b")
_SIZE_REPR = re.compile(r"torch\.Size\((\[[^]]*\])\)")


def _meta(op, args, kwargs):
    """meta_result, its errors naming dtypes and shapes as torch's CPU kernels do (Float and
    [2, 3], not torch.float32 and torch.Size([2, 3]))."""
    try:
        return meta_result(op, args, kwargs)
    except RuntimeError as e:
        named = _DTYPE_REPR.sub(lambda m: _scalar_name(getattr(torch, m[1])), str(e))
        named = _SIZE_REPR.sub(r"\1", named)
        if named == str(e):
            raise
        raise type(e)(named) from e


def _check_errors(info, api, A):
    """torch's LinAlgError for a failed factorization (info > 0), in torch's own words."""
    infos = torch.from_numpy(np.ascontiguousarray(info.numpy()))
    _aten._linalg_check_errors(infos, api, is_matrix=A.dim() == 2)


def _scalar_name(dtype):
    """torch's name of a dtype in its error messages: Long, Half, Float."""
    return torch.empty(0, dtype=dtype).type().removeprefix("torch.").removesuffix("Tensor")


def _full_precision(A, kernel):
    """torch's CPU linear algebra (as cltensor's) is built for float32 and float64 only: its
    error for another dtype, raised by kernel `kernel`."""
    if A.dtype not in (torch.float32, torch.float64):
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_scalar_name(A.dtype)}'")


def _floating(A, api, low_precision=False):
    """torch's checks of a linear algebra input that its Meta kernels word differently: a
    floating (or complex) dtype and, with low_precision, not float16/bfloat16."""
    if not (A.is_floating_point() or A.is_complex()):
        raise RuntimeError(f"{api}: Expected a floating point or complex tensor as input. Got "
                           f"{_scalar_name(A.dtype)}")
    if low_precision and A.dtype in (torch.float16, torch.bfloat16):
        raise RuntimeError(f"{api}: Low precision dtypes not supported. Got "
                           f"{_scalar_name(A.dtype)}")


@contextlib.contextmanager
def _torch_errors():
    """cltensor's errors as torch's: LinAlgError as torch.linalg.LinAlgError, argument errors
    as RuntimeError."""
    try:
        yield
    except la.LinAlgError as e:
        raise torch.linalg.LinAlgError(str(e)) from e
    except (ValueError, TypeError) as e:
        raise RuntimeError(str(e)) from e


# ---- LU: det, slogdet, solve, inv, lu_factor, lu, lu_unpack, lu_solve --------------------------
def _lu(A, transposed=False):
    """torch's lu_factor_ex of A (of A^T when transposed): (LU, int32 pivots, info)."""
    _full_precision(A, "lu_cpu")
    x = unwrap(A)
    LU, piv, info = la.lu_factor_ex(x.mT if transposed else x)
    return LU, piv.to(dt.int32), info


def _permutation_sign(piv):
    """det(P) of LAPACK's row swaps: -1 to the number of pivots that move a row."""
    steps = arange(1, piv.shape[-1] + 1, dtype=dt.int32, device=piv.device)
    return where(piv != steps, -1.0, 1.0).prod(-1)


def _lu_solve(LU, piv, B, left=True, adjoint=False):
    """X with A X = B (left) or X A = B, from A's LU (adjoint: A^T's)."""
    if left:
        return la.lu_solve(LU, piv, B, adjoint)
    return la.lu_solve(LU, piv, B.mT, not adjoint).mT


def linalg_det(A):
    _floating(A, "linalg.det")
    metas = _meta(_aten._linalg_det.default, (A,), {})
    LU, piv, _ = _lu(A, A.is_contiguous())
    det = _permutation_sign(piv) * LU.diagonal(0, -2, -1).prod(-1)
    return _results((det, LU, piv), metas)


def linalg_slogdet(A):
    _floating(A, "linalg.slogdet", low_precision=True)
    metas = _meta(_aten._linalg_slogdet.default, (A,), {})
    LU, piv, _ = _lu(A, A.is_contiguous())
    diag = LU.diagonal(0, -2, -1)
    sign = diag.sign().prod(-1) * _permutation_sign(piv)
    return _results((sign, diag.abs().log().sum(-1), LU, piv), metas)


def _solve(A, B, left, api, check_errors):
    """torch's _linalg_solve_ex on ClTensor B: (X, LU, pivots, info), LU of A itself."""
    LU, piv, info = _lu(A)
    if check_errors:
        _check_errors(info, api, A)
    return _lu_solve(LU, piv, B, left), LU, piv, info


def linalg_solve_ex(A, B, *, left=True, check_errors=False):
    _floating(A, "linalg.solve")
    # torch's vector right-hand side: B (n,) or A's shape without its last dim
    vector = B.dim() == 1 or (B.dim() == A.dim() - 1 and B.shape == A.shape[:-1])
    _batches_broadcast(B.shape[:-1] if vector else B.shape[:-2], A.shape[:-2])
    metas = _meta(_aten._linalg_solve_ex.default, (A, B),
                  {"left": left, "check_errors": check_errors})
    b = unwrap(B)
    X, LU, piv, info = _solve(A, b.unsqueeze(-1) if vector else b, left,
                              "torch.linalg.solve_ex", check_errors)
    return _results((X.squeeze(-1) if vector else X, LU, piv, info), metas)


def _batches_broadcast(a, b):
    """torch's CPU error (its Meta kernel words it otherwise) for batch shapes a and b that do
    not broadcast."""
    n = max(len(a), len(b))
    for i in range(1, n + 1):
        x, y = (a[-i] if i <= len(a) else 1), (b[-i] if i <= len(b) else 1)
        if x != y and 1 not in (x, y):
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) "
                               f"at non-singleton dimension {n - i}")


def linalg_inv_ex(A, *, check_errors=False):
    _floating(A, "linalg.inv", low_precision=True)
    _square(A, "linalg.inv")
    metas = _meta(_aten.linalg_inv_ex.default, (A,), {"check_errors": check_errors})
    x = unwrap(A)
    one = eye(x.shape[-1], dtype=x.dtype, device=x.device).expand(*x.shape)
    X, _, _, info = _solve(A, one, True, "linalg.inv_ex", check_errors)
    return _results((X, info), metas)


def _square(A, api):
    """torch's CPU check (its Meta kernel names another function)."""
    if A.dim() < 2:
        raise RuntimeError(f"{api}: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{api}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")


def linalg_lu_factor_ex(A, *, pivot=True, check_errors=False):
    metas = _meta(_aten.linalg_lu_factor_ex.default, (A,),
                  {"pivot": pivot, "check_errors": check_errors})
    _no_pivoting(pivot)
    LU, piv, info = _lu(A)
    if check_errors:
        _check_errors(info, "torch.linalg.lu_factor_ex", A)
    return _results((LU, piv, info), metas)


def _no_pivoting(pivot):
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the "
                           "opencl device")


def linalg_lu(A, *, pivot=True):
    metas = _meta(_aten.linalg_lu.default, (A,), {"pivot": pivot})
    _no_pivoting(pivot)
    LU, piv, _ = _lu(A)
    return _results(_unpack(LU, piv, True, True), metas)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    metas = _meta(_aten.lu_unpack.default, (LU_data, LU_pivots, unpack_data, unpack_pivots),
                  {})
    _full_precision(LU_data, "lu_unpack")
    LU = unwrap(LU_data)
    return _results(_unpack(LU, unwrap(LU_pivots), unpack_data, unpack_pivots), metas)


def _unpack(LU, piv, data, pivots):
    """(P, L, U) with A = P L U from A's LU and pivots; the parts not asked for None."""
    m, n = LU.shape[-2:]
    k = min(m, n)
    P = _permutation(piv, m, LU) if pivots else None
    if not data:
        return P, None, None
    one = eye(m, k, dtype=LU.dtype, device=LU.device)
    return P, LU.narrow(-1, 0, k).tril(-1) + one, LU.narrow(-2, 0, k).triu()


def _permutation(piv, m, like):
    """The permutation matrices P (*, m, m) of LAPACK's 1-based row swaps piv (*, k): the swaps
    are applied in order, on the host (k steps over the whole batch)."""
    swaps = piv.numpy().astype(np.int64) - 1
    if swaps.size and (swaps.min() < 0 or swaps.max() >= m):
        raise RuntimeError(f"lu_unpack: pivots must be in [1, {m}] (LAPACK's 1-based rows)")
    batch = swaps.shape[:-1]
    swaps = swaps.reshape(-1, swaps.shape[-1])
    rows = np.arange(swaps.shape[0])
    perm = np.tile(np.arange(m), (swaps.shape[0], 1))
    for i in range(swaps.shape[1]):
        j = swaps[:, i]
        perm[rows, i], perm[rows, j] = perm[rows, j], perm[rows, i].copy()
    P = np.zeros((swaps.shape[0], m, m), dtype=like.dtype)
    P[rows[:, None], perm, np.arange(m)] = 1  # A = P L U: row perm[i] of A is row i of L U
    return tensor(P.reshape(*batch, m, m), device=like.device)


def linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    _floating(LU, "torch.linalg.lu_solve")
    if pivots.dtype != torch.int32:  # (its Meta kernel names the dtype otherwise)
        raise RuntimeError("linalg.lu_solve: pivots should be a Tensor of scalar type torch.int32")
    out = _meta(_aten.linalg_lu_solve.default, (LU, pivots, B),
                {"left": left, "adjoint": adjoint})
    _full_precision(LU, "linalg.lu_solve_cpu")
    return _result(_lu_solve(unwrap(LU), unwrap(pivots), unwrap(B), left, adjoint), out)


aten("_linalg_det")(linalg_det)
_with_outs("_linalg_det.result", linalg_det, ("result", "LU", "pivots"))
aten("_linalg_slogdet")(linalg_slogdet)
_with_outs("_linalg_slogdet.sign", linalg_slogdet, ("sign", "logabsdet", "LU", "pivots"))
aten("_linalg_solve_ex")(linalg_solve_ex)
_with_outs("_linalg_solve_ex.result", linalg_solve_ex, ("result", "LU", "pivots", "info"))
aten("linalg_inv_ex")(linalg_inv_ex)
_with_outs("linalg_inv_ex.inverse", linalg_inv_ex, ("inverse", "info"))
aten("linalg_lu_factor_ex")(linalg_lu_factor_ex)
_with_outs("linalg_lu_factor_ex.out", linalg_lu_factor_ex, ("LU", "pivots", "info"))
aten("linalg_lu")(linalg_lu)
_with_outs("linalg_lu.out", linalg_lu, ("P", "L", "U"))
aten("lu_unpack")(lu_unpack)
_with_outs("lu_unpack.out", lu_unpack, ("P", "L", "U"))
aten("linalg_lu_solve")(linalg_lu_solve)
with_out("linalg_lu_solve.out", linalg_lu_solve)


# ---- Cholesky, QR, SVD, eigh, triangular and Cholesky solves -----------------------------------
def linalg_cholesky_ex(self, *, upper=False, check_errors=False):
    _floating(self, "linalg.cholesky")
    metas = _meta(_aten.linalg_cholesky_ex.default, (self,),
                  {"upper": upper, "check_errors": check_errors})
    _full_precision(self, "cholesky_cpu")
    L, info = la.cholesky_ex(unwrap(self), upper)
    if check_errors:
        _check_errors(info, "linalg.cholesky_ex", self)
    return _results((L, info), metas)


def linalg_qr(A, mode="reduced"):
    _floating(A, "linalg.qr")
    metas = _meta(_aten.linalg_qr.default, (A, mode), {})
    _full_precision(A, "geqrf_cpu")
    return _results(la.qr(unwrap(A), mode), metas)


def linalg_svd(A, full_matrices=False, compute_uv=True, *, driver=None):
    _floating(A, "linalg.svd")
    metas = _meta(_aten._linalg_svd.default, (A, full_matrices, compute_uv),
                  {"driver": driver})
    if driver is not None:
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on "
                           "CUDA inputs with cuSOLVER backend.")
    _full_precision(A, "linalg_svd_cpu")
    U, S, Vh, info = la.svd(unwrap(A), full_matrices, vectors=compute_uv)
    if info.numel() and bool(info.any()) and not bool(unwrap(A).isfinite().all()):
        raise torch.linalg.LinAlgError("linalg.svd: The algorithm failed to converge because the "
                                       "input matrix contained non-finite values.")
    _check_errors(info, "linalg.svd", A)
    return _results((U, S, Vh), metas)


def linalg_eigh(A, UPLO="L", compute_v=True):
    metas = _meta(_aten._linalg_eigh.default, (A, UPLO, compute_v), {})
    _full_precision(A, "linalg_eigh_cpu")
    w, V, info = la.eigh(unwrap(A), UPLO == "U", vectors=compute_v)
    _check_errors(info, "linalg.eigh", A)
    return _results((w, V), metas)


def linalg_solve_triangular(self, B, *, upper, left=True, unitriangular=False):
    out = _meta(_aten.linalg_solve_triangular.default, (self, B),
                {"upper": upper, "left": left, "unitriangular": unitriangular})
    _full_precision(self, "triangular_solve_cpu")
    return _result(la.solve_triangular(unwrap(self), unwrap(B), upper, left, unitriangular), out)


def cholesky_solve_helper(self, A, upper):
    out = _meta(_aten._cholesky_solve_helper.default, (self, A, upper), {})
    _full_precision(A, "cholesky_solve_cpu")
    return _result(la.cholesky_solve(unwrap(self), unwrap(A), upper), out)


def cholesky_inverse(self, upper=False):
    out = _meta(_aten.cholesky_inverse.default, (self, upper), {})
    _full_precision(self, "cholesky_inverse_out_cpu")
    with _torch_errors():
        return _result(_cholesky_inverse(unwrap(self), upper), out)


def cholesky(self, upper=False):
    """torch.cholesky, linalg.cholesky's deprecated form."""
    out = _meta(_aten.cholesky.default, (self, upper), {})
    _full_precision(self, "cholesky_cpu")
    L, info = la.cholesky_ex(unwrap(self), upper)
    _check_errors(info, "cholesky", self)
    return _result(L, out)


def triangular_solve(self, A, upper=True, transpose=False, unitriangular=False):
    """torch.triangular_solve, linalg.solve_triangular's deprecated form: (X with op(A) X = self,
    op(A) A or A^T, and a copy of A broadcast to the batch)."""
    metas = _meta(_aten.triangular_solve.default, (self, A, upper, transpose, unitriangular), {})
    _full_precision(A, "triangular_solve_cpu")
    a = unwrap(A)
    X = la.solve_triangular(a.mT if transpose else a, unwrap(self), upper != transpose, True,
                            unitriangular)
    copy = a.expand(*metas[1].shape).clone(memory_format="contiguous_format")
    return _results((X, copy), metas)


aten("linalg_cholesky_ex")(linalg_cholesky_ex)
_with_outs("linalg_cholesky_ex.L", linalg_cholesky_ex, ("L", "info"))
aten("linalg_qr")(linalg_qr)
_with_outs("linalg_qr.out", linalg_qr, ("Q", "R"))
aten("_linalg_svd")(linalg_svd)
_with_outs("_linalg_svd.U", linalg_svd, ("U", "S", "Vh"))
aten("_linalg_eigh")(linalg_eigh)
_with_outs("_linalg_eigh.eigenvalues", linalg_eigh, ("eigenvalues", "eigenvectors"))
aten("cholesky")(cholesky)
with_out("cholesky.out", cholesky)
aten("triangular_solve")(triangular_solve)
_with_outs("triangular_solve.X", triangular_solve, ("X", "M"))
aten("linalg_solve_triangular")(linalg_solve_triangular)
with_out("linalg_solve_triangular.out", linalg_solve_triangular)
aten("_cholesky_solve_helper")(cholesky_solve_helper)
with_out("_cholesky_solve_helper.out", cholesky_solve_helper)
aten("cholesky_inverse")(cholesky_inverse)
with_out("cholesky_inverse.out", cholesky_inverse)


# ---- least squares -----------------------------------------------------------------------------
def linalg_lstsq(self, b, rcond=None, *, driver=None):
    """torch's checks (aten has no Meta kernel for lstsq), then cltensor's minimum-norm
    solution with the fields torch's CPU drivers fill."""
    check_devices((self, b), {}, _aten.linalg_lstsq.default)
    for t in (self, b):
        if t.dtype not in (torch.float32, torch.float64):
            raise RuntimeError("This function doesn't handle types other than float and double")
    if self.dtype != b.dtype:
        raise RuntimeError(f"torch.linalg.lstsq: Expected input and other to have the same "
                           f"dtype, but got input's dtype {_scalar_name(self.dtype)} and "
                           f"other's dtype {_scalar_name(b.dtype)}")
    if self.dim() < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    if b.dim() < 1:
        raise RuntimeError("torch.linalg.lstsq: other must have at least 1 dimension.")
    if not 0 <= self.dim() - b.dim() <= 1:
        raise RuntimeError("torch.linalg.lstsq: input.dim() must be greater or equal to "
                           "other.dim() and (input.dim() - other.dim()) <= 1")
    if driver not in (None, "gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, "
                           "gelsy, gelsd, gelss)")
    vector = b.dim() == self.dim() - 1
    _batches_broadcast(self.shape[:-2], b.shape[:-1] if vector else b.shape[:-2])
    if b.shape[-1 if vector else -2] != self.shape[-2]:
        dim = "other.size(-1)" if vector else "other.size(-2)"
        raise RuntimeError(f"torch.linalg.lstsq: input.size(-2) should match {dim}")
    with _torch_errors():
        res = _lstsq(unwrap(self), unwrap(b), rcond, driver=driver)
    return tuple(wrap(r) for r in res)


def _outs_without_meta(name, functional, out_args):
    """The out= overload `name` of an op without a Meta kernel: the out tensors on the operands'
    device and of the results' dtypes, resized to the results' shapes."""
    op = getattr(getattr(_aten, name.split(".")[0]), name.split(".")[1])

    def kernel(*args, **kwargs):
        outs = [kwargs.pop(a) for a in out_args]
        check_devices((*args, *outs), kwargs, op)
        results = functional(*args, **kwargs)
        for o, r in zip(outs, _listed(results)):
            if o.dtype != r.dtype:
                raise RuntimeError(f"{op.name()}: expected the out tensor to have dtype "
                                   f"{r.dtype}, but got {o.dtype} instead")
        written = tuple(write_into(o, r) for o, r in zip(outs, _listed(results)))
        return written if isinstance(results, tuple) else written[0]
    aten(name)(kernel)


def _listed(results):
    return results if isinstance(results, tuple) else (results,)


aten("linalg_lstsq")(linalg_lstsq)
_outs_without_meta("linalg_lstsq.out", linalg_lstsq,
                   ("solution", "residuals", "rank", "singular_values"))


# ---- cdist, cross ------------------------------------------------------------------------------
def cdist_forward(x1, x2, p, compute_mode):
    if compute_mode not in (None, 0, 1, 2):  # (its Meta kernel words it otherwise)
        raise RuntimeError(f"possible modes: 0, 1, 2, but was: {compute_mode}")
    out = _meta(_aten._cdist_forward.default, (x1, x2, p, compute_mode), {})
    _same_dtypes(x1, x2)
    _full_precision(x1, "cdist")
    mode = _CDIST_MODES[compute_mode or 0]
    dtype = np_dtype(out.dtype, "cdist")
    return _result(_cdist(operand(x1, dtype), operand(x2, dtype), p, mode), out)


def cdist_backward(grad, x1, x2, p, cdist):
    """torch's gradient of cdist with respect to x1 (for x2's, torch swaps the operands): per
    pair of rows, the derivative of the p-norm of their difference, summed over x2's rows."""
    out = _meta(_aten._cdist_backward.default, (grad, x1, x2, p, cdist), {})
    dtype = np_dtype(out.dtype, "cdist_backward")
    a, b = operand(x1, dtype), operand(x2, dtype)
    g, d = operand(grad, dtype).unsqueeze(-1), operand(cdist, dtype).unsqueeze(-1)
    diff = a.unsqueeze(-2) - b.unsqueeze(-3)  # (*, P, R, M)
    return _result(_pair_grads(diff, g, d, p).sum(-2), out)


def _pair_grads(diff, g, d, p):
    """d(g * |diff|_p)/d(diff) as torch's CPU kernel: 0 where the distance is 0 (and, for
    p < 1, where a coordinate's difference is)."""
    sign = diff.sign()
    if p == 0:
        return zeros(diff.shape, dtype=diff.dtype, device=diff.device)
    if p == 1:
        return g * sign
    if p == float("inf"):
        return g * sign * (diff.abs() == d).to(diff.dtype)
    if p == 2:
        return where(d == 0, 0.0, g * diff / d)
    if p < 2:
        zero = (d == 0) | (diff == 0) if p < 1 else (d == 0)
        return where(zero, 0.0, sign * diff.abs().pow(p - 1) * g / d.pow(p - 1))
    return where(d == 0, 0.0, diff * diff.abs().pow(p - 2) * g / d.pow(p - 1))


def _pairs(x):
    """The (i, j) row indices of pdist's pairs, i < j in row-major order, on x's device."""
    i, j = np.triu_indices(x.shape[0], 1)
    return [tensor(a.astype(np.int64), device=x.device) for a in (i, j)]


def pdist_forward(self, p=2):
    """The p-norm distances of the rows' pairs (F.pdist), as cdist's of each pair's rows."""
    out = _meta(_aten._pdist_forward.default, (self, p), {})
    _full_precision(self, "pdist")
    x = operand(self, np_dtype(out.dtype, "pdist"))
    i, j = _pairs(x)
    return _result(_cdist(x.index_select(0, i).unsqueeze(1), x.index_select(0, j).unsqueeze(1),
                          p).reshape(-1), out)


def pdist_backward(grad, self, p, pdist):
    """pdist's gradient: each pair's cdist gradient added to its first row, taken from its
    second (index_add_, in pair order: deterministic)."""
    out = _meta(_aten._pdist_backward.default, (grad, self, p, pdist), {})
    dtype = np_dtype(out.dtype, "pdist_backward")
    x = operand(self, dtype)
    i, j = _pairs(x)
    diff = x.index_select(0, i) - x.index_select(0, j)
    g = _pair_grads(diff, operand(grad, dtype).unsqueeze(-1), operand(pdist, dtype).unsqueeze(-1),
                    p)
    res = zeros(x.shape, dtype=dtype, device=x.device)
    index_add_(res, 0, i, g)
    index_add_(res, 0, j, g, alpha=-1)
    return _result(res, out)


def _same_dtypes(a, b):
    """torch's CPU kernels of cdist and cross take operands of one dtype (their Meta kernels
    promote)."""
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected scalar type {_scalar_name(a.dtype)} but found "
                           f"{_scalar_name(b.dtype)}")


def linalg_cross(self, other, *, dim=-1):
    out = _meta(_aten.linalg_cross.default, (self, other), {"dim": dim})
    _same_dtypes(self, other)
    dtype = np_dtype(out.dtype, "linalg_cross")
    d = dim % max(self.dim(), other.dim())
    return _result(_cross(operand(self, dtype), operand(other, dtype), d), out)


aten("_cdist_forward")(cdist_forward)
_outs_without_meta("_cdist_forward.out", cdist_forward, ("out",))
aten("_cdist_backward")(cdist_backward)
with_out("_cdist_backward.out", cdist_backward)
aten("_pdist_forward")(pdist_forward)
with_out("_pdist_forward.out", pdist_forward)
aten("_pdist_backward")(pdist_backward)
with_out("_pdist_backward.out", pdist_backward)
aten("linalg_cross")(linalg_cross)
with_out("linalg_cross.out", linalg_cross)


# ---- take, put_ --------------------------------------------------------------------------------
@contextlib.contextmanager
def _index_errors(index, size):
    """cltensor's out-of-range IndexError in torch's words (the first such index)."""
    try:
        yield
    except IndexError as e:
        flat = index.numpy().reshape(-1)
        bad = flat[(flat >= size) | (flat < -size)]
        if not bad.size:
            raise
        raise IndexError(f"out of range: tried to access index {int(bad[0])} on a tensor of "
                         f"{size} elements.") from e


def take(self, index):
    out = _meta(_aten.take.default, (self, index), {})
    idx = unwrap(index)
    with _index_errors(idx, self.numel()):
        return _result(unwrap(self).reshape(-1)[idx.reshape(-1)], out)


def put_(self, index, source, accumulate=False):
    _meta(_aten.put_.default, (self, index, source, accumulate), {})
    if source.numel() != index.numel():  # torch's CPU checks (its Meta kernel makes none)
        raise IndexError(f"put_(): Expected source and index to have the same number of "
                         f"elements, but got source.numel() = {source.numel()}, index.numel() = "
                         f"{index.numel()}")
    if source.dtype != self.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {_scalar_name(self.dtype)} and source.dtype = "
                           f"{_scalar_name(source.dtype)}")
    idx = unwrap(index)
    with _index_errors(idx, self.numel()):
        _put_(unwrap(self), idx, operand(source, np_dtype(self.dtype, "put_")), accumulate)
    return self


aten("take")(take)
with_out("take.out", take)
aten("put_")(put_)


# ---- adaptive max pooling ----------------------------------------------------------------------
def _planes(x):
    """x (N, C, H, W), or (C, H, W) seen as one image."""
    return x.unsqueeze(0) if x.ndim == 3 else x


def _floating_pool(x, kernel):
    if not x.is_floating_point():
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_scalar_name(x.dtype)}'")


def adaptive_max_pool2d(self, output_size):
    metas = _meta(_aten.adaptive_max_pool2d.default, (self, output_size), {})
    _floating_pool(self, "adaptive_max_pool2d")
    y, idx = pool.adaptive_max_pool2d(_planes(unwrap(self)), tuple(metas[0].shape[-2:]), True)
    return _results((y, idx), metas)


def adaptive_max_pool2d_backward(grad_output, self, indices):
    out = _meta(_aten.adaptive_max_pool2d_backward.default, (grad_output, self, indices), {})
    _floating_pool(self, "adaptive_max_pool2d_backward")
    x = _planes(unwrap(self))
    g = _planes(operand(grad_output, x.dtype))
    idx = _planes(unwrap(indices)).to(dt.int32)
    return _result(pool.adaptive_max_pool2d_backward(g, idx, x.shape, pool.layout_of(x)), out)


aten("adaptive_max_pool2d")(adaptive_max_pool2d)
_with_outs("adaptive_max_pool2d.out", adaptive_max_pool2d, ("out", "indices"))
aten("adaptive_max_pool2d_backward")(adaptive_max_pool2d_backward)
with_out("adaptive_max_pool2d_backward.grad_input", adaptive_max_pool2d_backward, "grad_input")
