"""torch storage objects on the opencl device. torch's Python backend API gives the device no
allocator, so torch would crash (null allocator) allocating storage there:
`torch.UntypedStorage(n, device="opencl")`, `TypedStorage(..., device="opencl")` and storage
`.clone()` (which allocates a storage like its own). Those raise a clear error instead; opencl
tensors keep their data in cltensor buffers, so tensor methods (`clone`, `to`, `share_memory_`)
are the way."""
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


def install():
    """Make torch.UntypedStorage (hence TypedStorage and the legacy storages, which build on
    it) refuse the opencl device before torch's allocator is reached."""
    torch.UntypedStorage.__new__ = _checked_new(torch._C.StorageBase.__new__)
