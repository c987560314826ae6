"""ASGD and Rprop (torch.optim.ASGD, torch.optim.Rprop)."""
from __future__ import annotations

from .common import X_AX_COPY, ExtraOptimizer, check_impl_flags, check_nonneg, scalar_state
from .optimizer import ParamsT, state_buffer

__all__ = ["ASGD", "Rprop"]


class ASGD(ExtraOptimizer):
    """Averaged SGD, one fused kernel per parameter, as torch.

    With g the gradient (negated when maximize) plus weight_decay * p:
    p = p * (1 - lambd * eta) - eta * g, and the average ax += (p - ax) * mu; then
    eta = lr / (1 + lambd * lr * step)^alpha and mu = 1 / max(1, step - t0) (both kept in
    float32, as torch keeps them).

    Example:
        opt = cltensor.optim.ASGD(model.parameters(), lr=0.01, t0=100)
    """

    def __init__(self, params: ParamsT, lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75,
                 t0: float = 1e6, weight_decay: float = 0, foreach: bool | None = None,
                 maximize: bool = False, differentiable: bool = False, capturable: bool = False) -> None:
        check_impl_flags("ASGD", foreach, None, differentiable, capturable)
        defaults = {"lr": lr, "lambd": lambd, "alpha": alpha, "t0": t0,
                    "weight_decay": weight_decay, "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "capturable": capturable}
        super().__init__(params, defaults)

    @staticmethod
    def _check(group):
        check_nonneg(group, [("lr", "learning rate"), ("weight_decay", "weight_decay value")])

    def _update(self, param, grad, group, state):
        if not state:
            state.update(step=0.0, eta=scalar_state(group["lr"]), mu=1.0)
        ax = state_buffer(state, "ax", param, True)
        state["step"] = step = state["step"] + 1
        eta, mu, lr = state["eta"], state["mu"], group["lr"]
        flags = self._flags(group) | (X_AX_COPY if mu == 1 else 0)
        self._launch("asgd_step", param, grad, [ax],
                     (1 - group["lambd"] * eta, -eta, mu, group["weight_decay"]), flags)
        state["eta"] = scalar_state(lr / ((1 + group["lambd"] * lr * step) ** group["alpha"]))
        state["mu"] = scalar_state(1 / max(1, step - group["t0"]))


class Rprop(ExtraOptimizer):
    """Resilient backpropagation, one fused kernel per parameter, as torch.

    Each element's step size (starting at lr) is multiplied by etaplus where the gradient kept
    its sign since the last step and by etaminus where it flipped, then clamped to step_sizes;
    where it flipped the step is skipped (and the gradient remembered as 0);
    p -= sign(g) * step_size.

    Example:
        opt = cltensor.optim.Rprop(model.parameters(), lr=0.01, etas=(0.5, 1.2))
    """

    def __init__(self, params: ParamsT, lr: float = 1e-2, etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False) -> None:
        check_impl_flags("Rprop", foreach, None, differentiable, capturable)
        defaults = {"lr": lr, "etas": etas, "step_sizes": step_sizes, "foreach": foreach,
                    "maximize": maximize, "differentiable": differentiable,
                    "capturable": capturable}
        super().__init__(params, defaults)

    @staticmethod
    def _check(group):
        check_nonneg(group, [("lr", "learning rate")])
        etaminus, etaplus = group["etas"]
        if not 0.0 < etaminus < 1.0 < etaplus:
            raise ValueError(f"Invalid eta values: {etaminus}, {etaplus}")

    def _update(self, param, grad, group, state):
        state["step"] = float(state.get("step", 0.0)) + 1
        prev = state_buffer(state, "prev", param, True)
        if "step_size" not in state:
            state_buffer(state, "step_size", param).fill_(group["lr"])
        (etaminus, etaplus), (lo, hi) = group["etas"], group["step_sizes"]
        self._launch("rprop_step", param, grad, [prev, state["step_size"]],
                     (etaminus, etaplus, lo, hi), self._flags(group, decay=False))
