"""cltensor's differentiable namespace: the functions of the kernel-op modules (creation,
indexing, matmul, pointwise, ranges, reduce, shape, sort, random), with every differentiable op
wrapped by autograd, and ClTensor's methods from those modules' TENSOR_METHODS, wrapped alike.

The layers above autograd (composed ops, linalg, nn, utils.data) import the functions they
call from here (`from ..autograd.namespace import cat, where`), never from the package root;
cltensor/__init__.py re-exports all of it.
"""
from .. import creation, interop, random
from ..ops import elementwise as ew
from ..ops import indexing, matmul, pointwise, ranges, reduce, shape, sort
from ..tensor import ClTensor
from . import install

# in the order cltensor has always bound them (a later module's name wins)
_FUNCTION_MODULES = (creation, indexing, matmul, pointwise, ranges, reduce, shape, sort, random)
_METHOD_MODULES = (pointwise, reduce, shape, indexing, matmul, ranges, random, sort, interop)


def _attach_methods():
    for module in _METHOD_MODULES:
        for name, fn in module.TENSOR_METHODS.items():
            setattr(ClTensor, name, fn)


def _functions():
    ns = {"broadcast_shapes": ew.broadcast_shapes, "is_tensor": ew.is_tensor}
    for module in _FUNCTION_MODULES:
        ns.update((name, getattr(module, name)) for name in module.__all__)
    return ns


_attach_methods()
_namespace = _functions()
install(_namespace, ClTensor)
globals().update(_namespace)
__all__ = sorted(_namespace)
