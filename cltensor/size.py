"""cltensor.Size: a tensor's shape, as torch.Size (a tuple of ints with numel())."""
import math


class Size(tuple):
    """The shape of a tensor: a tuple of ints, printed as torch prints torch.Size.

    NOTE: slicing and concatenation give plain tuples (torch gives a Size): overriding them in
    Python would slow every shape[i] of the per-op path.
    """

    __slots__ = ()

    def numel(self):
        """The number of elements a tensor of this shape holds."""
        return math.prod(self)

    def __repr__(self):
        return f"cltensor.Size({list(self)})"

    __str__ = __repr__

    def __format__(self, spec):
        # NOTE: f-strings (the error messages) show the plain tuple, "(2, 3)"
        return format(tuple(self), spec)

    def __reduce__(self):
        return Size, (tuple(self),)
