"""GradScaler: dynamic loss scaling for float16 training, with torch.amp.GradScaler's methods
and semantics (skip the step and back off on infinite or NaN gradients, grow the scale after
growth_interval clean steps)."""
import enum

from .. import dtypes as dt
from ..creation import tensor as _tensor
from ..tensor import ClTensor
from . import kernels


class _OptState(enum.Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


class GradScaler:
    """Scale the loss so that float16 gradients do not underflow, and undo it before the step.

    Args:
        device: accepted as torch takes it ("cuda", "opencl", ...); the tensors' devices count.
        init_scale: the first scale (2**16).
        growth_factor: the scale's factor after growth_interval steps without inf/NaN (2.0).
        backoff_factor: its factor after a step with inf/NaN gradients (0.5).
        growth_interval: clean steps between growths (2000).
        enabled: False makes every method a pass-through (scale returns its input).

    Example:
        scaler = cltensor.amp.GradScaler()
        with cltensor.autocast("opencl", dtype=cltensor.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)      # skipped when a gradient is inf/NaN
        scaler.update()             # halves the scale then, grows it after 2000 clean steps
    """

    def __init__(self, device="opencl", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        if not growth_factor > 1.0:
            raise ValueError(f"GradScaler: growth_factor must be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got "
                             f"{backoff_factor}")
        if not (isinstance(growth_interval, int) and growth_interval > 0):
            raise ValueError(f"GradScaler: growth_interval must be a positive int, got "
                             f"{growth_interval!r}")
        self._device = device
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval = growth_interval
        self._growth_tracker = 0
        self._scale_tensors = {}  # device -> 0-d float32 tensor holding _scale
        self._per_optimizer = {}  # id(optimizer) -> {"stage", "found_inf"}

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    # ---- scale, unscale_, step, update ----------------------------------------------------------

    def scale(self, outputs):
        """outputs * scale: a tensor, or tensors in (nested) lists, tuples and dict values."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, ClTensor):
            return outputs * self._scale_on(outputs.device)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if isinstance(outputs, dict):
            return {k: self.scale(v) for k, v in outputs.items()}
        raise TypeError(f"GradScaler.scale: expected a tensor or tensors in lists, tuples or "
                        f"dicts, got {type(outputs).__name__}")

    def _scale_on(self, device):
        t = self._scale_tensors.get(device)
        if t is None:  # a 0-d float32 tensor: a float32 loss stays float32, as in torch
            t = self._scale_tensors[device] = _tensor(self._scale, dtype=dt.float32,
                                                      device=device)
        return t

    def _state_of(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _OptState.READY,
                                                              "found_inf": None})

    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale in place, noting inf/NaN among them
        (a few launches: eight gradients each); at most once per optimizer between updates."""
        if not self._enabled:
            return
        state = self._state_of(optimizer)
        if state["stage"] is _OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since "
                               "the last update().")
        if state["stage"] is _OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        grads = [p.grad for group in optimizer.param_groups for p in group["params"]
                 if p.grad is not None]
        if any(g.dtype is dt.float16 for g in grads):
            raise ValueError("Attempting to unscale FP16 gradients.")
        found = None
        if grads:
            found = kernels.new_flag(grads[0].device)
            kernels.unscale_and_check(grads, 1.0 / self._scale, found)
        state["found_inf"], state["stage"] = found, _OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """unscale_ (unless done) and optimizer.step(), skipped when a gradient is inf/NaN;
        returns step's result, or None when skipped."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        state = self._state_of(optimizer)
        if state["stage"] is _OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is _OptState.READY:
            self.unscale_(optimizer)
        result = None
        if not self._found(state):
            result = optimizer.step(*args, **kwargs)
        state["stage"] = _OptState.STEPPED
        return result

    @staticmethod
    def _found(state):
        flag = state["found_inf"]
        if flag is not None and "found" not in state:
            state["found"] = flag.item() != 0  # one read per optimizer and step
        return state.get("found", False)

    def update(self, new_scale=None):
        """Set the scale for the next iteration: new_scale if given (a number or a tensor of
        one element), else backoff_factor * scale after inf/NaN gradients in some optimizer
        since the last update, growth_factor * scale after growth_interval clean updates."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if isinstance(new_scale, ClTensor)
                                else new_scale)
        else:
            states = [s for s in self._per_optimizer.values() if s["found_inf"] is not None]
            if not states:
                raise RuntimeError("No inf checks were recorded prior to update.")
            if any(self._found(s) for s in states):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._scale_tensors.clear()
        self._per_optimizer.clear()

    # ---- checkpoints ------------------------------------------------------------------------------

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
        self._scale_tensors.clear()
