"""Installs the composed ops' ClTensor methods (cltensor/methods.py's COMPOSED_OPS) as they are,
since they call the autograd-wrapped methods; records their in-place forms (composed/inplace.py)
for autograd with their out-of-place twins; binds torch's other names (ALIASES); and builds
the cltensor functions that are methods here (METHOD_FUNCTIONS), which cltensor/__init__.py
re-exports."""
from . import autograd, linalg
from .autograd import namespace
from .methods import ALIASES, COMPOSED_OPS, IN_PLACE_ALIASES, METHOD_FUNCTIONS, attach
from .composed import arrange, composed, contract, inplace, searching
from .tensor import ClTensor

_TABLES = {m.__name__.partition(".")[2]: m.TENSOR_METHODS
           for m in (composed, inplace, searching, arrange, contract, linalg)}
# root functions from the composed ops' modules (cltensor/__init__.py's re-exports)
_COMPOSED_FUNCTIONS = (arrange, composed, contract, searching)


def _attach_composed():
    attach(ClTensor, COMPOSED_OPS, _TABLES)
    for name, twin in inplace.IN_PLACE.items():
        setattr(ClTensor, name, autograd.wrap_inplace(name, getattr(ClTensor, name), twin))


def _functions():
    """{name: function} of the method functions and the aliases of cltensor's functions."""
    known = {name: getattr(namespace, name) for name in namespace.__all__}
    for module in _COMPOSED_FUNCTIONS:
        known.update((name, getattr(module, name)) for name in module.__all__)
    made = {name: getattr(ClTensor, name) for name in METHOD_FUNCTIONS}
    known.update(made)
    for alias, target in ALIASES.items():
        for a, t in ((alias, target), (alias + "_", target + "_")):
            if hasattr(ClTensor, t):
                setattr(ClTensor, a, getattr(ClTensor, t))
            if t in known:
                made[a] = known[a] = known[t]
    for alias, target in IN_PLACE_ALIASES.items():
        setattr(ClTensor, alias, getattr(ClTensor, target))
    return made


_attach_composed()
_made = _functions()
globals().update(_made)
__all__ = sorted(_made)
del _made
