"""SGD with momentum, dampening, Nesterov momentum, weight decay and maximize (torch.optim.SGD)."""
from __future__ import annotations

from . import fused
from .common import check_impl_flags
from .optimizer import Optimizer, ParamsT, state_buffer

__all__ = ["SGD"]


class SGD(Optimizer):
    """Stochastic gradient descent, by fused kernels (eight contiguous parameters a launch).

    With g the gradient (negated when maximize): g += weight_decay * p; with momentum,
    b = g on the first step and b = momentum * b + (1 - dampening) * g after, and
    g = g + momentum * b (nesterov) or g = b; finally p -= lr * g. Same as torch.optim.SGD.

    Args:
        params: parameters or parameter groups.
        lr: learning rate (>= 0).
        momentum: momentum factor (>= 0).
        dampening: dampening of the momentum.
        weight_decay: L2 penalty (>= 0).
        nesterov: Nesterov momentum (needs momentum > 0 and dampening 0).
        maximize: ascend the objective instead.
        foreach, fused: accepted; cltensor always runs fused kernels, eight contiguous
            parameters per launch.
        differentiable: only False.

    Example:
        opt = cltensor.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    """

    def __init__(self, params: ParamsT, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        # NOTE: the flags are checked but not kept in the groups (test_optim.py's repr test
        # pins SGD's group keys)
        check_impl_flags("SGD", foreach, fused, differentiable)
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize}
        _check(defaults)
        super().__init__(params, defaults)

    def _check_group(self, group):
        _check(group)

    def _check_capture(self, work):
        self._refuse_first_step(work, lambda state, group: group["momentum"] == 0 or
                                state.get("momentum_buffer") is not None)

    def _update(self, param, grad, group, state):
        momentum = group["momentum"]
        flags = (fused.SGD_MAXIMIZE if group["maximize"] else 0) | \
                (fused.SGD_DECAY if group["weight_decay"] != 0 else 0)
        buf = None
        if momentum != 0:
            first = state.get("momentum_buffer") is None
            buf = state_buffer(state, "momentum_buffer", param)
            flags |= fused.SGD_MOMENTUM | (fused.SGD_FIRST if first else 0) | \
                (fused.SGD_NESTEROV if group["nesterov"] else 0)
        fused.sgd_step(param, grad, buf, group["lr"], momentum, group["dampening"],
                       group["weight_decay"], flags)


def _check(group):
    if not 0.0 <= group["lr"]:
        raise ValueError(f"Invalid learning rate: {group['lr']}")
    if not 0.0 <= group["momentum"]:
        raise ValueError(f"Invalid momentum value: {group['momentum']}")
    if not 0.0 <= group["weight_decay"]:
        raise ValueError(f"Invalid weight_decay value: {group['weight_decay']}")
    if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
        raise ValueError("Nesterov momentum requires a momentum and zero dampening")
