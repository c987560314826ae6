"""torch.nn.parameter's path: `from cltensor.nn.parameter import Parameter`."""
from .modules.module import Parameter

__all__ = ["Parameter"]
