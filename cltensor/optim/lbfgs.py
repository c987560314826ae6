"""L-BFGS (torch.optim.LBFGS): a quasi-Newton method over all parameters as one flat vector,
with an optional strong-Wolfe line search. Vector work stays on the device; the scalar
decisions (curvature test, stopping rules, line-search steps) read dot products on the host,
where torch syncs too."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import creation
from ..ops.shape import cat
from ..autograd import enable_grad, no_grad
from .optimizer import Optimizer, ParamsT, _check_grad

__all__ = ["LBFGS"]


def _cubic_min(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimizer of the cubic through (x1, f1), (x2, f2) with slopes g1, g2, clamped to
    bounds (default: the interval between x1 and x2); its midpoint when the cubic has none."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2.0
    d2 = math.sqrt(disc)
    if x1 <= x2:
        pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(pos, lo), hi)


class _WolfeSearch:
    """A line search along d from the point with loss f, flat gradient g and slope gtd < 0
    for a step t meeting the strong Wolfe conditions (sufficient decrease c1, curvature c2):
    first grow t until a bracket holds one, then shrink the bracket. Points are tuples
    (t, loss, flat gradient, slope). Slopes are `scalar`s (numpy scalars of the parameters'
    dtype), so the step arithmetic rounds as torch's on 0-d tensors of that dtype."""

    def __init__(self, evaluate, d, f, g, gtd, scalar, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                 max_ls=25):
        self.evaluate, self.d, self.start, self.scalar = evaluate, d, (0, f, g, gtd), scalar
        self.c1, self.c2, self.tol, self.max_ls = c1, c2, tolerance_change, max_ls
        self.evals = self.iters = 0

    def _point(self, t):
        f, g = self.evaluate(t)
        self.evals += 1
        return (t, f, g, self.scalar(g.dot(self.d).item()))

    def _too_high(self, p):
        _, f, _, gtd = self.start
        return p[1] > f + self.c1 * p[0] * gtd

    def _flat_enough(self, p):
        return abs(p[3]) <= -self.c2 * self.start[3]

    def run(self, t):
        """(loss, flat gradient, t, evaluations) at the step found."""
        bracket, done = self._grow(t)
        if not done:
            bracket = self._zoom(bracket)
        t, f, g, _ = bracket[self._low(bracket)]
        return f, g, t, self.evals

    def _grow(self, t):
        prev, cur = self.start, self._point(t)
        while self.iters < self.max_ls:
            if self._too_high(cur) or (self.iters > 1 and cur[1] >= prev[1]):
                return [prev, cur], False
            if self._flat_enough(cur):
                return [cur], True
            if cur[3] >= 0:
                return [prev, cur], False
            t = cur[0]
            t_next = _cubic_min(prev[0], prev[1], prev[3], t, cur[1], cur[3],
                                bounds=(t + 0.01 * (t - prev[0]), t * 10))
            prev, cur = cur, self._point(t_next)
            self.iters += 1
        return [self.start, cur], False

    @staticmethod
    def _low(bracket):
        return 0 if bracket[0][1] <= bracket[-1][1] else 1

    def _zoom(self, bracket):
        d_norm = self.scalar(self.d.abs().max().item())
        insufficient = False
        while self.iters < self.max_ls:
            lo = self._low(bracket)
            (a, fa, _, ga), (b, fb, _, gb) = bracket
            if abs(b - a) * d_norm < self.tol:
                break
            t = _cubic_min(a, fa, ga, b, fb, gb)
            t, insufficient = self._keep_inside(t, min(a, b), max(a, b), insufficient)
            cur = self._point(t)
            self.iters += 1
            if self._too_high(cur) or cur[1] >= bracket[lo][1]:
                bracket[1 - lo] = cur
                continue
            if self._flat_enough(cur):
                bracket[lo] = cur
                break
            if cur[3] * (bracket[1 - lo][0] - bracket[lo][0]) >= 0:
                bracket[1 - lo] = bracket[lo]
            bracket[lo] = cur
        return bracket

    @staticmethod
    def _keep_inside(t, low, high, insufficient):
        """t moved 10% of the bracket inside when it comes too close to an end (at once after
        a step that made too little progress)."""
        eps = 0.1 * (high - low)
        if min(high - t, t - low) >= eps:
            return t, False
        if insufficient or t >= high or t <= low:
            return (high - eps if abs(t - high) < abs(t - low) else low + eps), False
        return t, True


