"""torch.autocast("opencl", dtype=torch.bfloat16 | torch.float16): kernels for torch's
AutocastPrivateUse1 dispatch key with the casting policies torch's CUDA autocast applies to the
same operators. torch registers no autocast kernel for a PrivateUse1 backend itself, so without
these the region would change nothing.

A tensor is cast when it is floating point, on the opencl device and not float64 (torch's
eligibility rule); the operator then runs with autocast excluded, below it. The casts are
ordinary differentiable `.to` calls (torch's CUDA autocast also caches the casts of leaf weights
within a region; here each call casts anew).
"""
import torch

from ._backend import NAME

_KEY = "AutocastPrivateUse1"
_EXCLUDE = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)
_LIB = torch.library.Library("aten", "IMPL")
_FALLTHROUGH = torch.library.Library("_", "IMPL")  # other operators pass the key untouched

# torch's CUDA autocast lists (aten overloads, "name" meaning name.default)
LOWER_PRECISION = (
    "_convolution", "_convolution.deprecated", "conv1d", "conv2d", "conv3d", "conv_tbc",
    "conv_transpose1d", "conv_transpose2d.input", "conv_transpose3d.input", "convolution",
    "prelu", "addmm", "addmv", "addr", "matmul", "einsum", "mm", "mv", "linalg_vecdot", "linear",
    "addbmm", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot", "_thnn_fused_lstm_cell",
    "_thnn_fused_gru_cell", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
    "_scaled_dot_product_flash_attention", "scaled_dot_product_attention")
FLOAT32 = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar",
    "softplus", "layer_norm", "native_layer_norm", "group_norm", "frobenius_norm.dim",
    "nuclear_norm", "nuclear_norm.dim", "cosine_similarity", "poisson_nll_loss",
    "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div",
    "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss",
    "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
    "rms_norm", "upsample_nearest1d", "_upsample_nearest_exact1d", "upsample_nearest2d",
    "_upsample_nearest_exact2d", "upsample_nearest3d", "_upsample_nearest_exact3d",
    "upsample_linear1d", "upsample_bilinear2d", "_upsample_bilinear2d_aa",
    "upsample_trilinear3d", "upsample_bicubic2d", "_upsample_bicubic2d_aa")
# float32 through their dtype argument when it is not given
FLOAT32_DTYPE_ARG = (
    "prod", "prod.dim_int", "softmax.int", "log_softmax.int", "cumprod", "cumsum",
    "linalg_vector_norm", "linalg_matrix_norm", "linalg_matrix_norm.str_ord", "sum",
    "sum.dim_IntList")
# the widest floating dtype among the operands
PROMOTE = ("addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot", "grid_sampler",
           "index_put", "tensordot", "scatter_add")


def _overload(name):
    base, _, overload = name.partition(".")
    packet = getattr(torch.ops.aten, base, None)
    return getattr(packet, overload or "default", None) if packet is not None else None


def _eligible(x):
    return (isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != torch.float64
            and x.device.type == NAME)


def _cast(value, dtype):
    """value with its eligible tensors (also inside lists) cast to dtype."""
    if _eligible(value):
        return value if value.dtype == dtype else value.to(dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype) for v in value)
    return value


def _run(op, args, kwargs, dtype):
    with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
        return op(*_cast(args, dtype), **{k: _cast(v, dtype) for k, v in kwargs.items()})


def _lower(op):
    return lambda *args, **kwargs: _run(op, args, kwargs, torch.get_autocast_dtype(NAME))


def _float32(op):
    return lambda *args, **kwargs: _run(op, args, kwargs, torch.float32)


def _promote(op):
    def kernel(*args, **kwargs):
        dtype = torch.get_autocast_dtype(NAME)
        for x in (*args, *kwargs.values()):
            for t in (x if isinstance(x, (list, tuple)) else (x,)):
                if _eligible(t):
                    dtype = torch.promote_types(dtype, t.dtype)
        return _run(op, args, kwargs, dtype)
    return kernel


def _float32_dtype_arg(op):
    """float32 passed as the op's dtype argument when none is given and the first operand is
    eligible; the operands themselves are not cast (the kernel widens as it reads)."""
    at = [a.name for a in op._schema.arguments].index("dtype")

    def kernel(*args, **kwargs):
        given = args[at] if len(args) > at else kwargs.get("dtype")
        if given is None and args and _eligible(args[0]):
            if len(args) > at:
                args = (*args[:at], torch.float32, *args[at + 1:])
            else:
                kwargs = dict(kwargs, dtype=torch.float32)
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            return op(*args, **kwargs)
    return kernel


def _refused(op):
    def kernel(*args, **kwargs):
        raise RuntimeError(
            f"aten::{op._schema.name.split('::')[1]}: torch.nn.functional.binary_cross_entropy "
            f"and torch.nn.BCELoss are unsafe to autocast (torch refuses them on CUDA too); use "
            f"binary_cross_entropy_with_logits / BCEWithLogitsLoss, or compute the loss outside "
            f"the autocast region")
    return kernel


def register():
    """Register the policies for every overload of the lists this torch has."""
    _FALLTHROUGH.fallback(torch.library.fallthrough_kernel, dispatch_key=_KEY)
    policies = [(LOWER_PRECISION, _lower), (FLOAT32, _float32),
                (FLOAT32_DTYPE_ARG, _float32_dtype_arg), (PROMOTE, _promote),
                (("binary_cross_entropy",), _refused)]
    for names, policy in policies:
        for name in names:
            op = _overload(name)
            if op is not None:
                _LIB.impl(name, policy(op), _KEY)
