"""Pinned host memory with the opencl device registered: `DataLoader(pin_memory=True)` and
`tensor.pin_memory()` pin for torch's current accelerator, and for a PrivateUse1 backend torch
asks for a pinned-memory allocator that its Python backend API cannot provide (a
NotImplementedError in the DataLoader's pin-memory thread). OpenCL copies from any host memory,
so pinning for opencl makes a plain CPU copy (pin_memory's result is a copy either way);
pinning for another device (CUDA) stays torch's own."""
import torch

from . import _backend as be

_LIB = torch.library.Library("aten", "IMPL")
_TORCHS = torch._C.DispatchKeySet(torch._C.DispatchKey.CompositeExplicitAutograd)


def _for_opencl(device):
    """Whether pinning with this device argument pins for opencl (None: the current
    accelerator)."""
    if device is None:
        accelerator = getattr(torch, "accelerator", None)
        current = accelerator.current_accelerator() if accelerator else None
        return current is not None and current.type == be.NAME
    return torch.device(device).type == be.NAME


def _pin_memory(self, device=None):
    if _for_opencl(device):
        return self.clone()
    return torch.ops.aten._pin_memory.default.redispatch(_TORCHS, self, device)


def install():
    """Register the CPU kernel of aten::_pin_memory (Tensor.pin_memory's)."""
    _LIB.impl("_pin_memory", _pin_memory, "CPU")
