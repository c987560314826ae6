"""Convolution: conv2d with torch's semantics over six algorithms, chosen per device and
problem (dispatch.py), forward and backward.

    im2col          im2col.py     column buffer (chunked) + the GEMM engine; col2im backward
    implicit_gemm   implicit.py   the gather inside the GEMM tile loads; no column buffer;
                                  cached weight panels
    winograd        winograd.py   F(2x2, 3x3) and F(2x2, 5x5): 3x3 and 5x5 kernels, stride 1,
                                  dilation 1; cached filter transform
    winograd_4x4    winograd.py   F(4x4, 3x3) and F(4x4, 5x5), likewise: fewer multiplications,
                                  larger rounding errors (still within 1e-5 relative)
    gemm_1x1        gemm1x1.py    a 1x1 unpadded convolution is a plain GEMM
    s2d_winograd    s2d.py        a strided convolution as a stride-1 one over the space-to-depth
                                  input, by winograd_4x4 (kernels of 3x3 or 5x5 stride blocks)

conv3d and conv_transpose3d (volume.py; torch.nn.functional's in cltensor.nn.functional) run
as one conv2d (conv_transpose2d) over the depth taps gathered as channels.
conv_transpose2d (transposed.py) runs as the passes of the convolution it transposes.
`conv_algorithms(...)` reports each algorithm's eligibility, workspace and (in benchmark mode,
cltensor.backends.benchmark = True) its time for a problem.
"""
from . import common, dispatch, implicit_gpu, winograd
from .dispatch import ALGORITHMS, PASSES  # noqa: F401
from .function import Conv2dFunction, conv2d  # noqa: F401
from .params import ConvParams, make_params  # noqa: F401
from .query import conv_algorithms
from .transposed import ConvTranspose2dFunction, conv_transpose2d  # noqa: F401

__all__ = ["conv2d", "conv_transpose2d", "conv_algorithms"]


def clear_cache():
    """Forget the algorithm choices, the implicit-GEMM kernels chosen per problem, Winograd's
    replayed launches and the cached weight transforms (Winograd's filters, implicit GEMM's
    panels); the benchmark-mode file stays; cltensor.clear_cache() forgets the kernels."""
    dispatch.clear_cache()
    winograd.clear_plans()
    common.clear_per_weight()
    implicit_gpu.clear_cache()
