"""Learning-rate schedulers (torch.optim.lr_scheduler): LRScheduler, StepLR, MultiStepLR,
ExponentialLR, LambdaLR, LinearLR, CosineAnnealingLR, OneCycleLR and ReduceLROnPlateau; the rest
(ConstantLR, CyclicLR, SequentialLR, ...) build on them in schedulers_extra.py.

The values follow torch's recursive formulas (each step from the group's current lr), and
`step(epoch)` uses the closed forms, so both give torch's numbers.
"""
import bisect
import contextlib
import functools
import math
import numbers
import types
import warnings
import weakref

from .optimizer import Optimizer

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "LambdaLR", "LinearLR",
           "CosineAnnealingLR", "OneCycleLR", "ReduceLROnPlateau"]


class LRScheduler:
    """Base class: sets every group's "lr" from `get_lr()` on each `step()`.

    Making a scheduler records each group's "initial_lr" and performs step 0 (last_epoch
    becomes 0). Call `scheduler.step()` after `optimizer.step()`, once per epoch.

    Args:
        optimizer: the Optimizer whose learning rates are scheduled.
        last_epoch: the index of the last epoch when resuming; -1 starts afresh.
    """

    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   f"when resuming a scheduler with last_epoch={last_epoch}")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        _track_optimizer_steps(optimizer)
        self._initial_step()

    def _initial_step(self):
        """Step 0, made on construction (and by SequentialLR when a scheduler takes over)."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self):
        """The next learning rate of each group (subclasses; called by step)."""
        raise NotImplementedError

    def get_last_lr(self):
        """The learning rates set by the last step, one per group."""
        return self._last_lr

    def step(self, epoch=None):
        """Advance one epoch (or, deprecated, jump to `epoch` using the closed form)."""
        if self._step_count == 1 and not getattr(self.optimizer, "_opt_called", False):
            warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`: "
                          "call them in the opposite order, or the first value of the "
                          "schedule is skipped", UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn("the epoch parameter in `scheduler.step()` is deprecated",
                          UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        """Set the groups' lr for the next epoch, or for `epoch` by the closed form."""
        with self._in_step():
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                values = self._get_closed_form_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    @contextlib.contextmanager
    def _in_step(self):
        self._get_lr_called_within_step = True
        try:
            yield
        finally:
            self._get_lr_called_within_step = False

    def _warn_outside_step(self):
        if not getattr(self, "_get_lr_called_within_step", False):
            warnings.warn("To get the last learning rate computed by the scheduler, please use "
                          "`get_last_lr()`.", UserWarning, stacklevel=3)

    def _get_closed_form_lr(self):
        return self.get_lr()

    def state_dict(self):
        """Everything but the optimizer (numbers and lists)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


class _LRScheduler(LRScheduler):
    """The old name of LRScheduler, which older scripts subclass (as torch keeps it)."""


def _track_optimizer_steps(optimizer):
    """Wrap optimizer.step so the scheduler can warn when it steps first (as torch does)."""
    if hasattr(optimizer.step, "_wrapped_by_lr_sched"):
        return
    func = optimizer.step.__func__
    ref = weakref.ref(optimizer)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        opt = ref()
        opt._opt_called = True
        return func(opt, *args, **kwargs)

    wrapper._wrapped_by_lr_sched = True
    optimizer.step = wrapper


def _positive_int(value, name, owner):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{owner}: {name} must be a positive integer, got {value!r}")
    return int(value)


class StepLR(LRScheduler):
    """Multiply each group's lr by gamma every step_size epochs:
    lr = initial_lr * gamma ** (epoch // step_size).

    Example:
        sched = StepLR(opt, step_size=30, gamma=0.1)
        for epoch in range(100):
            train(...); sched.step()
    """

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = _positive_int(step_size, "step_size", "StepLR")
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size)
                for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from each group's initial lr down to eta_min over T_max epochs (and
    back up over the next T_max, periodically):
    lr = eta_min + (initial_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2.

    Example:
        sched = CosineAnnealingLR(opt, T_max=50, eta_min=1e-5)
    """

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max = _positive_int(T_max, "T_max", "CosineAnnealingLR")
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        groups, t, T = self.optimizer.param_groups, self.last_epoch, self.T_max
        if self._is_initial:
            return [group["lr"] for group in groups]
        if self._step_count == 1 and t > 0:
            return [self.eta_min + (base - self.eta_min) * (1 + math.cos(t * math.pi / T)) / 2
                    for base in self.base_lrs]
        if (t - 1 - T) % (2 * T) == 0:
            return [group["lr"] + (base - self.eta_min) * (1 - math.cos(math.pi / T)) / 2
                    for base, group in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T))
                * (group["lr"] - self.eta_min) + self.eta_min for group in groups]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply each group's lr by gamma at each milestone epoch (a milestone given twice
    multiplies twice): lr = initial_lr * gamma ** (milestones passed).

    Example:
        sched = MultiStepLR(opt, milestones=[30, 80], gamma=0.1)
    """

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        milestones = list(milestones)
        for m in milestones:
            _positive_int(m, "milestones", "MultiStepLR")
        self.milestones = sorted(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        times = self.milestones.count(self.last_epoch)
        return [group["lr"] * self.gamma ** times for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        passed = bisect.bisect_right(self.milestones, self.last_epoch)
        return [base * self.gamma ** passed for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply each group's lr by gamma every epoch: lr = initial_lr * gamma ** epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        groups = self.optimizer.param_groups
        if self._is_initial:
            return [group["lr"] for group in groups]
        return [group["lr"] * self.gamma for group in groups]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class LambdaLR(LRScheduler):
    """lr = initial_lr * lr_lambda(epoch), one function for every group or one per group.

    Example:
        sched = LambdaLR(opt, lambda epoch: 0.95 ** epoch)
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * n
        if len(lambdas) != n:
            raise ValueError(f"LambdaLR: expected {n} lr_lambdas, got {len(lambdas)}")
        if not all(callable(f) for f in lambdas):
            raise TypeError("LambdaLR: lr_lambda must be a callable or a list of callables")
        self.lr_lambdas = lambdas
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        return [base * f(self.last_epoch) for base, f in zip(self.base_lrs, self.lr_lambdas)]

    def state_dict(self):
        """As LRScheduler's, without the functions (give them again when loading)."""
        return {k: v for k, v in super().state_dict().items() if k != "lr_lambdas"}

    def load_state_dict(self, state_dict):
        """Also takes torch's layout, whose 'lr_lambdas' holds None per function (and a
        callable object's attributes): the functions given to the constructor stay."""
        _load_lambdas_state_dict(self, state_dict)


