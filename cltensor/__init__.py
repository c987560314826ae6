"""cltensor: a hardware-agnostic OpenCL tensor backend with Torch's names and semantics."""
import sys as _sys

from . import dtypes  # noqa: F401
from .creation import *  # noqa: F401,F403
from .device import (Device, DeviceError, OutOfMemoryError, default_device, devices,  # noqa: F401
                     empty_cache, get_device, memory_stats, reset_peak_memory_stats,
                     set_default_device, synchronize)
from .dtypes import (bfloat16, bool_, double, float16, float32, float64, half,  # noqa: F401
                     int8, int16, int32, int64, long, short, uint8)
from .dtypes import float, int  # noqa: F401,A004
from .dtypes import DType as dtype  # noqa: F401
from .dtypes import bool_ as bool  # noqa: F401,A004
from .dtypes import (finfo, get_default_dtype, iinfo, promote_types, result_type,  # noqa: F401
                     set_default_dtype)
from .size import Size  # noqa: F401
from .threads import (get_num_interop_threads, get_num_threads,  # noqa: F401
                      set_num_interop_threads, set_num_threads)
from .ops import indexing, pointwise, ranges, reduce, shape  # noqa: F401
from .profiler import profile  # noqa: F401
from .caches import clear_cache  # noqa: F401
from .program import KernelBuildError  # noqa: F401
from . import random  # noqa: F401
from .tensor import CHANNELS_LAST as channels_last  # noqa: F401
from .tensor import CONTIGUOUS_FORMAT as contiguous_format  # noqa: F401
from .tensor import ClTensor

Tensor = ClTensor

# the kernel ops' functions and methods, the differentiable ones wrapped by autograd
from .autograd.namespace import *  # noqa: E402,F401,F403
from . import autograd  # noqa: E402
from .autograd import Function, enable_grad, no_grad, set_grad_enabled  # noqa: E402,F401

# ops composed of the (now differentiable) tensor methods: bound as they are
from .ops import arrange as _arrange  # noqa: E402
from .ops import composed as _composed  # noqa: E402
from .ops import contract as _contract  # noqa: E402
from .ops import inplace as _inplace  # noqa: E402
from .ops import searching as _searching  # noqa: E402
from .ops.arrange import *  # noqa: E402,F401,F403
from .ops.composed import *  # noqa: E402,F401,F403
from .ops.contract import *  # noqa: E402,F401,F403
from .ops.searching import *  # noqa: E402,F401,F403

from . import linalg  # noqa: E402  (torch.linalg: its Functions compose the ops above)
from .linalg import (cholesky, cholesky_inverse, cholesky_solve, det, inverse,  # noqa: E402,F401
                     logdet, pinverse, slogdet, triangular_solve)
from .linalg import qr_legacy as qr  # noqa: E402,F401  (torch.qr)

for _module in (_composed, _inplace, _searching, _arrange, _contract, linalg):
    for _name, _fn in _module.TENSOR_METHODS.items():
        setattr(ClTensor, _name, _fn)
for _name, _twin in _inplace.IN_PLACE.items():  # in-place forms composed of the ops above
    setattr(ClTensor, _name, autograd.wrap_inplace(_name, getattr(ClTensor, _name), _twin))
del _module, _name, _fn, _twin

# torch's functions that are tensor methods here (torch.relu_(x) is x.relu_(), ...)
for _name in ("abs_", "acos_", "acosh_", "addmv_", "as_strided_", "asin_", "asinh_", "atan_",
              "atanh_", "ceil_", "clamp_", "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_",
              "deg2rad_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fill_", "floor_", "frac_",
              "gcd_", "i0_", "lcm_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_",
              "nan_to_num_", "neg_", "rad2deg_", "reciprocal_", "relu_", "round_", "rsqrt_",
              "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_",
              "xlogy_", "zero_", "adjoint", "clone", "conj", "conj_physical", "detach", "detach_",
              "is_complex", "is_conj", "is_floating_point", "is_neg", "is_nonzero",
              "is_same_size", "is_signed", "numel", "resolve_conj", "resolve_neg"):
    globals()[_name] = getattr(ClTensor, _name)
# torch's other names for the same ops (torch.absolute is torch.abs, ...): as tensor methods with
# their in-place forms, and as cltensor functions where the target is one
_ALIASES = {"absolute": "abs", "arccos": "acos", "arcsin": "asin", "arctan": "atan",
           "arccosh": "acosh", "arcsinh": "asinh", "arctanh": "atanh", "fix": "trunc",
           "negative": "neg", "subtract": "sub", "multiply": "mul", "divide": "div",
           "true_divide": "div", "greater": "gt", "greater_equal": "ge", "less": "lt",
           "less_equal": "le", "not_equal": "ne", "swapdims": "swapaxes", "unsafe_chunk": "chunk",
           "unsafe_split": "split", "unsafe_split_with_sizes": "split_with_sizes"}
for _alias, _target in _ALIASES.items():
    for _a, _t in ((_alias, _target), (_alias + "_", _target + "_")):
        if hasattr(ClTensor, _t):
            setattr(ClTensor, _a, getattr(ClTensor, _t))
        if _t in globals():
            globals()[_a] = globals()[_t]
ClTensor.swapaxes_ = ClTensor.swapdims_ = ClTensor.transpose_
del _name, _alias, _target, _a, _t

from . import backends, conv, nn, optim  # noqa: E402,F401  (layers sit on top of the ops)
from . import accelerator, cuda  # noqa: E402,F401  (torch.cuda, torch.accelerator over "cuda")
from .conv import conv_algorithms  # noqa: E402,F401
from .plugins import plugins, register_plugin, unregister_plugin  # noqa: E402,F401
from .serialization import load, save  # noqa: E402,F401

# (their keyword dtype shadows cltensor.dtype only inside the lambdas)
ClTensor.softmax = lambda self, dim, dtype=None: nn.functional.softmax(  # noqa: F811
    self, dim, dtype=dtype)
ClTensor.log_softmax = lambda self, dim, dtype=None: nn.functional.log_softmax(  # noqa: F811
    self, dim, dtype=dtype)
softmax, log_softmax = ClTensor.softmax, ClTensor.log_softmax  # torch.softmax(input, dim, dtype)
from . import special  # noqa: E402,F401  (torch.special: binds the functions above)
ClTensor.hardshrink = lambda self, lambd=0.5: nn.functional.hardshrink(self, lambd)
ClTensor.prelu = lambda self, weight: nn.functional.prelu(self, weight)

from . import amp  # noqa: E402
from .amp import autocast  # noqa: E402,F401

amp.install(_sys.modules[__name__])  # autocast's op lists: the functions bound above

__version__ = "0.1.0"
from . import utils  # noqa: E402,F401  (torch.utils.data)
