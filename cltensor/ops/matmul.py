"""Matrix products with torch's names and rules: matmul, mm, bmm, mv, dot, addmm, baddbmm, outer.

Every product runs the GEMM engine (cltensor/ops/gemm/): Co[b] = alpha * A[b] @ B[b] +
beta * Ci[b] over strided views, so transposed, sliced and broadcast operands are never copied,
with the kernel family and its parameters chosen per device from the tuning database.
"""
from .. import dtypes as dt
from ..tensor import ClTensor
from . import elementwise as ew
from .gemm import gemm, gemm_into
from .gemm.checks import (broadcast_batch, check_addend, check_inner, check_out,
                          check_scalar, check_tensors)

__all__ = ["matmul", "mm", "bmm", "mv", "dot", "addmm", "baddbmm", "outer", "ger", "gemm"]


# ---- checks -----------------------------------------------------------------------------------

def _listing(items):
    items = [str(x) for x in items]
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else items[0]


def _check_dims(op, tensors, ndims):
    if any(t.ndim != nd for t, nd in zip(tensors, ndims)):
        want = _listing(f"{nd}-d" for nd in ndims)
        got = _listing(f"{t.ndim}-d" for t in tensors)
        raise ValueError(f"{op}: expected {want} tensors, got {got}")


# ---- running a product into a result ----------------------------------------------------------

def _same(t):
    return t


def _hazard(c, a, b, c_in):
    """True when the kernel would write storage it still has to read through another view."""
    return (any(t.storage is c.storage for t in (a, b)) or
            (c_in is not None and ew.overlaps_differently(c, c_in)))


def _run(op, a, b, shape, out, view=_same, c_in=None, alpha=1, beta=0):
    """alpha * a @ b + beta * c_in into `out` (checked first) or a new tensor of `shape`.

    a, b and c_in have the kernel's (*batch, M, K), (*batch, K, N), (*batch, M, N) shapes;
    `view` maps a result of `shape` to the (*batch, M, N) view the kernel writes.
    """
    if out is not None:
        check_out(op, out, shape, a.dtype, a.device)
    if beta == 0:
        c_in = None
    target = out
    if out is None or _hazard(view(out), a, b, c_in):
        target = ClTensor.empty_on(shape, a.dtype, a.device)
    gemm_into(a, b, view(target), c_in, alpha, beta)
    if out is None:
        return target
    if target is not out:
        ew.copy_into(out, target)
    return out


# ---- the ops ----------------------------------------------------------------------------------

def matmul(a, b, out=None):
    """Matrix product with torch.matmul's rules.

    1-d @ 1-d is a dot product (0-d result); a 1-d first operand is a row (its dim is removed
    from the result), a 1-d second operand a column; leading (batch) dims broadcast.

    Args:
        a, b: tensors of the same dtype (float32, float64, int32 or int64) and device.
        out: optional tensor of the result's shape and dtype to write into.

    Shape:
        a (*batch_a, M, K) and b (*batch_b, K, N) give (*broadcast(batch_a, batch_b), M, N).

    Example:
        >>> x = cltensor.ones(8, 1, 5, 3); w = cltensor.ones(4, 3, 2)
        >>> cltensor.matmul(x, w).shape
        (8, 4, 5, 2)
    """
    check_tensors("matmul", a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: both arguments need to be at least 1-d, but they are "
                         f"{a.ndim}-d and {b.ndim}-d")
    a2 = a.unsqueeze(0) if a.ndim == 1 else a
    b2 = b.unsqueeze(1) if b.ndim == 1 else b
    check_inner("matmul", a, b, a2.shape[-1], b2.shape[-2])
    batch = broadcast_batch("matmul", a2, b2)
    m, n = a2.shape[-2], b2.shape[-1]
    shape = batch + ((m,) if a.ndim > 1 else ()) + ((n,) if b.ndim > 1 else ())

    def view(t):
        t = t.unsqueeze(len(batch)) if a.ndim == 1 else t
        return t.unsqueeze(t.ndim) if b.ndim == 1 else t
    return _run("matmul", a2.expand(batch + a2.shape[-2:]), b2.expand(batch + b2.shape[-2:]),
                shape, out, view)


def mm(a, b, out=None):
    """Product of two matrices (no broadcasting).

    Example:
        >>> cltensor.mm(cltensor.ones(2, 3), cltensor.ones(3, 4)).shape
        (2, 4)
    """
    check_tensors("mm", a, b)
    _check_dims("mm", (a, b), (2, 2))
    check_inner("mm", a, b, a.shape[1], b.shape[0])
    return _run("mm", a, b, (a.shape[0], b.shape[1]), out)


def bmm(a, b, out=None):
    """Batched product of 3-d tensors with equal batch sizes (no broadcasting).

    Example:
        >>> cltensor.bmm(cltensor.ones(5, 2, 3), cltensor.ones(5, 3, 4)).shape
        (5, 2, 4)
    """
    check_tensors("bmm", a, b)
    _check_dims("bmm", (a, b), (3, 3))
    _check_batches("bmm", a, b)
    check_inner("bmm", a, b, a.shape[2], b.shape[1])
    return _run("bmm", a, b, (a.shape[0], a.shape[1], b.shape[2]), out)


def _check_batches(op, a, b):
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"{op}: batch sizes differ: shapes {tuple(a.shape)} and "
                         f"{tuple(b.shape)} have {a.shape[0]} and {b.shape[0]} batches")


