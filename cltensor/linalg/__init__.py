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

solve.py holds the solves, inverses, determinants and factorizations, decompositions.py QR,
eigh, SVD and what is built on them, norms.py the norms.
"""
# ruff: noqa: F401 (the package's names, re-exported)
from ..composed.contract import matrix_power  # torch.linalg.matrix_power
from ..ops.linalg import LinAlgError
from .decompositions import (LSTSQ_DRIVERS, Eigh, Lstsq, Qr, QrLegacy, Svd, eigh, eigvalsh, lstsq,
                             matrix_rank, pinv, pinverse, qr, qr_legacy, svd, svdvals)
from .norms import MATRIX_ORDS, cond, matrix_norm, norm, vector_norm
from .solve import (CholeskyEx, InvEx, LuFactor, LuFactorEx, Slogdet, TriangularSolve, cholesky,
                    cholesky_ex, cholesky_inverse, cholesky_solve, det, inv, inv_ex, logdet,
                    lu_factor, lu_factor_ex, lu_solve, slogdet, solve, solve_triangular,
                    triangular_solve)

__all__ = ["solve", "inv", "inv_ex", "det", "slogdet", "cholesky", "cholesky_ex", "lu_factor",
           "lu_factor_ex", "lu_solve", "solve_triangular", "matrix_power", "vector_norm",
           "matrix_norm", "norm", "cond", "qr", "eigh", "eigvalsh", "svd", "svdvals", "pinv",
           "matrix_rank", "lstsq", "LinAlgError"]

inverse = inv
TENSOR_METHODS = {"inverse": inv, "det": det, "logdet": logdet, "slogdet": slogdet,
                  "cholesky": cholesky, "cholesky_solve": cholesky_solve,
                  "cholesky_inverse": cholesky_inverse, "triangular_solve": triangular_solve,
                  "qr": qr_legacy, "pinverse": pinverse}
