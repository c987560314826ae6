"""Conformance of the "opencl" device's aten kernels with CPU torch: a table of operators, each
run on random inputs in float32 and float64, in contiguous, transposed, strided, offset and
expanded (stride 0) layouts, in its functional, in-place and out= forms, with gradients through
torch.autograd; every result must match CPU torch. One test builds each operator's kernels once
and runs all its layouts, so the table stays quick on PoCL."""
import contextlib
import warnings
from dataclasses import dataclass, field

import numpy as np
import pytest

# torch (skipping when it is missing or too old) and the fixture making `device` opencl:0
from test_torch_device import ct, ocl, torch  # noqa: F401
from torch.nn import functional as F  # noqa: E402

pytestmark = pytest.mark.usefixtures("ocl")
OCL = "opencl"
LAYOUTS = ("contiguous", "transposed", "strided", "offset", "expanded")
TOL = {torch.float32: dict(rtol=2e-4, atol=2e-5), torch.float64: dict(rtol=1e-9, atol=1e-11)}


@dataclass
class Op:
    """One table row. fn(*inputs) is the call; `inputs` are (shape, kind) pairs, kind f (normal),
    p (positive), u (inside (-0.9, 0.9)), i (int64 in [0, 4)), b (bool). `method`: the torch
    function whose in-place (method_) and out= forms are checked too, with keyword args kw."""
    name: str
    inputs: list
    fn: object = None
    method: str = None
    kw: dict = field(default_factory=dict)
    inplace: bool = False
    out: bool = False
    grad: bool = True
    tol: float = 1.0  # multiplies TOL for ops whose float32 result carries more rounding

    def call(self, *xs):
        return self.fn(*xs) if self.fn else getattr(torch, self.method)(*xs, **self.kw)


def _pointwise(names, kinds, **opts):
    opts = {"inplace": True, "out": True, **opts}
    return [Op(n, [((3, 4), k) for k in kinds], method=n, **opts) for n in names]


