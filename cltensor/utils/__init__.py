"""torch.utils's names: `data` (datasets, samplers, DataLoader)."""
from . import data  # noqa: F401
