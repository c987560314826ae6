"""cltensor: a hardware-agnostic OpenCL tensor backend with Torch's names and semantics."""
from . import dtypes  # noqa: F401
from .creation import *  # noqa: F401,F403
from .device import (Device, DeviceError, OutOfMemoryError, default_device, devices,  # noqa: F401
                     empty_cache, get_device, memory_stats, reset_peak_memory_stats,
                     set_default_device, synchronize)
from .dtypes import bool_, double, float32, float64, int32, int64, long  # noqa: F401
from .dtypes import float, int  # noqa: F401,A004
from .dtypes import bool_ as bool  # noqa: F401,A004
from .dtypes import promote_types, result_type  # noqa: F401
from .ops import indexing, pointwise, ranges, reduce, shape
from .ops import matmul as _matmul_ops
from .ops import sort as _sort_ops
from .ops.elementwise import broadcast_shapes, is_tensor  # noqa: F401
from .ops.indexing import *  # noqa: F401,F403
from .ops.matmul import *  # noqa: F401,F403
from .ops.pointwise import *  # noqa: F401,F403
from .ops.ranges import *  # noqa: F401,F403
from .ops.reduce import *  # noqa: F401,F403
from .ops.shape import *  # noqa: F401,F403
from .ops.sort import *  # noqa: F401,F403
from .profiler import profile  # noqa: F401
from .program import KernelBuildError, clear_cache  # noqa: F401
from . import random
from .random import *  # noqa: F401,F403
from .tensor import CHANNELS_LAST as channels_last  # noqa: F401
from .tensor import CONTIGUOUS_FORMAT as contiguous_format  # noqa: F401
from .tensor import ClTensor

Tensor = ClTensor

for _module in (pointwise, reduce, shape, indexing, _matmul_ops, ranges, random, _sort_ops):
    for _name, _fn in _module.TENSOR_METHODS.items():
        setattr(ClTensor, _name, _fn)
del _module, _name, _fn

from . import autograd  # noqa: E402
from .autograd import Function, enable_grad, no_grad, set_grad_enabled  # noqa: E402,F401

autograd.install(globals(), ClTensor)

# ops composed of the (now differentiable) tensor methods: bound as they are
from .ops import arrange as _arrange  # noqa: E402
from .ops import composed as _composed  # noqa: E402
from .ops import contract as _contract  # noqa: E402
from .ops import searching as _searching  # noqa: E402
from .ops.arrange import *  # noqa: E402,F401,F403
from .ops.composed import *  # noqa: E402,F401,F403
from .ops.contract import *  # noqa: E402,F401,F403
from .ops.searching import *  # noqa: E402,F401,F403

from . import linalg  # noqa: E402  (torch.linalg: its Functions compose the ops above)
from .linalg import (cholesky, cholesky_inverse, cholesky_solve, det, inverse,  # noqa: E402,F401
                     logdet, pinverse, slogdet, triangular_solve)
from .linalg import qr_legacy as qr  # noqa: E402,F401  (torch.qr)

for _module in (_composed, _searching, _arrange, _contract, linalg):
    for _name, _fn in _module.TENSOR_METHODS.items():
        setattr(ClTensor, _name, _fn)
del _module, _name, _fn

from . import backends, conv, nn, optim  # noqa: E402,F401  (layers sit on top of the ops)
from .conv import conv_algorithms  # noqa: E402,F401
from .plugins import plugins, register_plugin, unregister_plugin  # noqa: E402,F401
from .serialization import load, save  # noqa: E402,F401

ClTensor.softmax = lambda self, dim, dtype=None: nn.functional.softmax(self, dim, dtype=dtype)
ClTensor.log_softmax = lambda self, dim, dtype=None: nn.functional.log_softmax(self, dim, dtype=dtype)

__version__ = "0.1.0"
