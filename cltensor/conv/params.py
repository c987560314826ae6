"""conv2d's arguments: torch's forms normalised into one ConvParams, with the checks that name
what is wrong (shapes, channels, groups, dtypes, devices) before any kernel runs."""
import numbers
from typing import NamedTuple

import numpy as np

from .. import caches
from .. import dtypes as dt
from ..ops import elementwise as ew
from ..program import remember

# stride, dilation (and a symmetric padding): one int for both dims, or (h, w)
Pair = int | tuple[int, int]
# conv2d's padding: a Pair, (left, right, top, bottom), or "valid" / "same"
Padding = int | tuple[int, int] | tuple[int, int, int, int] | str


class ConvParams(NamedTuple):
    """One 2-d convolution problem: (N, C, H, W) input, (Co, C / groups, Kh, Kw) weight."""
    n: int
    c: int
    h: int
    w: int
    co: int
    kh: int
    kw: int
    sh: int
    sw: int
    pt: int
    pb: int
    pl: int
    pr: int
    dh: int
    dw: int
    groups: int
    dtype: np.dtype

    @property
    def ho(self):
        return (self.h + self.pt + self.pb - self.dh * (self.kh - 1) - 1) // self.sh + 1

    @property
    def wo(self):
        return (self.w + self.pl + self.pr - self.dw * (self.kw - 1) - 1) // self.sw + 1

    @property
    def cg(self):
        """Input channels per group."""
        return self.c // self.groups

    @property
    def cog(self):
        """Output channels per group."""
        return self.co // self.groups

    @property
    def k(self):
        """The GEMM reduction length of one group: Cg * Kh * Kw."""
        return self.cg * self.kh * self.kw

    @property
    def out_shape(self):
        return (self.n, self.co, self.ho, self.wo)

    @property
    def flops(self):
        """Multiply-adds times two, counted as a direct convolution."""
        return 2 * self.n * self.co * self.cg * self.kh * self.kw * self.ho * self.wo

    def key(self):
        """A short string naming the problem (cache files, tables)."""
        return (f"n{self.n}c{self.c}h{self.h}w{self.w}-o{self.co}k{self.kh}x{self.kw}"
                f"s{self.sh}x{self.sw}p{self.pt}.{self.pb}.{self.pl}.{self.pr}"
                f"d{self.dh}x{self.dw}g{self.groups}-{self.dtype}")


def _positive_int(x):
    """An integer that is not a bool (any sign; callers check the range)."""
    if type(x) is int:  # NOTE: the common case, without the slow abstract-class check
        return True
    return isinstance(x, (numbers.Integral, np.integer)) and not isinstance(x, bool)


def _pair(value, name, minimum):
    """An int or a pair of ints, each at least `minimum`, as a pair."""
    if type(value) is int and value >= minimum:
        return (value, value)
    vals = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(vals) != 2 or not all(_positive_int(v) for v in vals):
        raise TypeError(f"conv2d: {name} must be an int or a pair of ints, got {value!r}")
    if any(v < minimum for v in vals):
        raise ValueError(f"conv2d: {name} must be {'positive' if minimum else 'non-negative'}, "
                         f"got {value!r}")
    return tuple(int(v) for v in vals)


