"""Python's operators on tensors that go through the tensor's methods (which autograd wraps):
+, -, *, /, **, @, unary, bitwise and in-place; a base class of ClTensor. Those that call a
kernel op directly (//, %, comparisons, reflected @ and shifts) are in the ops' tables:
ops/pointwise.py OPERATORS and ops/matmul.py, listed in cltensor/methods.py."""
from __future__ import annotations

from typing import Self

Scalar = int | float | bool  # a Python number on the other side of an operator


class TensorOperators:
    def __format__(self, spec: str) -> str:
        """format(t, spec), as torch: a 0-d tensor formats as its number (f"{loss:.4f}"); any
        other takes only the empty spec, as object does."""
        if self.dim() == 0:
            return format(self.item(), spec)
        if spec:
            raise TypeError(f"unsupported format string {spec!r} passed to Tensor.__format__: "
                            f"only 0-d tensors take one (this one has shape {tuple(self.shape)})")
        return str(self)

    def __add__(self, o: Self | Scalar) -> Self:
        return self.add(o)

    def __radd__(self, o: Self | Scalar) -> Self:
        return self.add(o)

    def __sub__(self, o: Self | Scalar) -> Self:
        return self.sub(o)

    def __rsub__(self, o: Self | Scalar) -> Self:
        return self.rsub(o)

    def __mul__(self, o: Self | Scalar) -> Self:
        return self.mul(o)

    def __rmul__(self, o: Self | Scalar) -> Self:
        return self.mul(o)

    def __truediv__(self, o: Self | Scalar) -> Self:
        return self.div(o)

    def __rtruediv__(self, o: Self | Scalar) -> Self:
        return self._rdiv(o)

    def __pow__(self, o: Self | Scalar) -> Self:
        return self.pow(o)

    def __rpow__(self, o: Self | Scalar) -> Self:
        return self._rpow(o)

    def __neg__(self) -> Self:
        return self.neg()

    def __pos__(self) -> Self:
        return self

    def __abs__(self) -> Self:
        return self.abs()

    def __matmul__(self, o: Self | Scalar) -> Self:
        return self.matmul(o)

    # bitwise on integer and bool tensors (bool: the logical ops), TypeError on floats
    def __and__(self, o: Self | Scalar) -> Self:
        return self.bitwise_and(o)

    def __or__(self, o: Self | Scalar) -> Self:
        return self.bitwise_or(o)

    def __xor__(self, o: Self | Scalar) -> Self:
        return self.bitwise_xor(o)

    def __invert__(self) -> Self:
        return self.bitwise_not()

    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__

    def __lshift__(self, o: Self | Scalar) -> Self:
        return self.bitwise_left_shift(o)

    def __rshift__(self, o: Self | Scalar) -> Self:
        return self.bitwise_right_shift(o)

    def __iand__(self, o: Self | Scalar) -> Self:
        return self.bitwise_and_(o)

    def __ior__(self, o: Self | Scalar) -> Self:
        return self.bitwise_or_(o)

    def __ixor__(self, o: Self | Scalar) -> Self:
        return self.bitwise_xor_(o)

    def __ilshift__(self, o: Self | Scalar) -> Self:
        return self.bitwise_left_shift_(o)

    def __irshift__(self, o: Self | Scalar) -> Self:
        return self.bitwise_right_shift_(o)

    def __iadd__(self, o: Self | Scalar) -> Self:
        return self.add_(o)

    def __isub__(self, o: Self | Scalar) -> Self:
        return self.sub_(o)

    def __imul__(self, o: Self | Scalar) -> Self:
        return self.mul_(o)

    def __itruediv__(self, o: Self | Scalar) -> Self:
        return self.div_(o)
