"""The public API carries type hints (creation, device, nn.Module, the optimizers, conv2d), and
every hint resolves: typing.get_type_hints evaluates the postponed annotations, so a name that
a module does not import fails here rather than in a type checker or the API reference."""
import inspect
import typing

import pytest

import cltensor
from cltensor import conv, creation, optim
from cltensor import device as device_module
from cltensor.nn import functional as F
from cltensor.nn.modules.module import Module, Parameter


def _public_methods(cls):
    """cls's own public methods and properties' getters, with __init__ and __call__."""
    found = []
    for name, value in vars(cls).items():
        if name.startswith("_") and name not in ("__init__", "__call__"):
            continue
        if isinstance(value, property):
            found.append((f"{cls.__name__}.{name}", value.fget))
        elif inspect.isfunction(value):
            found.append((f"{cls.__name__}.{name}", value))
    return found


DEVICE_FUNCTIONS = ["get_device", "default_device", "set_default_device", "synchronize",
                    "memory_stats", "empty_cache", "reset_peak_memory_stats", "devices",
                    "all_devices"]
API = (
    [(f"creation.{n}", getattr(creation, n)) for n in creation.__all__
     if not isinstance(getattr(creation, n), type)]
    # the legacy tensor types (FloatTensor, ...) are called through their metaclass
    + [("creation._TensorType.__call__", creation._TensorType.__call__)]
    + [(f"device.{n}", getattr(device_module, n)) for n in DEVICE_FUNCTIONS]
    + _public_methods(device_module.Device)
    + [("TorchDevice.__init__", device_module.TorchDevice.__init__)]
    + _public_methods(Module) + [("Parameter.__init__", Parameter.__init__)]
    + _public_methods(optim.Optimizer)
    + [(f"optim.{n}.__init__", getattr(optim, n).__init__) for n in optim.__all__
       if isinstance(getattr(optim, n), type)]
    + [("conv.conv2d", conv.conv2d), ("conv.conv_transpose2d", conv.conv_transpose2d),
       ("conv.conv_algorithms", conv.conv_algorithms), ("nn.functional.conv2d", F.conv2d)])


@pytest.mark.parametrize("name, fn", API, ids=[n for n, _ in API])
def test_public_api_is_fully_annotated(name, fn):
    hints = typing.get_type_hints(inspect.unwrap(fn))  # NameError for a hint that does not resolve
    params = [p for p in inspect.signature(fn).parameters if p not in ("self", "cls")]
    missing = [p for p in params if p not in hints] + ([] if "return" in hints else ["return"])
    assert not missing, f"{name}: no type hint for {missing}"


def test_hints_name_the_types_the_functions_take_and_return():
    assert typing.get_type_hints(creation.zeros)["return"] is cltensor.ClTensor
    assert typing.get_type_hints(device_module.get_device)["return"] is device_module.Device
    spec = typing.get_type_hints(device_module.get_device)["spec"]
    assert set(typing.get_args(spec)) == {device_module.Device, device_module.TorchDevice, str,
                                          int, type(None)}
    assert typing.get_type_hints(conv.conv2d)["weight"] is cltensor.ClTensor