M, V = (3, 4), (4,)
TABLE = (
    _pointwise(["abs", "neg", "exp", "tanh", "sigmoid", "sin", "cos", "atan", "sinh",
                "cosh", "erf", "expm1", "exp2"], "f")
    + _pointwise(["floor", "ceil", "round", "trunc", "frac", "sign", "sgn"], "f", grad=False)
    + _pointwise(["log", "sqrt", "rsqrt", "log1p", "log2", "log10", "reciprocal"], "p")
    + _pointwise(["asin", "acos", "erfinv", "tan"], "u")
    + _pointwise(["relu"], "f", out=False)
    # activations: each call, its gradient and its in-place form (on a copy, so autograd
    # differentiates through it); out= forms in the *_out rows; clamps and special values
    + [Op(n, [(M, "f")], lambda x, f=f: (f(x * 3), f(x * 3, inplace=True)))
       for n, f in (("silu", F.silu), ("mish", F.mish), ("hardswish", F.hardswish),
                    ("hardsigmoid", F.hardsigmoid), ("elu", F.elu), ("selu", F.selu),
                    ("relu6", F.relu6))]
    + [Op("leaky_relu", [(M, "f")], lambda x: (F.leaky_relu(x, 0.2),
                                                F.leaky_relu(x * 1, 0.1, inplace=True))),
       Op("celu", [(M, "f")], lambda x: (F.celu(x, 0.7), F.celu(x * 1, 1.5, inplace=True))),
       Op("elu_alpha", [(M, "f")], lambda x: (F.elu(x, 0.5), F.elu(x * 1, 2.0, inplace=True))),
       Op("hardtanh", [(M, "f")], lambda x: (F.hardtanh(x, -0.5, 0.8),
                                              F.hardtanh(x * 1, -1.0, 0.3, inplace=True))),
       Op("softplus", [(M, "f")], lambda x: (F.softplus(x), F.softplus(x * 8, 2.0, 3.0))),
       Op("logsigmoid", [(M, "f")], lambda x: F.logsigmoid(x * 10)),
       Op("activations_out", [(M, "f")], lambda x: [_out(f, x * 3, *a) for f, *a in (
           (torch._C._nn.silu,), (torch._C._nn.mish,), (torch._C._nn.hardswish,),
           (torch._C._nn.hardsigmoid,), (torch._C._nn.leaky_relu, 0.3),
           (torch._C._nn.hardtanh, -1.0, 2.0), (torch._C._nn.softplus, 2.0, 3.0),
           (torch._C._nn.elu, 1.5, 1.2, 0.5), (torch._C._nn.log_sigmoid,))], grad=False),
       Op("clamp_min", [(M, "f")], method="clamp_min", kw={"min": 0.3}, inplace=True, out=True),
       Op("clamp_max", [(M, "f")], method="clamp_max", kw={"max": -0.2}, inplace=True, out=True),
       Op("clamp_min_tensor", [(M, "f"), (V, "f")], method="clamp_min", inplace=True, out=True),
       Op("clamp_max_tensor", [(M, "f"), (V, "f")], method="clamp_max", inplace=True, out=True),
       Op("nan_to_num", [(M, "f")], method="nan_to_num", kw={"nan": 1.5}, inplace=True,
          out=True),
       Op("nan_to_num_special", [(M, "f")], lambda x: (
           torch.nan_to_num(x.log() / (x > 0.5)),
           torch.nan_to_num(-x.log() / (x > 0.5), nan=1.5, posinf=2.0, neginf=-3.0))),
       Op("xlogy", [(M, "f"), (M, "p")], method="xlogy", inplace=True, out=True),
       Op("xlogy_scalar", [(M, "p")], lambda y: (torch.xlogy(2.5, y), torch.xlogy(y, 3.0),
                                                 torch.xlogy(y * 0, y))),
       Op("xlogy_out", [(M, "p")], lambda y: (_out(torch.xlogy, y, 0.5),
                                              torch.xlogy(2.0, y, out=torch.empty_like(y))),
          grad=False)]
    + _pointwise(["isnan", "isinf", "isfinite"], "f", inplace=False, out=False, grad=False)
    + _pointwise(["isneginf", "isposinf"], "f", inplace=False, grad=False)
    + _pointwise(["logical_not"], "b", grad=False) + _pointwise(["bitwise_not"], "i", grad=False)
    + _pointwise(["sub", "mul", "div", "atan2"], "ff")
    + _pointwise(["maximum", "minimum"], "ff", inplace=False)
    + [Op("add", [(M, "f"), (V, "f")], method="add", kw={"alpha": 2}, inplace=True, out=True),
       Op("div_floor", [(M, "f"), (M, "p")], method="div", kw={"rounding_mode": "floor"},
          inplace=True, out=True, grad=False),
       Op("pow", [(M, "p"), (M, "f")], method="pow", inplace=True, out=True),
       Op("pow_scalar", [(M, "f")], lambda a: a ** 3 + 2.5 ** a),
       Op("scalar_ops", [(M, "i")], lambda a: (a * 2.5 - 1, a // 3, a % 3, a / 2), grad=False)]
    + _pointwise(["remainder", "fmod"], "fp", grad=False)
    + _pointwise(["eq", "ne", "lt", "le", "gt", "ge"], "ff", grad=False)
    + _pointwise(["floor_divide"], "fp", grad=False)
    + _pointwise(["logical_and", "logical_or", "logical_xor"], "bb", grad=False)
    + _pointwise(["bitwise_and", "bitwise_or", "bitwise_xor"], "ii", grad=False)
    + _pointwise(["erfc", "sinc", "asinh", "deg2rad", "rad2deg"], "f")
    + _pointwise(["lgamma"], "p") + _pointwise(["atanh"], "u")
    + _pointwise(["digamma", "i0"], "p")  # gradients through polygamma and special_i1
    + [Op("acosh", [(M, "p")], lambda a: torch.acosh(a + 1)),
       Op("acosh_", [(M, "p")], lambda a: (a.detach() + 1).acosh_(), grad=False)]
    + _pointwise(["signbit"], "f", inplace=False, grad=False)
    + _pointwise(["hypot", "copysign"], "ff")
    + _pointwise(["fmax", "fmin", "logaddexp", "logaddexp2"], "ff", inplace=False)
    + _pointwise(["heaviside", "nextafter"], "ff", grad=False)
    + _pointwise(["gcd", "lcm", "bitwise_left_shift", "bitwise_right_shift"], "ii", grad=False)
    + [Op("addcmul", [(M, "f"), (M, "f"), (V, "f")], method="addcmul", kw={"value": 0.5},
          inplace=True, out=True),
       Op("addcdiv", [(M, "f"), (M, "f"), (M, "p")], method="addcdiv", kw={"value": -2},
          inplace=True, out=True),
       Op("lerp", [(M, "f"), (M, "f"), (M, "u")], method="lerp", inplace=True, out=True),
       Op("where", [(M, "b"), (M, "f"), (V, "f")], method="where", out=True),
       Op("clamp", [(M, "f"), (M, "u"), (V, "p")], method="clamp", inplace=True, out=True)]
    # reductions
    + [Op("sum", [((3, 4, 5), "f")], method="sum", kw={"dim": (0, 2)}, out=True),
       Op("sum_all_int", [(M, "i")], lambda a: (a.sum(), a.sum(1, dtype=torch.float64)),
          grad=False),
       Op("mean", [((3, 4, 5), "f")], method="mean", kw={"dim": 1, "keepdim": True}, out=True),
       Op("var", [((3, 4, 5), "f")], method="var", kw={"dim": (0, 2), "correction": 0},
          out=True),
       Op("std", [((3, 4, 5), "f")], method="std", kw={"dim": 1}, out=True),
       Op("var_mean", [((3, 4, 5), "f")], lambda a: torch.var_mean(a, 2, keepdim=True)),
       Op("std_mean", [((3, 4, 5), "f")], lambda a: torch.std_mean(a)),
       Op("vector_norm", [((3, 4, 5), "f")], lambda a: torch.linalg.vector_norm(a, 3.0, (0, 2))),
       Op("norm_dim", [((3, 4, 5), "f")], lambda a: a.norm(1.5, dim=(0, 2), keepdim=True)),
       Op("norm_all", [((3, 4), "f")], lambda a: (torch.norm(a, 3), F.normalize(a, dim=1))),
       Op("norm_out", [((3, 4), "f")],
          lambda a: (torch.norm(a, 2, 1, out=torch.empty(0, dtype=a.dtype, device=a.device)),
                     torch.ops.aten.norm.Scalar_out(a, 3, out=torch.empty(0, dtype=a.dtype,
                                                                          device=a.device))),
          grad=False),
       Op("prelu", [((2, 3, 4), "f"), ((3,), "p")], lambda x, w: F.prelu(x, w)),
       Op("glu", [((4, 4), "f")], lambda x: (F.glu(x, 1), F.glu(x, 0))),
       Op("glu_out", [((4, 4), "f"), ((4, 2), "f")],
          lambda x, g: (torch.ops.aten.glu.out(x, 1, out=torch.empty(0, dtype=x.dtype,
                                                                     device=x.device)),
                        torch.ops.aten.glu_backward.grad_input(
                            g, x, 1, grad_input=torch.empty(0, dtype=x.dtype, device=x.device))),
          grad=False),
       Op("vector_norm_inf", [((3, 4), "f")],
          lambda a: torch.linalg.vector_norm(a, float("inf"), 1, keepdim=True)),
       Op("vector_norm_out", [((3, 4), "f")],
          lambda a: torch.linalg.vector_norm(a, out=torch.empty(0, dtype=a.dtype, device=a.device)),
          grad=False),
       Op("amax", [((3, 4, 5), "f")], method="amax", kw={"dim": (1, 2)}, out=False),
       Op("max_min", [(M, "f")], lambda a: (a.max(), a.min())),
       Op("argmax", [((3, 4, 5), "f")], method="argmax", kw={"dim": 1}, grad=False),
       Op("prod", [(M, "u")], method="prod", kw={"dim": 1}, out=True),
       Op("prod_all", [(M, "u")], lambda a: a.prod()),
       Op("all_any", [(M, "f")], lambda a: (a.gt(0).all(), a.gt(0).any(0), (a > -2).all(1),
                                            a.any(), a.all((0, 1))), grad=False),
       Op("all_out", [(M, "b")], method="all", kw={"dim": 1}, out=True, grad=False),
       Op("any_out", [(M, "b")], method="any", kw={"dim": 0}, out=True, grad=False),
       Op("softmax", [(M, "f")], lambda a: (a.softmax(1), a.log_softmax(0)))]
    # matrix products
    + [Op("mm", [((4, 5), "f"), ((5, 3), "f")], method="mm", out=True),
       Op("addmm_bias", [((3,), "f"), ((3, 5), "f"), ((5, 3), "f")], torch.addmm),
       Op("addmm", [((3, 3), "f"), ((3, 5), "f"), ((5, 3), "f")], method="addmm",
          kw={"beta": 0.5, "alpha": 2}, inplace=True, out=True),
       Op("bmm", [((2, 4, 5), "f"), ((2, 5, 3), "f")], method="bmm", out=True),
       # sorting, selection, scans and triangles (index kinds i are in [0, 4); argsort of random
       # floats gives indices without repeats, where scatter's winner would be unspecified)
       Op("gather", [((4, 5), "f"), ((3, 5), "i")],
          lambda a, i: (a.gather(1, i), torch.gather(a, 0, i), _out(torch.gather, a.detach(), -1, i))),
       Op("scatter", [((4, 5), "f"), ((4, 5), "f"), ((4, 5), "f")],
          lambda a, w, s: (a.scatter(1, w.argsort(1)[:, :3], s[:, 1:4]), a.scatter(0, w.argsort(0)[:2], -1.5),
                           a.clone().scatter_(1, w.argsort(1)[:, 2:], s[:, 2:]),
                           a.clone().scatter_(0, w.argsort(0), 0.5))),
       Op("scatter_out", [((4, 5), "f"), ((4, 5), "f"), ((4, 5), "f")],
          lambda a, w, s: (_out(torch.scatter, a, 1, w.argsort(1), s),
                           _out(torch.scatter, a, 0, w.argsort(0)[1:], 2.0)), grad=False),
       Op("scatter_legacy_reduce", [((4, 5), "f"), ((6, 5), "i"), ((6, 5), "f")],
          lambda a, i, s: (a.scatter(0, i, s, reduce="add"), a.scatter(1, i[:4], s, reduce="multiply"),
                           a.scatter(0, i, 0.5, reduce="multiply"),
                           a.clone().scatter_(0, i, s, reduce="multiply"),
                           a.clone().scatter_(1, i[:4], 2.0, reduce="add"),
                           _out(torch.scatter, a, 0, i, s, reduce="add"),
                           _out(torch.scatter, a, 0, i, 2.0, reduce="multiply")), grad=False),
       Op("scatter_add", [((5, 4), "f"), ((6, 4), "i"), ((6, 4), "f")],
          lambda a, i, s: (a.scatter_add(0, i, s), a.clone().scatter_add_(1, i[:5], s[:5]))),
       Op("scatter_add_out", [((5, 4), "f"), ((6, 4), "i"), ((6, 4), "f")],
          lambda a, i, s: _out(torch.scatter_add, a, 0, i, s), grad=False),
       Op("scatter_reduce", [((4, 3), "f"), ((6, 3), "i"), ((6, 3), "u")],
          lambda a, i, s: tuple(a.scatter_reduce(0, i, s, r, include_self=inc) for inc in (True, False)
                                for r in ("sum", "prod", "mean", "amax", "amin"))),
       Op("scatter_reduce_", [((4, 3), "f"), ((6, 3), "i"), ((6, 3), "u")],
          lambda a, i, s: (a.clone().scatter_reduce_(0, i, s, "amax"),
                           a.clone().scatter_reduce_(0, i, s, "mean", include_self=False),
                           _out(torch.scatter_reduce, a.detach(), 0, i, s.detach(), "prod",
                               include_self=False))),
       Op("sort", [((3, 4, 5), "f")],
          lambda a: (*a.sort(1, descending=True), *torch.sort(a, stable=True), a.argsort(0))),
       Op("topk", [((3, 4, 5), "f")],
          lambda a: (*a.topk(2, 1), *a.topk(3, largest=False), *a.topk(1, 0, sorted=False))),
       Op("max_min_dim", [((3, 4, 5), "f")],
          lambda a: (*a.max(1), *a.min(-1, keepdim=True), a.argmin(), a.argmin(0, keepdim=True))),
       Op("argmin", [((3, 4, 5), "f")], method="argmin", kw={"dim": 1}, out=True, grad=False),
       Op("cumsum", [((3, 4, 5), "f")], method="cumsum", kw={"dim": 1}, inplace=True, out=True),
       Op("cumprod", [((3, 4, 5), "u")], method="cumprod", kw={"dim": -1}, inplace=True,
          out=True),
       Op("cumsum_dtype", [(M, "i")], lambda a: (a.cumsum(0), a.cumprod(1, dtype=torch.float64),
                                                 (a > 1).cumsum(1)), grad=False),
       Op("flip", [((3, 4, 5), "f")],  # torch.flip and torch.roll take no out=: aten's do
          lambda a: (a.flip(0, 2), a.flip(-1), _out(torch.ops.aten.flip.out, a.detach(), [0, 2]))),
       Op("roll", [((3, 4, 5), "f")],
          lambda a: (a.roll((1, -2), (0, 2)), a.roll(5), a.roll(-1, 1),
                     _out(torch.ops.aten.roll.out, a.detach(), [2], [1]))),
       Op("tril", [((2, 3, 4), "f")], method="tril", kw={"diagonal": 1}, inplace=True, out=True),
       Op("triu", [((2, 3, 4), "f")], method="triu", kw={"diagonal": -1}, inplace=True, out=True),
       # running extremes, searches, counts, order statistics and uniques (search_ops.py)
       Op("cummax_cummin", [((3, 4, 5), "f")],
          lambda a: (*a.cummax(1), *torch.cummin(a, 0), *a.cummax(-1))),
       Op("logcumsumexp", [((3, 4, 5), "f")], method="logcumsumexp", kw={"dim": 1}, out=True),
       Op("kthvalue_median_mode", [((3, 4, 5), "f")],
          lambda a: (*a.kthvalue(2, 1), *a.median(-1), a.median(), *a.nanmedian(2, keepdim=True),
                     a.nanmedian(), *a.mode(1))),
       Op("search_count", [((3, 4, 5), "f")],
          lambda a: (torch.searchsorted(a.sort(-1).values, a), torch.searchsorted(a[0, 0].sort().values, 0.1),
                     torch.bucketize(a, a[0, 0].sort().values, right=True), torch.histc(a, 7),
                     torch.count_nonzero(a > 0, 1)), grad=False),
       Op("unique_bincount", [((3, 4), "i")],
          lambda a: (*torch.unique(a, return_inverse=True, return_counts=True),
                     *torch.unique(a, dim=1, return_inverse=True),
                     *torch.unique_consecutive(a, return_counts=True),
                     *torch.unique_consecutive(a, dim=0, return_inverse=True),
                     torch.bincount(a.flatten(), minlength=6)), grad=False),
       # linear algebra, distances, cross, take and adaptive max pooling (linalg_ops.py;
       # test_torch_linalg_ops.py tests their other forms): decompositions by functions of
       # their factors that do not depend on the factors' signs
       Op("det_slogdet_inv", [((2, 3, 3), "f")],
          lambda a: (torch.linalg.det(a), *torch.linalg.slogdet(a), torch.linalg.inv(a),
                     torch.linalg.inv_ex(a).info), tol=10),
       Op("solve", [((2, 3, 3), "f"), ((2, 3, 2), "f")],
          lambda a, b: (torch.linalg.solve(a, b), torch.linalg.solve(a.mT, b[..., 0]),
                        torch.linalg.solve(a, b.mT, left=False)), tol=10),
       Op("lu_factor_solve", [((2, 3, 3), "f"), ((2, 3, 2), "f")],
          lambda a, b: (*torch.linalg.lu_factor(a), *torch.linalg.lu(a),
                        torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b, adjoint=True)),
          tol=10),
       Op("cholesky", [((2, 3, 3), "f"), ((2, 3, 2), "f")],
          lambda a, b: (lambda s: (torch.linalg.cholesky(s), torch.linalg.cholesky(s, upper=True),
                                   torch.cholesky_solve(b, torch.linalg.cholesky(s)),
                                   torch.cholesky_inverse(torch.linalg.cholesky(s)),
                                   torch.cholesky(s, upper=True)))(
              a @ a.mT + 3 * torch.eye(3, dtype=a.dtype, device=a.device)), tol=10),
       Op("solve_triangular", [((2, 3, 3), "f"), ((2, 3, 2), "f")],
          lambda a, b: (lambda t: (torch.linalg.solve_triangular(t, b, upper=True),
                                   torch.linalg.solve_triangular(t.mT, b.mT, upper=False,
                                                                 left=False),
                                   *torch.triangular_solve(b, t, transpose=True)))(
              a + 4 * torch.eye(3, dtype=a.dtype, device=a.device)), tol=10),
       Op("qr_svd_eigh", [((2, 4, 3), "f")],
          lambda a: (lambda q, u, e: (q.Q @ q.Q.mT, q.R.mT @ q.R, u.S, u.U @ u.U.mT,
                                      e.eigenvalues, e.eigenvectors * e.eigenvalues.unsqueeze(-2)
                                      @ e.eigenvectors.mT))(
              torch.linalg.qr(a), torch.linalg.svd(a, full_matrices=False),
              torch.linalg.eigh(a.mT @ a)), tol=10),
       Op("lstsq_pinv", [((2, 5, 3), "f"), ((2, 5, 2), "f")],
          lambda a, b: (torch.linalg.lstsq(a, b).solution, torch.linalg.pinv(a),
                        torch.linalg.matrix_rank(a.detach())), tol=10),
       Op("cdist", [((2, 4, 3), "f"), ((2, 5, 3), "f")],
          lambda a, b: tuple(torch.cdist(a, b, p=p) for p in (2.0, 1.0, 0.0, 1.5, float("inf")))),
       Op("cross_take", [((2, 4, 3), "f"), ((2, 4, 3), "f")],
          lambda a, b: (torch.linalg.cross(a, b), torch.cross(a.mT, b.mT, dim=1),
                        torch.take(a, torch.tensor([[0, 5], [-1, 5]], device=a.device)))),
       Op("adaptive_max_pool2d", [((2, 3, 7, 6), "f")],
          lambda x: (*F.adaptive_max_pool2d(x, (3, 4), return_indices=True),
                     F.adaptive_max_pool2d(x[0], (2, 5)))),
       Op("mv", [((4, 5), "f"), ((5,), "f")], method="mv", out=True),
       # transposed convolution, sliding blocks and 1-d resampling (test_torch_conv_ops.py
       # and test_torch_resample.py test their other forms)
       Op("conv_transpose2d", [((2, 4, 5, 3), "f"), ((4, 3, 3, 2), "f"), ((6,), "f")],
          lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1,
                                             groups=2), tol=5),
       Op("conv_transpose1d", [((2, 4, 5), "f"), ((4, 3, 3), "f")],
          lambda x, w: F.conv_transpose1d(x, w, stride=3, output_padding=2, dilation=2), tol=5),
       Op("conv_transpose3d", [((2, 4, 3, 4, 3), "f"), ((4, 3, 2, 3, 2), "f"), ((6,), "f")],
          lambda x, w, b: F.conv_transpose3d(x, w, b, stride=(2, 1, 2), padding=(0, 1, 1),
                                             output_padding=(1, 0, 0), groups=2), tol=5),
       Op("unfold_fold", [((2, 3, 5, 4), "f")],
          lambda x: (F.unfold(x, (2, 3), padding=1, stride=(2, 1)),
                     F.fold(F.unfold(x, 2, dilation=(2, 1)), (5, 4), 2, dilation=(2, 1)))),
       Op("tensor_unfold", [((3, 7), "f")], lambda x: (x.unfold(1, 3, 2), x.unfold(0, 2, 1))),
       Op("interpolate_1d", [((2, 3, 6), "f")],
          lambda x: (F.interpolate(x, scale_factor=2), F.interpolate(x, 9, mode="nearest-exact"),
                     F.interpolate(x, 4, mode="linear"),
                     F.interpolate(x, scale_factor=1.5, mode="linear", align_corners=True))),
       Op("trace", [((4, 5), "f")], lambda a: (torch.trace(a), torch.trace(a[1:]))),
       Op("trace_int", [((4, 5), "i")], lambda a: torch.trace(a), grad=False),
       Op("index_fill", [((4, 5), "f"), ((2,), "i")],
          lambda a, i: (a.index_fill(1, i, 2.5), a.index_fill(0, i, torch.tensor(-1.0)))),
       Op("addmv", [((4,), "f"), ((4, 5), "f"), ((5,), "f")], method="addmv",
          kw={"beta": 0.5, "alpha": 2}, out=True),  # addmv_: test_torch_device.py
       Op("vector @ matrix", [((5,), "f"), ((5, 3), "f")], lambda a, b: a @ b),
       Op("baddbmm", [((2, 4, 3), "f"), ((2, 4, 5), "f"), ((2, 5, 3), "f")], method="baddbmm",
          kw={"alpha": 0.5}, inplace=True, out=True),
       Op("matmul", [((2, 3, 4, 5), "f"), ((3, 5, 2), "f")], method="matmul")]
    # layers
    + [Op("conv2d", [((2, 4, 7, 6), "f"), ((6, 2, 3, 3), "f"), ((6,), "f")],
          lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1, groups=2), tol=5),
       Op("conv2d_dilated", [((2, 3, 8, 8), "f"), ((4, 3, 3, 3), "f")],
          lambda x, w: F.conv2d(x, w, dilation=2), tol=5),
       Op("conv3d", [((2, 4, 5, 4, 5), "f"), ((6, 2, 3, 2, 3), "f"), ((6,), "f")],
          lambda x, w, b: F.conv3d(x, w, b, stride=(2, 1, 1), padding=(1, 0, 1), groups=2),
          tol=5),
       Op("max_pool2d", [((2, 3, 7, 6), "f")],
          lambda x: F.max_pool2d(x, 3, 2, padding=1, ceil_mode=True)),
       Op("avg_pool2d", [((2, 3, 7, 6), "f")],
          lambda x: (F.avg_pool2d(x, 3, 2, padding=1, ceil_mode=True, count_include_pad=False),
                     F.avg_pool2d(x, 2, divisor_override=3))),
       Op("adaptive_avg_pool2d", [((2, 3, 7, 6), "f")],
          lambda x: (F.adaptive_avg_pool2d(x, (3, 4)), F.adaptive_avg_pool2d(x, 1))),
       Op("gelu", [(M, "f")], lambda x: (F.gelu(x), F.gelu(x, approximate="tanh"))),
       Op("layer_norm", [((2, 3, 4, 5), "f"), ((4, 5), "f"), ((4, 5), "f")],
          lambda x, w, b: (F.layer_norm(x, (4, 5), w, b, 1e-3), F.layer_norm(x, (5,)))),
       Op("batch_norm", [((3, 4, 5, 2), "f"), ((4,), "f"), ((4,), "f")],
          lambda x, w, b: F.batch_norm(x, torch.zeros(4, device=x.device, dtype=x.dtype),
                                       torch.ones(4, device=x.device, dtype=x.dtype), w, b,
                                       training=True)),
       Op("cross_entropy", [((5, 4), "f"), ((5,), "i"), ((4,), "p")],
          lambda x, t, w: (F.cross_entropy(x, t, w.detach()), F.nll_loss(x, t, reduction="sum"),
                           F.cross_entropy(x, t, ignore_index=1, reduction="none"))),
       Op("embedding", [((4, 3), "i"), ((5, 6), "f")],
          lambda i, w: F.embedding(i, w, padding_idx=2)),
       Op("dropout_eval", [(M, "f")], lambda x: (F.dropout(x, 0.5, training=False),
                                                 F.dropout(x, 0.0, training=True)))]
    # joining and selecting
    + [Op("cat", [(M, "f"), ((2, 4), "f"), ((3, 4), "f")],
          lambda a, b, c: (torch.cat([a, b]), torch.stack([a, c], 1))),
       Op("cat_out", [(M, "f"), ((2, 4), "f")], lambda a, b: _out(torch.cat, [a, b]), grad=False),
       Op("index_add", [((5, 4), "f"), ((6,), "i"), ((6, 4), "f")],
          lambda a, i, s: a.index_add(0, i, s, alpha=2)),
       Op("index_add_out", [((5, 4), "f"), ((6,), "i"), ((6, 4), "f")],
          lambda a, i, s: _out(torch.index_add, a, 0, i, s), grad=False),
       Op("masked_fill", [(M, "f"), (V, "b")],
          lambda a, m: (a.masked_fill(m, 2.5), a.masked_fill(m, torch.tensor(-1.0)))),
       Op("masked_fill_out", [(M, "f"), (M, "b")],
          lambda a, m: (_out(torch.ops.aten.masked_fill.Scalar_out, a, m, 2.5),
                        _out(torch.ops.aten.masked_fill.Tensor_out, a, m, torch.tensor(3.0))),
          grad=False),
       Op("index_select", [((5, 4), "f"), ((6,), "i")],
          lambda a, i: (a.index_select(0, i), a.index_select(1, i))),
       Op("index", [((5, 4, 3), "f"), ((2, 3), "i"), ((3,), "i")],
          lambda a, i, j: (a[i], a[:, j], a[i, j[:1]])),
       Op("index_put", [((5, 4), "f"), ((3,), "i"), ((3, 4), "f")],
          lambda a, i, v: (a.index_put((i,), v, accumulate=True), a.index_put((i[:1],), v[0]))),
       Op("masked_select", [(M, "f"), (M, "b")], lambda a, m: a.masked_select(m), grad=False)]
)
BY_NAME = {op.name: op for op in TABLE}
assert len(BY_NAME) == len(TABLE), "two table rows share a name"


