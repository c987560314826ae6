"""Margin and embedding losses: ranking, hinge, soft margin, multi-class and
multi-label margins, cosine embedding and triplet losses.
"""
import numpy as np

from ... import dtypes as dt
from ...autograd.functions import _where
from ...autograd.namespace import from_numpy, minimum
from ...ops.elementwise import common_device
from .activation import logsigmoid, relu
from .distance import pairwise_distance
from .utils import (_float_tensor, _loss_operand, _number, _per_channel, _reduced, _reduction,
                    _same_shapes, _tensor)

__all__ = ["cosine_embedding_loss", "hinge_embedding_loss", "margin_ranking_loss",
           "multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss",
           "soft_margin_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss"]


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                        reduction="mean"):
    """max(0, -target * (input1 - input2) + margin), reduced; target holds 1 or -1.

    Example:
        >>> F.margin_ranking_loss(cltensor.tensor([1.0]), cltensor.tensor([2.0]),
        ...                       cltensor.tensor([1.0])).item()
        1.0
    """
    op = "margin_ranking_loss"
    reduction = _reduction(reduction, op, size_average, reduce)
    _same_shapes(op, input1=input1, input2=input2, target=target)
    loss = relu(-target * (input1 - input2) + _number(margin, "margin", op))
    return _reduced(loss, reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """input where target is 1, max(0, margin - input) where it is -1, reduced.

    Example:
        >>> F.hinge_embedding_loss(cltensor.tensor([0.3, 2.0]), cltensor.tensor([-1.0, 1.0]),
        ...                        reduction="sum").item()
        2.7
    """
    op = "hinge_embedding_loss"
    reduction = _reduction(reduction, op, size_average, reduce)
    _same_shapes(op, input=input, target=target)
    hinge = relu(_number(margin, "margin", op) - input)
    loss = _where(target != 1, hinge, 0.0) + _where(target != -1, input, 0.0)
    return _reduced(loss, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input)), reduced (target 1 or -1).

    Example:
        >>> round(F.soft_margin_loss(cltensor.tensor([0.0]), cltensor.tensor([1.0])).item(), 4)
        0.6931
    """
    op = "soft_margin_loss"
    reduction = _reduction(reduction, op, size_average, reduce)
    _same_shapes(op, input=input, target=target)
    return _reduced(-logsigmoid(target * input), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """The mean over the C classes of -(t log sigmoid(x) + (1 - t) log sigmoid(-x)) (times
    weight, (C,)), per sample of an (N, C) input, reduced over the samples.

    Example:
        >>> x = cltensor.zeros(1, 2); t = cltensor.tensor([[1.0, 0.0]])
        >>> round(F.multilabel_soft_margin_loss(x, t).item(), 4)
        0.6931
    """
    op = "multilabel_soft_margin_loss"
    reduction = _reduction(reduction, op, size_average, reduce)
    _same_shapes(op, input=input, target=target)
    if input.ndim == 0:
        raise ValueError(f"{op}: input must have a class dim, got a 0-d tensor")
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        _loss_operand(weight, "weight", input, op)
        loss = loss * weight
    return _reduced(loss.mean(input.ndim - 1), reduction)


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos(input1, input2) where target is 1, max(0, cos - margin) where it is -1, cos along
    the feature dim of (N, D) (or (D,)) inputs, reduced.

    Example:
        >>> a = cltensor.tensor([[1.0, 0.0]])
        >>> F.cosine_embedding_loss(a, a, cltensor.tensor([1.0])).item()
        0.0
    """
    op = "cosine_embedding_loss"
    reduction = _reduction(reduction, op, size_average, reduce)
    _same_shapes(op, input1=input1, input2=input2)
    _tensor(target, "target", op)
    if input1.ndim not in (1, 2) or target.shape != input1.shape[:-1]:
        raise ValueError(f"{op}: expected (N, D) or (D,) inputs and an (N,) or () target, got "
                         f"inputs of shape {input1.shape} and target of shape {target.shape}")
    d, tiny = input1.ndim - 1, 1e-12  # NOTE: torch's EPSILON, added to each squared magnitude
    dot = (input1 * input2).sum(d)
    cos = dot / (((input1 * input1).sum(d) + tiny) * ((input2 * input2).sum(d) + tiny)).sqrt()
    loss = _where(target == 1, 1 - cos, 0.0) + \
        _where(target == -1, relu(cos - _number(margin, "margin", op)), 0.0)
    return _reduced(loss, reduction)


