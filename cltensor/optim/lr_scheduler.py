"""torch.optim.lr_scheduler's namespace: the schedulers of schedulers.py (LRScheduler, StepLR,
MultiStepLR, ExponentialLR, LambdaLR, LinearLR, CosineAnnealingLR, OneCycleLR,
ReduceLROnPlateau) and of schedulers_extra.py (ConstantLR, MultiplicativeLR, PolynomialLR,
CosineAnnealingWarmRestarts, CyclicLR, SequentialLR, ChainedScheduler).

The values follow torch's recursive formulas (each step from the group's current lr), and
`step(epoch)` uses the closed forms, so both give torch's numbers.
"""
from .schedulers import (CosineAnnealingLR, ExponentialLR, LambdaLR, LinearLR, LRScheduler,  # noqa: F401
                         MultiStepLR, OneCycleLR, ReduceLROnPlateau, StepLR, _LRScheduler)
from .schedulers_extra import (ChainedScheduler, ConstantLR, CosineAnnealingWarmRestarts,
                               CyclicLR, MultiplicativeLR, PolynomialLR, SequentialLR)

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "LambdaLR", "LinearLR",
           "CosineAnnealingLR", "OneCycleLR", "ReduceLROnPlateau", "ConstantLR",
           "MultiplicativeLR", "PolynomialLR", "CosineAnnealingWarmRestarts", "CyclicLR",
           "SequentialLR", "ChainedScheduler"]
