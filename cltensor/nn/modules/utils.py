"""Helpers shared by the layers: argument checks, parameter creation and torch's default
initialization, int-or-tuple arguments."""
import collections.abc
import math

from ... import dtypes as dt
from ...creation import empty
from .. import init
from .module import Parameter


def check_size(value, name, owner):
    """value as an int >= 0, or a TypeError/ValueError naming the argument."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{owner}: {name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{owner}: {name} must be non-negative, got {value}")
    return value


def new_parameter(shape, device, dtype, owner):
    """An uninitialized floating Parameter (float32 unless dtype says otherwise)."""
    dtype = dt.as_dtype(dtype) or dt.float32
    if not dt.is_floating(dtype):
        raise TypeError(f"{owner}: parameters must have a floating dtype, got {dtype}")
    return Parameter(empty(shape, dtype=dtype, device=device))


def add_weight_and_bias(module, weight_shape, bias_size, device, dtype, owner):
    """module.weight of weight_shape and module.bias of (bias_size,) (None when bias_size is
    None), then module.reset_parameters()."""
    module.weight = new_parameter(weight_shape, device, dtype, owner)
    if bias_size is not None:
        module.bias = new_parameter((bias_size,), device, dtype, owner)
    else:
        module.register_parameter("bias", None)
    module.reset_parameters()


def reset_kaiming(module):
    """torch's default for linear and convolution layers: kaiming_uniform_(a=sqrt(5)) weights
    and a U(-1/sqrt(fan_in), 1/sqrt(fan_in)) bias."""
    init.kaiming_uniform_(module.weight, a=math.sqrt(5))
    if module.bias is not None:
        init_fan_in_bias(module.bias, module.weight)


def init_fan_in_bias(bias, weight):
    """Torch's default bias: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
    init.uniform_(bias, -bound, bound)


def ntuple(value, n, name, owner):
    """(a,) * n from an int, or an n-tuple of ints, checked."""
    v = (value,) * n if isinstance(value, int) else \
        tuple(value) if isinstance(value, (tuple, list)) else ()
    if len(v) != n or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        kind = "a pair" if n == 2 else f"a {n}-tuple"
        raise TypeError(f"{owner}: {name} must be an int or {kind} of ints, got {value!r}")
    return v


def pair(value, name, owner):
    """(a, a) from an int, or a 2-tuple of ints, checked."""
    return ntuple(value, 2, name, owner)


def _ntuple(n, name="parse"):
    """torch.nn.modules.utils._ntuple: a function turning x into (x,) * n, an iterable into a
    tuple of it, unchecked (scripts import _pair and the others from here)."""
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return (x,) * n
    parse.__name__ = name
    return parse


_single, _pair, _triple, _quadruple = (_ntuple(n, f"_{w}") for n, w in
                                       ((1, "single"), (2, "pair"), (3, "triple"),
                                        (4, "quadruple")))
