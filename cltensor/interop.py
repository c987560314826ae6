"""A tensor's ways out of cltensor: pickling (via a host copy) and DLPack export.

Pickling copies the data to the host; unpickling puts it on the default device of the type it
left ("cpu", "cuda", "opencl"; the default device where the machine has none of that type),
so a tensor, a model or an optimizer pickles, and copy.deepcopy keeps its device.

DLPack: a tensor on a CPU device (host memory) exports a host copy, as OpenCL gives no
pointer into a buffer that stays valid while kernels run; numpy and torch read it with
np.from_dlpack / torch.from_dlpack / torch.tensor. A GPU tensor exports only when the consumer
asks for the host (dl_device=(kDLCPU, 0), copy not False); otherwise BufferError.
"""
from .creation import from_numpy
from .device import device_of_type, all_devices
from .tensor import ClTensor

KDL_CPU, KDL_OPENCL = 1, 4  # DLPack's device types

TENSOR_METHODS = {}


def _method(fn):
    TENSOR_METHODS[fn.__name__] = fn
    return fn


@_method
def _move(self, device):
    """A copy on another device (through the host: contexts differ); Tensor.to's transfer."""
    return from_numpy(self.numpy(), device=device)


@_method
def __reduce_ex__(self, protocol):
    if self.requires_grad and not self.is_leaf:
        raise RuntimeError("cannot pickle a non-leaf tensor that requires grad (it carries "
                           "autograd history); pickle x.detach() instead")
    return _rebuild, (type(self), self.numpy(), self.device.type, self.requires_grad)


def _rebuild(cls, array, kind, requires_grad):
    """The tensor __reduce_ex__ pickled, on the default device of type `kind`."""
    t = from_numpy(array, device=device_of_type(kind))
    if cls is not ClTensor:
        base = t
        t = ClTensor.__new__(cls)
        ClTensor.__init__(t, base.storage, base.shape, base.strides, base.offset, base.dtype)
    return t.requires_grad_(requires_grad) if requires_grad else t


@_method
def __dlpack_device__(self):
    """(kDLCPU, 0) on a CPU device; (kDLOpenCL, position in all_devices()) elsewhere."""
    dev = self.device
    if dev.is_cpu:
        return KDL_CPU, 0
    return KDL_OPENCL, next((i for i, d in enumerate(all_devices()) if d is dev), 0)


@_method
def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    """A DLPack capsule of a host copy of the data (see the module's docstring)."""
    to_host = dl_device is not None and tuple(dl_device) == (KDL_CPU, 0)
    if not (self.device.is_cpu or to_host):
        raise BufferError(f"__dlpack__: the tensor is on {self.device}, whose memory the host "
                          f"cannot address; export x.numpy() (or x.cpu() where a CPU device "
                          f"exists), or ask for dl_device=(kDLCPU, 0)")
    if copy is False:
        raise BufferError("__dlpack__: copy=False cannot be honoured: a tensor's data is in an "
                          "OpenCL buffer, and DLPack gets a host copy of it")
    if dl_device is not None and not to_host:
        raise BufferError(f"__dlpack__: cannot export to device {tuple(dl_device)}; only "
                          f"(kDLCPU, 0) is supported")
    return self.numpy().__dlpack__(stream=stream, max_version=max_version)
