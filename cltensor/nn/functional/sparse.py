"""Lookup tables: embedding and embedding_bag (sum, mean or max of each bag)."""
import numbers

import numpy as np

from ... import dtypes as dt
from ... import linalg
from ...autograd import Function, no_grad
from ...autograd.namespace import arange, searchsorted, where, zeros
from ...composed.searching import bincount
from ...ops.elementwise import common_device
from ...ops.indexing import one_hot  # noqa: F401  (torch.nn.functional.one_hot)
from .utils import _float_tensor, _tensor

__all__ = ["embedding", "embedding_bag", "one_hot"]


class _Embedding(Function):
    @staticmethod
    def forward(ctx, weight, index, padding_idx, by_freq):
        ctx.index, ctx.padding_idx, ctx.by_freq = index, padding_idx, by_freq
        ctx.shape = weight.shape
        rows = weight.index_select(0, index.reshape(-1))
        return rows.reshape(index.shape + (weight.shape[1],))

    @staticmethod
    def backward(ctx, g):
        n, width = ctx.shape
        g2 = g.reshape(-1, width)
        flat = ctx.index.reshape(-1).to(dt.int64)
        gw = zeros(ctx.shape, dtype=g.dtype, device=g.device).scatter_add(
            0, flat.reshape(-1, 1).expand(g2.shape), g2)
        if ctx.by_freq:  # each row's gradient over the number of times the input picked it
            gw = gw / bincount(flat, minlength=n).to(g.dtype).clamp(min=1).reshape(-1, 1)
        if ctx.padding_idx is not None:
            gw[ctx.padding_idx] = 0.0
        return gw, None, None, None


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of weight picked by the integer tensor input: output shape input.shape + (dim,).

    Args:
        input: int32/int64 indices in [0, num_embeddings).
        weight: (num_embeddings, embedding_dim).
        padding_idx: a row whose gradient stays zero (negative counts from the end).
        max_norm: if given, the rows that input picks and whose norm_type-norm exceeds it are
            first scaled in place, in weight itself, to that norm (as torch).
        scale_grad_by_freq: each row's gradient divided by the number of times input picks it.
        sparse: sparse gradients are not supported (NotImplementedError).

    Example:
        >>> w = cltensor.arange(6.0).reshape(3, 2)
        >>> F.embedding(cltensor.tensor([2, 0]), w).tolist()
        [[4.0, 5.0], [0.0, 1.0]]
    """
    op = "embedding"
    padding_idx = _table_inputs(input, weight, padding_idx, op, [input, weight])
    _table_options(max_norm, sparse, op)
    if max_norm is not None:
        _renorm_rows(weight, input, max_norm, norm_type)
    return _Embedding.apply(weight, input, padding_idx, bool(scale_grad_by_freq))


def _table_options(max_norm, sparse, op):
    """Checks embedding's and embedding_bag's max_norm and sparse."""
    if sparse:
        raise NotImplementedError(f"{op}: sparse gradients are not supported (sparse=True)")
    if max_norm is not None and (isinstance(max_norm, bool) or
                                 not isinstance(max_norm, numbers.Real) or not max_norm >= 0):
        raise ValueError(f"{op}: max_norm must be a non-negative number or None, got "
                         f"{max_norm!r}")


def _renorm_rows(weight, input, max_norm, norm_type):
    """In place, without autograd: the rows of weight that input picks and whose norm_type-norm
    exceeds max_norm, scaled by max_norm / (norm + 1e-7) (torch's embedding_renorm_)."""
    flat = input.reshape(-1).to(dt.int64)
    with no_grad():
        rows = weight.index_select(0, flat)
        norms = linalg.vector_norm(rows, norm_type, dim=1, keepdim=True)
        scale = where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        # NOTE: a row picked twice is written twice with the same values
        weight.index_copy_(0, flat, rows * scale)


def _table_inputs(input, weight, padding_idx, op, on_device):
    """Checks embedding's and embedding_bag's indices, weight, the devices of the tensors
    `on_device` and padding_idx; returns padding_idx as a row (or None)."""
    _tensor(input, "input", op)
    _float_tensor(weight, "weight", op)
    if input.dtype not in (dt.int32, dt.int64):
        raise TypeError(f"{op}: indices must be int32 or int64, got {input.dtype}")
    if weight.ndim != 2:
        raise ValueError(f"{op}: weight must be 2-d (num_embeddings, embedding_dim), got shape "
                         f"{weight.shape}")
    common_device(on_device, op)
    if padding_idx is None:
        return None
    n = weight.shape[0]
    if not isinstance(padding_idx, numbers.Integral) or not -n <= padding_idx < n:
        raise ValueError(f"{op}: padding_idx must be within num_embeddings ({n}), got "
                         f"{padding_idx!r}")
    return int(padding_idx) % n


EMBEDDING_BAG_MODES = ("sum", "mean", "max")


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """The sums, means or maxima of bags of weight's rows, without the (bags, length, dim)
    intermediate of embedding().

    Args:
        input: int32/int64 indices: (B, L) for B bags of L, or 1-d with `offsets`.
        weight: (num_embeddings, embedding_dim), floating point.
        offsets: with a 1-d input, the start of each bag in it (starting at 0, non-decreasing);
            with include_last_offset, one more: the input's length, where the last bag ends.
        mode: "sum", "mean" or "max"; an empty bag gives zeros.
        per_sample_weights: (mode "sum") a weight per index, input's shape and weight's dtype;
            differentiable.
        padding_idx: entries with this index belong to no bag (nor to mean's counts).
        max_norm, norm_type, scale_grad_by_freq, sparse: as embedding()'s (scale_grad_by_freq
            not in mode "max", as in torch).

    Shape:
        output (B, embedding_dim)

    In mode "max" ties between different rows share the gradient (torch gives it to one).

    Example:
        >>> w = cltensor.arange(6.0).reshape(3, 2)
        >>> F.embedding_bag(cltensor.tensor([0, 2, 1]), w, cltensor.tensor([0, 2]),
        ...                 mode="sum").tolist()
        [[4.0, 6.0], [2.0, 3.0]]
    """
    op = "embedding_bag"
    if mode not in EMBEDDING_BAG_MODES:
        raise ValueError(f"{op}: mode must be one of {EMBEDDING_BAG_MODES}, got {mode!r}")
    if scale_grad_by_freq and mode == "max":
        raise ValueError(f"{op}: mode 'max' cannot scale gradients by frequency "
                         "(scale_grad_by_freq), as in torch")
    _table_options(max_norm, sparse, op)
    padding_idx = _table_inputs(input, weight, padding_idx, op, [
        t for t in (input, weight, offsets, per_sample_weights) if t is not None])
    if per_sample_weights is not None:
        _sample_weights(per_sample_weights, input, weight, mode, op)
    idx = input.reshape(-1)
    bags, bag = _bags(input, offsets, include_last_offset, op)
    if max_norm is not None:
        _renorm_rows(weight, idx, max_norm, norm_type)
    rows = embedding(idx, weight, scale_grad_by_freq=scale_grad_by_freq)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1, 1)
    if padding_idx is not None:
        # NOTE: padding entries go to a spare bag (row `bags`) that is dropped at the end
        bag = where(idx == padding_idx, bags, bag)
    out = zeros((bags + 1, weight.shape[1]), dtype=weight.dtype, device=weight.device)
    if mode == "max":
        out = out.scatter_reduce(0, bag.reshape(-1, 1).expand(rows.shape), rows, "amax",
                                 include_self=False)
    else:
        out = out.index_add(0, bag, rows)
    if mode == "mean":
        counts = bincount(bag, minlength=bags + 1).to(weight.dtype).clamp(min=1)
        out = out / counts.reshape(-1, 1)
    return out[:bags]


