"""PyTorch's "opencl" device: `import cltensor.torch` registers it, after which
`torch.randn(3, device="opencl")`, `.to("opencl")` and torch.nn models run on cltensor's kernels.

Needs torch (`pip install "cltensor[torch]"`). See docs/torch_device.md.
"""
import functools

import torch
import torch.autograd.graph
from torch.utils import backend_registration

# torch's Python backend API (torch._C._acc) first shipped in torch 2.10
if not hasattr(backend_registration, "_setup_privateuseone_for_python_backend") or \
        not hasattr(torch._C, "_acc"):
    raise ImportError(f"cltensor.torch needs torch 2.10 or later (its Python-registered device "
                      f"API); found torch {torch.__version__}: pip install 'cltensor[torch]'")

from . import _backend, device_module, pinned, storage_guard  # noqa: E402


class _Hooks(torch._C._acc.PrivateUse1Hooks):
    def is_available(self):
        return device_module.is_available()

    def has_primary_context(self, dev_id):
        return True

    def is_built(self):
        return True


_PRIVATE_USE1 = torch._C._autograd.DeviceType.PrivateUse1


class _Guard(torch._C._acc.DeviceGuard):
    def type_(self):  # asked by torch's C++ several times per aten call
        return _PRIVATE_USE1


_has_storage = torch._C._has_storage


def _has_device_storage(t):
    """opencl tensors keep their data in cltensor buffers, not in torch storage: torch then
    deep-copies them with clone() and pickles them through a CPU copy, as it does for other
    backends without storage (its storage path would allocate opencl storage, which has no
    allocator)."""
    return t.device.type != _backend.NAME and _has_storage(t)


def _calling_thread_backward(run):
    """torch's engine runs each non-CPU device's backward on a worker thread from a queue per
    device index, counted once, at the first backward, from the device guards: the Python guard
    of a PrivateUse1 backend reports one device, and none before this module registered it (a
    backward on opencl:N, N > 0, or after a CPU-only backward, trips an internal assertion).
    A backward therefore runs on the calling thread, as with
    torch.autograd.set_multithreading_enabled(False) (the kernels here hold the GIL anyway),
    unless an output lives on another accelerator (CUDA): torch runs that one as it would
    (torch 2.11's engine trips a stream assertion for CUDA nodes once the device is registered,
    on the calling thread and on its workers alike: docs/torch_device.md, Limits)."""
    @functools.wraps(run)
    def engine_run_backward(t_outputs, *args, **kwargs):
        if _on_other_accelerator(t_outputs):
            return run(t_outputs, *args, **kwargs)
        with torch.autograd.set_multithreading_enabled(False):
            return run(t_outputs, *args, **kwargs)
    return engine_run_backward


def _on_other_accelerator(outputs):
    """Whether a backward's outputs include a tensor on a device other than the CPU and
    opencl (GradientEdges are not asked)."""
    return any(isinstance(t, torch.Tensor) and t.device.type not in ("cpu", _backend.NAME)
               for t in outputs)


def _register():
    if torch._C._get_privateuse1_backend_name() == _backend.NAME:
        return
    backend_registration._setup_privateuseone_for_python_backend(
        _backend.NAME, backend_module=device_module, hook=_Hooks(), device_guard=_Guard())
    torch._C._has_storage = _has_device_storage
    backward = _calling_thread_backward(torch.autograd.graph._engine_run_backward)
    torch.autograd.graph._engine_run_backward = torch.autograd._engine_run_backward = backward
    storage_guard.install()
    pinned.install()


_register()

from . import factory, views  # noqa: E402,F401  (register their kernels)
from .fallback import CPUFallbackWarning, fallback_ops  # noqa: E402,F401
from . import math_ops, nn_ops, norm_ops, optim_ops, reduce_ops, select_ops  # noqa: E402,F401
from . import activation_ops, conv_ops, loss_ops, resample_ops, sort_ops  # noqa: E402,F401
from . import foreach_ops, linalg_ops, random_ops, rnn_ops, search_ops  # noqa: E402,F401
from . import serialization  # noqa: E402,F401
from . import ctc_ops, matrix_ops, sampling_ops, special_ops, volume_ops  # noqa: E402,F401
from . import autocast  # noqa: E402

autocast.register()

__all__ = ["CPUFallbackWarning", "fallback_ops", "registered_ops"]


def registered_ops():
    """The aten overloads that run on the opencl device, sorted."""
    return sorted(_backend.KERNELS)
