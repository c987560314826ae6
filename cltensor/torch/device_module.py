"""torch.opencl: the device module torch looks up for the "opencl" device (torch.cuda's names)."""
import torch

from .. import device as cl_device
from .. import random as cl_random
from . import _backend as be


def is_available():
    return bool(cl_device.all_devices())


def is_initialized():
    return True


def _is_in_bad_fork():
    return False


def device_count():
    return len(be.ordered_devices()) if is_available() else 0


def current_device():
    return be.current_index()


def set_device(device):
    be.set_current_index(_index(device))


def _index(device):
    """An int index from an int, "opencl:N" or a torch.device; None or "opencl" is the current one."""
    if isinstance(device, (str, torch.device)):
        device = torch.device(device)
        if device.type != be.NAME:
            raise ValueError(f"expected an opencl device, got {device}")
        device = device.index
    return be.current_index() if device is None else device


def _cl(device=None):
    return be.ordered_devices()[be.check_index(_index(device))]


def get_device_name(device=None):
    return _cl(device).name


def synchronize(device=None):
    be.settle_pending()
    _cl(device).synchronize()


def get_amp_supported_dtype():
    """The dtypes torch.autocast("opencl", dtype=...) takes (cltensor.torch.autocast)."""
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation=True):
    return True  # stored in 16 bits on every device, computed in float32


def manual_seed(seed):
    cl_random.manual_seed(seed)


manual_seed_all = manual_seed


def memory_allocated(device=None):
    return cl_device.memory_stats(_cl(device))["allocated"]


def max_memory_allocated(device=None):
    return cl_device.memory_stats(_cl(device))["peak"]


def reset_peak_memory_stats(device=None):
    cl_device.reset_peak_memory_stats(_cl(device))


def empty_cache():
    for d in be.ordered_devices():
        cl_device.empty_cache(d)


class device:  # noqa: N801  (torch.cuda.device's name)
    """Context manager that makes `index` the current opencl device, then restores the previous."""

    def __init__(self, index):
        self.index = -1 if index is None else _index(index)
        self.prev = -1

    def __enter__(self):
        if self.index != -1:
            self.prev = be.current_index()
            be.set_current_index(self.index)

    def __exit__(self, *exc):
        if self.prev != -1:
            be.set_current_index(self.prev)
        return False