def mv(a, v, out=None):
    """Matrix-vector product.

    Example:
        >>> cltensor.mv(cltensor.ones(2, 3), cltensor.ones(3)).shape
        (2,)
    """
    check_tensors("mv", a, v)
    _check_dims("mv", (a, v), (2, 1))
    check_inner("mv", a, v, a.shape[1], v.shape[0])
    return _run("mv", a, v.unsqueeze(1), (a.shape[0],), out, lambda t: t.unsqueeze(1))


def dot(a, b, out=None):
    """Dot product of two 1-d tensors of equal length (a 0-d result).

    Example:
        >>> cltensor.dot(cltensor.tensor([1.0, 2.0]), cltensor.tensor([3.0, 4.0])).item()
        11.0
    """
    check_tensors("dot", a, b)
    _check_dims("dot", (a, b), (1, 1))
    check_inner("dot", a, b, a.shape[0], b.shape[0])
    return _run("dot", a.unsqueeze(0), b.unsqueeze(1), (), out,
                lambda t: t.unsqueeze(0).unsqueeze(1))


def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * (mat1 @ mat2), in one kernel.

    Args:
        input: added tensor, broadcast to (M, N); ignored (NaN included) when beta is 0.
        mat1, mat2: (M, K) and (K, N) matrices of input's dtype.
        beta, alpha: real numbers (integers for integer tensors).
        out: optional (M, N) tensor to write into.

    Example:
        >>> bias = cltensor.zeros(4); x = cltensor.ones(2, 3); w = cltensor.ones(3, 4)
        >>> cltensor.addmm(bias, x, w, alpha=0.5).tolist()[0]
        [1.5, 1.5, 1.5, 1.5]
    """
    _, dtype = check_tensors("addmm", input, mat1, mat2)
    _check_dims("addmm", (mat1, mat2), (2, 2))
    check_inner("addmm", mat1, mat2, mat1.shape[1], mat2.shape[0])
    check_scalar("addmm", "alpha", alpha, dtype)
    check_scalar("addmm", "beta", beta, dtype)
    shape = (mat1.shape[0], mat2.shape[1])
    check_addend("addmm", input, shape)
    return _run("addmm", mat1, mat2, shape, out, c_in=input.expand(shape), alpha=alpha, beta=beta)


def addmm_(self, mat1, mat2, *, beta=1, alpha=1):
    """In place: self = beta * self + alpha * (mat1 @ mat2)."""
    _, dtype = check_tensors("addmm_", self, mat1, mat2)
    _check_dims("addmm_", (self, mat1, mat2), (2, 2, 2))
    check_inner("addmm_", mat1, mat2, mat1.shape[1], mat2.shape[0])
    check_scalar("addmm_", "alpha", alpha, dtype)
    check_scalar("addmm_", "beta", beta, dtype)
    return _run("addmm_", mat1, mat2, (mat1.shape[0], mat2.shape[1]), self, c_in=self,
                alpha=alpha, beta=beta)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * bmm(batch1, batch2); input broadcasts to the product's shape.

    Example:
        >>> c = cltensor.ones(2, 1, 4); b1 = cltensor.ones(2, 3, 5); b2 = cltensor.ones(2, 5, 4)
        >>> cltensor.baddbmm(c, b1, b2, beta=2).shape
        (2, 3, 4)
    """
    _, dtype = check_tensors("baddbmm", input, batch1, batch2)
    shape = _check_bmm_args("baddbmm", batch1, batch2, alpha, beta, dtype)
    check_addend("baddbmm", input, shape)
    return _run("baddbmm", batch1, batch2, shape, out, c_in=input.expand(shape), alpha=alpha,
                beta=beta)


def baddbmm_(self, batch1, batch2, *, beta=1, alpha=1):
    """In place: self = beta * self + alpha * bmm(batch1, batch2)."""
    _, dtype = check_tensors("baddbmm_", self, batch1, batch2)
    shape = _check_bmm_args("baddbmm_", batch1, batch2, alpha, beta, dtype)
    if tuple(self.shape) != shape:
        raise ValueError(f"baddbmm_: self has shape {tuple(self.shape)}, the product {shape}")
    return _run("baddbmm_", batch1, batch2, shape, self, c_in=self, alpha=alpha, beta=beta)


def _check_bmm_args(op, batch1, batch2, alpha, beta, dtype):
    _check_dims(op, (batch1, batch2), (3, 3))
    _check_batches(op, batch1, batch2)
    check_inner(op, batch1, batch2, batch1.shape[2], batch2.shape[1])
    check_scalar(op, "alpha", alpha, dtype)
    check_scalar(op, "beta", beta, dtype)
    return (batch1.shape[0], batch1.shape[1], batch2.shape[2])


def outer(a, b, out=None):
    """Outer product of two 1-d tensors: out[i, j] = a[i] * b[j] (dtypes promote, as torch).

    Example:
        >>> cltensor.outer(cltensor.ones(2), cltensor.ones(3)).shape
        (2, 3)
    """
    for t in (a, b):
        if not ew.is_tensor(t):
            raise TypeError(f"outer: expected tensors, got {type(t).__name__}"
                            f"{dt.conversion_hint(t)}")
    _check_dims("outer", (a, b), (1, 1))
    return ew.binary("mul", a.unsqueeze(1), b.unsqueeze(0), out=out)


ger = outer

TENSOR_METHODS = {"matmul": matmul, "mm": mm, "bmm": bmm, "mv": mv, "dot": dot, "addmm": addmm,
                  "addmm_": addmm_, "baddbmm": baddbmm, "baddbmm_": baddbmm_, "outer": outer,
                  "ger": outer, "__rmatmul__": lambda self, o: matmul(o, self)}
