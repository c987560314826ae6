"""RMSprop (torch.optim.RMSprop)."""
from __future__ import annotations

from . import fused
from .common import check_impl_flags
from .optimizer import Optimizer, ParamsT, state_buffer

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop, each parameter updated by one fused kernel, with torch's formulas.

    With g the gradient (negated when maximize): g += weight_decay * p;
    v = alpha * v + (1 - alpha) * g^2; centered: m = lerp(m, g, 1 - alpha) and
    d = sqrt(v - m^2) + eps, else d = sqrt(v) + eps; with momentum b = momentum * b + g / d and
    p -= lr * b, else p -= lr * g / d.

    Args:
        params: parameters or parameter groups.
        lr: learning rate (>= 0).
        alpha: smoothing constant of the squared-gradient average (>= 0).
        eps: added to the denominator (>= 0).
        weight_decay: L2 penalty (>= 0).
        momentum: momentum factor (>= 0).
        centered: normalize by the gradient's estimated variance.
        maximize: ascend the objective instead.
        foreach, capturable: accepted; they change nothing in cltensor.
        differentiable: only False.

    Example:
        opt = cltensor.optim.RMSprop(model.parameters(), lr=1e-3, momentum=0.9)
    """

    def __init__(self, params: ParamsT, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False,
                 capturable: bool = False, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        check_impl_flags("RMSprop", foreach, None, differentiable, capturable)
        defaults = {"lr": lr, "alpha": alpha, "eps": eps, "weight_decay": weight_decay,
                    "momentum": momentum, "centered": centered, "maximize": maximize,
                    "capturable": capturable, "foreach": foreach,
                    "differentiable": differentiable}
        _check(defaults)
        super().__init__(params, defaults)

    def _check_group(self, group):
        _check(group)

    def _update(self, param, grad, group, state):
        alpha, momentum, wd = group["alpha"], group["momentum"], group["weight_decay"]
        state["step"] = float(state.get("step", 0.0)) + 1
        square_avg = state_buffer(state, "square_avg", param, True)
        grad_avg = state_buffer(state, "grad_avg", param, True) if group["centered"] else None
        buf = state_buffer(state, "momentum_buffer", param, True) if momentum > 0 else None
        flags = (fused.RMS_CENTERED if group["centered"] else 0) | \
            (fused.RMS_MOMENTUM if momentum > 0 else 0) | \
            (fused.RMS_MAXIMIZE if group["maximize"] else 0) | (fused.RMS_DECAY if wd != 0 else 0)
        scalars = (alpha, 1 - alpha, group["eps"], wd, momentum, group["lr"])
        fused.rmsprop_step(param, grad, square_avg, grad_avg, buf, scalars, flags)


def _check(group):
    for name in ("lr", "eps", "momentum", "weight_decay", "alpha"):
        if not 0.0 <= group[name]:
            raise ValueError(f"Invalid {name.replace('_', ' ')} value: {group[name]}")
