"""Adamax, NAdam and RAdam (torch.optim's), and SparseAdam, which cltensor refuses."""
from __future__ import annotations

import math

from .common import (X_DECAY, X_DECOUPLED, X_RECTIFY, ExtraOptimizer, check_betas,
                     check_impl_flags, check_nonneg, scalar_state)
from .optimizer import ParamsT, state_buffer

__all__ = ["Adamax", "NAdam", "RAdam", "SparseAdam"]


def _check_adam_like(group):
    check_nonneg(group, [("lr", "learning rate"), ("eps", "epsilon value")])
    check_betas(group["betas"])
    check_nonneg(group, [("weight_decay", "weight_decay value")])


def _moments(state, param):
    """step + 1 and Adam's two zero-started moment buffers."""
    state["step"] = float(state.get("step", 0.0)) + 1
    return (state["step"], state_buffer(state, "exp_avg", param, True),
            state_buffer(state, "exp_avg_sq", param, True))


def _decay_flags(group):
    """X_DECOUPLED or X_DECAY for a nonzero weight_decay, by decoupled_weight_decay."""
    if group["weight_decay"] == 0:
        return 0
    return X_DECOUPLED if group["decoupled_weight_decay"] else X_DECAY


class Adamax(ExtraOptimizer):
    """Adamax (Adam with the infinity norm), one fused kernel per parameter, as torch.

    With g the gradient (negated when maximize) plus weight_decay * p:
    m = lerp(m, g, 1 - beta1), u = max(beta2 * u, |g| + eps) and
    p -= lr / (1 - beta1^step) * m / u.

    Example:
        opt = cltensor.optim.Adamax(model.parameters(), lr=2e-3)
    """

    _check = staticmethod(_check_adam_like)

    def __init__(self, params: ParamsT, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, capturable: bool = False) -> None:
        check_impl_flags("Adamax", foreach, None, differentiable, capturable)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "foreach": foreach, "maximize": maximize, "differentiable": differentiable,
                    "capturable": capturable}
        super().__init__(params, defaults)

    def _update(self, param, grad, group, state):
        state["step"] = step = float(state.get("step", 0.0)) + 1
        exp_avg = state_buffer(state, "exp_avg", param, True)
        exp_inf = state_buffer(state, "exp_inf", param, True)
        beta1, beta2 = group["betas"]
        clr = group["lr"] / (1 - beta1 ** step)
        self._launch("adamax_step", param, grad, [exp_avg, exp_inf],
                     (1 - beta1, beta2, group["eps"], group["weight_decay"], -clr),
                     self._flags(group))


class NAdam(ExtraOptimizer):
    """NAdam (Adam with Nesterov momentum and a momentum schedule), one fused kernel per
    parameter, as torch.

    mu_t = beta1 * (1 - 0.5 * 0.96^(step * momentum_decay)), mu_product the product of the
    mu_t so far (kept in float32, as torch keeps it); with Adam's moments m, v:
    p -= lr * (1 - mu_t) / (1 - mu_product) * g / denom
         + lr * mu_{t+1} / (1 - mu_product * mu_{t+1}) * m / denom,
    denom = sqrt(v / (1 - beta2^step)) + eps. decoupled_weight_decay multiplies p by
    1 - lr * weight_decay instead of adding weight_decay * p to g.

    Example:
        opt = cltensor.optim.NAdam(model.parameters(), lr=2e-3)
    """

    @staticmethod
    def _check(group):
        _check_adam_like(group)
        check_nonneg(group, [("momentum_decay", "momentum_decay value")])

    def __init__(self, params: ParamsT, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False) -> None:
        check_impl_flags("NAdam", foreach, None, differentiable, capturable)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "momentum_decay": momentum_decay,
                    "decoupled_weight_decay": decoupled_weight_decay, "maximize": maximize,
                    "foreach": foreach, "capturable": capturable,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def _update(self, param, grad, group, state):
        if not state:  # torch's key order
            state.update(step=0.0, mu_product=1.0)
        step, exp_avg, exp_avg_sq = _moments(state, param)
        lr, (beta1, beta2), decay = group["lr"], group["betas"], group["momentum_decay"]
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * decay))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * decay))
        state["mu_product"] = product = scalar_state(state["mu_product"] * scalar_state(mu))
        scalars = (1 - beta1, beta2, 1 - beta2, group["eps"], group["weight_decay"],
                   1 - lr * group["weight_decay"], 1 - beta2 ** step,
                   -lr * (1.0 - mu) / (1.0 - product), -lr * mu_next / (1.0 - product * mu_next))
        self._launch("nadam_step", param, grad, [exp_avg, exp_avg_sq], scalars,
                     self._flags(group, decay=False) | _decay_flags(group))


class RAdam(ExtraOptimizer):
    """RAdam (rectified Adam), one fused kernel per parameter, as torch.

    With rho_inf = 2 / (1 - beta2) - 1 and rho_t = rho_inf - 2 step beta2^step / (1 - beta2^step):
    while rho_t <= 5 the step is p -= lr * m / (1 - beta1^step) (momentum SGD); after, it is
    scaled by sqrt(1 - beta2^step) / (sqrt(v) + eps) and the rectification
    sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t)).

    Example:
        opt = cltensor.optim.RAdam(model.parameters(), lr=1e-3)
    """

    _check = staticmethod(_check_adam_like)

    def __init__(self, params: ParamsT, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        check_impl_flags("RAdam", foreach, None, differentiable, capturable)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize, "foreach": foreach, "capturable": capturable,
                    "decoupled_weight_decay": decoupled_weight_decay,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def _update(self, param, grad, group, state):
        step, exp_avg, exp_avg_sq = _moments(state, param)
        lr, (beta1, beta2) = group["lr"], group["betas"]
        bias_correction2 = 1 - beta2 ** step
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
        flags = self._flags(group, decay=False) | _decay_flags(group)
        rect = 0.0
        if rho_t > 5.0:
            flags |= X_RECTIFY
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf /
                    ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
        scalars = (1 - beta1, beta2, 1 - beta2, group["eps"], group["weight_decay"],
                   1 - lr * group["weight_decay"], 1 - beta1 ** step, lr,
                   math.sqrt(bias_correction2), rect)
        self._launch("radam_step", param, grad, [exp_avg, exp_avg_sq], scalars, flags)


class SparseAdam:
    """torch.optim.SparseAdam needs sparse gradients, which cltensor does not have: making one
    raises NotImplementedError (use Adam or AdamW, which take dense gradients)."""

    def __init__(self, params: ParamsT, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, maximize: bool = False) -> None:
        raise NotImplementedError("SparseAdam: cltensor has no sparse gradients (nn.Embedding's "
                                  "sparse=True is not supported); use Adam or AdamW")
