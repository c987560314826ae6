"""Operators without an opencl kernel run on the CPU (copy in, torch's CPU kernel, copy out)."""
import os
import warnings

import torch
from torch.utils._pytree import tree_map

from ._backend import NAME, TO_NUMPY, cl_device_for, empty_wrapper, is_opencl, unwrap, wrap
from .factory import to_cl, to_cpu


class CPUFallbackWarning(UserWarning):
    """An aten operator had no opencl kernel and ran on the CPU."""


_FELL_BACK = set()


def fallback_ops():
    """The aten overloads that have fallen back to the CPU so far, sorted."""
    return sorted(_FELL_BACK)


def _note(name):
    if os.environ.get("CLTENSOR_TORCH_FALLBACK", "").lower() == "error":
        raise NotImplementedError(f"{name} has no opencl kernel (CLTENSOR_TORCH_FALLBACK=error "
                                  f"forbids running it on the CPU)")
    if name not in _FELL_BACK:
        _FELL_BACK.add(name)
        warnings.warn(f"{name} has no opencl kernel; it runs on the CPU (copies in and out)",
                      CPUFallbackWarning, stacklevel=3)


# NOTE: ops that write arguments their schema does not mark as written
_UNMARKED_WRITES = {"aten::native_batch_norm": {"running_mean", "running_var"}}


def _mutated(op):
    """Indices of the arguments the op writes (in-place self, out=, running statistics)."""
    unmarked = _UNMARKED_WRITES.get(op.name(), ())
    return [i for i, a in enumerate(op._schema.arguments)
            if (a.alias_info is not None and a.alias_info.is_write) or a.name in unmarked]


def cpu_fallback(op, *args, **kwargs):
    """Run op on the CPU with opencl operands copied there, and bring the results back."""
    name = op.name()  # "aten::ne.Scalar"
    if any(r.alias_info is not None and not r.alias_info.is_write for r in op._schema.returns):
        raise NotImplementedError(f"{name} is a view op without an opencl kernel; a CPU copy would "
                                  f"not share the tensor's storage")
    _note(name)
    cpu_args, cpu_kwargs = tree_map(_to_cpu, args), tree_map(_to_cpu, kwargs)
    out = op(*cpu_args, **cpu_kwargs)
    names = [a.name for a in op._schema.arguments]
    written = {}
    for i in _mutated(op):
        orig = args[i] if i < len(args) else kwargs.get(names[i])
        done = cpu_args[i] if i < len(args) else cpu_kwargs.get(names[i])
        if is_opencl(orig):
            if orig.shape != done.shape:
                orig.resize_(done.shape)
            unwrap(orig).copy_(to_cl(done, unwrap(orig).dtype, unwrap(orig).device))
            written[id(done)] = orig
    return tree_map(lambda x: _back(x, written), out)


def _to_cpu(x):
    """An argument for the CPU call: opencl tensors copied (cloned: out= may resize), and a
    factory's device="opencl" made the CPU (else the call would come back here, endlessly)."""
    if is_opencl(x):
        return to_cpu(x).clone()
    if isinstance(x, torch.device) and x.type == NAME:
        return torch.device("cpu")
    return x


def _back(x, written):
    """An op's CPU output as the opencl tensor it was written into, or a new opencl tensor."""
    if id(x) in written:
        return written[id(x)]
    if isinstance(x, torch.Tensor) and x.numel() == 0 and x.dtype not in TO_NUMPY:
        return empty_wrapper(x.shape, x.dtype)
    if isinstance(x, torch.Tensor):
        return wrap(to_cl(x, None, cl_device_for(None, "fallback")))
    return x


_LIB = torch.library.Library("_", "IMPL")
_LIB.fallback(cpu_fallback, dispatch_key="PrivateUse1")