def _out(fn, *args, dtype=None, **kw):
    """fn's out= form into a fresh empty tensor (of dtype; None: the first operand's) on the
    operands' device."""
    first = args[0][0] if isinstance(args[0], list) else args[0]
    o = torch.empty(0, dtype=dtype or first.dtype, device=first.device)
    return fn(*args, **kw, out=o)


def _values(shape, kind, dtype, gen):
    if kind == "i":
        return torch.randint(0, 4, shape, generator=gen)
    if kind == "b":
        return torch.rand(shape, generator=gen) > 0.5
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    x = {"p": x.abs() + 0.5, "u": torch.tanh(x) * 0.9}.get(kind, x)
    return x.to(dtype)


def _base(shape, layout):
    """(shape of the buffer to fill, view taking the operand of `shape` out of it)."""
    if layout == "transposed" and len(shape) >= 2:
        return shape[:-2] + shape[-2:][::-1], lambda t: t.transpose(-1, -2)
    if layout == "strided" and shape:
        return shape[:-1] + (2 * shape[-1],), lambda t: t[..., ::2]
    if layout == "offset" and shape:
        return (shape[0] + 1,) + shape[1:], lambda t: t[1:]
    if layout == "expanded" and shape and shape[0] > 1:
        return (1,) + shape[1:], lambda t: t.expand(*shape)
    return shape, lambda t: t


