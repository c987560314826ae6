"""View ops: torch's Meta kernels compute the sizes, strides and offset (and raise torch's
errors); the result carries a ClTensor view of the same device buffer."""
import torch

from ._backend import aten, meta_view

# view ops with a backend kernel in torch; the composite ones (select, transpose, permute, expand,
# slice, squeeze, unsqueeze, t, diagonal, ...) reach as_strided and come here through it
VIEW_OPS = ("as_strided", "view", "_reshape_alias", "unfold", "_unsafe_view")


def _register(name):
    op = getattr(torch.ops.aten, name).default
    aten(name)(lambda t, *args: meta_view(op, t, *args))


for _name in VIEW_OPS:
    _register(_name)
