"""ClTensor's whole surface beyond the class itself: every method name -> the module whose
TENSOR_METHODS table holds its function (x.sum is ops/reduce.py's TENSOR_METHODS["sum"],
reduce.sum), in the order they are installed; a later table's name would win, and no name
is in two tables. The function has the method's name unless NAMED_OTHERWISE gives it. The
rest of ClTensor is written on the class: tensor.py (storage, shape, views, conversions,
autograd state) and operators.py (Python's operators through the methods).

The tables are installed from the layers that own their functions, each with `attach`: the
kernel ops' by autograd/namespace.py (then autograd.install() wraps the differentiable ones,
autograd.FUNCTIONS and VIEWS, and records the in-place ones); the composed ops' by
cltensor/composed_methods.py, with torch's other names for the same ops (ALIASES); nn's by
nn/methods.py. tests/test_methods_table.py checks that every public attribute of ClTensor is
written on the class or listed here, and that each table lists exactly its module's methods.

METHOD_FUNCTIONS are methods that are also cltensor functions (torch.relu_(x) is x.relu_()).
This module imports nothing: the tensor layer's declaration, read by the layers above.
"""
from collections.abc import Callable, Mapping

# installed by autograd/namespace.py, then the differentiable ones (autograd.FUNCTIONS, VIEWS)
# wrapped by autograd.install()
KERNEL_OPS: dict[str, tuple[str, ...]] = {
    "ops.elementwise": ("clone", "_cast", "copy_", "fill_"),
    "ops.pointwise": ("add", "sub", "mul", "div", "floor_divide", "remainder", "pow", "neg",
        "clamp", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
        "logical_or", "logical_xor", "logical_not", "fmod", "heaviside", "sgn", "frac", "logit",
        "nan_to_num", "bitwise_not", "_polygamma", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt",
        "sin", "cos", "tanh", "sigmoid", "reciprocal", "tan", "sinh", "cosh", "asin", "acos",
        "atan", "erf", "erfc", "log2", "log10", "exp2", "deg2rad", "rad2deg", "acosh", "asinh",
        "atanh", "erfinv", "lgamma", "digamma", "i0", "sinc", "abs", "sign", "relu", "square",
        "floor", "ceil", "round", "trunc", "atan2", "hypot", "logaddexp", "logaddexp2", "copysign",
        "xlogy", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
        "bitwise_right_shift", "nextafter", "igamma", "igammac", "fmax", "fmin", "gcd", "lcm",
        "add_", "sub_", "mul_", "div_", "floor_divide_", "remainder_", "pow_", "neg_", "clamp_",
        "maximum_", "minimum_", "eq_", "ne_", "lt_", "le_", "gt_", "ge_", "logical_and_",
        "logical_or_", "logical_xor_", "logical_not_", "fmod_", "heaviside_", "sgn_", "frac_",
        "logit_", "nan_to_num_", "bitwise_not_", "_polygamma_", "exp_", "log_", "log1p_", "expm1_",
        "sqrt_", "rsqrt_", "sin_", "cos_", "tanh_", "sigmoid_", "reciprocal_", "tan_", "sinh_",
        "cosh_", "asin_", "acos_", "atan_", "erf_", "erfc_", "log2_", "log10_", "exp2_",
        "deg2rad_", "rad2deg_", "acosh_", "asinh_", "atanh_", "erfinv_", "lgamma_", "digamma_",
        "i0_", "sinc_", "abs_", "sign_", "relu_", "square_", "floor_", "ceil_", "round_", "trunc_",
        "atan2_", "hypot_", "logaddexp_", "logaddexp2_", "copysign_", "xlogy_", "bitwise_and_",
        "bitwise_or_", "bitwise_xor_", "bitwise_left_shift_", "bitwise_right_shift_", "nextafter_",
        "igamma_", "igammac_", "gcd_", "lcm_", "rsub", "_rdiv", "_rpow", "isnan", "isinf",
        "isfinite", "clip", "clip_", "true_divide", "isposinf", "isneginf", "isreal", "signbit",
        "arctan2", "positive", "frexp", "arctan2_", "where", "__floordiv__", "__mod__",
        "__rfloordiv__", "__rmod__", "__rlshift__", "__rrshift__", "__eq__", "__ne__", "__lt__",
        "__le__", "__gt__", "__ge__"),
    "ops.reduce": ("sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin",
        "var", "std", "norm", "all", "any", "logsumexp", "cumsum", "cumprod", "logcumsumexp"),
    "ops.shape": ("split", "chunk", "flip", "repeat", "roll", "split_with_sizes",
        "as_strided"),
    "ops.indexing": ("index_select", "gather", "scatter", "scatter_", "scatter_add",
        "scatter_add_", "masked_fill", "masked_fill_", "masked_select", "nonzero",
        "scatter_reduce", "scatter_reduce_", "masked_scatter", "masked_scatter_", "index_put",
        "index_put_", "index_add", "index_add_", "index_copy", "index_copy_", "index_fill",
        "index_fill_", "put", "put_", "select_scatter", "slice_scatter", "diagonal_scatter",
        "__getitem__", "__setitem__"),
    "ops.matmul": ("matmul", "mm", "bmm", "mv", "dot", "addmm", "addmm_", "baddbmm",
        "baddbmm_", "outer", "ger", "__rmatmul__"),
    "ops.ranges": ("tril", "triu", "tril_", "triu_", "diag"),
    "random": ("uniform_", "normal_", "exponential_", "bernoulli_", "bernoulli", "random_"),
    "ops.sort": ("sort", "argsort", "topk"),
    "interop": ("_move", "__reduce_ex__", "__dlpack_device__", "__dlpack__"),
    "autograd": ("backward",),
}
# installed by cltensor/composed_methods.py as they are (they call the wrapped methods); the
# in-place ones (composed/inplace.py) recorded for autograd with their out-of-place twins
COMPOSED_OPS: dict[str, tuple[str, ...]] = {
    "composed.composed": ("lerp", "addcmul", "addcdiv", "unbind", "kthvalue", "median", "unique",
        "unique_consecutive", "new_full", "new_tensor", "type_as", "movedim", "swapaxes", "ravel",
        "clamp_min", "clamp_max", "msort", "nansum", "nanmean", "isclose", "allclose", "equal",
        "count_nonzero", "new_zeros", "new_ones", "new_empty", "moveaxis", "nelement", "mvlgamma",
        "ldexp", "float_power", "angle", "diagflat", "sum_to_size", "new_empty_strided",
        "narrow_copy", "hsplit", "vsplit", "dsplit", "nanmedian", "mode", "cov", "corrcoef",
        "multinomial", "index_reduce", "polygamma", "polygamma_"),
    "composed.inplace": ("clamp_min_", "clamp_max_", "cumsum_", "cumprod_", "addcdiv_", "addcmul_",
        "lerp_", "addmv_", "addr_", "addbmm_", "renorm_", "index_reduce_", "mvlgamma_", "ldexp_",
        "float_power_", "fill_diagonal_", "transpose_", "t_", "squeeze_", "unsqueeze_",
        "as_strided_"),
    "composed.searching": ("take", "take_along_dim", "argwhere", "aminmax", "cummax", "cummin",
        "bincount", "histc", "histogram", "quantile", "nanquantile"),
    "composed.arrange": ("tensor_split", "tile", "repeat_interleave", "rot90", "fliplr", "flipud",
        "trace", "diag_embed", "diff"),
    "composed.contract": ("tensordot", "inner", "vdot", "kron", "cross", "addmv", "addr", "addbmm",
        "matrix_power", "dist", "renorm"),
    "linalg": ("inverse", "det", "logdet", "slogdet", "cholesky", "cholesky_solve",
        "cholesky_inverse", "triangular_solve", "qr", "pinverse"),
}
# installed by nn/methods.py (the tensor sits below nn)
NN: dict[str, tuple[str, ...]] = {
    "nn.methods": ("softmax", "log_softmax", "hardshrink", "prelu"),
}


