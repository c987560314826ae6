"""A convolution's output fed straight to relu: one launch, the ReLU in the convolution's epilogue
(as cltensor native fuses nn.Conv2d and nn.ReLU), for torch.nn models on the device.

The `convolution` kernel picks its algorithm (and raises torch's and cltensor's errors) at once
but defers the launch until the next aten kernel on the device runs. When that kernel is `relu_`
of exactly the convolution's output, the launch writes max(., 0) into that output; when it is
`relu`, the launch writes the ReLU into relu's new result, and the pre-ReLU output is computed
only if it is still alive when the next kernel starts (a program that keeps it and reads it). Any
other kernel, and any other read of the output (`unwrap`, `synchronize`), first runs the launch
as it is. Nothing between two kernels can write the convolution's operands, so a deferred launch
always sees the values the call was given.
"""
import weakref

from ..conv import common, dispatch
from ..conv import function as conv_function
from . import _backend as be

ENABLED = True  # False: every convolution launches at once (for measuring the fusion)


def convolution(x, w, bias, p):
    """The (N, Co, Ho, Wo) output ClTensor of a convolution whose launch is deferred."""
    name = dispatch.choose(p, x.device, "forward", "auto", (x, w, bias))
    out = common.empty(p.out_shape, x, common.layout_of(x))
    launch = _Launch(name, x, w, bias, p)
    if not ENABLED or p.n == 0:
        return launch(out, relu=False)
    be.defer(_Pending(launch, out))
    return out


class _Launch:
    """One convolution's launch, with the operands it was given."""

    def __init__(self, name, x, w, bias, p):
        self.name, self.x, self.w, self.bias, self.p = name, x, w, bias, p

    def __call__(self, out, relu):
        return conv_function.forward_into(self.name, self.x, self.w, self.bias, self.p, out,
                                          relu)


class _Pending:
    """A deferred convolution whose output nothing has read yet."""

    def __init__(self, launch, out):
        self.launch, self.out = launch, out

    def holds(self, storage):
        return storage is self.out.storage

    def settle(self, name, args):
        """Launch before kernel `name` runs on args; its result where the launch computes it."""
        target = args[0] if args and name in ("relu", "relu_") else None
        if target is None or not is_exactly(target, self.out):
            self.launch(self.out, relu=False)
            return None
        if name == "relu_":
            self.launch(self.out, relu=True)
            return target
        result = common.empty(self.out.shape, self.out, common.layout_of(self.out))
        self.launch(result, relu=True)
        be.defer(Unread(self.launch, self.out))
        return be.wrap(result)


class Unread:
    """A result a fused kernel made unnecessary (a convolution output whose ReLU was computed
    fused, a ReLU gradient a convolution's backward took itself): launch(tensor, relu=False)
    computes it only if a tensor still holds its storage when the next kernel (or read) comes."""

    def __init__(self, launch, out):
        self.launch, self.ref = launch, weakref.ref(out.storage)
        self.geometry = (out.shape, out.strides, out.offset, out.dtype)

    def holds(self, storage):
        return storage is self.ref()

    def settle(self, name, args):
        storage = self.ref()
        if storage is not None:
            self.launch(be.ClTensor(storage, *self.geometry), relu=False)
        return None


def is_exactly(t, cl):
    """Whether torch tensor t is exactly ClTensor cl (not a view of a part of it)."""
    return (be.is_opencl(t) and getattr(t.untyped_storage(), "_cl_storage", None) is cl.storage
            and tuple(t.shape) == cl.shape and tuple(t.stride()) == cl.strides
            and t.storage_offset() == cl.offset and be.TO_NUMPY.get(t.dtype) == cl.dtype)
