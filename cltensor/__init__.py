"""cltensor: a hardware-agnostic OpenCL tensor backend with Torch's names and semantics."""
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
from .ops import indexing, pointwise, ranges, reduce, shape  # noqa: F401
from .profiler import profile  # noqa: F401
from .graphs import CUDAGraph, Graph, GraphCaptureError, graph, is_current_stream_capturing  # noqa: F401
from .caches import clear_cache  # noqa: F401
from .program import KernelBuildError  # noqa: F401
from . import random  # noqa: F401
from .tensor import CHANNELS_LAST as channels_last  # noqa: F401
from .tensor import CONTIGUOUS_FORMAT as contiguous_format  # noqa: F401
from .creation import PRESERVE_FORMAT as preserve_format  # noqa: F401
from .tensor import ClTensor

Tensor = ClTensor

# the kernel ops' functions and methods, the differentiable ones wrapped by autograd
from .autograd.namespace import *  # noqa: E402,F401,F403
from . import autograd  # noqa: E402,F401
from .autograd import (Function, enable_grad, is_grad_enabled, no_grad,  # noqa: E402,F401
                       set_grad_enabled)
from .autograd.inference import inference_mode, is_inference_mode_enabled  # noqa: E402,F401

# ops composed of the (now differentiable) tensor methods
from .composed.arrange import *  # noqa: E402,F401,F403
from .composed.composed import *  # noqa: E402,F401,F403
from .composed.contract import *  # noqa: E402,F401,F403
from .composed.searching import *  # noqa: E402,F401,F403

from . import linalg  # noqa: E402,F401  (torch.linalg: its Functions compose the ops above)
from .linalg import (cholesky, cholesky_inverse, cholesky_solve, det, inverse,  # noqa: E402,F401
                     logdet, pinverse, slogdet, triangular_solve)
from .linalg import qr_legacy as qr  # noqa: E402,F401  (torch.qr)

# the composed ops' methods, torch's aliases, and the functions that are methods here
from .composed_methods import *  # noqa: E402,F401,F403

from . import backends, conv, nn, optim  # noqa: E402,F401  (layers sit on top of the ops)
from . import accelerator, cuda  # noqa: E402,F401  (torch.cuda, torch.accelerator over "cuda")
from .backends import (are_deterministic_algorithms_enabled,  # noqa: E402,F401
                       get_float32_matmul_precision, get_num_interop_threads, get_num_threads,
                       is_deterministic_algorithms_warn_only_enabled, set_float32_matmul_precision,
                       set_num_interop_threads, set_num_threads, use_deterministic_algorithms)
from .conv import conv_algorithms  # noqa: E402,F401
from .plugins import plugins, register_plugin, unregister_plugin  # noqa: E402,F401
from .serialization import load, save  # noqa: E402,F401

from .nn.methods import log_softmax, softmax  # noqa: E402,F401  (torch.softmax(input, dim, dtype))
from . import special  # noqa: E402,F401  (torch.special)

from . import amp  # noqa: E402,F401
from .amp import autocast  # noqa: E402,F401
from .amp.wrapped import *  # noqa: E402,F401,F403  (autocast's op lists, wrapped)

__version__ = "0.1.0"
from . import utils  # noqa: E402,F401  (torch.utils.data)
from . import compiler, distributions, onnx  # noqa: E402,F401
from .compiler import compile  # noqa: E402,F401,A004
from . import tune  # noqa: E402,F401  (the tuner: installs tuning on first use)