METHOD_FUNCTIONS: tuple[str, ...] = (
    "abs_", "acos_", "acosh_", "addmv_", "as_strided_", "asin_", "asinh_", "atan_", "atanh_",
    "ceil_", "clamp_", "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_", "deg2rad_", "erf_",
    "erfc_", "exp2_", "exp_", "expm1_", "fill_", "floor_", "frac_", "gcd_", "i0_", "lcm_",
    "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_", "nan_to_num_", "neg_", "rad2deg_",
    "reciprocal_", "relu_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_",
    "square_", "tan_", "tanh_", "trunc_", "xlogy_", "zero_", "adjoint", "clone", "conj",
    "conj_physical", "detach", "detach_", "is_complex", "is_conj", "is_floating_point",
    "is_neg", "is_nonzero", "is_same_size", "is_signed", "numel", "resolve_conj", "resolve_neg")
# alias -> target: a tensor method with its in-place form, and a function where the target is one
ALIASES: dict[str, str] = {
    "absolute": "abs", "arccos": "acos", "arcsin": "asin", "arctan": "atan",
    "arccosh": "acosh", "arcsinh": "asinh", "arctanh": "atanh", "fix": "trunc",
    "negative": "neg", "subtract": "sub", "multiply": "mul", "divide": "div",
    "true_divide": "div", "greater": "gt", "greater_equal": "ge", "less": "lt",
    "less_equal": "le", "not_equal": "ne", "swapdims": "swapaxes", "unsafe_chunk": "chunk",
    "unsafe_split": "split", "unsafe_split_with_sizes": "split_with_sizes",
}
# The methods whose function is named otherwise (every other method's function has the
# method's name in its module): method -> the function, or for a lambda the call it makes.
NAMED_OTHERWISE: dict[str, str] = {
    "clip": "clamp", "clip_": "clamp_", "true_divide": "div", "arctan2": "atan2",
    "arctan2_": "atan2_", "where": "where(condition, self, other)",
    "__floordiv__": "floor_divide", "__mod__": "remainder",
    "__rfloordiv__": "reflected('floor_divide', self, other)",
    "__rmod__": "reflected('remainder', self, other)",
    "__rlshift__": "bitwise_left_shift(other, self)",
    "__rrshift__": "bitwise_right_shift(other, self)",
    "__getitem__": "tensor_getitem", "__setitem__": "tensor_setitem", "ger": "outer",
    "__rmatmul__": "matmul(other, self)", "backward": "_tensor_backward", "moveaxis": "movedim",
    "nelement": "numel", "polygamma": "_polygamma_method", "polygamma_": "_polygamma_in_place",
    "inverse": "inv", "qr": "qr_legacy",
}
# torch's names of an in-place transpose
IN_PLACE_ALIASES: dict[str, str] = {"swapaxes_": "transpose_", "swapdims_": "transpose_"}


def attach(cls: type, declared: Mapping[str, tuple[str, ...]],
           tables: Mapping[str, Mapping[str, Callable]]) -> None:
    """Set on cls each declared name, module by module, to that module's table entry
    (tables: module name as declared -> its TENSOR_METHODS). A name the module's table lacks
    raises KeyError, so the declaration cannot name a method that does not exist."""
    for module, names in declared.items():
        table = tables[module]
        for name in names:
            setattr(cls, name, table[name])
