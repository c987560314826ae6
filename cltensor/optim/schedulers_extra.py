"""More learning-rate schedulers, with torch.optim.lr_scheduler's names, formulas and
state_dict: ConstantLR, MultiplicativeLR, PolynomialLR, CosineAnnealingWarmRestarts, CyclicLR,
SequentialLR and ChainedScheduler. cltensor.optim.lr_scheduler exports them all."""
import bisect
import math
import types

from .schedulers import (LRScheduler, ReduceLROnPlateau, _lambdas_state_dict,
                         _load_lambdas_state_dict, _per_group)
from .optimizer import Optimizer

__all__ = ["ConstantLR", "MultiplicativeLR", "PolynomialLR", "CosineAnnealingWarmRestarts",
           "CyclicLR", "SequentialLR", "ChainedScheduler"]


def _group_lrs(optimizer):
    return [group["lr"] for group in optimizer.param_groups]


class ConstantLR(LRScheduler):
    """Multiply each group's lr by factor until epoch total_iters, then restore it.

    Example:
        warmup = ConstantLR(opt, factor=0.5, total_iters=4)
    """

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        if self.last_epoch == 0:
            return [lr * self.factor for lr in _group_lrs(self.optimizer)]
        if self.last_epoch != self.total_iters:
            return _group_lrs(self.optimizer)
        return [lr * (1.0 / self.factor) for lr in _group_lrs(self.optimizer)]

    def _get_closed_form_lr(self):
        return [base * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base in self.base_lrs]


