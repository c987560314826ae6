"""The globals a user allows load() to rebuild beyond tensors and plain data, as torch's
add_safe_globals / safe_globals: a class of their own (a dataclass, an enum) or a function, named
in the file as "module.qualname" (or by the name given with it as an (object, name) pair)."""
import contextlib
import threading

_allowed = {}  # object or (object, name) -> "module.qualname"
_lock = threading.Lock()


def _name(entry):
    if isinstance(entry, tuple):
        if len(entry) != 2 or not isinstance(entry[1], str):
            raise TypeError(f"add_safe_globals: a tuple entry must be (object, 'module.name'), "
                            f"got {entry!r}")
        return entry[1]
    module, qualname = getattr(entry, "__module__", None), getattr(entry, "__qualname__", None)
    if not (isinstance(module, str) and isinstance(qualname, str)):
        raise TypeError(f"add_safe_globals: {entry!r} is not a class or function (it has no "
                        f"__module__ and __qualname__); pass (object, 'module.name')")
    return f"{module}.{qualname}"


def add_safe_globals(safe_globals):
    """Let load() rebuild these globals (classes or functions, or (object, "module.name")
    pairs) from a checkpoint, as torch.serialization.add_safe_globals: only for code you trust."""
    if not isinstance(safe_globals, (list, tuple, set)):
        raise TypeError(f"add_safe_globals: expected a list of globals, got "
                        f"{type(safe_globals).__name__}")
    names = {entry: _name(entry) for entry in safe_globals}
    with _lock:
        _allowed.update(names)


def get_safe_globals():
    """The globals add_safe_globals allowed, in the order they were added."""
    with _lock:
        return list(_allowed)


def clear_safe_globals():
    """Forget every global add_safe_globals allowed."""
    with _lock:
        _allowed.clear()


@contextlib.contextmanager
def safe_globals(safe_globals):
    """add_safe_globals for the duration of a with block (the earlier list comes back after)."""
    with _lock:
        before = dict(_allowed)
    add_safe_globals(safe_globals)
    try:
        yield
    finally:
        with _lock:
            _allowed.clear()
            _allowed.update(before)


def allowed():
    """{"module.qualname": object} for the unpickler."""
    with _lock:
        return {name: entry[0] if isinstance(entry, tuple) else entry
                for entry, name in _allowed.items()}
