"""autocast's op lists wrapped at import: ClTensor's methods and nn.functional's functions in
place, and the package-level functions here, which cltensor/__init__.py re-exports after every
other name (autocast_mode.OP_LISTS). torch.cuda.amp's names join cltensor.cuda."""
import types

from .. import cuda as _cuda
from .. import nn
from ..autograd import namespace as _ops
from ..composed import contract as _contract
from ..nn import methods as _nn_methods
from . import autocast_mode
from .autocast_mode import autocast
from .grad_scaler import GradScaler

# the modules whose functions the package root binds under the op lists' names, the later
# binding first (softmax from nn.methods, addbmm from composed.contract, the rest from the kernel ops)
_SOURCES = (_nn_methods, _contract, _ops)
__all__ = [name for _, names, _, _ in autocast_mode.OP_LISTS for name in names]

_functions = types.SimpleNamespace(**{
    name: next(getattr(m, name) for m in _SOURCES if hasattr(m, name)) for name in __all__})
autocast_mode.install(_functions, nn.functional)
globals().update(vars(_functions))

_cuda.amp = types.SimpleNamespace(
    GradScaler=GradScaler, autocast=lambda enabled=True, dtype=None, cache_enabled=None:
    autocast("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled))
