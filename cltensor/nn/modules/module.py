"""Module and Parameter: torch.nn's registration, traversal, state_dict and device/dtype moves."""
from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import numpy as np

from ... import dtypes as dt
from ...autograd import no_grad, zero_grads
from ...creation import DTypeLike, from_numpy
from ...device import DeviceLike, default_device
from ...hooks import RemovableHandle
from ...tensor import ClTensor, to_args
from . import hooks

__all__ = ["Module", "Parameter"]

M = TypeVar("M", bound="Module")  # methods that return self return the caller's own class
Hook = Callable[..., Any]


class _IncompatibleKeys(namedtuple("IncompatibleKeys", "missing_keys unexpected_keys")):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()


_REGISTRIES = ("_parameters", "_buffers", "_modules")
_NOTED = ("_parameters", "_modules")  # the registries that are _Registry objects
_changes = itertools.count()  # next() on every change to any module's _Registry
_changed = [next(_changes)]
_parameter_lists = weakref.WeakKeyDictionary()  # module -> (_changed[0] then, its parameters)


def _bump():
    _changed[0] = next(_changes)
    if _parameter_lists:
        _parameter_lists.clear()  # NOTE: kept lists would hold removed parameters alive


def _noting(name):
    """OrderedDict's method `name`, noting the change first."""
    method = getattr(OrderedDict, name)

    def noted(self, *args, **kwargs):
        _bump()
        return method(self, *args, **kwargs)
    noted.__name__ = name
    return noted


class _Registry(OrderedDict):
    """A module's _parameters or _modules: an OrderedDict that notes every change, so that
    parameters() can keep a module's list until any such registry anywhere changes (buffers
    do not move it: a forward may reassign them every step)."""

    (__init__, __setitem__, __delitem__, __ior__, pop, popitem, clear, setdefault, update,
     move_to_end) = map(_noting, ("__init__", "__setitem__", "__delitem__", "__ior__", "pop",
                                  "popitem", "clear", "setdefault", "update", "move_to_end"))


class Parameter(ClTensor):
    """A tensor that a Module registers as learnable: a leaf that requires grad.

    It shares `data`'s storage, and works everywhere a ClTensor does (results of ops on it are
    plain ClTensors).

    Example:
        w = cltensor.nn.Parameter(cltensor.randn(3, 4))   # w.requires_grad is True
    """

    def __init__(self, data: ClTensor | None = None, requires_grad: bool = True) -> None:
        if data is None:
            data = ClTensor.empty_on((0,), dt.float32, default_device())
        if not isinstance(data, ClTensor):
            raise TypeError(f"Parameter: expected a ClTensor, got {type(data).__name__}")
        super().__init__(data.storage, data.shape, data.strides, data.offset, data.dtype)
        self.requires_grad_(requires_grad)

    @classmethod
    def empty_on(cls, *args, **kwargs):
        # NOTE: ops allocate results through type(out).empty_on; those are never Parameters
        return ClTensor.empty_on(*args, **kwargs)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        out = Parameter(self.detach().clone(), self.requires_grad)
        memo[id(self)] = out
        return out


