"""torch.compile's place: cltensor runs every model eagerly, op by op, so compile() hands the
model (or function) back as it is; the results are those of the eager run, as torch's with
backend="eager"."""

__all__ = ["compile", "disable", "is_compiling"]

_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None,  # noqa: A001
            options=None, disable=False):
    """The model or function unchanged (a decorator without a model); torch's arguments are
    checked and have no effect.

    Example:
        model = cltensor.compile(model)   # a torch 2 script's line; runs as before
    """
    if mode not in _MODES:
        raise ValueError(f"compile: unknown mode {mode!r}; torch's are {_MODES[1:]}")
    if mode is not None and options is not None:
        raise ValueError("compile: give mode or options, not both (as torch)")
    if model is None:
        return lambda fn: fn
    if not callable(model):
        raise TypeError(f"compile: expected a Module or a function, got {type(model).__name__}")
    return model


def disable(fn=None, recursive=True):
    """torch.compiler.disable: fn as it is (nothing is compiled here)."""
    return (lambda f: f) if fn is None else fn


def is_compiling():
    """False: nothing is ever being compiled."""
    return False
