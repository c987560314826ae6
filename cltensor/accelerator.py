"""torch.accelerator's counterpart: the accelerator is the default OpenCL GPU ("cuda"), and
there is none on a machine without a GPU (is_available() False, current_accelerator() None),
where scripts fall back to "cpu", the CPU OpenCL device."""
from . import cuda
from .device import TorchDevice

__all__ = ["is_available", "current_accelerator", "device_count", "current_device_index",
           "set_device_index", "synchronize"]


def is_available():
    return cuda.is_available()


def current_accelerator(check_available=False):
    """device(type='cuda') when a GPU is present, else None."""
    return TorchDevice("cuda") if cuda.is_available() else None


def device_count():
    return cuda.device_count()


def current_device_index():
    return cuda.current_device()


def set_device_index(index):
    cuda.set_device(index)


def synchronize(device=None):
    cuda.synchronize(device)