def _operands(op, dtype, layout, seed):
    """Matching CPU and opencl operands: leaf buffers (float ones requiring grad when the op is
    differentiated) and the views the op gets."""
    gen = torch.Generator().manual_seed(seed)
    sides = {"cpu": ([], []), OCL: ([], [])}
    for shape, kind in op.inputs:
        full, view = _base(tuple(shape), layout)
        values = _values(full, kind, dtype, gen)
        for dev, (leaves, views) in sides.items():
            leaf = values.to(dev, copy=True)
            if op.grad and kind in "fpu":
                leaf.requires_grad_()
            leaves.append(leaf)
            views.append(view(leaf))
    return sides


def _flat(res):
    return list(res) if isinstance(res, (tuple, list)) else [res]


def _check(got, want, dtype, scale=1.0):
    for g, w in zip(_flat(got), _flat(want), strict=True):
        assert g.device.type == OCL, g.device
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        tol = {k: v * scale for k, v in TOL.get(dtype, TOL[torch.float64]).items()}
        np.testing.assert_allclose(g.detach().cpu().numpy(), w.detach().numpy(), **tol)


def _grads(res, leaves, seed):
    """d(sum of each float output times fixed random weights)/d(each leaf needing grad)."""
    outs = [r for r in _flat(res) if r.is_floating_point() and r.requires_grad]
    gen = torch.Generator().manual_seed(seed)
    weights = [torch.randn(r.shape, generator=gen, dtype=r.dtype).to(r.device) for r in outs]
    needs = [x for x in leaves if x.requires_grad]
    if not outs or not needs:
        return []
    return torch.autograd.grad(outs, needs, weights, allow_unused=True)


