"""Ops whose gradient comes from composing differentiable ops: no Function of their own."""
from ...ops.indexing import check_put, slice_key
from ...ops.reduce import return_types
from ...tensor import ClTensor
from .indexing import AsStrided, IndexPut, ViewScatter
from .pointwise import Frexp, _where
from .reduce import Amax, Amin, MaxDim, MinDim, _reduced_dims
from .shape import Cat


def composites(ns, cls):
    """name -> (raw op, differentiable composition) for ops that need no Function of their own."""
    def outer(a, b):
        return a.unsqueeze(1) * b.unsqueeze(0)

    return {"outer": (ns["outer"], outer), "ger": (ns["ger"], outer),
            "var": (ns["var"], _var_composite), "std": (ns["std"], _std_composite),
            "logsumexp": (ns["logsumexp"], _logsumexp_composite),
            "cat": (ns["cat"], _cat_composite), "concat": (ns["concat"], _cat_composite),
            "concatenate": (ns["concatenate"], _cat_composite),
            "stack": (ns["stack"], _stack_composite),
            "max": (ns["max"], _extreme_composite("max", ns)),
            "min": (ns["min"], _extreme_composite("min", ns)),
            "index_put": (ns["index_put"], lambda x, indices, values, accumulate=False:
                          IndexPut.apply(x, tuple(indices), values, accumulate)),
            "sort": (ns["sort"], _picked(ns["sort"], "sort", 0)),
            "topk": (ns["topk"], _picked(ns["topk"], "topk", 1)),
            "as_strided": (ns["as_strided"], AsStrided.apply), "put": (ns["put"], _put),
            "frexp": (ns["frexp"], Frexp.apply), **_view_scatters(ns)}


def _view_scatters(ns):
    def select(x, src, dim, index):
        return ViewScatter.apply(x, src, "select_scatter", "select", dim, index)

    def slices(x, src, dim=0, start=None, end=None, step=1):
        return ViewScatter.apply(x, src, "slice_scatter", "_basic_index",
                                 slice_key(x, dim, start, end, step))

    def diagonal(x, src, offset=0, dim1=0, dim2=1):
        return ViewScatter.apply(x, src, "diagonal_scatter", "diagonal", offset, dim1, dim2)

    return {"select_scatter": (ns["select_scatter"], select),
            "slice_scatter": (ns["slice_scatter"], slices),
            "diagonal_scatter": (ns["diagonal_scatter"], diagonal)}


def _picked(raw, name, dim_at):
    """sort / topk made differentiable: the indices from raw on the detached input, the values
    gathered from the input along the op's dim (argument dim_at after x, default -1), so that
    Gather's backward sends each value's gradient to where it came from."""

    def op(x, *args, **kwargs):
        indices = raw(x.detach(), *args, **kwargs).indices
        dim = kwargs.get("dim", args[dim_at] if len(args) > dim_at else -1)
        if x.ndim == 0:
            values = x.reshape(1).gather(0, indices.reshape(-1)).reshape(indices.shape)
        else:
            values = x.gather(dim, indices)
        return getattr(return_types, name)(values, indices)
    return op


def _extreme_composite(name, ns):
    """max/min: of everything, over a dim (values, indices), or against another tensor."""
    all_cls, dim_cls = (Amax, MaxDim) if name == "max" else (Amin, MinDim)

    def op(x, dim=None, keepdim=False):
        if isinstance(dim, ClTensor):
            return ns["maximum" if name == "max" else "minimum"](x, dim)
        if dim is None:
            return all_cls.apply(x, None, False)
        return getattr(return_types, name)(*dim_cls.apply(x, dim, keepdim))
    return op


def _var_composite(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    c = 1 if correction is None and unbiased in (None, True) else (correction or 0)
    dims = _reduced_dims(x, dim)
    count = 1
    for d in dims:
        count *= x.shape[d]
    centered = x - x.mean(dims, keepdim=True)
    return (centered * centered).sum(dims, keepdim=keepdim) / max(count - c, 0)


def _std_composite(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _var_composite(x, dim, unbiased, keepdim, correction=correction).sqrt()


def _logsumexp_composite(x, dim, keepdim=False):
    dims = _reduced_dims(x, dim)
    m = x.detach().amax(dims, keepdim=True)
    m = _where(m.isinf(), 0.0, m)
    out = (x - m).exp().sum(dims, keepdim=True).log() + m
    return out if keepdim else out.squeeze(dims)


def _cat_composite(tensors, dim=0):
    return Cat.apply(dim, *tensors)


def _stack_composite(tensors, dim=0):
    nd = tensors[0].ndim + 1 if tensors else 1
    return Cat.apply(dim % nd, *[t.unsqueeze(dim % nd) for t in tensors])


def _put(x, index, source, accumulate=False):
    """put as IndexPut on x flattened (its checks first)."""
    check_put(x, index, source, "put")
    flat = IndexPut.apply(x.reshape(-1), (index.reshape(-1),), source.reshape(-1), accumulate)
    return flat.reshape(x.shape)
