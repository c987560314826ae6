"""View ops: torch's Meta kernels compute the sizes, strides and offset (and raise torch's
errors); the result carries a ClTensor view of the same device buffer."""
import torch

from ..ops import shape
from ._backend import aten, meta_view, restride, unwrap

# view ops with a backend kernel in torch; the composite ones (select, transpose, permute, expand,
# slice, squeeze, unsqueeze, t, diagonal, ...) reach as_strided and come here through it
VIEW_OPS = ("as_strided", "view", "_reshape_alias", "unfold", "_unsafe_view")


def _register(name):
    op = getattr(torch.ops.aten, name).default
    aten(name)(lambda t, *args: meta_view(op, t, *args))


for _name in VIEW_OPS:
    _register(_name)


@aten("as_strided_")
def as_strided_(self, size, stride, storage_offset=None):
    """The in-place views (squeeze_, unsqueeze_, t_, transpose_, ...) reach this: self takes the
    geometry, bounded by its device buffer (the wrapper's own storage holds no bytes)."""
    try:
        view = shape.as_strided(unwrap(self), size, stride, storage_offset)
    except ValueError as e:
        raise RuntimeError(str(e)) from None  # torch's type for a view outside the storage
    return restride(self, view)