def _lambdas_state_dict(sched):
    """state_dict of LambdaLR / MultiplicativeLR: 'lr_lambdas' holds None for a function and
    the attributes of a callable object."""
    state = {k: v for k, v in sched.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
    state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                           for fn in sched.lr_lambdas]
    return state


def _load_lambdas_state_dict(sched, state_dict):
    state = dict(state_dict)
    saved = state.pop("lr_lambdas", None) or []
    sched.__dict__.update(state)
    for fn, attrs in zip(sched.lr_lambdas, saved):
        if attrs is not None:
            fn.__dict__.update(attrs)


class LinearLR(LRScheduler):
    """Scale each group's lr linearly from start_factor to end_factor over total_iters epochs
    (a warm-up), then keep it: lr = initial_lr * (start + (end - start) * min(epoch, total) /
    total).

    Example:
        warmup = LinearLR(opt, start_factor=0.1, total_iters=5)
    """

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise ValueError(f"LinearLR: start_factor must be in (0, 1] and end_factor in "
                             f"[0, 1], got {start_factor} and {end_factor}")
        self.start_factor, self.end_factor = start_factor, end_factor
        self.total_iters = _positive_int(total_iters, "total_iters", "LinearLR")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        groups, t = self.optimizer.param_groups, self.last_epoch
        if t == 0:
            return [group["lr"] * self.start_factor for group in groups]
        if self._is_initial or t > self.total_iters:
            return [group["lr"] for group in groups]
        span = self.end_factor - self.start_factor
        ratio = 1 + span / (self.total_iters * self.start_factor + (t - 1) * span)
        return [group["lr"] * ratio for group in groups]

    def _get_closed_form_lr(self):
        done = min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * (self.start_factor + (self.end_factor - self.start_factor) * done)
                for base in self.base_lrs]


