"""torch storage objects on the opencl device. torch's Python backend API gives the device no
allocator, so torch would crash (null allocator) allocating storage there:
`torch.UntypedStorage(n, device="opencl")`, `TypedStorage(..., device="opencl")` and storage
`.clone()` (which allocates a storage like its own). Those raise a clear error instead; opencl
tensors keep their data in cltensor buffers, so tensor methods (`clone`, `to`, `share_memory_`)
are the way. Their storages count as shared, as CUDA's do, on every torch version."""
import torch

from . import _backend as be

_NO_STORAGE = ("opencl: torch storage objects cannot be allocated on the opencl device (torch's "
               "Python backend API has no allocator for it; tensors keep their data in cltensor "
               "buffers): use tensors, e.g. torch.empty({n}, dtype=torch.uint8, device={where!r}) "
               "or tensor.clone()")


def _on_opencl(device):
    """Whether a storage constructor's device argument names the opencl device (an int names
    torch's current accelerator)."""
    try:
        return device is not None and torch.device(device).type == be.NAME
    except (RuntimeError, TypeError):
        return False  # torch's constructor reports a bad device itself


def _checked_new(base):
    def __new__(cls, *args, **kwargs):  # noqa: N807  (the constructor it replaces)
        device = kwargs.get("device")
        if _on_opencl(device):
            n = args[0] if args and isinstance(args[0], int) else "n"
            raise RuntimeError(_NO_STORAGE.format(n=n, where=str(torch.device(device))))
        return base(cls, *args, **kwargs)
    return __new__


def _device_is_shared(base):
    def is_shared(self):
        return self.device.type == be.NAME or base(self)
    return is_shared


def install():
    """Make torch.UntypedStorage (hence TypedStorage and the legacy storages, which build on
    it) refuse the opencl device before torch's allocator is reached, and report opencl
    storages as shared, as newer torch does for every device but CPU and meta: torch 2.11's
    is_shared answers True for CUDA only, then asks the CPU shared-memory allocators, which
    never hold a device buffer (share_memory_ is a no-op for a PrivateUse1 storage)."""
    torch.UntypedStorage.__new__ = _checked_new(torch._C.StorageBase.__new__)
    torch.UntypedStorage.is_shared = _device_is_shared(torch._C.StorageBase.is_shared)