class Module:
    """Base class of every layer and model, with torch.nn.Module's API.

    Assigning a Parameter or a Module to an attribute registers it; `register_buffer` adds
    state that is saved but not trained (running statistics).

    Example:
        class Net(cltensor.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = cltensor.nn.Linear(4, 2)

            def forward(self, x):
                return self.fc(x).relu()
    """

    def __init__(self) -> None:
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", _Registry())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", _Registry())

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  f'"forward" function')

    _hooked = False  # True once a hook was registered (the hook dicts: hooks.py)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._hooked:
            return hooks.call(self, args, kwargs)
        return self.forward(*args, **kwargs)

    # ---- hooks (called as in torch; see hooks.py) ----------------------------------------------
    def register_forward_pre_hook(self, hook: Hook, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """hook(module, args) (with_kwargs: hook(module, args, kwargs)) runs before forward; a
        result other than None replaces args (with_kwargs: (args, kwargs)). Returns a
        RemovableHandle."""
        return self._add_hook("_forward_pre_hooks", hook, prepend, (hook, bool(with_kwargs)))

    def register_forward_hook(self, hook: Hook, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """hook(module, args, output) (with_kwargs: hook(module, args, kwargs, output)) runs
        after forward; a result other than None replaces the output. always_call: run it also
        when forward raises (output None). Returns a RemovableHandle."""
        entry = (hook, bool(with_kwargs), bool(always_call))
        return self._add_hook("_forward_hooks", hook, prepend, entry)

    def register_full_backward_pre_hook(self, hook: Hook, prepend: bool = False) -> RemovableHandle:
        """hook(module, grad_output) runs when the gradients of the module's outputs are
        known; a result other than None replaces grad_output. Returns a RemovableHandle."""
        return self._add_hook("_backward_pre_hooks", hook, prepend, hook)

    def register_full_backward_hook(self, hook: Hook, prepend: bool = False) -> RemovableHandle:
        """hook(module, grad_input, grad_output) runs when the gradients of the module's
        positional inputs are known (None for those that need none); a result other than None
        replaces grad_input. Returns a RemovableHandle."""
        return self._add_hook("_backward_hooks", hook, prepend, hook)

    def _has_hooks(self):
        """Whether any hook of this module is registered now."""
        d = self.__dict__
        return self._hooked and any(d.get(name) for name in (
            "_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks"))

    def _add_hook(self, name, hook, prepend, entry):
        if not callable(hook):
            raise TypeError(f"{name[1:-1].replace('_', ' ')}: expected a callable, got "
                            f"{type(hook).__name__}")
        registry = self.__dict__.get(name)
        if registry is None:
            registry = OrderedDict()
            object.__setattr__(self, name, registry)
        object.__setattr__(self, "_hooked", True)
        return RemovableHandle(registry, entry, prepend)

    # ---- registration -------------------------------------------------------------------------
    def _check_name(self, name, kind):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
        if name == "" or "." in name:
            raise KeyError(f"{kind} name can't be empty or contain \".\", got {name!r}")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (a Parameter, or None for an absent one such as bias=False)."""
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (Parameter or None required)")
        if param is not None:
            _check_leaf(name, param)
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: ClTensor | None, persistent: bool = True) -> None:
        """Add a tensor that is state but not a parameter (saved in state_dict when persistent)."""
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, ClTensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            f"(ClTensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module (None leaves a named empty slot)."""
        self._check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        d = self.__dict__
        if isinstance(value, Parameter):
            self._check_name(name, "parameters")
            _check_leaf(name, value)
            self._forget(name, keep="_parameters")
            self.register_parameter(name, value)
        elif d.get("_parameters") is not None and name in d["_parameters"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                f"(Parameter or None expected)")
            self._parameters[name] = None
        elif isinstance(value, Module):
            self._check_name(name, "child module")
            self._forget(name, keep="_modules")
            self._modules[name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module "
                                f"'{name}' (Module or None expected)")
            self._modules[name] = None
        elif d.get("_buffers") is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, ClTensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                f"(ClTensor or None expected)")
            self._buffers[name] = value
        else:
            if name in _NOTED and isinstance(value, Mapping):
                value = _Registry(value)  # a registry replaced as a whole
            object.__setattr__(self, name, value)

    def _forget(self, name, keep):
        """Drop `name` from the instance dict and every registry but `keep`, where a reassigned
        name keeps its place (children(), parameters() and state_dict() order, as torch's)."""
        self.__dict__.pop(name, None)
        for reg in _REGISTRIES:
            if reg != keep:
                self.__dict__[reg].pop(name, None)
        self._non_persistent_buffers.discard(name)

    def __getattr__(self, name):
        # NOTE: only called when normal lookup fails, so registered names resolve here
        d = self.__dict__
        for reg in _REGISTRIES:
            if reg in d and name in d[reg]:
                return d[reg][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for reg in _REGISTRIES:
            if name in self.__dict__[reg]:
                del self.__dict__[reg][name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def __setstate__(self, state):
        # NOTE: unpickled registries of an older Module may be plain dicts; make them note changes
        self.__dict__.update(state)
        for reg in _NOTED:
            value = self.__dict__.get(reg)
            if value is not None and not isinstance(value, _Registry):
                self.__dict__[reg] = _Registry(value)
        _bump()

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers)
                      | set(self._modules))

    # ---- traversal ----------------------------------------------------------------------------
    def named_modules(self, memo: set[Module] | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """(name, module) for this module and every descendant, each once; this one first."""
        # NOTE: a stack, not recursive generators: each level of `yield from` cost every
        # module above it a resumption (GoogLeNet's parameters(): 0.49 ms a call)
        memo = set() if memo is None else memo
        stack = [(prefix, self)]
        while stack:
            pre, mod = stack.pop()
            if remove_duplicate:
                if mod in memo:
                    continue
                memo.add(mod)
            yield pre, mod
            stack.extend(reversed([(_join(pre, name), child)
                                   for name, child in mod._modules.items() if child is not None]))

    def modules(self) -> Iterator[Module]:
        return (m for _, m in self.named_modules())

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen = set()
        for name, child in self._modules.items():
            if child is not None and child not in seen:
                seen.add(child)
                yield name, child

    def children(self) -> Iterator[Module]:
        return (m for _, m in self.named_children())

    def _named_members(self, registry, prefix, recurse, remove_duplicate=True):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for mod_prefix, mod in mods:
            for name, value in getattr(mod, registry).items():
                if value is None or (remove_duplicate and value in seen):
                    continue
                seen.add(value)
                yield _join(mod_prefix, name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """(name, Parameter) pairs, named as in state_dict ("features.0.weight")."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """Every Parameter of this module (and, with recurse, of its descendants), each once.

        Example:
            opt = cltensor.optim.SGD(model.parameters(), lr=0.1)
        """
        if not recurse:
            return (p for _, p in self.named_parameters(recurse=False))
        # NOTE: kept until a registry changes: walking GoogLeNet's 176 modules took 0.14 ms,
        # 0.9 ms after a step had evicted them from the caches (PoCL)
        changed, kept = _changed[0], _parameter_lists.get(self)
        if kept is None or kept[0] != changed:
            kept = _parameter_lists[self] = (changed, tuple(self._members("_parameters")))
        return iter(kept[1])

    def _members(self, registry):
        """The values of `registry` of this module and its descendants, each once, in
        named_parameters' order, without their names."""
        seen, mods, stack = set(), set(), [self]
        while stack:
            mod = stack.pop()
            if mod in mods:
                continue
            mods.add(mod)
            for value in getattr(mod, registry).values():
                if value is not None and value not in seen:
                    seen.add(value)
                    yield value
            stack.extend(reversed([c for c in mod._modules.values() if c is not None]))

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, ClTensor]]:
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[ClTensor]:
        return (b for _, b in self.named_buffers(recurse=recurse))

    def get_submodule(self, target: str) -> Module:
        """The descendant named by a dotted path ("features.0"); "" is this module."""
        mod = self
        for part in target.split(".") if target else []:
            child = mod._modules.get(part)
            if child is None:
                raise AttributeError(f"{type(mod).__name__} has no submodule `{part}` "
                                     f"(looking up {target!r})")
            mod = child
        return mod

    def apply(self: M, fn: Callable[[Module], None]) -> M:
        """Call fn on every descendant (children first) and then on this module; returns self."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ---- modes and gradients ------------------------------------------------------------------
    def train(self: M, mode: bool = True) -> M:
        """Set training mode (dropout on, batch statistics) here and below; returns self."""
        if not isinstance(mode, bool):
            raise ValueError(f"train: training mode is expected to be a bool, got {mode!r}")
        self.training = mode
        for child in self.children():
            child.train(mode)
        return self

    def eval(self: M) -> M:
        return self.train(False)

    def requires_grad_(self: M, requires_grad: bool = True) -> M:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's .grad: to None, or to zeros with set_to_none=False."""
        zero_grads(self.parameters(), set_to_none)

    # ---- state --------------------------------------------------------------------------------
    def state_dict(self, *, destination: dict[str, ClTensor] | None = None, prefix: str = "",
                   keep_vars: bool = False) -> dict[str, ClTensor]:
        """An OrderedDict of every parameter and persistent buffer by dotted name.

        The tensors share storage with the module's (detached unless keep_vars).

        Example:
            cltensor.save(model.state_dict(), "model.npz")
        """
        out = OrderedDict() if destination is None else destination
        for name, p in self._parameters.items():
            if p is not None:
                out[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers:
                out[prefix + name] = b if keep_vars else b.detach()
        # NOTE: over _modules, not named_modules(): a shared child appears under each name, as
        # in torch
        for name, child in self._modules.items():
            if child is not None:
                child.state_dict(destination=out, prefix=f"{prefix}{name}.", keep_vars=keep_vars)
        return out

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> _IncompatibleKeys:
        """Copy parameters and buffers from a dict of ClTensors or numpy arrays.

        Every entry is checked before anything is copied, so a failed load leaves the module
        as it was. A PyTorch checkpoint loads through numpy: {k: v.numpy() for k, v in sd.items()}.

        Args:
            state_dict: name -> ClTensor, numpy array (or anything np.asarray accepts).
            strict: missing and unexpected keys are errors; otherwise they are only returned.

        Returns:
            A namedtuple (missing_keys, unexpected_keys).

        Raises:
            RuntimeError: naming every bad key (shape mismatches, missing or unexpected keys).
        """
        if not hasattr(state_dict, "items"):
            raise TypeError(f"load_state_dict: expected a dict, got {type(state_dict).__name__}")
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors, sources = [], {}
        for key, target in own.items():
            if key in state_dict:
                src, err = _source_for(key, state_dict[key], target)
                if err:
                    errors.append(err)
                else:
                    sources[key] = src
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in unexpected) + ".")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in missing) + ".")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(errors))
        with no_grad():
            for key, src in sources.items():
                own[key].copy_(src)
        return _IncompatibleKeys(missing, unexpected)

    # ---- moves --------------------------------------------------------------------------------
    def to(self: M, *args: Any, device: DeviceLike = None, dtype: DTypeLike = None,
           non_blocking: bool = False, memory_format: str | None = None) -> M:
        """Move parameters and buffers to a device and/or cast floating ones to a dtype, in place.

        Parameters stay the same objects (an optimizer built before keeps working). A device
        is anything get_device takes ("cuda", "cpu", cltensor.device(...), "0:0", a Device).

        Example:
            model.to("cuda"); model.to(cltensor.float64)
        """
        device, dtype = to_args(args, device, dtype)
        if dtype is not None:
            dtype = dt.as_dtype(dtype)
            if not dt.is_floating(dtype):
                raise TypeError(f"Module.to only accepts floating point dtypes, got {dtype}")

        def convert(t):
            return t.to(device=device, dtype=dtype if t.is_floating_point() else None,
                        memory_format=memory_format if t.ndim == 4 else None)
        return self._apply(convert)

    def _apply(self, fn):
        for child in self.children():
            child._apply(fn)
        with no_grad():
            for p in self._parameters.values():
                if p is None:
                    continue
                p.data = fn(p.detach())
                if p.grad is not None:
                    p.grad = fn(p.grad)
            for name, b in self._buffers.items():
                if b is not None:
                    self._buffers[name] = fn(b)
        return self

    def cpu(self: M) -> M:
        return self.to("cpu")

    def cuda(self: M, device: DeviceLike = None) -> M:
        """Move to a GPU: the current one, or `device` (an index, "cuda:1", a device)."""
        return self._apply(lambda t: t.cuda(device))

    def float(self: M) -> M:
        return self.to(dtype=dt.float32)

    def double(self: M) -> M:
        return self.to(dtype=dt.float64)

    # ---- repr ---------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The constructor arguments shown in repr (override in layers)."""
        return ""

    def __repr__(self):
        extra = self.extra_repr().split("\n") if self.extra_repr() else []
        children = [f"({name}): " + _indent(repr(mod), 2) for name, mod in self._modules.items()]
        lines = extra + children
        body = ""
        if len(extra) == 1 and not children:
            body = extra[0]
        elif lines:
            body = "\n  " + "\n  ".join(lines) + "\n"
        return f"{type(self).__name__}({body})"