class OneCycleLR(LRScheduler):
    """The one-cycle policy (Smith): the lr rises from max_lr / div_factor to max_lr over the
    first pct_start of total_steps, then anneals to max_lr / div_factor / final_div_factor
    (three_phase: back to the start first), cosine or linear; momentum (SGD's, or Adam's
    beta1) cycles the other way between max_momentum and base_momentum. Step it once per
    batch.

    Example:
        sched = OneCycleLR(opt, max_lr=0.1, total_steps=1000)
    """

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
                 max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False,
                 last_epoch=-1):
        name = "OneCycleLR"
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError(f"{name}: give total_steps, or epochs and steps_per_epoch")
            total_steps = _positive_int(epochs, "epochs", name) * \
                _positive_int(steps_per_epoch, "steps_per_epoch", name)
        self.total_steps = _positive_int(total_steps, "total_steps", name)
        if not 0 <= pct_start <= 1 or isinstance(pct_start, bool):
            raise ValueError(f"{name}: pct_start must be in [0, 1], got {pct_start!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"{name}: anneal_strategy must be 'cos' or 'linear', got "
                             f"{anneal_strategy!r}")
        self.anneal_strategy = anneal_strategy
        groups = optimizer.param_groups
        max_lrs = _per_group(max_lr, groups, "max_lr", name)
        end = float(pct_start * self.total_steps) - 1
        phases = [(end, "initial_lr", "max_lr", "max_momentum", "base_momentum")]
        if three_phase:
            phases.append((float(2 * pct_start * self.total_steps) - 2, "max_lr", "initial_lr",
                           "base_momentum", "max_momentum"))
        phases.append((self.total_steps - 1, phases[-1][2], "min_lr", phases[-1][4],
                       "max_momentum"))
        self._phases = phases
        if last_epoch == -1:
            for group, top in zip(groups, max_lrs):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self._use_beta1 = "betas" in optimizer.defaults
            if not self._use_beta1 and "momentum" not in optimizer.defaults:
                raise ValueError(f"{name}: optimizer must support momentum or beta1 with "
                                 f"cycle_momentum enabled")
            bases = _per_group(base_momentum, groups, "base_momentum", name)
            tops = _per_group(max_momentum, groups, "max_momentum", name)
            if last_epoch == -1:
                for group, lo, hi in zip(groups, bases, tops):
                    self._set_momentum(group, hi)
                    group["max_momentum"], group["base_momentum"] = hi, lo
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group, value):
        if self._use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        self._warn_outside_step()
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: tried to step {step} times; the total number of "
                             f"steps is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr0, lr1, m0, m1) in enumerate(self._phases):
                if step <= end or i == len(self._phases) - 1:
                    pct = (step - start) / (end - start)
                    lr = self._anneal(group[lr0], group[lr1], pct)
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[m0], group[m1], pct))
                    break
                start = end
            lrs.append(lr)
        return lrs


def _per_group(value, groups, name, owner):
    """value for each group: a number for all of them, or a list or tuple of one per group."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(groups):
            raise ValueError(f"{owner}: expected {len(groups)} values for {name}, got "
                             f"{len(value)}")
        return list(value)
    return [value] * len(groups)


class ReduceLROnPlateau(LRScheduler):
    """Multiply each group's lr by factor once the metric given to step(metric) has not
    improved for `patience` epochs (then wait `cooldown` epochs), never below min_lr.

    Args:
        mode: "min" (the metric should fall) or "max".
        threshold, threshold_mode: an improvement beats the best by threshold, relative
            ("rel") or absolute ("abs").
        eps: changes of the lr smaller than this are skipped.

    Example:
        sched = ReduceLROnPlateau(opt, patience=3)
        for epoch in range(100):
            val_loss = evaluate(...); sched.step(val_loss)
    """

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError(f"Factor should be < 1.0. (ReduceLROnPlateau got factor={factor})")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        if mode not in ("min", "max"):
            raise ValueError(f"mode {mode} is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold mode {threshold_mode} is unknown!")
        if isinstance(min_lr, (list, tuple)) and len(min_lr) != len(optimizer.param_groups):
            raise ValueError(f"expected {len(optimizer.param_groups)} min_lrs, got "
                             f"{len(min_lr)}")
        self.default_min_lr = None if isinstance(min_lr, (list, tuple)) else min_lr
        self.optimizer = optimizer
        self.min_lrs = _per_group(min_lr, optimizer.param_groups, "min_lr", "ReduceLROnPlateau")
        self.mode, self.factor, self.patience = mode, factor, patience
        self.threshold, self.threshold_mode = threshold, threshold_mode
        self.cooldown, self.eps = cooldown, eps
        self.mode_worse = self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = 0
        self.last_epoch = 0
        self._last_lr = [group["lr"] for group in optimizer.param_groups]

    def _better(self, a, best):
        if self.mode == "min":
            bound = best * (1 - self.threshold) if self.threshold_mode == "rel" else \
                best - self.threshold
            return a < bound
        bound = best * (1 + self.threshold) if self.threshold_mode == "rel" else \
            best + self.threshold
        return a > bound

    def step(self, metrics, epoch=None):
        """Record this epoch's metric (a number, or a 1-element tensor); `epoch` (deprecated)
        sets last_epoch."""
        current = float(metrics.item() if hasattr(metrics, "item") else metrics)
        if epoch is not None:
            warnings.warn("the epoch parameter in `scheduler.step()` is deprecated",
                          UserWarning, stacklevel=2)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self._better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._match_groups()
            for group, floor in zip(self.optimizer.param_groups, self.min_lrs):
                new = max(group["lr"] * self.factor, floor)
                if group["lr"] - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _match_groups(self):
        """min_lrs for groups added since construction: the default, when one number was
        given."""
        n = len(self.optimizer.param_groups)
        if len(self.min_lrs) != n:
            if self.default_min_lr is None:
                raise RuntimeError(f"ReduceLROnPlateau: the optimizer has {n} parameter groups, "
                                   f"{len(self.min_lrs)} when the scheduler was made; set "
                                   f"min_lrs to one value per group")
            self.min_lrs = [self.default_min_lr] * n
