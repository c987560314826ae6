"""cltensor's differentiable namespace: the functions of the kernel-op modules (creation,
indexing, matmul, pointwise, ranges, reduce, shape, sort, random), with every differentiable op
wrapped by autograd, and ClTensor's methods from those modules' TENSOR_METHODS (as
cltensor/methods.py's KERNEL_OPS declares them), wrapped alike.

The layers above autograd (composed ops, linalg, nn, utils.data) import the functions they
call from here (`from ..autograd.namespace import cat, where`), never from the package root;
cltensor/__init__.py re-exports all of it.
"""
from .. import creation, interop, random
from ..methods import KERNEL_OPS, attach
from ..ops import elementwise as ew
from ..ops import indexing, matmul, pointwise, ranges, reduce, shape, sort
from ..tensor import ClTensor
from . import TENSOR_METHODS, install

# in the order cltensor has always bound them (a later module's name wins)
_FUNCTION_MODULES = (creation, indexing, matmul, pointwise, ranges, reduce, shape, sort, random)
# the kernel ops' method tables, by the module names cltensor/methods.py declares them under
_TABLES = {m.__name__.partition(".")[2]: m.TENSOR_METHODS
           for m in (ew, pointwise, reduce, shape, indexing, matmul, ranges, random, sort, interop)}
_TABLES["autograd"] = TENSOR_METHODS


def _functions():
    ns = {"broadcast_shapes": ew.broadcast_shapes, "is_tensor": ew.is_tensor}
    for module in _FUNCTION_MODULES:
        ns.update((name, getattr(module, name)) for name in module.__all__)
    return ns


attach(ClTensor, KERNEL_OPS, _TABLES)
_namespace = _functions()
install(_namespace, ClTensor)
globals().update(_namespace)
__all__ = sorted(_namespace)
