"""The matrix exponential on the opencl device (linalg_matrix_exp, which torch.matrix_exp and its
gradient, matrix_exp_backward, call), by scaling and squaring a Taylor polynomial on cltensor's
batched matmul; geqrf and linalg_householder_product (torch.orgqr) on linalg.cl's Householder
kernels.

torch's CPU kernel bounds ||A / 2^s||_1 by its degree-18 approximant's theta (Bader, Blanes and
Casas) and squares s times; the degree-18 Taylor polynomial has the same truncation error at
that bound, so the same s gives torch's accuracy. Each matrix of a batch takes its own s.
"""
import math

import numpy as np
import torch

from .. import dtypes as dt
from ..creation import from_numpy
from ..linalg.decompositions import geqrf as _geqrf
from ..linalg.decompositions import householder_product as _householder_product
from ..ops.matmul import matmul
from ..ops.pointwise import where
from ..ops.ranges import eye
from ..ops.shape import stack
from ._backend import aten, unwrap
from .linalg_ops import _floating, _full_precision, _meta, _result, _results, _torch_errors
from .math_ops import check_devices, with_out, write_into

_aten = torch.ops.aten
# torch's bounds on ||A||_1 for its degree-18 approximant, by the dtype computed in
_THETA = {dt.float32: 3.010066362817634, dt.float64: 1.090863719290036}
_DEGREE, _STEP = 18, 6  # Paterson-Stockmeyer: powers up to A^6, Horner in A^6
# Horner's blocks: row j holds the coefficients of A^0 .. A^5 in block j, 1 / (6j + i)!
_BLOCKS = np.array([[1 / math.factorial(_STEP * j + i) if _STEP * j + i <= _DEGREE else 0.0
                     for i in range(_STEP)] for j in range(_DEGREE // _STEP + 1)])


def _taylor(A):
    """The degree-18 Taylor polynomial of exp at A (b, n, n): 8 matmuls between matrices, and
    one that sums the powers below A^6 into the 4 blocks of Horner's steps."""
    b, n = A.shape[0], A.shape[-1]
    powers = [eye(n, dtype=A.dtype, device=A.device).expand(b, n, n), A]
    for k in range(2, _STEP + 1):
        powers.append(matmul(powers[k // 2], powers[k - k // 2]))
    top = powers.pop()
    blocks = matmul(from_numpy(_BLOCKS, device=A.device).to(A.dtype),
                    stack(powers).reshape(_STEP, -1)).reshape(-1, b, n, n)
    P = blocks[-1]
    for j in range(len(blocks) - 2, -1, -1):
        P = matmul(P, top) + blocks[j]
    return P


def _squarings(A):
    """s per matrix of A (b, n, n): the fewest halvings that bring ||A||_1 to theta (0 for a
    norm that is not finite, whose exponential is not either)."""
    norms = A.abs().sum(-2).amax(-1).to(dt.float64).numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.ceil(np.log2(norms / _THETA[A.dtype]))
    return np.where(np.isfinite(s) & (s > 0), s, 0).astype(np.int64)


def matrix_exp(A):
    """exp of each matrix of the ClTensor A (b, n, n), float32 or float64."""
    s = _squarings(A)
    if s.any():
        A = A * from_numpy(np.ldexp(1.0, -s).reshape(-1, 1, 1), device=A.device).to(A.dtype)
    P = _taylor(A)
    for k in range(int(s.max(initial=0))):
        squared = matmul(P, P)
        if (s > k).all():
            P = squared
        else:  # only the matrices scaled down more than k times
            more = from_numpy((s > k).reshape(-1, 1, 1), device=A.device)
            P = where(more, squared, P)
    return P


@aten("linalg_matrix_exp")
def linalg_matrix_exp(self):
    out = _meta(_aten.linalg_matrix_exp.default, (self,), {})
    x = unwrap(self)
    x = x.to(dt.float32) if x.dtype in dt.HALF_TYPES else x
    n = x.shape[-1]
    if x.numel() == 0:
        return _result(x.contiguous(), out)
    return _result(matrix_exp(x.reshape(-1, n, n).contiguous()).reshape(x.shape), out)


with_out("linalg_matrix_exp.out", linalg_matrix_exp)


# ---- geqrf, householder_product ----------------------------------------------------------------
def _geqrf_metas(A):
    """torch's geqrf results as Meta tensors (it has no Meta kernel): a column-major, as
    LAPACK's, and tau (*, min(m, n))."""
    if A.dim() < 2:
        raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")
    *batch, m, n = A.shape
    a = torch.empty_strided(A.shape, (*_contiguous(batch, m * n), 1, m), dtype=A.dtype,
                            device="meta")
    return a, torch.empty((*batch, min(m, n)), dtype=A.dtype, device="meta")


def _contiguous(sizes, inner):
    """Row-major strides of sizes above a block of `inner` elements."""
    strides = []
    for size in reversed(sizes):
        strides.insert(0, inner)
        inner *= size
    return strides


@aten("geqrf")
def geqrf(self):
    metas = _geqrf_metas(self)
    _full_precision(self, "geqrf_cpu")
    with _torch_errors():
        return _results(_geqrf(unwrap(self)), metas)


@aten("geqrf.a")
def geqrf_out(self, *, a, tau):
    check_devices((self, a, tau), {}, _aten.geqrf.a)
    res = geqrf(self)
    return write_into(a, res[0]), write_into(tau, res[1])


@aten("linalg_householder_product")
def linalg_householder_product(input, tau):
    _floating(input, "torch.linalg.householder_product")
    out = _meta(_aten.linalg_householder_product.default, (input, tau), {})
    _full_precision(input, "orgqr_cpu")
    with _torch_errors():
        return _result(_householder_product(unwrap(input), unwrap(tau)), out)


with_out("linalg_householder_product.out", linalg_householder_product)
