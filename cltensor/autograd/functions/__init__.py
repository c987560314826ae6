"""Gradients of the tensor ops: one Function per op, forward calling the op itself, in modules
that mirror cltensor/ops (pointwise, shape, indexing, matmul, reduce; special for torch.special's
kernel ops; composed for ops whose gradient comes from composing differentiable ops).

This package only re-exports them, under the names autograd.install() and other layers use.
"""
from .composed import composites  # noqa: F401
from .indexing import (AsStrided, Gather, Index, IndexAdd, IndexCopy, IndexFill,  # noqa: F401
                       IndexPut, IndexSelect, MaskedFill, MaskedScatter, MaskedSelect, Scatter,
                       ScatterAdd, ScatterReduce, ViewScatter)
from .matmul import Addmm, Baddbmm, Matmul  # noqa: F401
from .pointwise import (BINARY, UNARY, I1, Add, Clamp, Div, Frexp, Logit, Maximum,  # noqa: F401
                        Minimum, Mul, NanToNum, Pow, Rdiv, Rpow, Rsub, Sub, Where, _where)
from .reduce import (Amax, Amin, Cumprod, Cumsum, Logcumsumexp, MaxDim, Mean,  # noqa: F401
                     MinDim, Norm, Prod, Sum)
from .shape import (Cast, Cat, Clone, Diag, Expand, Flip, Pad, PadScatter,  # noqa: F401
                    Permute, Repeat, Reshape, Roll, Slice, SliceScatter, ToDevice, Tril, Triu)
from .special import SPECIAL_BINARY, SPECIAL_UNARY  # noqa: F401