def _join(prefix, name):
    return f"{prefix}.{name}" if prefix else name


def _check_leaf(name, param):
    if param.grad_fn is not None:
        raise ValueError(f"cannot assign non-leaf tensor to parameter '{name}'; make it a leaf "
                         f"with .detach() first")


def _indent(text, spaces):
    lines = text.split("\n")
    return "\n".join(lines[:1] + [" " * spaces + line for line in lines[1:]])


def _source_for(key, value, target):
    """(a tensor ready to copy into target, None) or (None, an error message naming key)."""
    if not isinstance(value, ClTensor):
        try:
            value = np.asarray(value)
        except Exception as e:  # noqa: BLE001 -- any conversion failure is reported by key
            return None, (f'While copying the parameter named "{key}": cannot convert '
                          f'{type(value).__name__} to an array ({e})')
        if value.dtype.kind not in "biuf":
            return None, (f'While copying the parameter named "{key}": expected a tensor or '
                          f'a numeric array, got dtype {value.dtype}')
    if tuple(value.shape) != target.shape:
        return None, (f"size mismatch for {key}: copying a param with shape {tuple(value.shape)} "
                      f"from checkpoint, the shape in current model is {target.shape}.")
    if isinstance(value, np.ndarray):
        value = from_numpy(value, device=target.device, dtype=target.dtype)  # never wraps
    return value, None
