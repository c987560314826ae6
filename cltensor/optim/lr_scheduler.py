"""Learning-rate schedulers: LRScheduler, StepLR and CosineAnnealingLR (torch.optim.lr_scheduler).

The values follow torch's recursive formulas (each step from the group's current lr), and
`step(epoch)` uses the closed forms, so both give torch's numbers.
"""
import contextlib
import functools
import math
import numbers
import warnings
import weakref

from .optimizer import Optimizer

__all__ = ["LRScheduler", "StepLR", "CosineAnnealingLR"]


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
        self._step_count = 0
        self._is_initial = True
        self.step()
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
        with self._in_step():
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                warnings.warn("the epoch parameter in `scheduler.step()` is deprecated",
                              UserWarning, stacklevel=2)
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