def _bags(input, offsets, include_last_offset, op):
    """(number of bags, the int64 bag of each of input's entries, flattened)."""
    n = input.numel()
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(f"{op}: offsets must be None for a 2-d input (each row is a bag)")
        length = max(input.shape[1], 1)
        return input.shape[0], arange(n, device=input.device) // length
    if input.ndim != 1:
        raise ValueError(f"{op}: input must be 1-d (with offsets) or 2-d (bags, length), got "
                         f"shape {input.shape}")
    if offsets is None:
        raise ValueError(f"{op}: a 1-d input needs offsets (the start of each bag)")
    _tensor(offsets, "offsets", op)
    if offsets.ndim != 1 or offsets.dtype not in (dt.int32, dt.int64):
        raise ValueError(f"{op}: offsets must be a 1-d int32/int64 tensor, got shape "
                         f"{offsets.shape} of {offsets.dtype}")
    # NOTE: the offsets are checked on the host (one small read): a bad one would put entries
    # in the wrong bags without any error
    starts = offsets.numpy().astype(np.int64)
    if include_last_offset:
        if starts.size == 0 or starts[-1] != n:
            raise ValueError(f"{op}: with include_last_offset the last offset must be the "
                             f"input's length {n}, got {starts[-1:].tolist()}")
        starts = starts[:-1]
    if starts.size and starts[0] != 0:
        raise ValueError(f"{op}: offsets[0] must be 0 (the first bag starts the input), got "
                         f"{starts[0]}")
    if (np.diff(starts) < 0).any() or (starts.size and starts[-1] > n):
        raise ValueError(f"{op}: offsets must be non-decreasing and at most the input's length "
                         f"{n}, got {offsets.tolist()}")
    if starts.size == 0:
        if n:
            raise ValueError(f"{op}: offsets hold no bag for an input of {n} indices")
        return 0, zeros(0, dtype=dt.int64, device=input.device)
    found = offsets[:starts.size].to(dt.int64)
    bag = searchsorted(found, arange(n, device=input.device), right=True) - 1
    return starts.size, bag


def _sample_weights(psw, input, weight, mode, op):
    """Checks per_sample_weights against the input, weight and mode."""
    _tensor(psw, "per_sample_weights", op)
    if mode != "sum":
        raise ValueError(f"{op}: per_sample_weights needs mode='sum', got mode={mode!r}")
    if psw.shape != input.shape:
        raise ValueError(f"{op}: per_sample_weights must have the input's shape {input.shape}, "
                         f"got {psw.shape}")
    if psw.dtype != weight.dtype:
        raise TypeError(f"{op}: per_sample_weights must have weight's dtype {weight.dtype}, got "
                        f"{psw.dtype}")