class MultiplicativeLR(LRScheduler):
    """Multiply each group's lr by lr_lambda(epoch) every epoch after the first (one function
    for every group, or one per group).

    Example:
        sched = MultiplicativeLR(opt, lambda epoch: 0.95)
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"Expected {n} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise TypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        if self._is_initial:
            return _group_lrs(self.optimizer)
        return [group["lr"] * fn(self.last_epoch)
                for fn, group in zip(self.lr_lambdas, self.optimizer.param_groups)]

    def state_dict(self):
        """As torch: functions are left out (their attributes kept for callable objects)."""
        return _lambdas_state_dict(self)

    def load_state_dict(self, state_dict):
        _load_lambdas_state_dict(self, state_dict)


class PolynomialLR(LRScheduler):
    """Decay each group's lr polynomially to 0 over total_iters epochs:
    lr = initial_lr * (1 - min(epoch, total_iters) / total_iters) ** power.

    Example:
        sched = PolynomialLR(opt, total_iters=50, power=0.9)
    """

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        t, total = self.last_epoch, self.total_iters
        if self._is_initial or t > total:
            return _group_lrs(self.optimizer)
        factor = ((1.0 - t / total) / (1.0 - (t - 1) / total)) ** self.power
        return [lr * factor for lr in _group_lrs(self.optimizer)]

    def _get_closed_form_lr(self):
        return [base * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters)
                ** self.power for base in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from each group's initial lr to eta_min over T_i epochs, restarting
    after each period; the period starts at T_0 and is multiplied by T_mult at each restart.
    step(epoch) takes fractional epochs (steps within an epoch).

    Example:
        sched = CosineAnnealingWarmRestarts(opt, T_0=10, T_mult=2)
        for epoch in range(20):
            for i, batch in enumerate(loader):
                ...; sched.step(epoch + i / len(loader))
    """

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        if not isinstance(T_0, int) or T_0 <= 0:
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type "
                             f"{type(eta_min)}")
        self.T_0 = self.T_i = T_0
        self.T_mult, self.eta_min = T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        return [self.eta_min + (base - self.eta_min) *
                (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2 for base in self.base_lrs]

    def step(self, epoch=None):
        """Advance one epoch, or go to `epoch` (a number, fractions allowed)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur, self.T_i = self.T_cur % self.T_i, self.T_i * self.T_mult
        else:
            self._restart_at(epoch)
        self.last_epoch = math.floor(epoch)
        with self._in_step():
            values = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = _group_lrs(self.optimizer)

    def _restart_at(self, epoch):
        if epoch < 0:
            raise ValueError(f"Expected non-negative epoch, but got {epoch}")
        if epoch < self.T_0:
            self.T_i, self.T_cur = self.T_0, epoch
        elif self.T_mult == 1:
            self.T_cur = epoch % self.T_0
        else:
            n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
            self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
            self.T_i = self.T_0 * self.T_mult ** n


class CyclicLR(LRScheduler):
    """The cyclical learning rate policy (Smith): each group's lr goes from base_lr up to max_lr
    over step_size_up steps and back over step_size_down, the amplitude scaled per cycle
    ("triangular": 1, "triangular2": halved each cycle) or per step ("exp_range": gamma **
    step), or by scale_fn; with cycle_momentum the momentum (or Adam's beta1) cycles the
    other way between max_momentum and base_momentum. Step it once per batch.

    Example:
        sched = CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=200)
    """

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None,
                 mode="triangular", gamma=1.0, scale_fn=None, scale_mode="cycle",
                 cycle_momentum=True, base_momentum=0.8, max_momentum=0.9, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer, groups = optimizer, optimizer.param_groups
        base_lrs = _per_group(base_lr, groups, "base_lr", "CyclicLR")
        if last_epoch == -1:
            for lr, group in zip(base_lrs, groups):
                group["lr"] = lr
        self.max_lrs = _per_group(max_lr, groups, "max_lr", "CyclicLR")
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size, self.step_ratio = up + down, up / (up + down)
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode, self.gamma, self.scale_mode = mode, gamma, scale_mode
        self._scale_fn_custom = scale_fn
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self._init_momentum(base_momentum, max_momentum, last_epoch)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_momentum(self, base_momentum, max_momentum, last_epoch):
        defaults, groups = self.optimizer.defaults, self.optimizer.param_groups
        if "momentum" not in defaults and "betas" not in defaults:
            raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` "
                             "option enabled")
        self.use_beta1 = "betas" in defaults
        self.base_momentums = _per_group(base_momentum, groups, "base_momentum", "CyclicLR")
        self.max_momentums = _per_group(max_momentum, groups, "max_momentum", "CyclicLR")
        if last_epoch == -1:
            for top, bottom, group in zip(self.max_momentums, self.base_momentums, groups):
                self._set_momentum(group, top)
                group["max_momentum"], group["base_momentum"] = top, bottom

    def _set_momentum(self, group, value):
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _init_scale_fn(self):
        if self._scale_fn_custom is not None:
            return
        if self.mode in ("triangular", "triangular2"):
            self.scale_mode = "cycle"
        elif self.mode == "exp_range":
            self.scale_mode = "iterations"

    def scale_fn(self, x):
        """The amplitude's scale at cycle (or step) x."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self):
        self._warn_outside_step()
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            rise = x / self.step_ratio
        else:
            rise = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [base + (top - base) * rise * scale
               for base, top in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, bottom, top in zip(self.optimizer.param_groups, self.base_momentums,
                                          self.max_momentums):
                self._set_momentum(group, top - (top - bottom) * rise * scale)
        return lrs

    def state_dict(self):
        """As torch: a custom scale_fn is left out (its attributes kept for callable
        objects)."""
        state = super().state_dict()
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None if fn is None or isinstance(
            fn, types.FunctionType) else fn.__dict__.copy()
        return state

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        fn = state.pop("_scale_fn_custom")
        super().load_state_dict(state)
        if fn is not None:
            self._scale_fn_custom.__dict__.update(fn)
        self._init_scale_fn()


def _check_schedulers(owner, schedulers, optimizer):
    for i, sched in enumerate(schedulers):
        if not hasattr(sched, "optimizer"):
            raise TypeError(f"{owner} at index {i} should have `optimizer` as its attribute.")
        if isinstance(sched, ReduceLROnPlateau):
            raise ValueError(f"{owner} does not support `ReduceLROnPlateau` scheduler as it "
                             f"requires additional kwargs to be specified when calling `step`, "
                             f"but got one at index {i} in the given schedulers sequence.")
        if optimizer is not sched.optimizer:
            raise ValueError(f"{owner} expects all schedulers to belong to the same optimizer, "
                             f"but got scheduler {type(sched).__name__} at index {i} has "
                             f"{sched.optimizer}, which is different from "
                             f"{type(optimizer).__name__}.")


class _Composite(LRScheduler):
    """state_dict / load_state_dict of a scheduler made of others (their states nested)."""

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        nested = state.pop("_schedulers")
        self.__dict__.update(state)
        for sched, saved in zip(self._schedulers, nested):
            sched.load_state_dict(saved)


class SequentialLR(_Composite):
    """Run schedulers one after another: schedulers[i] from milestones[i - 1] on (each
    restarted at its milestone from the groups' initial lr).

    Example:
        warmup = LinearLR(opt, start_factor=0.1, total_iters=5)
        decay = ExponentialLR(opt, gamma=0.9)
        sched = SequentialLR(opt, [warmup, decay], milestones=[5])
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(schedulers) < 1:
            raise ValueError("SequentialLR expects at least one scheduler, but got no "
                             "scheduler.")
        _check_schedulers("SequentialLR", schedulers, optimizer)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"Sequential Schedulers expects number of schedulers provided to "
                             f"be one more than the number of milestone points, but got number "
                             f"of schedulers {len(schedulers)} and the number of milestones to "
                             f"be equal to {len(milestones)}")
        self._schedulers, self._milestones = list(schedulers), list(milestones)
        self.last_epoch, self.optimizer = last_epoch + 1, optimizer
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        _undo_step(self)  # each scheduler made its step 0 already; the first redoes it
        first = self._schedulers[bisect.bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def step(self):
        """Step the scheduler of the current epoch (restarting it at its milestone)."""
        self.last_epoch += 1
        idx = bisect.bisect_right(self._milestones, self.last_epoch)
        sched = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            sched._update_lr(0)
        else:
            sched.step()
        self._last_lr = sched.get_last_lr()


def _undo_step(sched):
    """last_epoch -= 1 for every scheduler under `sched` (nested ones included)."""
    if hasattr(sched, "_schedulers"):
        for inner in sched._schedulers:
            _undo_step(inner)
    elif hasattr(sched, "last_epoch"):
        sched.last_epoch -= 1


class ChainedScheduler(_Composite):
    """Step several schedulers of one optimizer together, each multiplying in its change.

    Example:
        sched = ChainedScheduler([ConstantLR(opt, factor=0.1, total_iters=2),
                                  ExponentialLR(opt, gamma=0.9)])
    """

    def __init__(self, schedulers, optimizer=None):
        if len(schedulers) < 1:
            raise ValueError("ChainedScheduler expects at least one scheduler to be chained, "
                             "but got no scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        _check_schedulers("ChainedScheduler", schedulers, optimizer)
        self._schedulers, self.optimizer = list(schedulers), optimizer
        self._last_lr = _group_lrs(self._schedulers[-1].optimizer)

    def step(self):
        """Step every scheduler in order."""
        for sched in self._schedulers:
            sched.step()
        self._last_lr = _group_lrs(self._schedulers[-1].optimizer)
