"""Optimizer: parameter groups, per-parameter state, zero_grad and state_dict, as torch.optim."""
from __future__ import annotations

import copy
import numbers
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .. import dtypes as dt
from .. import graphs
from ..autograd import enable_grad, no_grad, zero_grads
from ..creation import from_numpy
from ..graphs import GraphCaptureError
from ..tensor import ClTensor
from . import fused

__all__ = ["Optimizer"]

# what an optimizer takes as params: tensors, (name, tensor) pairs, or parameter-group dicts
ParamsT = Iterable[ClTensor] | Iterable[tuple[str, ClTensor]] | Iterable[dict[str, Any]]


class Optimizer:
    """Base class of the optimizers.

    Subclasses give `defaults` (hyperparameters every group falls back to), check a group's
    values in `_check_group`, and update one parameter in `_update(param, grad, group, state)`
    (a single fused kernel launch); `step` runs it for every parameter that has a gradient.

    Args:
        params: an iterable of tensors, of (name, tensor) pairs, or of dicts, each a parameter
            group {"params": [...], <hyperparameter overrides>}.
        defaults: hyperparameter defaults.
    """

    def __init__(self, params: ParamsT, defaults: dict[str, Any]) -> None:
        self.defaults = dict(defaults)
        self.state = defaultdict(dict)
        self.param_groups = []
        if isinstance(params, (ClTensor, set, dict)):
            raise TypeError(f"params argument given to the optimizer should be an iterable of "
                            f"tensors or dicts (in a fixed order), but got {type(params).__name__}")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def __repr__(self):
        s = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        return s + ")"

    # ---- groups -------------------------------------------------------------------------------
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own hyperparameters (the rest from defaults).

        Example:
            opt.add_param_group({"params": head.parameters(), "lr": 1e-2})
        """
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        group = dict(param_group)
        params = group.get("params")
        if params is None:
            raise ValueError("param_group needs a 'params' entry")
        if isinstance(params, set):
            raise TypeError("optimizer parameters need to be in an ordered collection (a set's "
                            "order changes between runs); use a list")
        params = [params] if isinstance(params, ClTensor) else list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        params = [p[1] if isinstance(p, tuple) else p for p in params]
        if names and len(names) != len(params):
            raise ValueError("all optimizer params should be with or without names; some names "
                             "are missing")
        _check_params(params)
        group["params"] = params
        if names:
            group["param_names"] = names
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        self._check_group(group)
        if len(params) != len({id(p) for p in params}):
            warnings.warn("optimizer contains a parameter group with duplicate parameters",
                          stacklevel=2)
        taken = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in taken for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def _check_group(self, group):
        """Raise ValueError for an invalid hyperparameter of a group (subclasses)."""

    # ---- gradients and steps ------------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the .grad of every parameter: to None, or to zeros with set_to_none=False."""
        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; returns closure()'s loss when given.

        All gradients are checked first, so a bad one changes no parameter.

        Example:
            loss = loss_fn(model(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        work = [(p, group) for group in self.param_groups for p in group["params"]
                if p.grad is not None]
        for p, _ in work:
            _check_grad(p)
            _check_state(p, self.state.get(p, {}))
        capturing = graphs.current_graph() is not None
        if capturing:
            self._check_capture(work)
        with no_grad(), fused.batched():
            for p, group in work:
                self._update(p, p.grad, group, self.state[p])
        return loss

    def _update(self, param, grad, group, state):
        raise NotImplementedError(f"{type(self).__name__} must define _update")

    def _check_capture(self, work):
        """GraphCaptureError unless a step over `work` [(param, group)] can be captured in a
        graph: those that can (SGD, Adam) override this."""
        raise GraphCaptureError(
            f"{type(self).__name__}.step() cannot be captured in a graph: it keeps state on the "
            f"host (a step count) that replays would not advance; SGD, Adam and AdamW can")

    def _refuse_first_step(self, work, has_state):
        """GraphCaptureError when a parameter of `work` has no state yet (has_state(state) is
        false): its first step would be captured, and every replay would repeat it."""
        if any(not has_state(self.state.get(p, {}), group) for p, group in work):
            raise GraphCaptureError(
                f"{type(self).__name__}.step(): a parameter's first step cannot be captured in a "
                f"graph (every replay would take it again); run a few eager steps before the "
                f"capture so that the optimizer's state exists")

    # ---- state --------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """{'state': {index: per-parameter state}, 'param_groups': [group, params as indices]}.

        Parameters are numbered in group order, as torch does; state tensors are references.
        """
        index, groups, start = {}, [], 0
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            ids = list(range(start, start + len(group["params"])))
            index.update({id(p): i for p, i in zip(group["params"], ids)})
            packed["params"] = ids
            start += len(ids)
            groups.append(packed)
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what state_dict() gave (state tensors may be ClTensors or numpy arrays).

        Everything is checked before anything changes; state moves to each parameter's device
        and floating state to its dtype.
        """
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has {len(saved_groups)} parameter groups, the "
                             f"optimizer has {len(self.param_groups)}")
        id_map = {}
        for i, (mine, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if len(mine["params"]) != len(saved["params"]):
                raise ValueError(f"loaded state dict's parameter group {i} has "
                                 f"{len(saved['params'])} parameters, the optimizer's has "
                                 f"{len(mine['params'])}")
            id_map.update(zip(saved["params"], mine["params"]))
        new_state = defaultdict(dict)
        for key, values in state_dict["state"].items():
            if key not in id_map:
                raise ValueError(f"loaded state dict has state for parameter {key}, which is in "
                                 f"no parameter group")
            p = id_map[key]
            new_state[p] = {name: _state_value(name, v, p) for name, v in values.items()}
        new_groups = []
        for mine, saved in zip(self.param_groups, saved_groups):
            g = copy.deepcopy({k: v for k, v in saved.items() if k != "params"})
            g["params"] = mine["params"]
            new_groups.append(g)
        self.state, self.param_groups = new_state, new_groups


def _check_params(params):
    for p in params:
        if not isinstance(p, ClTensor):
            raise TypeError(f"optimizer can only optimize tensors, but one of the params is "
                            f"{type(p).__name__}")
        if not p.is_leaf:
            raise ValueError("can't optimize a non-leaf tensor (one computed from others); "
                             "optimize the leaves it came from")
        if not dt.is_floating(p.dtype):
            raise TypeError(f"optimizer can only optimize floating point tensors, got {p.dtype}")


def _check_grad(p):
    g = p.grad
    if not isinstance(g, ClTensor):
        raise TypeError(f"optimizer step: a parameter's .grad is a {type(g).__name__}, not a "
                        f"tensor")
    if g.shape != p.shape:
        raise RuntimeError(f"optimizer step: gradient of shape {g.shape} for a parameter of "
                           f"shape {p.shape}")
    if g.dtype != p.dtype:
        raise RuntimeError(f"optimizer step: gradient dtype {g.dtype} differs from the "
                           f"parameter's {p.dtype}")
    if g.device is not p.device:
        raise RuntimeError(f"optimizer step: gradient on {g.device}, parameter on {p.device}")
    if any(s == 0 and n > 1 for n, s in zip(p.shape, p.strides)):
        raise RuntimeError(f"optimizer step: the parameter of shape {p.shape} is an expanded "
                           f"view (several elements share memory) and cannot be updated")


def _check_state(param, state):
    """Every state tensor must still fit its parameter (a Module.to() after the optimizer was
    made would break that): the fused kernels index it like the parameter."""
    for name, buf in state.items():
        if isinstance(buf, ClTensor) and (
                buf.shape != param.shape or buf.dtype != param.dtype or
                buf.device is not param.device or not buf.is_contiguous() or buf.offset != 0):
            raise RuntimeError(f"optimizer state {name!r} ({buf.shape}, {buf.dtype}, "
                               f"{buf.device}) no longer fits its parameter ({param.shape}, "
                               f"{param.dtype}, {param.device}); make the optimizer after "
                               f"moving the model")


def state_buffer(state, name, param, fill_zeros=False):
    """state[name], created shaped like param (contiguous) on first use: uninitialized (for a
    kernel that writes it before reading it), or zeros."""
    buf = state.get(name)
    if buf is None:
        buf = state[name] = ClTensor.empty_on(param.shape, param.dtype, param.device)
        if fill_zeros:
            buf.zero_()
    return buf


def _state_value(name, value, param):
    """A loaded state entry: numbers stay numbers, arrays become fresh contiguous tensors on
    the parameter's device (floating ones in its dtype)."""
    if isinstance(value, numbers.Number) or value is None:
        return value
    if name == "step":
        return float(np.asarray(value.numpy() if isinstance(value, ClTensor) else value))
    host = value.numpy() if isinstance(value, ClTensor) else np.asarray(value)
    if host.shape != param.shape:
        raise ValueError(f"loaded optimizer state {name!r} has shape {host.shape}, its parameter "
                         f"has shape {param.shape}")
    dtype = param.dtype if host.dtype.kind == "f" else None
    return from_numpy(np.ascontiguousarray(host), device=param.device, dtype=dtype)
