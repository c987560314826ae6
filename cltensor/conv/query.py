"""conv_algorithms(): what each algorithm would do with a convolution problem."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import backends
from .. import dtypes as dt
from ..creation import DTypeLike, from_numpy
from ..device import DeviceLike, get_device
from ..tensor import ClTensor
from . import dispatch
from .params import Padding, Pair, make_params


def _as_tensor(x, dtype, device):
    """A tensor standing in for a shape: random data when benchmark mode will time it, else
    uninitialised memory that nothing reads."""
    if isinstance(x, ClTensor):
        return x
    if not backends.benchmark:
        return ClTensor.empty_on(tuple(x), dtype, device)
    data = np.random.default_rng(0).uniform(-1, 1, tuple(x)).astype(dtype)
    return from_numpy(data, device=device)


def conv_algorithms(input: ClTensor | Sequence[int], weight: ClTensor | Sequence[int],
                    bias: ClTensor | Sequence[int] | None = None, stride: Pair = 1,
                    padding: Padding = 0, dilation: Pair = 1, groups: int = 1, *,
                    dtype: DTypeLike = None, device: DeviceLike = None) -> list[dict[str, Any]]:
    """For one convolution problem, one dict per algorithm and pass.

    Args:
        input, weight: tensors, or shapes ((N, C, H, W) and (Co, C / groups, Kh, Kw)); shapes
            are made into random tensors of `dtype` (default float32) on `device` when
            benchmark mode has to time them.
        bias, stride, padding, dilation, groups: as conv2d (bias: a tensor, a shape or None).
        dtype, device: for shapes only.

    Returns:
        A list of dicts with keys algo, pass ("forward", "backward_data", "backward_weight"),
        eligible, reason (why not, else ""), workspace_bytes, time_ms (measured when
        cltensor.backends.benchmark is True, else None), chosen (what algo="auto" runs) and
        plugin (the name of the plug-in that offers the algorithm, None for the portable ones).
        The algorithms of the plug-ins that serve the device come after the portable ones.

    Example:
        >>> for row in cltensor.conv.conv_algorithms((8, 64, 28, 28), (128, 64, 3, 3), padding=1):
        ...     print(row["pass"], row["algo"], row["eligible"], row["workspace_bytes"])
    """
    device = get_device(device if device is not None else
                        (input.device if isinstance(input, ClTensor) else None))
    dtype = dt.as_dtype(dtype or (input.dtype if isinstance(input, ClTensor) else dt.float32))
    x = _as_tensor(input, dtype, device)
    w = _as_tensor(weight, dtype, device)
    b = None if bias is None else _as_tensor(bias, dtype, device)
    p = make_params(x, w, b, stride, padding, dilation, groups)
    rows = []
    for pass_ in dispatch.PASSES:
        operands = (x, w, b) if pass_ == "forward" else (x, w, _grad(p, x))
        chosen = dispatch.choose(p, device, pass_, "auto", operands)
        measured = dispatch.timings(device, p, pass_) if backends.benchmark else {}
        for name in dispatch.algorithms(device):
            ok, why = dispatch.eligible(name, p, pass_, device)
            rows.append({"algo": name, "pass": pass_, "eligible": ok, "reason": why,
                         "workspace_bytes":
                             dispatch.workspace_bytes(name, p, pass_, device) if ok else 0,
                         "time_ms": measured.get(name) if ok else None,
                         "chosen": name == chosen, "plugin": _plugin_of(name)})
    return rows


def _plugin_of(name):
    owner = None if name in dispatch.ALGORITHMS else dispatch.algorithm_owner(name)
    return owner.name if owner is not None else None


def _grad(p, x):
    return _as_tensor(p.out_shape, p.dtype, x.device)
