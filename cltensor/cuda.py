"""torch.cuda's counterpart: "cuda" names the machine's OpenCL GPUs, so scripts written for
CUDA run on any OpenCL GPU. Without a GPU, is_available() is False and device_count() 0, as
torch without CUDA; the calls that need a device then raise DeviceError.

GPU i is the i-th GPU of cltensor.device.all_devices(); the current device is the default
device when it is a GPU, else GPU 0. cltensor has one random generator for every device:
manual_seed(s) reseeds it when a GPU is present and, as torch, does nothing otherwise.
"""
import contextlib
from dataclasses import dataclass

from . import random
from .device import OutOfMemoryError  # noqa: F401  (torch.cuda.OutOfMemoryError)
from .device import (DeviceError, TorchDevice, gpu_devices, no_gpu_message, default_device,
                     default_gpu, get_device, set_default_device)
from .device import empty_cache as _empty_cache
from .device import reset_peak_memory_stats as _reset_peak

__all__ = ["is_available", "device_count", "current_device", "set_device", "get_device_name",
           "synchronize", "manual_seed", "manual_seed_all", "memory_allocated",
           "max_memory_allocated", "memory_reserved", "reset_peak_memory_stats", "empty_cache",
           "device", "is_initialized", "get_device_properties", "is_bf16_supported",
           "OutOfMemoryError"]


def is_available():
    """True when the machine has an OpenCL GPU."""
    return bool(gpu_devices())


def is_initialized():
    return is_available()


def device_count():
    return len(gpu_devices())


def _gpu(dev=None):
    """The GPU that `dev` names: None for the current one, an index, "cuda:1", a device."""
    if dev is None:
        gpu = default_gpu()
        if gpu is None:
            raise DeviceError(no_gpu_message("cuda"))
        return gpu
    if isinstance(dev, int) and not isinstance(dev, bool):
        dev = TorchDevice("cuda", dev)
    gpu = get_device(dev)
    if not gpu.is_gpu:
        raise ValueError(f"torch.cuda: {dev!r} is not a GPU device ({gpu})")
    return gpu


def current_device():
    """The index of the current GPU."""
    gpu = _gpu()
    return next(i for i, d in enumerate(gpu_devices()) if d is gpu)


def set_device(dev):
    """Make GPU `dev` (an index, "cuda:i" or a device) the default device."""
    set_default_device(_gpu(dev))


def get_device_name(dev=None):
    return _gpu(dev).name


@dataclass(frozen=True)
class DeviceProperties:
    """What torch.cuda.get_device_properties gives that OpenCL knows."""
    name: str
    total_memory: int
    multi_processor_count: int


def get_device_properties(dev=None):
    gpu = _gpu(dev)
    return DeviceProperties(gpu.name, gpu.cl_device.global_mem_size, gpu.cl_device.max_compute_units)


def is_bf16_supported(including_emulation=True):
    """False: cltensor has no bfloat16 tensors."""
    return False


def synchronize(dev=None):
    """Wait for every command queued on the GPU."""
    _gpu(dev).synchronize()


def manual_seed(seed):
    """Reseed cltensor's generator (shared by every device) if a GPU is present."""
    if is_available():
        random.manual_seed(seed)


manual_seed_all = manual_seed


def memory_allocated(dev=None):
    """Bytes held by live tensors on the GPU."""
    return _gpu(dev).allocated


def max_memory_allocated(dev=None):
    """The peak of memory_allocated since the last reset_peak_memory_stats."""
    return _gpu(dev).peak


def memory_reserved(dev=None):
    """Bytes the GPU's memory pool holds: live tensors' and freed buffers kept for reuse."""
    pool = _gpu(dev)._pool
    return pool.managed_bytes if pool is not None else 0


def reset_peak_memory_stats(dev=None):
    _reset_peak(_gpu(dev))


def empty_cache():
    """Give the memory pools' unused buffers back to the driver (every GPU's)."""
    for gpu in gpu_devices():
        _empty_cache(gpu)


@contextlib.contextmanager
def device(dev):
    """with cltensor.cuda.device(1): ... makes GPU 1 the default device inside the block (None
    or a negative index: no change, as torch). The default device is global, so the block
    changes it for every thread, unlike torch's per-thread current device."""
    if dev is None or (isinstance(dev, int) and dev < 0):
        yield
        return
    before = default_device()
    set_device(dev)
    try:
        yield
    finally:
        set_default_device(before)