def run_op(op, dtype, layout, seed=0, watch=contextlib.nullcontext):
    """All forms of one table row in one dtype and layout, checked against CPU torch; the
    opencl side runs inside context `watch`."""
    sides = _operands(op, dtype, layout, seed)
    want = _forms(op, *sides["cpu"], layout, seed)
    with watch():
        got = _forms(op, *sides[OCL], layout, seed)
    for form, g in got.items():
        _check(g, want[form], dtype, op.tol * (10 if form == "grad" else 1))


def _forms(op, leaves, views, layout, seed):
    """{form: results} of the call, its gradients, out= and in-place forms on one device."""
    res = op.call(*views)
    forms = {"call": res}
    if op.grad and any(x.requires_grad for x in leaves):
        forms["grad"] = [g for g in _grads(res, leaves, seed) if g is not None]
    with torch.no_grad():
        if op.out:
            first = _flat(res)[0]
            forms["out"] = _out(getattr(torch, op.method), *views, dtype=first.dtype, **op.kw)
        if op.inplace and layout != "expanded":  # torch refuses in-place writes to expanded views
            self = views[0].detach().clone()
            same_lead = lambda v: v.dim() == self.dim() and v.shape[0] == self.shape[0]
            # in place through a view with a storage offset
            getattr(self[1:], op.method + "_")(*[v.detach()[1:] if same_lead(v) else v.detach()
                                                 for v in views[1:]], **op.kw)
            forms["inplace"] = self
    return forms


