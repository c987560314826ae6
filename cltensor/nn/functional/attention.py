"""scaled_dot_product_attention, and the attention math nn.MultiheadAttention builds on:
masks, the softmax that gives zeros for fully masked rows, and the weighted sum of values.
"""
import math

from ... import dtypes as dt
from ...autograd.namespace import arange
from ...tensor import ClTensor
from .activation import softmax
from .dropout import dropout

__all__ = ["scaled_dot_product_attention"]


def _apply_mask(scores, mask, keep_where_true, op):
    """scores with -inf where a bool mask excludes a position, or plus a float mask."""
    if mask is None:
        return scores
    if not isinstance(mask, ClTensor):
        raise TypeError(f"{op}: a mask must be a tensor, got {type(mask).__name__}")
    if mask.dtype == dt.bool_:
        return scores.masked_fill(mask.logical_not() if keep_where_true else mask, -math.inf)
    if not dt.is_floating(mask.dtype):
        raise TypeError(f"{op}: a mask must be bool or floating, got {mask.dtype}")
    return scores + mask


def _safe_softmax(scores):
    """softmax over the last dim, with rows that mask out every key giving zeros (as torch's
    scaled_dot_product_attention) instead of NaN."""
    dead = (scores.detach() == -math.inf).all(-1, keepdim=True)
    return softmax(scores.masked_fill(dead, 0.0), -1).masked_fill(dead, 0.0)


def _attend(q, k, v, scale, dropout_p, masks, safe=True):
    """(softmax(q k^T * scale + masks) with dropout) v, and the attention weights; masks are
    (mask, keep_where_true) pairs."""
    scores = q @ k.transpose(-2, -1) * scale
    for mask, keep in masks:
        scores = _apply_mask(scores, mask, keep, "attention")
    weights = _safe_softmax(scores) if safe else softmax(scores, -1)
    if dropout_p > 0:
        weights = dropout(weights, dropout_p, True)
    return weights @ v, weights


def _causal_mask(q, k):
    """The (L, S) bool mask of torch's is_causal: query i sees keys 0..i."""
    rows = arange(q.shape[-2], device=q.device).unsqueeze(1)
    return rows >= arange(k.shape[-2], device=q.device)


def _check_sdpa(query, key, value, attn_mask, is_causal):
    op = "scaled_dot_product_attention"
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, ClTensor) or t.ndim < 2:
            raise ValueError(f"{op}: {name} must be a tensor with at least 2 dims (..., L, E)")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(f"{op}: query's last dim {query.shape[-1]} must equal key's "
                         f"{key.shape[-1]}")
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"{op}: key and value must have the same sequence length, got "
                         f"{key.shape[-2]} and {value.shape[-2]}")
    if is_causal and attn_mask is not None:
        raise ValueError(f"{op}: Explicit attn_mask should not be set when is_causal=True")


def _grouped(key, value, query, enable_gqa):
    """key and value with their heads (dim -3) repeated to match query's, for grouped-query
    attention."""
    if not enable_gqa or key.ndim < 3 or key.shape[-3] == query.shape[-3]:
        return key, value
    groups = query.shape[-3] // key.shape[-3]
    if groups * key.shape[-3] != query.shape[-3]:
        raise ValueError(f"scaled_dot_product_attention: query's {query.shape[-3]} heads are "
                         f"not a multiple of key's {key.shape[-3]}")
    return key.repeat_interleave(groups, -3), value.repeat_interleave(groups, -3)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """softmax(query key^T * scale + mask) value, as torch.nn.functional's.

    Args:
        query: (..., L, E).
        key: (..., S, E).
        value: (..., S, Ev).
        attn_mask: broadcastable to (..., L, S): bool (True: take part in attention) or a
            float mask added to the scores.
        dropout_p: dropout probability on the attention weights (always applied when > 0).
        is_causal: query i attends to keys 0..i (no attn_mask allowed with it).
        scale: the factor on the scores; 1 / sqrt(E) when None.
        enable_gqa: repeat key's and value's heads (dim -3) to query's count.

    Rows whose every key is masked out give zeros, as in torch.

    Example:
        q = cltensor.randn(2, 4, 5, 8)   # (N, heads, L, E)
        out = scaled_dot_product_attention(q, q, q, is_causal=True)   # (2, 4, 5, 8)
    """
    _check_sdpa(query, key, value, attn_mask, is_causal)
    key, value = _grouped(key, value, query, enable_gqa)
    mask = _causal_mask(query, key) if is_causal else attn_mask
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    return _attend(query, key, value, scale, dropout_p, [(mask, True)])[0]
