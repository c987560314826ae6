"""Resampling and padding on the opencl device: F.interpolate's nearest, nearest-exact, bilinear
and bicubic of images, nearest, nearest-exact and linear of 1-d signals (upsample.cl, forward
and backward) and F.pad's reflect and replicate modes (their backwards through cltensor's
autograd)."""
import torch

import cltensor.nn.functional as F

from ..ops import pool, resample
from ._backend import aten, unwrap
from .math_ops import finish, meta_result, with_out
from .nn_ops import vjp

_aten = torch.ops.aten
# aten name -> (cltensor's mode, whether its arguments include align_corners); the 1-d forms run
# as the 2-d ones over a height of 1 (linear as bilinear)
UPSAMPLE = {"upsample_nearest2d": ("nearest", False),
            "_upsample_nearest_exact2d": ("nearest-exact", False),
            "upsample_bilinear2d": ("bilinear", True), "upsample_bicubic2d": ("bicubic", True),
            "upsample_nearest1d": ("nearest", False),
            "_upsample_nearest_exact1d": ("nearest-exact", False),
            "upsample_linear1d": ("bilinear", True)}


def _split(rest, corners, dims):
    """(align_corners, (scale_h, scale_w)) of the arguments after the sizes (1-d: no height
    scale, the height staying 1)."""
    align, rest = (rest[0], rest[1:]) if corners else (None, rest)
    scales = tuple(rest) + (None,) * (dims - len(rest))
    return align, scales if dims == 2 else (None, *scales)


def _register_upsample(name, mode, corners):
    op, backward_op = getattr(_aten, name).default, getattr(_aten, name + "_backward").default
    dims = 1 if name.endswith("1d") else 2
    planes = (lambda t: t.unsqueeze(2)) if dims == 1 else (lambda t: t)  # (N, C, 1, L)
    size_2d = (lambda size: (1, *size)) if dims == 1 else tuple

    def forward(self, output_size, *rest):
        out = meta_result(op, (self, output_size, *rest), {})
        align, scales = _split(rest, corners, dims)
        return finish(resample.upsample(planes(unwrap(self)), size_2d(output_size), scales, mode,
                                        align), out)

    def backward(grad_output, output_size, input_size, *rest):
        out = meta_result(backward_op, (grad_output, output_size, input_size, *rest), {})
        align, scales = _split(rest, corners, dims)
        g = planes(unwrap(grad_output))
        x_shape = (*input_size[:2], *size_2d(input_size[2:]))
        return finish(resample.upsample_backward(g, x_shape, pool.layout_of(g), scales, mode,
                                                 align), out)
    aten(name)(forward)
    with_out(f"{name}.out", forward)
    aten(f"{name}_backward")(backward)
    with_out(f"{name}_backward.grad_input", backward, "grad_input")


for _name, (_mode, _corners) in UPSAMPLE.items():
    _register_upsample(_name, _mode, _corners)


def _register_pad(name, mode):
    """reflection_pad / replication_pad: F.pad's mode, forward and backward."""
    op, backward_op = getattr(_aten, name).default, getattr(_aten, name + "_backward").default

    def forward(self, padding):
        out = meta_result(op, (self, padding), {})
        return finish(F.pad(unwrap(self), tuple(padding), mode), out)

    def backward(grad_output, self, padding):
        out = meta_result(backward_op, (grad_output, self, padding), {})
        (gx,) = vjp(lambda x: F.pad(x, tuple(padding), mode), [unwrap(self)], [True],
                    unwrap(grad_output))
        return finish(gx, out)
    aten(name)(forward)
    with_out(f"{name}.out", forward)
    aten(f"{name}_backward")(backward)
    with_out(f"{name}_backward.grad_input", backward, "grad_input")


for _dims in ("1d", "2d"):
    _register_pad(f"reflection_pad{_dims}", "reflect")
    _register_pad(f"replication_pad{_dims}", "replicate")