def _dtypes_of(op):
    floats = any(kind in "fpu" for _, kind in op.inputs)
    return [torch.float32, torch.float64] if floats else [torch.int64]


CASES = [pytest.param(op.name, dt, id=f"{op.name}-{str(dt)[6:]}") for op in TABLE
         for dt in _dtypes_of(op)]


@pytest.mark.parametrize("name, dtype", CASES)
def test_conformance(name, dtype, device, monkeypatch):
    if dtype == torch.float64 and not device.has_fp64:
        pytest.skip(f"{device.name} has no float64")
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")  # every op must run on the device
    with warnings.catch_warnings():
        warnings.simplefilter("error", ct.CPUFallbackWarning)
        for seed, layout in enumerate(LAYOUTS):
            try:
                run_op(BY_NAME[name], dtype, layout, seed)
            except AssertionError as e:
                raise AssertionError(f"{name}, {dtype}, {layout} layout: {e}") from e


# overloads the other test files drive: factories, copies and views (test_torch_device.py),
# random fills and dropout (its mask random), torch.optim's fused steps (test_torch_models.py)
ELSEWHERE = {"empty.memory_format", "empty_strided", "copy_", "_copy_from", "_copy_from_and_resize",
             "_to_copy", "resize_", "fill_.Scalar", "fill_.Tensor", "zero_", "_local_scalar_dense", "normal_",
             "uniform_", "as_strided", "as_strided_", "addmv_", "view", "_reshape_alias", "unfold",
             "_unsafe_view",
             "_fused_adam_", "_fused_adamw_", "_fused_sgd_", "_fused_adam_.tensor_lr",
             "_fused_adamw_.tensor_lr", "_fused_sgd_.tensor_lr", "native_dropout",
             "set_.source_Storage_storage_offset",  # torch.load (test_torch_checkpoint.py)
             "native_dropout_backward",
             # GradScaler's unscale and update (test_torch_half.py)
             "_amp_foreach_non_finite_check_and_unscale_", "_amp_update_scale_"}
