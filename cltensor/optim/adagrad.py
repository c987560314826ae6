"""Adagrad and Adadelta (torch.optim.Adagrad, torch.optim.Adadelta)."""
from __future__ import annotations

from .common import ExtraOptimizer, check_impl_flags, check_nonneg
from .optimizer import ParamsT, state_buffer

__all__ = ["Adagrad", "Adadelta"]


class Adagrad(ExtraOptimizer):
    """Adagrad, each parameter updated by one fused kernel, with torch's formulas.

    With g the gradient (negated when maximize) plus weight_decay * p:
    sum += g^2 and p -= lr / (1 + (step - 1) * lr_decay) * g / (sqrt(sum) + eps). The state
    ('step', 'sum' = initial_accumulator_value) exists from construction, as in torch.

    Args:
        params: parameters or parameter groups.
        lr, lr_decay, weight_decay, initial_accumulator_value, eps: as torch (all >= 0).
        foreach, fused: accepted; cltensor always runs one fused kernel per parameter.
        maximize: ascend the objective instead.
        differentiable: only False.

    Example:
        opt = cltensor.optim.Adagrad(model.parameters(), lr=0.01, lr_decay=1e-4)
    """

    def __init__(self, params: ParamsT, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach: bool | None = None,
                 *, maximize: bool = False, differentiable: bool = False, fused: bool | None = None) -> None:
        check_impl_flags("Adagrad", foreach, fused, differentiable)
        defaults = {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                    "initial_accumulator_value": initial_accumulator_value, "foreach": foreach,
                    "maximize": maximize, "differentiable": differentiable, "fused": fused}
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["step"] = 0.0
                state_buffer(self.state[p], "sum", p).fill_(group["initial_accumulator_value"])

    @staticmethod
    def _check(group):
        check_nonneg(group, [("lr", "learning rate"), ("lr_decay", "lr_decay value"),
                             ("weight_decay", "weight_decay value"),
                             ("initial_accumulator_value", "initial_accumulator_value value"),
                             ("eps", "epsilon value")])

    def _update(self, param, grad, group, state):
        state["step"] = step = float(state.get("step", 0.0)) + 1
        if "sum" not in state:  # a group added after construction
            state_buffer(state, "sum", param).fill_(group["initial_accumulator_value"])
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        self._launch("adagrad_step", param, grad, [state["sum"]],
                     (-clr, group["eps"], group["weight_decay"]), self._flags(group))


class Adadelta(ExtraOptimizer):
    """Adadelta, each parameter updated by one fused kernel, with torch's formulas.

    With g the gradient (negated when maximize) plus weight_decay * p:
    v = rho * v + (1 - rho) * g^2, d = sqrt(u + eps) / sqrt(v + eps) * g,
    u = rho * u + (1 - rho) * d^2 and p -= lr * d.

    Args:
        params: parameters or parameter groups.
        lr: scale of the update (>= 0). rho: decay of the averages, in [0, 1].
        eps, weight_decay: >= 0.
        foreach, capturable: accepted; they change nothing in cltensor.
        maximize: ascend the objective instead.
        differentiable: only False.

    Example:
        opt = cltensor.optim.Adadelta(model.parameters())
    """

    def __init__(self, params: ParamsT, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach: bool | None = None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False) -> None:
        check_impl_flags("Adadelta", foreach, None, differentiable, capturable)
        defaults = {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize, "capturable": capturable, "foreach": foreach,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    @staticmethod
    def _check(group):
        check_nonneg(group, [("lr", "learning rate")])
        if not 0.0 <= group["rho"] <= 1.0:
            raise ValueError(f"Invalid rho value: {group['rho']}")
        check_nonneg(group, [("eps", "epsilon value"), ("weight_decay", "weight_decay value")])

    def _update(self, param, grad, group, state):
        state["step"] = float(state.get("step", 0.0)) + 1
        square_avg = state_buffer(state, "square_avg", param, True)
        acc_delta = state_buffer(state, "acc_delta", param, True)
        rho = group["rho"]
        self._launch("adadelta_step", param, grad, [square_avg, acc_delta],
                     (rho, 1 - rho, group["eps"], group["weight_decay"], group["lr"]),
                     self._flags(group))
