"""Adam and AdamW (torch.optim.Adam, torch.optim.AdamW)."""
from __future__ import annotations

from typing import Any

from .. import graphs
from . import fused
from .common import check_impl_flags
from .optimizer import Optimizer, ParamsT, state_buffer

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """Adam by fused kernels (eight contiguous parameters a launch), with torch's formulas.

    With g the gradient (negated when maximize) and t the step count: g += weight_decay * p
    (or, decoupled, p *= 1 - lr * weight_decay); m = lerp(m, g, 1 - beta1);
    v = beta2 * v + (1 - beta2) * g^2; with amsgrad v_max = max(v_max, v) replaces v below;
    p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).

    Args:
        params: parameters or parameter groups.
        lr: learning rate (>= 0).
        betas: decay rates (beta1, beta2) of the moment averages, each in [0, 1).
        eps: added to the denominator (>= 0).
        weight_decay: L2 penalty (>= 0).
        amsgrad: use the maximum of past second moments.
        maximize: ascend the objective instead.
        decoupled_weight_decay: decay the weights directly (AdamW) rather than through g.
        foreach, fused, capturable: accepted; cltensor always runs fused kernels (eight
            contiguous parameters a launch), with no host sync.
        differentiable: only False.

    Example:
        opt = cltensor.optim.Adam(model.parameters(), lr=1e-3)
    """

    def __init__(self, params: ParamsT, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False) -> None:
        check_impl_flags(type(self).__name__, foreach, fused, differentiable, capturable)
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                    "amsgrad": amsgrad, "maximize": maximize, "foreach": foreach,
                    "capturable": capturable, "differentiable": differentiable, "fused": fused,
                    "decoupled_weight_decay": decoupled_weight_decay}
        _check(defaults)
        super().__init__(params, defaults)

    def _check_group(self, group):
        _check(group)

    def _check_capture(self, work):
        self._refuse_first_step(work, lambda state, group: "exp_avg" in state and (
            not group["amsgrad"] or "max_exp_avg_sq" in state))

    def _update(self, param, grad, group, state):
        amsgrad = group["amsgrad"]
        first = "exp_avg" not in state
        exp_avg = state_buffer(state, "exp_avg", param)
        # NOTE: a buffer missing after the first step (amsgrad switched on) starts from zeros
        exp_avg_sq = state_buffer(state, "exp_avg_sq", param, not first)
        vmax = state_buffer(state, "max_exp_avg_sq", param, not first) if amsgrad else None
        state["step"] = step = float(state.get("step", 0.0)) + 1
        flags = (fused.ADAM_AMSGRAD if amsgrad else 0) | (fused.ADAM_FIRST if first else 0) | \
            (fused.ADAM_MAXIMIZE if group["maximize"] else 0)
        if group["weight_decay"] != 0:
            flags |= fused.ADAM_DECOUPLED if group["decoupled_weight_decay"] else fused.ADAM_DECAY
        refresh = None
        if graphs.current_graph() is not None and param.numel():
            # NOTE: a capture runs nothing: the count stays, and each replay advances it, then
            # sets the launch's scalars again from it and the group (a scheduler's lr too)
            state["step"] = step - 1
            graphs.on_replay(_advance(state))
            refresh = fused.Refresh(_state_scalars, group, state)
        fused.adam_step(param, grad, exp_avg, exp_avg_sq, vmax, _scalars(group, step), flags,
                        refresh)


def _scalars(group, step):
    """optim.cl's Adam scalars for step `step` (fused.adam_step)."""
    lr, (beta1, beta2), wd = group["lr"], group["betas"], group["weight_decay"]
    return (1 - beta1, beta2, 1 - beta2, group["eps"], wd, 1 - lr * wd,
            -lr / (1 - beta1 ** step), (1 - beta2 ** step) ** 0.5)


def _advance(state):
    """A captured step's update before each replay: the step count advanced."""
    def update():
        state["step"] += 1
    return update


def _state_scalars(group, state):
    return _scalars(group, state["step"])


class AdamW(Adam):
    """Adam with decoupled weight decay (p *= 1 - lr * weight_decay each step), as
    torch.optim.AdamW; weight_decay defaults to 1e-2.

    Example:
        opt = cltensor.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    """

    def __init__(self, params: ParamsT, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         foreach=foreach, capturable=capturable, differentiable=differentiable,
                         fused=fused, decoupled_weight_decay=True)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        for group in self.param_groups:  # AdamW's weight decay is always decoupled
            group["decoupled_weight_decay"] = True


def _check(group):
    beta1, beta2 = group["betas"]
    if not 0.0 <= group["lr"]:
        raise ValueError(f"Invalid learning rate: {group['lr']}")
    if not 0.0 <= group["eps"]:
        raise ValueError(f"Invalid epsilon value: {group['eps']}")
    if not 0.0 <= beta1 < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {beta1}")
    if not 0.0 <= beta2 < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {beta2}")
    if not 0.0 <= group["weight_decay"]:
        raise ValueError(f"Invalid weight_decay value: {group['weight_decay']}")