# aten helpers and legacy forms torch's functions do not call (test_torch_search_ops.py)
ELSEWHERE |= {"_cummax_helper", "_cummin_helper", "_unique", "unique_dim_consecutive"}
# the factories' out= forms (test_torch_device.py)
ELSEWHERE |= {"arange.out", "arange.start_out", "eye.m_out", "eye.out", "linspace.out",
              "logspace.out"}
# the losses and their out= forms (test_torch_losses.py)
ELSEWHERE |= {f"{name}{form}" for name in ("mse_loss", "smooth_l1_loss", "huber_loss",
                                           "binary_cross_entropy")
              for form in ("", ".out", "_backward", "_backward.grad_input", "_backward.out")}
ELSEWHERE |= {"nll_loss2d_forward", "nll_loss2d_backward"}
ELSEWHERE |= {"_ctc_loss", "_ctc_loss.Tensor", "_ctc_loss_backward",  # test_ctc_loss.py
              "_ctc_loss_backward.Tensor"}
ELSEWHERE |= {"equal"}  # test_torch_device.py
ELSEWHERE |= {"native_group_norm", "native_group_norm_backward"}  # test_torch_group_norm.py
# composed from cltensor's kernels (test_torch_composed_ops.py)
ELSEWHERE |= {"_weight_norm_interface", "_weight_norm_interface_backward", "addbmm", "addbmm.out",
              "addbmm_", "aminmax", "dot", "dot.out", "vdot", "vdot.out", "embedding_renorm_",
              "index_copy", "index_copy.out", "index_copy_", "isin.Scalar_Tensor",
              "isin.Scalar_Tensor_out", "isin.Tensor_Scalar", "isin.Tensor_Scalar_out",
              "isin.Tensor_Tensor", "isin.Tensor_Tensor_out", "logit", "logit.out",
              "logit_backward", "logit_backward.grad_input", "masked_scatter", "masked_scatter_",
              "nansum", "nansum.out", "renorm", "renorm.out", "renorm_",
              "repeat_interleave.Tensor", "tril_indices", "triu_indices"}
