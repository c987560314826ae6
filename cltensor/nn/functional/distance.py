"""Distances between rows: cosine_similarity, pairwise_distance, pdist."""
import numpy as np

from ...autograd.namespace import broadcast_shapes, clamp, from_numpy
from ...tensor import _norm_dim
from .normalization import _norm_order, _vector_norm
from .utils import _float_tensor, _loss_operand, _number

__all__ = ["cosine_similarity", "pairwise_distance", "pdist"]


def _operand_pair(x1, x2, op):
    """x1 and x2 (floating, of one dtype and device) expanded to their broadcast shape."""
    _float_tensor(x1, "x1", op)
    _loss_operand(x2, "x2", x1, op)
    try:
        shape = broadcast_shapes(x1.shape, x2.shape)
    except ValueError:
        raise ValueError(f"{op}: x1 of shape {x1.shape} and x2 of shape {x2.shape} do not "
                         f"broadcast") from None
    return x1.expand(shape), x2.expand(shape)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 * x2) / (max(||x1||, eps) max(||x2||, eps)) along dim (the operands broadcast).

    Example:
        >>> F.cosine_similarity(cltensor.tensor([[1.0, 0.0]]), cltensor.tensor([[1.0, 1.0]]))
    """
    op = "cosine_similarity"
    x1, x2 = _operand_pair(x1, x2, op)
    d = _norm_dim(dim, max(x1.ndim, 1), op)
    eps = _number(eps, "eps", op)
    n1, n2 = (clamp(_vector_norm(x, 2, d, keepdim=True), min=eps) for x in (x1, x2))
    return ((x1 / n1) * (x2 / n2)).sum(d)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p over the last dim (the operands broadcast).

    Example:
        >>> F.pairwise_distance(cltensor.tensor([[3.0, 4.0]]), cltensor.zeros(1, 2), eps=0.0)
    """
    op = "pairwise_distance"
    x1, x2 = _operand_pair(x1, x2, op)
    diff = x1 - x2 + _number(eps, "eps", op)
    if not diff.ndim:
        diff = diff.reshape(1)
    return _vector_norm(diff, _norm_order(p, op), -1, keepdim)


def pdist(input, p=2):
    """The p-norm distances between the rows of an (N, M) input, pairs i < j in row-major
    order: N (N - 1) / 2 of them.

    Example:
        >>> F.pdist(cltensor.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])).tolist()
        [5.0, 1.0, 4.242640687119285]
    """
    op = "pdist"
    if _float_tensor(input, "input", op).ndim != 2:
        raise ValueError(f"{op}: expected a 2-d (N, M) input, got shape {input.shape}")
    i, j = np.triu_indices(input.shape[0], 1)
    rows = [from_numpy(a.astype(np.int64), device=input.device) for a in (i, j)]
    diff = input.index_select(0, rows[0]) - input.index_select(0, rows[1])
    return _vector_norm(diff, _norm_order(p, op), 1)