class LBFGS(Optimizer):
    """L-BFGS over all parameters (one group), as torch.optim.LBFGS: each step(closure) runs
    up to max_iter iterations, each a two-loop recursion over the last history_size curvature
    pairs and a step of lr (the first scaled by min(1, 1 / |g|_1)) or a strong-Wolfe line
    search (line_search_fn="strong_wolfe"); it stops early when the largest gradient entry is
    <= tolerance_grad, or the step or the loss change is below tolerance_change, or after
    max_eval closure calls (default max_iter * 5 // 4).

    Example:
        opt = cltensor.optim.LBFGS(model.parameters(), line_search_fn="strong_wolfe")
        def closure():
            opt.zero_grad(); loss = loss_fn(model(x), y); loss.backward(); return loss
        opt.step(closure)
    """

    def __init__(self, params: ParamsT, lr: float = 1, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got "
                             f"{line_search_fn!r}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = {"lr": lr, "max_iter": max_iter, "max_eval": max_eval,
                    "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
                    "history_size": history_size, "line_search_fn": line_search_fn}
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def add_param_group(self, param_group):
        if getattr(self, "_params", None) is not None:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(param_group)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """As Optimizer's; the state (flat vectors and their history, kept for the first
        parameter) is copied onto the parameters' device."""
        super().load_state_dict({"state": {}, "param_groups": state_dict["param_groups"]})
        self._params = self.param_groups[0]["params"]
        saved = state_dict["state"].get(0)
        if saved is not None:
            device = self._params[0].device
            self.state[self._params[0]] = {k: _to_device(v, device) for k, v in saved.items()}

    def _scalar(self, x):
        """x as torch holds a 0-d tensor of the parameters' dtype: a numpy scalar of that
        dtype, whose arithmetic with Python floats rounds to it too."""
        return np.dtype(self._params[0].dtype).type(x)

    def _dot(self, a, b):
        return self._scalar(a.dot(b).item())

    def _flat_grad(self):
        """Every gradient (zeros for a missing one) flattened into one vector."""
        for p in self._params:
            if p.grad is not None:
                _check_grad(p)
        views = [p.grad.reshape(-1) if p.grad is not None else
                 creation.zeros(p.numel(), dtype=p.dtype, device=p.device)
                 for p in self._params]
        return cat(views, 0)

    def _add_step(self, t, d):
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(d[offset:offset + n].view(p.shape), alpha=t)
            offset += n

    def _evaluate_at(self, closure, x, t, d):
        """(loss, flat gradient) at parameters x + t d; the parameters are then put back."""
        self._add_step(t, d)
        loss = _loss_value(closure())
        grad = self._flat_grad()
        for p, saved in zip(self._params, x):
            p.copy_(saved)
        return loss, grad

    def step(self, closure: Callable[[], Any]) -> Any:
        """Run up to max_iter iterations; closure() re-evaluates the model, calls backward and
        returns the loss. Returns the loss of the first evaluation."""
        if closure is None:
            raise RuntimeError("LBFGS.step needs a closure that clears the gradients, "
                               "computes the loss, calls backward() and returns the loss")
        group = self.param_groups[0]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        def grad_closure():
            with enable_grad():
                return closure()

        with no_grad():
            return _Run(self, grad_closure, group, state).run()


def _to_device(value, device):
    """A loaded state value: tensors (and lists of them) as fresh tensors on device."""
    if isinstance(value, list):
        return [_to_device(v, device) for v in value]
    if value is None or isinstance(value, (int, float)):
        return value
    host = value.numpy() if hasattr(value, "numpy") else np.asarray(value)
    if host.ndim == 0:
        return host[()]
    return creation.from_numpy(np.ascontiguousarray(host), device=device)


def _loss_value(loss):
    return float(loss.item() if hasattr(loss, "item") else loss)


_HISTORY = ("d", "t", "old_dirs", "old_stps", "ro", "H_diag", "prev_flat_grad", "prev_loss")


