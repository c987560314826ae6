"""gemm(): the checked GEMM entry point for layers, with its epilogue."""
from ...tensor import ClTensor
from .. import elementwise as ew
from . import checks as mm
from .engine import gemm_into


def _check_gemm(a, b, out, c, row_bias, col_bias, alpha, beta):
    """Checks of gemm()'s arguments; returns the result's shape."""
    named = [t for t in (a, b, c, row_bias, col_bias) if t is not None]
    _, dtype = mm.check_tensors("gemm", *named)
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise ValueError(f"gemm: expected a and b to be at least 2-d, got {a.ndim}-d and "
                         f"{b.ndim}-d")
    mm.check_inner("gemm", a, b, a.shape[-1], b.shape[-2])
    mm.check_scalar("gemm", "alpha", alpha, dtype)
    mm.check_scalar("gemm", "beta", beta, dtype)
    batch_a, batch_b = a.shape[:-2], b.shape[:-2]
    batch = batch_a if batch_a == batch_b else mm.broadcast_batch("gemm", a, b)
    shape = batch + (a.shape[-2], b.shape[-1])
    for name, bias, size in (("row_bias", row_bias, shape[-2]), ("col_bias", col_bias, shape[-1])):
        if bias is not None and tuple(bias.shape) != (size,):
            raise ValueError(f"gemm: {name} must have shape ({size},), got {tuple(bias.shape)}")
    if c is not None:
        mm.check_addend("gemm", c, shape)
    if out is not None:
        mm.check_out("gemm", out, shape, dtype, a.device)
    return shape


def gemm(a, b, out=None, *, c=None, alpha=1, beta=1, row_bias=None, col_bias=None, relu=False):
    """out = act(alpha * a @ b + beta * c + row_bias[:, None] + col_bias[None, :]), one kernel.

    The GEMM entry point for layers (linear, convolution through im2col): the scaling, the
    addend, the biases and the ReLU are applied as the result is stored, so no extra pass runs.
    Transposed operands are views (`w.mT`, `x.transpose(-1, -2)`) and cost no copy; so do
    step-sliced, offset and expanded (stride 0) ones.

    Args:
        a: (*batch_a, M, K) tensor, float32, float64, int32 or int64; any strides.
        b: (*batch_b, K, N) tensor of a's dtype and device; batch dims broadcast with a's.
        out: optional (*batch, M, N) tensor to write into; it may be c itself (then c is
            updated in place) and may be any strided view. Default: a new contiguous tensor.
        c: optional addend, broadcast to (*batch, M, N); not read when beta is 0.
        alpha, beta: real numbers (integers for integer tensors); beta applies to c only.
        row_bias: optional (M,) tensor added along rows: out[..., m, n] += row_bias[m] (a
            convolution's per-channel bias when out = weight @ columns).
        col_bias: optional (N,) tensor added along columns: out[..., m, n] += col_bias[n] (a
            linear layer's bias when out = x @ weight.mT).
        relu: apply max(x, 0) last (NaN stays NaN, as torch.relu).

    Returns:
        out, or the new tensor.

    Shape:
        a (*batch_a, M, K), b (*batch_b, K, N) -> (*broadcast(batch_a, batch_b), M, N).

    Example:
        >>> x, w, bias = cltensor.ones(8, 3), cltensor.ones(4, 3), cltensor.zeros(4)
        >>> cltensor.gemm(x, w.mT, col_bias=bias, relu=True).shape      # relu(linear(x))
        (8, 4)
    """
    shape = _check_gemm(a, b, out, c, row_bias, col_bias, alpha, beta)
    batch = shape[:-2]
    a_full = _expand(a, batch + a.shape[-2:])
    b_full = _expand(b, batch + b.shape[-2:])
    c_in = _expand(c, shape) if c is not None and beta != 0 else None
    target = out
    readers = [t for t in (a_full, b_full, row_bias, col_bias) if t is not None]
    if out is None or _hazard(out, readers, c_in):
        target = ClTensor.empty_on(shape, a.dtype, a.device)
    gemm_into(a_full, b_full, target, c_in, alpha, beta, row_bias, col_bias, relu)
    if out is None:
        return target
    if target is not out:
        ew.copy_into(out, target)
    return out


def _expand(t, shape):
    """t seen with `shape` (t itself when it has it: gemm_into reads only the view)."""
    return t if t.shape == shape else t.expand(shape)


def _hazard(out, readers, c_in):
    """True when the kernel would write storage it still has to read through another view."""
    return (any(t.storage is out.storage for t in readers) or
            (c_in is not None and ew.overlaps_differently(out, c_in)))
