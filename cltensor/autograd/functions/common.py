"""Helpers shared by the Function modules: raw ops, and gradients brought to an input's shape."""
from ... import dtypes as dt
from ...tensor import ClTensor
from ..engine import RAW, sum_to_shape


def _is_t(x):
    return isinstance(x, ClTensor)


def _reduce_to(g, x):
    """g summed to x's shape and cast to x's dtype; None when x is not a tensor."""
    if not _is_t(x):
        return None
    return sum_to_shape(g, x.shape).to(x.dtype) if dt.is_floating(x.dtype) else None


def _op(name):
    """The raw (non-recording) op or ClTensor method of that name, as it was before autograd
    wrapped it."""
    return RAW[name]


def _scaled(t, factor):
    return t if factor == 1 else t * factor
