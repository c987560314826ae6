"""ClTensor's public API written in tensor.py and operators.py carries type hints that resolve."""
import inspect
import typing

import pytest

import cltensor
from cltensor.operators import TensorOperators
from cltensor.tensor import ClTensor

# written on the classes without a result worth a hint (object's protocol, copy's)
EXEMPT = {"__init__", "__deepcopy__"}


def _public_functions(cls):
    """(name, function) of the methods and property getters cls's own module defines (not
    those the ops' tables install on it); autograd's wrappers keep the hints they wrap."""
    for name, value in vars(cls).items():
        if name.startswith("_") and not name.startswith("__") or name in EXEMPT:
            continue
        fn = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
        if inspect.isfunction(fn) and inspect.unwrap(fn).__module__ == cls.__module__:
            yield name, fn


@pytest.mark.parametrize("cls", [ClTensor, TensorOperators])
def test_every_public_method_has_resolving_hints(cls):
    missing = [name for name, fn in _public_functions(cls)
               if "return" not in typing.get_type_hints(fn)]
    assert missing == []


def test_the_hints_name_the_tensor_and_its_device():
    assert typing.get_type_hints(ClTensor.view)["return"] is ClTensor
    assert typing.get_type_hints(ClTensor.device.fget)["return"] is cltensor.Device
    assert typing.get_type_hints(ClTensor.dim)["return"] is int


def test_the_finder_sees_a_method_without_hints():
    """A method without a result hint is reported (a check that could not fail is none)."""
    class Plain(ClTensor):
        def plain(self):
            return self
    assert [n for n, fn in _public_functions(Plain)
            if "return" not in typing.get_type_hints(fn)] == ["plain"]
