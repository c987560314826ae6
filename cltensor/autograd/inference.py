"""inference_mode: torch's faster no_grad for code that never backpropagates."""
import contextlib
import functools
import threading

from .engine import _set_enabled, is_grad_enabled

_state = threading.local()


def is_inference_mode_enabled():
    """True inside inference_mode() (and not inside an inference_mode(False) in it)."""
    return getattr(_state, "enabled", False)


class inference_mode(contextlib.ContextDecorator):
    """Context manager and decorator, as torch.inference_mode: ops inside record no graph.

    inference_mode(False) turns grad mode back on for its body. As a decorator it is written
    @inference_mode() or @inference_mode. Here it is no_grad plus the flag that
    is_inference_mode_enabled() reads: tensors made inside are ordinary tensors (torch marks
    them as inference tensors and refuses them in autograd later).

    Example:
        with cltensor.inference_mode():
            logits = model(x)
    """

    def __new__(cls, mode=True):
        if callable(mode):  # @inference_mode without parentheses
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode=True):
        if not isinstance(mode, bool):
            raise TypeError(f"inference_mode: mode must be a bool, got {type(mode).__name__}")
        self.mode = mode

    def __call__(self, fn):
        wrapped = super().__call__(fn)
        return functools.wraps(fn)(wrapped)

    def __enter__(self):
        self.prev = (is_grad_enabled(), is_inference_mode_enabled())
        _set_enabled(not self.mode)
        _state.enabled = self.mode
        return self

    def __exit__(self, *exc):
        _set_enabled(self.prev[0])
        _state.enabled = self.prev[1]
        return False
