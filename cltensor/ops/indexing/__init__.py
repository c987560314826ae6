"""Advanced indexing, gather/scatter, masks and nonzero (kernels: cl_kernels/indexing.cl).

Every index tensor is checked on the device before any data moves: normalize_index converts it
to int64, wraps negative values where torch does, writes it to one contiguous buffer and raises a
flag that the host reads back; an IndexError then names the index, the dim and the size, and
nothing has been written.
"""

# the package's modules, lowest first: common (kernels, index checks, plans) <- gather_scatter
# (index_select, gather, scatter*) <- masks (masked_*, nonzero, one_hot) <- keys (x[key],
# x[key] = v, index_put, put, the view scatters) <- slices (index_add/copy/fill)
from .common import _minmax  # noqa: F401  (sort and searching use it)
from .keys import (check_put, diagonal_scatter, getitem, index_put, index_put_,  # noqa: F401
                   masked_select, put, put_, select_scatter, setitem, slice_key,
                   slice_scatter, tensor_getitem, tensor_setitem, view_scatter)
from .masks import masked_fill, masked_fill_, masked_scatter, masked_scatter_, nonzero, one_hot
from .gather_scatter import (gather, index_select, scatter, scatter_, scatter_add,
                             scatter_add_, scatter_reduce, scatter_reduce_)
from .slices import index_add, index_add_, index_copy, index_copy_, index_fill, index_fill_

TENSOR_METHODS = {
    "index_select": index_select, "gather": gather, "scatter": scatter, "scatter_": scatter_,
    "scatter_add": scatter_add, "scatter_add_": scatter_add_, "masked_fill": masked_fill,
    "masked_fill_": masked_fill_, "masked_select": masked_select, "nonzero": nonzero,
    "scatter_reduce": scatter_reduce, "scatter_reduce_": scatter_reduce_,
    "masked_scatter": masked_scatter, "masked_scatter_": masked_scatter_,
    "index_put": index_put, "index_put_": index_put_, "index_add": index_add,
    "index_add_": index_add_, "index_copy": index_copy, "index_copy_": index_copy_,
    "index_fill": index_fill, "index_fill_": index_fill_, "put": put, "put_": put_,
    "select_scatter": select_scatter, "slice_scatter": slice_scatter,
    "diagonal_scatter": diagonal_scatter,
    "__getitem__": tensor_getitem, "__setitem__": tensor_setitem,
}

__all__ = ["index_select", "gather", "scatter", "scatter_add", "scatter_reduce", "masked_fill",
           "masked_select", "masked_scatter", "nonzero", "one_hot", "index_put", "index_put_",
           "index_add", "index_copy", "index_fill", "put", "select_scatter", "slice_scatter",
           "diagonal_scatter"]

