"""A torch-like namespace over tinygrad, so that models.py builds the same networks in tinygrad.

tinygrad's own nn has Conv2d and Linear but no Module, Sequential or ReLU, and its state dicts
name Sequential children differently; this adapter gives models.py the few torch names it uses
(nn.Module, nn.Sequential, nn.Conv2d, nn.Linear, nn.ReLU, nn.MaxPool2d with ceil_mode,
nn.AvgPool2d, nn.Flatten and cat), built on tinygrad's Tensor ops, with torch's state-dict keys.

Example:
    >>> from convnet_benchmarks import models, tiny
    >>> net = models.alexnet(tiny.library("CL"))
    >>> net.load_state_dict(cltensor_state)  # numpy arrays, keyed as torch's
"""
import math
import types

import numpy as np
from tinygrad import Tensor


class Module:
    """The part of torch.nn.Module the benchmarks need: child modules and parameters registered
    on attribute assignment, named_parameters, state_dict and load_state_dict."""

    def __init__(self):
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_parameters", {})

    def __setattr__(self, name, value):
        if isinstance(value, Module):
            self._modules[name] = value
        elif isinstance(value, Tensor):
            self._parameters[name] = value
        object.__setattr__(self, name, value)

    def __call__(self, x):
        return self.forward(x)

    def named_parameters(self, prefix=""):
        for name, p in self._parameters.items():
            yield prefix + name, p
        for name, m in self._modules.items():
            yield from m.named_parameters(f"{prefix}{name}.")

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def state_dict(self):
        return dict(self.named_parameters())

    def load_state_dict(self, state):
        """Replace every parameter by the array of the same name (numpy or anything
        np.asarray takes), on the parameter's device; names and shapes must match."""
        ours = self.state_dict()
        if set(ours) != set(state):
            missing, extra = sorted(set(ours) - set(state)), sorted(set(state) - set(ours))
            raise KeyError(f"load_state_dict: missing {missing}, unexpected {extra}")
        for name, p in ours.items():
            value = np.ascontiguousarray(state[name])
            if value.shape != p.shape:
                raise ValueError(f"load_state_dict: {name} has shape {value.shape}, "
                                 f"the model expects {p.shape}")
            owner, attr = self._owner(name)
            setattr(owner, attr, Tensor(value, device=p.device).realize())

    def _owner(self, name):
        *path, attr = name.split(".")
        m = self
        for part in path:
            m = m._modules[part]
        return m, attr


class Sequential(Module):
    def __init__(self, *layers):
        super().__init__()
        for i, layer in enumerate(layers):
            setattr(self, str(i), layer)

    def forward(self, x):
        for layer in self._modules.values():
            x = layer(x)
        return x


def _uniform(shape, bound, device):
    # NOTE: torch's default init (kaiming_uniform with a=sqrt(5) gives the same bound as the
    # bias's): uniform in +-1/sqrt(fan_in). tinygrad draws lazily, so a load_state_dict that
    # follows costs no random kernel.
    return Tensor.uniform(*shape, low=-bound, high=bound, device=device)


class Conv2d(Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, device=None):
        super().__init__()
        k = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        bound = 1 / math.sqrt(in_channels // groups * k[0] * k[1])
        self.weight = _uniform((out_channels, in_channels // groups, *k), bound, device)
        self.bias = _uniform((out_channels,), bound, device) if bias else None

    def forward(self, x):
        return x.conv2d(self.weight, self.bias, groups=self.groups, stride=self.stride,
                        dilation=self.dilation, padding=self.padding)


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True, device=None):
        super().__init__()
        bound = 1 / math.sqrt(in_features)
        self.weight = _uniform((out_features, in_features), bound, device)
        self.bias = _uniform((out_features,), bound, device) if bias else None

    def forward(self, x):
        return x.linear(self.weight.transpose(), self.bias)


class ReLU(Module):
    def forward(self, x):
        return x.relu()


class Flatten(Module):
    def forward(self, x):
        return x.flatten(1)


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class _Pool2d(Module):
    """torch's pooling module arguments over tinygrad's Tensor method `op`."""
    op = ""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False):
        super().__init__()
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(stride) if stride is not None else self.kernel_size
        self.padding, self.ceil_mode = _pair(padding), ceil_mode

    def forward(self, x):
        return getattr(x, self.op)(self.kernel_size, self.stride, padding=self.padding,
                                   ceil_mode=self.ceil_mode)


class MaxPool2d(_Pool2d):
    op = "max_pool2d"


class AvgPool2d(_Pool2d):
    op = "avg_pool2d"


def cat(tensors, dim=0):
    """torch.cat for tinygrad tensors."""
    first, *rest = tensors
    return first.cat(*rest, dim=dim)


def library(device):
    """A namespace with torch's names (`lib.nn.Conv2d`, ..., `lib.cat`) whose layers keep their
    parameters on the tinygrad `device` (e.g. "CL" or "CL:1"), for models.MODELS[name](lib)."""
    def on_device(cls):
        return lambda *args, **kw: cls(*args, device=device, **kw)

    nn = types.SimpleNamespace(
        Module=Module, Sequential=Sequential, Conv2d=on_device(Conv2d), Linear=on_device(Linear),
        ReLU=ReLU, Flatten=Flatten, MaxPool2d=MaxPool2d, AvgPool2d=AvgPool2d)
    return types.SimpleNamespace(nn=nn, cat=cat)