ELSEWHERE |= {"_thnn_fused_lstm_cell", "_thnn_fused_lstm_cell_backward_impl",
              "_thnn_fused_gru_cell", "_thnn_fused_gru_cell_backward", "channel_shuffle",
              "channel_shuffle.out", "native_channel_shuffle", "rrelu_with_noise",
              "rrelu_with_noise.out", "rrelu_with_noise_"}  # test_torch_rnn_ops.py
# the samplers (test_torch_random.py)
ELSEWHERE |= {"bernoulli", "bernoulli.p", "bernoulli_.Tensor", "bernoulli_.float", "cauchy_",
              "exponential_", "geometric_", "log_normal_", "multinomial", "normal.Tensor_Tensor",
              "normal.Tensor_float", "normal.float_Tensor", "random_", "random_.from",
              "random_.to", "randperm.generator_out", "_standard_gamma", "_standard_gamma.out",
              "_sample_dirichlet", "_sample_dirichlet.out", "binomial", "binomial.out"}
ELSEWHERE |= {"_pdist_forward", "_pdist_forward.out", "_pdist_backward",
              "_pdist_backward.out"}  # test_torch_linalg_ops.py
# resampling and padding of images (test_torch_resample.py)
ELSEWHERE |= {f"{name}{form}" for name in ("upsample_nearest2d", "_upsample_nearest_exact2d",
                                           "upsample_bilinear2d", "upsample_bicubic2d",
                                           "reflection_pad1d", "reflection_pad2d",
                                           "replication_pad1d", "replication_pad2d")
              for form in ("", ".out", "_backward", "_backward.grad_input")}
ELSEWHERE |= {n for n in ct.registered_ops() if n.startswith(  # test_torch_volume_ops.py
    ("avg_pool3d", "max_pool3d_with_indices", "upsample_trilinear3d", "max_unpool"))}
ELSEWHERE |= {n for n in ct.registered_ops() if n.startswith(  # test_torch_losses.py
    ("multi_margin_loss", "multilabel_margin_loss"))}
ELSEWHERE |= {n for n in ct.registered_ops() if n.split(".")[0] in (  # test_torch_special_ops.py
    "special_i0e", "special_i1", "special_i1e", "special_ndtri", "special_entr", "special_erfcx",
    "special_log_ndtr", "special_polygamma", "polygamma", "polygamma_", "frexp", "poisson")}
ELSEWHERE |= set(ct.sampling_ops.OPS)  # grid_sample and EmbeddingBag (test_torch_sampling_ops.py)
ELSEWHERE |= {n for n in ct.registered_ops() if n.startswith(  # test_torch_more_ops.py
    ("fractional_max_pool", "adaptive_max_pool3d", "linalg_matrix_exp", "geqrf",
     "linalg_householder_product"))}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_threshold_backward_passes_nan_on(dtype, monkeypatch):
    """torch zeroes the gradient where self <= threshold: NaN, inf (and 0 > threshold) pass it on."""
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    inf, nan = float("inf"), float("nan")
    y = torch.tensor([[0.0, 1.0, -0.0, inf], [nan, 0.5, -inf, 3.0]], dtype=dtype)
    g = torch.randn(2, 4, dtype=dtype, generator=torch.Generator().manual_seed(0))
    for threshold in (0, -1.0):
        want = torch.ops.aten.threshold_backward(g, y, threshold)
        got = torch.ops.aten.threshold_backward(g.to(OCL), y.to(OCL), threshold)
        assert torch.equal(got.cpu(), want), (threshold, got.cpu(), want)


def test_table_reaches_registered_ops(monkeypatch):
    """Each registered overload's base operator runs on the device in some row of the table (or
    is tested in the files ELSEWHERE names): a new kernel without a row fails here."""
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    with ct._backend.traced() as seen:
        for op in TABLE:
            run_op(op, _dtypes_of(op)[0], "strided")
    base = lambda name: name.split(".")[0]
    reached = {base(n) for n in seen}
    missing = sorted(n for n in ct.registered_ops() if n not in ELSEWHERE and base(n) not in reached
                     and not n.startswith("_foreach_"))  # each in test_torch_foreach.py
    assert not missing, f"registered, but no table row reaches: {missing}"