def _padding(padding, kernel, stride, dilation):
    """(top, bottom, left, right) from an int, a pair (h, w), a 4-tuple (left, right, top,
    bottom) as torch.nn.functional.pad orders it, or 'valid' / 'same' as torch accepts."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0, 0, 0)
        if padding != "same":
            raise ValueError(f"conv2d: padding must be 'valid', 'same', an int or a tuple, "
                             f"got {padding!r}")
        if stride != (1, 1):
            raise ValueError("conv2d: padding='same' is not supported for strided convolutions")
        th, tw = (d * (k - 1) for d, k in zip(dilation, kernel))
        return (th // 2, th - th // 2, tw // 2, tw - tw // 2)
    if isinstance(padding, (tuple, list)) and len(padding) == 4:
        if not all(_positive_int(v) for v in padding):
            raise TypeError(f"conv2d: padding must hold ints, got {padding!r}")
        if any(v < 0 for v in padding):
            raise ValueError(f"conv2d: padding must be non-negative, got {padding!r}")
        left, right, top, bottom = (int(v) for v in padding)
        return (top, bottom, left, right)
    ph, pw = _pair(padding, "padding", 0)
    return (ph, ph, pw, pw)


def check_tensors(input, weight, bias, op="conv2d", spatial="HW"):
    """The checks of op's operands (the convolution over the `spatial` dims) that need no
    geometry: tensors on one device, their dims, a common floating dtype."""
    if _usual_tensors(input, weight, bias, len(spatial) + 2):
        return
    for name, t in (("input", input), ("weight", weight), ("bias", bias)):
        if t is not None and not ew.is_tensor(t):
            raise TypeError(f"{op}: {name} must be a tensor, got {type(t).__name__}")
    ew.common_device([t for t in (input, weight, bias) if t is not None], op)
    nd, dims = len(spatial) + 2, ", ".join(spatial)
    if input.ndim != nd:
        raise ValueError(f"{op}: expected a {nd}-d input (N, C, {dims}) or a {nd - 1}-d one "
                         f"(C, {dims}), got {input.ndim}-d of shape {tuple(input.shape)}")
    if weight.ndim != nd:
        kernel = ", ".join("K" + s.lower() for s in spatial)
        raise ValueError(f"{op}: expected a {nd}-d weight (Co, C / groups, {kernel}), got "
                         f"{weight.ndim}-d of shape {tuple(weight.shape)}")
    if input.dtype not in (dt.float32, dt.float64, *dt.HALF_TYPES):
        raise TypeError(f"{op}: expected a float32 or float64 input (or float16, bfloat16), "
                        f"got {input.dtype}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.dtype != input.dtype:
            raise TypeError(f"{op}: input is {input.dtype} but {name} is {t.dtype}; they "
                            f"must have the same dtype")


def _usual_tensors(input, weight, bias, nd):
    """check_tensors' common case, tested in one expression (it runs for every convolution):
    tensors of one device, nd dims, one dtype of _CONV_DTYPES. False sends the operands
    through the checks one at a time, which name what is wrong."""
    is_t = ew.is_tensor
    if not (is_t(input) and is_t(weight) and (bias is None or is_t(bias))):
        return False
    s, dtype = input.storage, input.dtype
    return (len(input.shape) == nd and len(weight.shape) == nd and dtype in _CONV_DTYPES and
            weight.storage.device is s.device and weight.dtype is dtype and
            (bias is None or bias.storage.device is s.device and bias.dtype is dtype))


_CONV_DTYPES = frozenset((dt.float32, dt.float64, *dt.HALF_TYPES))


def make_params(input, weight, bias, stride, padding, dilation, groups):
    """Check conv2d's arguments (input already 4-d) and return its ConvParams."""
    check_tensors(input, weight, bias)
    if not all(map(_plain, (stride, padding, dilation, groups))):
        return _make_params(input, weight, bias, stride, padding, dilation, groups)
    # NOTE: memoized for arguments of exact types (True == 1 must not pass as a stride)
    key = (input.shape, weight.shape, None if bias is None else bias.shape, input.dtype,
           stride, padding, dilation, groups)
    p = _params.get(key)
    if p is None:
        p = remember(_params, key,
                     _make_params(input, weight, bias, stride, padding, dilation, groups))
    return p


# make_params' memo: shapes, dtype and the plain arguments -> ConvParams
_params = caches.register("conv.params.params", {})


def _plain(value):
    """An int, a str or a tuple of ints: an argument that may key make_params' memo."""
    t = type(value)
    return t is int or t is str or t is tuple and _INT.issuperset(map(type, value))


_INT = frozenset((int,))


def _make_params(input, weight, bias, stride, padding, dilation, groups):
    n, c, h, w = input.shape
    co, cg, kh, kw = weight.shape
    if not _positive_int(groups):
        raise TypeError(f"conv2d: groups must be an int, got {groups!r}")
    if groups <= 0:
        raise ValueError(f"conv2d: groups must be positive, got {groups}")
    stride = _pair(stride, "stride", 1)
    dilation = _pair(dilation, "dilation", 1)
    pads = _padding(padding, (kh, kw), stride, dilation)
    if co % groups:
        raise ValueError(f"conv2d: groups={groups} does not divide the weight's {co} output "
                         f"channels")
    if c % groups:
        raise ValueError(f"conv2d: groups={groups} does not divide the input's {c} channels")
    if c != cg * groups:
        raise ValueError(f"conv2d: input has {c} channels, weight expects {cg * groups} "
                         f"({cg} per group x {groups} groups); weight shape {tuple(weight.shape)}")
    if bias is not None and tuple(bias.shape) != (co,):
        raise ValueError(f"conv2d: bias must have shape ({co},), got {tuple(bias.shape)}")
    if min(co, kh, kw) == 0 or cg == 0:
        raise ValueError(f"conv2d: the weight has an empty dimension: {tuple(weight.shape)}")
    p = ConvParams(int(n), int(c), int(h), int(w), int(co), int(kh), int(kw), *stride, *pads,
                   *dilation, int(groups), input.dtype)
    _check_fits(p)
    return p


def _check_fits(p):
    eff_h, eff_w = p.dh * (p.kh - 1) + 1, p.dw * (p.kw - 1) + 1
    pad_h, pad_w = p.h + p.pt + p.pb, p.w + p.pl + p.pr
    if eff_h > pad_h or eff_w > pad_w:
        raise ValueError(f"conv2d: kernel size {eff_h}x{eff_w} (dilated) is larger than the "
                         f"padded input {pad_h}x{pad_w}")