def _class_rows(input, target, op):
    """An (N, C) or (C,) input with its int64 class targets (N,) or (), as (N, C) and (N,)."""
    _float_tensor(input, "input", op)
    _tensor(target, "target", op)
    if input.ndim not in (1, 2) or target.dtype != dt.int64 or target.shape != input.shape[:-1]:
        raise ValueError(f"{op}: expected an (N, C) or (C,) input and int64 targets of shape "
                         f"(N,) or (), got input {input.shape} and target {target.dtype} "
                         f"{target.shape}")
    common_device([input, target], op)
    if target.numel() and not ((target >= 0) & (target < input.shape[-1])).all().item():
        raise IndexError(f"{op}: target out of bounds for {input.shape[-1]} classes")
    return input.reshape(-1, input.shape[-1]), target.reshape(-1)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """The multi-class hinge loss: per sample, the sum over classes i != y of
    w_y max(0, margin - x[y] + x[i])^p, divided by C, reduced; p is 1 or 2.

    Example:
        >>> F.multi_margin_loss(cltensor.tensor([[0.1, 0.2, 0.4, 0.8]]),
        ...                     cltensor.tensor([3])).item()   # (0.3 + 0.4 + 0.6) / 4
    """
    op = "multi_margin_loss"
    reduction = _reduction(reduction, op, size_average, reduce)
    if p not in (1, 2):
        raise ValueError(f"{op}: only p == 1 and p == 2 are supported, got {p!r}")
    x, t = _class_rows(input, target, op)
    weight = _per_channel(weight, "weight", input, input.shape[-1], op)
    picked = t.unsqueeze(1)
    z = relu(_number(margin, "margin", op) - x.gather(1, picked) + x)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight.index_select(0, t).unsqueeze(1)
    z = z.scatter(1, picked, 0.0)
    return _reduced(z.sum(1).reshape(input.shape[:-1]) / input.shape[-1], reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Per sample, the sum over its target classes j and the other classes i of
    max(0, 1 - (x[j] - x[i])), divided by C, reduced; target (int64, the input's shape) lists
    the target classes, ended by the first -1.

    Example:
        >>> F.multilabel_margin_loss(cltensor.tensor([[0.1, 0.2, 0.4, 0.8]]),
        ...                          cltensor.tensor([[3, 0, -1, 1]])).item()   # 0.85
    """
    op = "multilabel_margin_loss"
    reduction = _reduction(reduction, op, size_average, reduce)
    _float_tensor(input, "input", op)
    _tensor(target, "target", op)
    if input.ndim not in (1, 2) or target.dtype != dt.int64 or target.shape != input.shape:
        raise ValueError(f"{op}: expected an (N, C) or (C,) input and int64 targets of its "
                         f"shape, got input {input.shape} and target {target.dtype} "
                         f"{target.shape}")
    common_device([input, target], op)
    x = input.reshape(-1, input.shape[-1])
    slots, pairs = _multilabel_pairs(target.reshape(x.shape).numpy(), op)
    xj = x.gather(1, from_numpy(slots, device=x.device))
    hinge = relu(1 - xj.unsqueeze(2) + x.unsqueeze(1))
    mask = from_numpy(pairs.astype(np.dtype(input.dtype)), device=x.device)
    loss = (hinge * mask).sum((1, 2)) / input.shape[-1]
    return _reduced(loss.reshape(input.shape[:-1]), reduction)


def _multilabel_pairs(target, op):
    """(the target class of each slot (0 past the list), the (N, slot, class) 0/1 mask of the
    pairs counted: a listed slot and a class not listed)."""
    n, c = target.shape
    listed = np.cumprod(target >= 0, axis=1).astype(bool)
    if (target[listed] >= c).any():
        raise IndexError(f"{op}: target out of bounds for {c} classes")
    slots = np.where(listed, target, 0)
    is_target = np.zeros((n, c), bool)
    rows = np.broadcast_to(np.arange(n)[:, None], (n, c))
    is_target[rows[listed], slots[listed]] = True
    return slots, listed[:, :, None] & ~is_target[:, None, :]


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(0, d(a, p) - d(a, n) + margin), d the pairwise_distance of order p; swap: d(a, n)
    replaced by d(p, n) where smaller. Reduced.

    Example:
        >>> a = cltensor.randn(8, 16)
        >>> F.triplet_margin_loss(a, a + 0.1, -a).item()
    """
    op = "triplet_margin_loss"
    reduction = _reduction(reduction, op, size_average, reduce)

    def distance(x1, x2):
        return pairwise_distance(x1, x2, p, eps)

    return _triplet(op, anchor, positive, negative, distance, margin, swap, reduction)


def _triplet(op, anchor, positive, negative, distance, margin, swap, reduction):
    _float_tensor(anchor, "anchor", op)
    shapes = {n: _tensor(t, n, op).ndim for n, t in
              (("anchor", anchor), ("positive", positive), ("negative", negative))}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"{op}: the anchor, positive and negative tensors are expected to have "
                         f"the same number of dimensions, got {shapes}")
    d_an = distance(anchor, negative)
    if swap:
        d_an = minimum(d_an, distance(positive, negative))
    loss = relu(distance(anchor, positive) - d_an + _number(margin, "margin", op))
    return _reduced(loss, reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """triplet_margin_loss with a distance of one's own (default pairwise_distance); margin
    must be positive.

    Example:
        >>> F.triplet_margin_with_distance_loss(a, p, n, distance_function=lambda x, y:
        ...     1 - F.cosine_similarity(x, y))
    """
    op = "triplet_margin_with_distance_loss"
    reduction = _reduction(reduction, op)
    if not _number(margin, "margin", op) > 0:
        raise ValueError(f"{op}: expected margin to be greater than 0, got {margin} instead")
    distance = pairwise_distance if distance_function is None else distance_function
    return _triplet(op, anchor, positive, negative, distance, margin, swap, reduction)