class _Run:
    """One LBFGS.step: the iterations, with the history read from and written back to the
    state (under torch's keys)."""

    def __init__(self, opt, closure, group, state):
        self.opt, self.closure, self.group, self.state = opt, closure, group, state
        for key in _HISTORY:
            setattr(self, key, state.get(key))

    def run(self):
        g, state = self.group, self.state
        orig_loss = self.closure()
        loss = _loss_value(orig_loss)
        self.evals = 1
        state["func_evals"] += 1
        flat_grad = self.opt._flat_grad()
        if flat_grad.abs().max().item() <= g["tolerance_grad"]:
            return orig_loss
        n_iter = 0
        while n_iter < g["max_iter"]:
            n_iter += 1
            state["n_iter"] += 1
            self._direction(flat_grad)
            if self.prev_flat_grad is None:
                self.prev_flat_grad = flat_grad.clone()
            else:
                self.prev_flat_grad.copy_(flat_grad)
            self.prev_loss = loss
            self.t = self._first_t(flat_grad) if state["n_iter"] == 1 else g["lr"]
            gtd = self.opt._dot(flat_grad, self.d)
            if gtd > -g["tolerance_change"]:
                break
            loss, flat_grad, stop = self._move(loss, flat_grad, gtd, n_iter == g["max_iter"])
            if stop or n_iter == g["max_iter"] or self.evals >= g["max_eval"]:
                break
            if self.d.mul(self.t).abs().max().item() <= g["tolerance_change"]:
                break
            if abs(loss - self.prev_loss) < g["tolerance_change"]:
                break
        for key in _HISTORY:
            state[key] = getattr(self, key)
        return orig_loss

    def _first_t(self, flat_grad):
        return min(1.0, 1.0 / self.opt._scalar(flat_grad.abs().sum().item())) * self.group["lr"]

    def _direction(self, flat_grad):
        """d from the two-loop recursion (steepest descent on the first iteration), after
        adding the last step's curvature pair when y.s > 1e-10."""
        if self.state["n_iter"] == 1:
            self.d, self.old_dirs, self.old_stps, self.ro, self.H_diag = \
                flat_grad.neg(), [], [], [], 1
            return
        dot = self.opt._dot
        y, s = flat_grad.sub(self.prev_flat_grad), self.d.mul(self.t)
        ys = dot(y, s)
        if ys > 1e-10:
            if len(self.old_dirs) == self.group["history_size"]:
                del self.old_dirs[0], self.old_stps[0], self.ro[0]
            self.old_dirs.append(y)
            self.old_stps.append(s)
            self.ro.append(1.0 / ys)
            self.H_diag = ys / dot(y, y)
        al = self.state.setdefault("al", [None] * self.group["history_size"])
        q = flat_grad.neg()
        for i in range(len(self.old_dirs) - 1, -1, -1):
            al[i] = dot(self.old_stps[i], q) * self.ro[i]
            q.add_(self.old_dirs[i], alpha=-al[i])
        r = q.mul(self.H_diag)
        for i in range(len(self.old_dirs)):
            be_i = dot(self.old_dirs[i], r) * self.ro[i]
            r.add_(self.old_stps[i], alpha=al[i] - be_i)
        self.d = r

    def _move(self, loss, flat_grad, gtd, last):
        """Step along d (fixed t or line search): (loss, flat gradient, gradient small)."""
        opt, g = self.opt, self.group
        if g["line_search_fn"] == "strong_wolfe":
            x = [p.clone() for p in opt._params]
            search = _WolfeSearch(lambda t: opt._evaluate_at(self.closure, x, t, self.d),
                                  self.d, loss, flat_grad, gtd, opt._scalar, tolerance_change=1e-9,
                                  max_ls=g["max_eval"] - self.evals)
            loss, flat_grad, self.t, evals = search.run(self.t)
            opt._add_step(self.t, self.d)
        else:
            opt._add_step(self.t, self.d)
            evals = 0
            if not last:
                loss, flat_grad, evals = _loss_value(self.closure()), opt._flat_grad(), 1
        self.evals += evals
        self.state["func_evals"] += evals
        small = flat_grad.abs().max().item() <= g["tolerance_grad"]
        return loss, flat_grad, small
