"""Containers: Sequential, ModuleList, ModuleDict, ParameterList and ParameterDict, as in
torch.nn."""
import operator
from collections import OrderedDict

from .activation import ReLU
from .conv import Conv2d
from .linear import Linear
from .module import Module, Parameter
from .pooling import MaxPool2d

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


def _index(idx, n, kind):
    """A non-negative position from a possibly negative int index; IndexError when out of range."""
    try:
        i = operator.index(idx)
    except TypeError:
        raise TypeError(f"{kind} indices must be integers or slices, got "
                        f"{type(idx).__name__}") from None
    if not -n <= i < n:
        raise IndexError(f"index {idx} is out of range for a {kind} of length {n}")
    return i % n


def _renumber(module, items):
    """Make `items` the children of module, named "0", "1", ..."""
    module._modules.clear()
    for i, m in enumerate(items):
        module._modules[str(i)] = m


class Sequential(Module):
    """Modules applied one after another: Sequential(a, b, c)(x) == c(b(a(x))).

    Children are named "0", "1", ... unless given as an OrderedDict of name -> module.

    Example:
        net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        net[0].weight.shape   # (8, 4)
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(idx, len(self), "Sequential")]

    def __setitem__(self, idx, module):
        key = list(self._modules)[_index(idx, len(self), "Sequential")]
        self.add_module(key, module)

    def __delitem__(self, idx):
        keys = list(self._modules)
        if isinstance(idx, slice):
            doomed = keys[idx]
        else:
            doomed = [keys[_index(idx, len(self), "Sequential")]]
        for key in doomed:
            del self._modules[key]
        if all(k.isdigit() for k in self._modules):  # keep numbering contiguous, as torch does
            _renumber(self, list(self._modules.values()))

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        if not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"index {index} is out of range for a Sequential of length {n}")
        items = list(self._modules.values())
        items.insert(index, module)
        _renumber(self, items)
        return self

    def forward(self, input):
        modules = tuple(self._modules.values())
        i = 0
        while i < len(modules):
            fused = i + 1 < len(modules) and _fused_relu(modules[i], modules[i + 1])
            if fused:
                input = fused(input)  # NOTE: the ReLU applied as the first module stores
                i += 2
            else:
                input = modules[i](input)
                i += 1
        return input


# The modules that apply a ReLU after them as they store, and the method that does
FUSES_RELU = {Conv2d: "conv_relu", Linear: "linear_relu", MaxPool2d: "pool_relu"}


def _fused_relu(first, second):
    """The method that runs first and the ReLU after it as one op (the same result and
    gradients, one pass over the output fewer), or None: plain instances of both, neither with
    a forward or hooks of its own, and a MaxPool2d that returns no indices."""
    method = FUSES_RELU.get(type(first))
    if (method is None or type(second) is not ReLU or "forward" in first.__dict__
            or "forward" in second.__dict__ or first._has_hooks() or second._has_hooks()
            or getattr(first, "return_indices", False)):
        return None
    return getattr(first, method)


class ModuleList(Module):
    """A list of modules whose parameters belong to the owner (unlike a plain Python list).

    Example:
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ModuleList(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self), "ModuleList"))]

    def __setitem__(self, idx, module):
        self.add_module(str(_index(idx, len(self), "ModuleList")), module)

    def __delitem__(self, idx):
        items = list(self._modules.values())
        if isinstance(idx, slice):
            del items[idx]
        else:
            del items[_index(idx, len(items), "ModuleList")]
        _renumber(self, items)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError(f"ModuleList.extend should be called with an iterable of modules, "
                            f"got {type(modules).__name__}")
        for m in list(modules):
            self.append(m)
        return self

    def insert(self, index, module):
        if not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        items = list(self._modules.values())
        items.insert(index, module)
        _renumber(self, items)


class ModuleDict(Module):
    """A dict of modules whose parameters belong to the owner; keeps insertion order."""
    _store = "_modules"  # NOTE: ParameterDict keeps the same methods over _parameters

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def _items(self):
        return getattr(self, self._store)

    def __getitem__(self, key):
        return self._items()[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._items()[key]

    def __len__(self):
        return len(self._items())

    def __iter__(self):
        return iter(self._items())

    def __contains__(self, key):
        return key in self._items()

    def keys(self):
        return self._items().keys()

    def items(self):
        return self._items().items()

    def values(self):
        return self._items().values()

    def update(self, modules):
        pairs = modules.items() if hasattr(modules, "items") else modules
        for key, module in pairs:
            self[key] = module


def _as_parameter(value):
    """A Parameter as is; a plain tensor wrapped in one (as torch's ParameterList does)."""
    return value if value is None or isinstance(value, Parameter) else Parameter(value)


class ParameterList(Module):
    """A list of parameters registered with the owner (named "0", "1", ...).

    Example:
        self.scales = nn.ParameterList([nn.Parameter(cltensor.ones(8)) for _ in range(3)])
    """

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList(list(self)[idx])
        return self._parameters[str(_index(idx, len(self), "ParameterList"))]

    def __setitem__(self, idx, param):
        self.register_parameter(str(_index(idx, len(self), "ParameterList")),
                                _as_parameter(param))

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def __iadd__(self, values):
        return self.extend(values)

    def append(self, value):
        self.register_parameter(str(len(self)), _as_parameter(value))
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self


class ParameterDict(ModuleDict):
    """A dict of parameters registered with the owner; keeps insertion order (plain tensors
    are wrapped in Parameters)."""
    _store = "_parameters"

    def __setitem__(self, key, param):
        self.register_parameter(key, _as_parameter(param))
