"""Helpers shared by the optimizers added beside SGD/Adam/RMSprop: the implementation flags
torch's constructors take, float32 scalar state, and the fused-kernel launch."""
from __future__ import annotations

from typing import Any

import numpy as np

from . import fused
from .optimizer import Optimizer

__all__ = ["ExtraOptimizer", "check_impl_flags", "check_nonneg", "check_betas", "scalar_state",
           "X_MAXIMIZE", "X_DECAY", "X_DECOUPLED", "X_RECTIFY", "X_AX_COPY"]

# flags of the kernels after rmsprop_step in optim.cl
X_MAXIMIZE, X_DECAY, X_DECOUPLED, X_RECTIFY, X_AX_COPY = 1, 2, 4, 8, 8


def check_impl_flags(owner, foreach=None, fused_=None, differentiable=False, capturable=False):
    """torch's implementation switches. foreach, fused and capturable pick how torch runs the
    same arithmetic (cltensor always runs fused kernels, several parameters per launch where
    it can, with no host sync), so they are accepted and change nothing;
    differentiable=True (autograd through the update) is refused."""
    if differentiable:
        raise NotImplementedError(f"{owner}: differentiable=True (autograd through the optimizer "
                                  f"step) is not supported by cltensor")
    if fused_ and foreach:
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
    del capturable  # same numbers either way


def scalar_state(value):
    """A scalar kept as torch keeps it in a float32 0-d tensor (eta, mu, mu_product): rounded to
    float32, so trajectories follow torch's."""
    return float(np.float32(value))


def check_nonneg(group, names):
    """ValueError with torch's wording for the first negative hyperparameter of `names`."""
    for key, label in names:
        if not 0.0 <= group[key]:
            raise ValueError(f"Invalid {label}: {group[key]}")


def check_betas(betas):
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {beta}")


class ExtraOptimizer(Optimizer):
    """An optimizer whose group hyperparameters are checked by `_check` (a function of the
    group), as in __init__, and whose per-parameter update is one kernel of optim.cl."""

    _check = staticmethod(lambda group: None)

    def __init__(self, params, defaults):
        self._check(defaults)
        super().__init__(params, defaults)

    def _check_group(self, group):
        self._check(group)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """As Optimizer's; 0-d state (torch's tensors for step, eta, mu, mu_product) becomes
        a float, so a torch.optim state_dict loads too."""
        state = {key: {name: _number_if_scalar(v) for name, v in values.items()}
                 for key, values in state_dict["state"].items()}
        super().load_state_dict({**state_dict, "state": state})

    @staticmethod
    def _flags(group, decay=True):
        """X_MAXIMIZE and X_DECAY (weight_decay != 0) from the group."""
        return (X_MAXIMIZE if group["maximize"] else 0) | \
            (X_DECAY if decay and group.get("weight_decay", 0) != 0 else 0)

    @staticmethod
    def _launch(name, param, grad, buffers, scalars, flags):
        fused._launch(name, param, grad, buffers, scalars, flags)


def _number_if_scalar(value):
    """A 0-d array or tensor as a float; anything else as it is."""
    if getattr(value, "ndim", None) == 0 or getattr(value, "shape", None) == ():
        return float(value.item() if hasattr(value, "item") else value)
    return value
