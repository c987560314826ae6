"""DataParallel: torch.nn.DataParallel's interface, running its module on one device."""
from ..modules.module import Module

__all__ = ["DataParallel"]


class DataParallel(Module):
    """Wraps `module` as torch.nn.DataParallel does (its parameters under "module." in the
    state_dict, `.module` to reach it), but runs the whole batch on the module's own device:
    cltensor does not split a batch across OpenCL devices in one process (for several devices
    use DistributedDataParallel, one process each). device_ids, output_device and dim are
    checked and kept.

    Example:
        net = nn.DataParallel(net)   # a CUDA script's line; the results are unchanged
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel: expected a Module, got {type(module).__name__}")
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise TypeError(f"DataParallel: dim must be an int, got {type(dim).__name__}")
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else []
        self.output_device, self.dim = output_device, dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)
