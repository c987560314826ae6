"""Padding modules (torch.nn's): ZeroPad1d/2d/3d, ConstantPad1d/2d/3d, ReflectionPad1d/2d/3d,
ReplicationPad1d/2d/3d and CircularPad1d/2d/3d, each F.pad with its mode."""
from .. import functional as F
from .module import Module
from .utils import pair

__all__ = ["ZeroPad1d", "ZeroPad2d", "ConstantPad1d", "ConstantPad2d", "ReflectionPad1d",
           "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d", "CircularPad1d",
           "CircularPad2d", "ZeroPad3d", "ConstantPad3d", "ReflectionPad3d", "ReplicationPad3d",
           "CircularPad3d"]


class _Pad(Module):
    """F.pad over the last `dims` dims; padding: an int for every side, or (left, right) per
    dim from the last ((left, right, top, bottom) in 2-d, then (front, back) in 3-d)."""
    mode = "constant"
    dims = 2
    show_value = False  # in the repr, as torch's ConstantPad*d (not ZeroPad*d)

    def __init__(self, padding, value=0.0):
        super().__init__()
        name = type(self).__name__
        if isinstance(padding, int):
            padding = (padding,) * (2 * self.dims)
        padding = tuple(padding)
        if len(padding) != 2 * self.dims:
            raise ValueError(f"{name}: padding must be an int or a {2 * self.dims}-tuple, got "
                             f"{padding!r}")
        pair(padding[:2], "padding", name)  # ints, as pair() checks them
        self.padding, self.value = padding, value

    def forward(self, input):
        if self.mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}" if self.show_value else \
            f"{self.padding}"


class ConstantPad1d(_Pad):
    """Pad the last dim with `value`."""
    dims, show_value = 1, True


class ConstantPad2d(_Pad):
    """Pad the last two dims with `value`.

    Example:
        nn.ConstantPad2d((1, 1, 2, 0), 3.5)(cltensor.zeros(1, 1, 2, 2)).shape   # (1, 1, 4, 4)
    """
    show_value = True


class ZeroPad1d(ConstantPad1d):
    """Pad the last dim with zeros."""
    show_value = False

    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ZeroPad2d(ConstantPad2d):
    """Pad the last two dims with zeros."""
    show_value = False

    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ReflectionPad1d(_Pad):
    """Pad the last dim with its reflection (the edge not repeated)."""
    mode, dims = "reflect", 1


class ReflectionPad2d(_Pad):
    """Pad the last two dims with their reflection (the edge not repeated)."""
    mode = "reflect"


class ReplicationPad1d(_Pad):
    """Pad the last dim by repeating its edge."""
    mode, dims = "replicate", 1


class ReplicationPad2d(_Pad):
    """Pad the last two dims by repeating their edges."""
    mode = "replicate"


class CircularPad1d(_Pad):
    """Pad the last dim by wrapping around."""
    mode, dims = "circular", 1


class CircularPad2d(_Pad):
    """Pad the last two dims by wrapping around."""
    mode = "circular"


class ConstantPad3d(_Pad):
    """Pad the last three dims with `value`.

    Example:
        nn.ConstantPad3d(1, 3.5)(cltensor.zeros(1, 1, 2, 2, 2)).shape   # (1, 1, 4, 4, 4)
    """
    dims, show_value = 3, True


class ZeroPad3d(ConstantPad3d):
    """Pad the last three dims with zeros."""
    show_value = False

    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ReflectionPad3d(_Pad):
    """Pad the last three dims with their reflection (the edge not repeated)."""
    mode, dims = "reflect", 3


class ReplicationPad3d(_Pad):
    """Pad the last three dims by repeating their edges."""
    mode, dims = "replicate", 3


class CircularPad3d(_Pad):
    """Pad the last three dims by wrapping around."""
    mode, dims = "circular", 3
