"""ReLU's gradient fed straight to the convolution's backward: one pass fewer, the mask applied
inside the convolution's backward passes (their recorded launches replayed), as cltensor native
takes the gradient of its fused Conv2d and ReLU.

torch takes relu's gradient as threshold_backward(grad, relu's output, 0). For float32/64
operands of one shape on one device, that kernel defers its launch until the next aten kernel
runs; when that kernel is convolution_backward of exactly its result (a plain 2-d or 1-d
convolution), the backward takes the gradient and the ReLU's output instead, and the thresholded
gradient is computed only if a tensor still holds it when the next kernel starts. Any other
kernel, and any other read of the result (`unwrap`, `synchronize`), first runs the launch as it
is. Anything else (another threshold, dtype or shape) takes threshold_backward's general path.
"""

import torch

from ..ops import elementwise as ew
from ..tensor import ClTensor
from . import _backend as be
from . import conv_ops, lazy_relu

ENABLED = True  # False: threshold_backward launches at once (for measuring the fusion)
_FLOATS = (torch.float32, torch.float64)


def deferred(grad_output, y, threshold):
    """threshold_backward(grad_output, y, threshold) as an opencl tensor whose launch is
    deferred, or None where the fast path does not apply."""
    if not (ENABLED and threshold == 0 and grad_output.dtype is y.dtype and y.dtype in _FLOATS
            and grad_output.shape == y.shape and be.is_opencl(grad_output) and be.is_opencl(y)):
        return None
    g, x = be.unwrap(grad_output), be.unwrap(y)
    if g.device is not x.device:
        return None  # the general path raises torch's error
    out = ClTensor.empty_on(x.shape, x.dtype, x.device)
    be.defer(_Pending(g, x, out))
    return be.wrap(out)


def _launch(g, y, out):
    """out = g where y > 0 (or NaN), else 0: torch's threshold_backward at threshold 0."""
    ew.ternary("relu_backward", [g, y], out.dtype, out=out)


class _Pending:
    """A thresholded gradient nothing has read yet."""

    def __init__(self, g, y, out):
        self.g, self.y, self.out = g, y, out

    def holds(self, storage):
        return storage is self.out.storage

    def settle(self, name, args):
        """Launch before kernel `name` runs on args, or run that kernel, a convolution's
        backward of the result, with the ReLU folded in and return its gradients."""
        if name == "convolution_backward" and lazy_relu.is_exactly(args[0], self.out):
            try:
                grads = conv_ops.backward_through_relu(args, self.g, self.y)
            except Exception:
                _launch(self.g, self.y, self.out)
                raise
            if grads is not None:
                g, y = self.g, self.y  # NOTE: not self, whose out would keep the result alive
                be.defer(lazy_relu.Unread(lambda t, relu=False: _launch(g, y, t), self.out))
                return grads
        _launch(self.g, self.y, self.out)
        return None
