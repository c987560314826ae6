"""Activations on the "opencl" device beyond what tests/test_torch_conformance.py's table
expresses: values at the kinks and special values, ELU's scale/input_scale and is_result
paths, 16-bit dtypes, torch's errors for bool and integer inputs, and a small model that
trains a step without falling back to the CPU."""
import re

import numpy as np
import pytest

# torch (skipping when it is missing or too old) and the fixture making `device` opencl:0
from test_torch_device import ct, ct_fallback, ocl, torch  # noqa: F401

pytestmark = pytest.mark.usefixtures("ocl")
OCL = "opencl"
F = torch.nn.functional
A = torch.ops.aten
INF, NAN = float("inf"), float("nan")
# the kinks, +-inf and NaN, with ordinary values around them
EDGES = [-INF, -20.0, -3.5, -3.0, -2.0, -0.5, -0.0, 0.0, 0.5, 2.0, 3.0, 3.5, 25.0, INF, NAN]


@pytest.fixture(autouse=True)
def _on_device_only(monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")


def _same(got, want, tol=0.0):
    assert got.device.type == OCL and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.detach().cpu().double().numpy(),
                               want.detach().double().numpy(), rtol=tol, atol=tol)


# one element per call: torch's CPU kernels treat NaN differently in their vectorized bodies
def _each(fn, x, *rest):
    return torch.stack([fn(x[i:i + 1], *[r[i:i + 1] for r in rest]) for i in range(len(x))])


BACKWARDS = {
    "silu": (F.silu, A.silu_backward), "mish": (F.mish, A.mish_backward),
    "hardswish": (F.hardswish, A.hardswish_backward),
    "hardsigmoid": (F.hardsigmoid, A.hardsigmoid_backward),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), lambda g, x: A.leaky_relu_backward(g, x, 0.2,
                                                                                       False)),
    "hardtanh": (lambda x: F.hardtanh(x, -3.0, 3.0), lambda g, x: A.hardtanh_backward(g, x, -3, 3)),
    "softplus": (lambda x: F.softplus(x, 2.0, 10.0),
                 lambda g, x: A.softplus_backward(g, x, 2.0, 10.0)),
    "logsigmoid": (F.logsigmoid,  # with the forward's buffer (opencl's is empty)
                   lambda g, x: A.log_sigmoid_backward(g, x, A.log_sigmoid_forward(x)[1])),
    "elu": (F.elu, lambda g, x: A.elu_backward(g, 1.0, 1.0, 1.0, False, x)),
}


@pytest.mark.parametrize("name", sorted(BACKWARDS))
def test_values_and_gradients_at_edges(name):
    """Forward and backward at -3 and 3 (hardswish's gradient 0 and 1 there, hardsigmoid's 0),
    +-inf and NaN, as CPU torch gives them."""
    forward, backward = BACKWARDS[name]
    x = torch.tensor(EDGES, dtype=torch.float64)
    g = torch.linspace(-1.5, 2.0, len(EDGES), dtype=torch.float64)
    _same(_each(forward, x.to(OCL)), _each(forward, x), 1e-12)
    # hardtanh: torch's CPU gradient at NaN is g or 0 by vector width; CUDA's and opencl's g
    keep = slice(None, -1) if name == "hardtanh" else slice(None)
    _same(_each(backward, g.to(OCL), x.to(OCL))[keep], _each(backward, g, x)[keep], 1e-12)


BACKWARD_OUTS = [  # (out= overload, its out argument, the other arguments after (g, x))
    (A.silu_backward.grad_input, "grad_input", ()), (A.hardswish_backward.out, "out", ()),
    (A.hardsigmoid_backward.grad_input, "grad_input", ()),
    (A.leaky_relu_backward.grad_input, "grad_input", (0.3, False)),
    (A.hardtanh_backward.grad_input, "grad_input", (-0.5, 1.0)),
    (A.softplus_backward.grad_input, "grad_input", (2.0, 1.0)),
]


def test_backward_out_forms():
    """The grad_input= (or out=) forms of the backwards, elu's and log_sigmoid's included, write
    what CPU torch writes, resizing an empty out tensor."""
    gen = torch.Generator().manual_seed(4)
    g, x = torch.randn(3, 5, generator=gen), torch.randn(3, 5, generator=gen) * 3
    for op, name, rest in BACKWARD_OUTS:
        o = torch.empty(0, device=OCL)
        assert op(g.to(OCL), x.to(OCL), *rest, **{name: o}) is o
        _same(o, op(g, x, *rest, **{name: torch.empty(0)}), 1e-6)
    for args in ((1.0, 1.0, 1.0, False), (0.5, 1.2, 0.8, True)):
        o = torch.empty(0, device=OCL)
        A.elu_backward.grad_input(g.to(OCL), *args, x.to(OCL), grad_input=o)
        _same(o, A.elu_backward(g, *args, x), 1e-6)
    o, buffer = torch.empty(0, device=OCL), torch.empty(0, device=OCL)
    A.log_sigmoid_forward.output(x.to(OCL), output=o, buffer=buffer)
    _same(o, F.logsigmoid(x), 1e-6)
    o = torch.empty(0, device=OCL)
    A.log_sigmoid_backward.grad_input(g.to(OCL), x.to(OCL), buffer, grad_input=o)
    _same(o, A.log_sigmoid_backward(g, x, A.log_sigmoid_forward(x)[1]), 1e-6)


def _elu_family(x):
    return (F.selu(x), F.celu(x, 0.6), F.elu(x, 0.7), F.selu(x * 1, inplace=True),
            F.celu(x * 1, 1.3, inplace=True), F.elu(x * 1, 0.4, inplace=True))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_elu_scales_and_results(dtype, device):
    """SELU and CELU reach elu with scale and input_scale; in place, the backward is computed
    from the result (is_result); each with its gradient."""
    if dtype == torch.float64 and not device.has_fp64:
        pytest.skip(f"{device.name} has no float64")
    x = torch.tensor(EDGES[1:-2] + [-1.2, 0.3], dtype=dtype)
    tol = 1e-6 if dtype == torch.float32 else 1e-12
    cpu, dev = x.clone().requires_grad_(), x.to(OCL).requires_grad_()
    want, got = _elu_family(cpu), _elu_family(dev)
    for w, g in zip(want, got, strict=True):
        _same(g, w, tol)
        weight = torch.linspace(-1, 1, len(x), dtype=dtype)
        gw, = torch.autograd.grad(w, cpu, weight)
        gg, = torch.autograd.grad(g, dev, weight.to(OCL))
        _same(gg, gw, tol)


@pytest.mark.parametrize("is_result", [False, True])
def test_elu_backward_general_and_nan(is_result):
    """elu_backward with scale and input_scale both set, and the NaN rule (g * scale)."""
    v = torch.tensor([-2.0, -0.5, 0.0, 0.7, NAN], dtype=torch.float64)
    g = torch.tensor([0.5, -1.0, 2.0, 1.5, 3.0], dtype=torch.float64)
    for alpha, scale, input_scale in ((1.0, 1.0, 1.0), (0.7, 1.2, 0.5)):
        args = (alpha, scale, input_scale, is_result)
        _same(_each(lambda gg, vv: A.elu_backward(gg, *args, vv), g.to(OCL), v.to(OCL)),
              _each(lambda gg, vv: A.elu_backward(gg, *args, vv), g, v), 1e-12)


def test_elu_and_leaky_relu_result_backward_refuse_negative_slopes():
    """torch refuses the in-place backward with a negative alpha or slope."""
    for fn in (lambda x: F.elu(x * 1, -0.5, inplace=True),
               lambda x: F.leaky_relu(x * 1, -0.1, inplace=True)):
        x = torch.randn(4, device=OCL, requires_grad=True)
        with pytest.raises(RuntimeError, match="negative slope"):
            fn(x).sum().backward()


HALF_OPS = {
    "silu": F.silu, "mish": F.mish, "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.1), "elu": F.elu, "selu": F.selu,
    "celu": lambda x: F.celu(x, 0.5), "hardtanh": lambda x: F.hardtanh(x, -1.5, 2.0),
    "softplus": lambda x: F.softplus(x, 1.5, 4.0), "logsigmoid": F.logsigmoid,
    "clamp_min": lambda x: x.clamp_min(0.25), "clamp_max": lambda x: x.clamp_max(-0.25),
    "xlogy": lambda x: torch.xlogy(x, x.abs() + 0.5),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(HALF_OPS))
def test_16_bit(name, dtype):
    """Stored in 16 bits, computed in float32 and rounded once, as CPU torch; gradients too."""
    fn = HALF_OPS[name]
    x = (torch.randn(2, 7, generator=torch.Generator().manual_seed(1)) * 3).to(dtype)
    cpu, dev = x.clone().requires_grad_(), x.to(OCL).requires_grad_()
    want, got = fn(cpu), fn(dev)
    tol = 1e-2 if dtype == torch.bfloat16 else 2e-3  # one rounding either side
    _same(got, want, tol)
    weight = torch.randn(2, 7, generator=torch.Generator().manual_seed(2)).to(dtype)
    _same(torch.autograd.grad(got, dev, weight.to(OCL))[0],
          torch.autograd.grad(want, cpu, weight)[0], 4 * tol)


IN_PLACE = {
    "silu": lambda t: F.silu(t, inplace=True), "mish": lambda t: F.mish(t, inplace=True),
    "hardswish": lambda t: F.hardswish(t, inplace=True),
    "hardsigmoid": lambda t: F.hardsigmoid(t, inplace=True),
    "leaky_relu": lambda t: F.leaky_relu(t, 0.1, inplace=True),
    "elu": lambda t: F.elu(t, 0.5, inplace=True), "selu": lambda t: F.selu(t, inplace=True),
    "relu6": lambda t: F.relu6(t, inplace=True), "clamp_min": lambda t: t.clamp_min_(0.5),
    "clamp_max": lambda t: t.clamp_max_(torch.tensor(0.5, device=t.device)),
    "xlogy": lambda t: t.xlogy_(2.0),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_16_bit_in_place_through_strided_views(name, dtype):
    """In-place forms write 16-bit results through a strided view and leave the rest alone."""
    x = (torch.randn(4, 6, generator=torch.Generator().manual_seed(5)) * 3).to(dtype)
    want, got = x.clone(), x.to(OCL)
    IN_PLACE[name](want[:, 1::2]), IN_PLACE[name](got[:, 1::2])
    _same(got, want, 1e-2 if dtype == torch.bfloat16 else 2e-3)


def test_16_bit_nan_to_num_uses_the_dtypes_extremes():
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.tensor([NAN, INF, -INF, 1.5], dtype=dtype)
        _same(torch.nan_to_num(x.to(OCL)), torch.nan_to_num(x))
        y = x.to(OCL)
        y.nan_to_num_(nan=2.0)
        _same(y, torch.nan_to_num(x, nan=2.0))


BAD_DTYPE_OPS = {
    "silu": F.silu, "mish": F.mish, "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid,
    "leaky_relu": F.leaky_relu, "elu": F.elu, "softplus": F.softplus, "logsigmoid": F.logsigmoid,
    "hardtanh": F.hardtanh, "silu_": lambda x: F.silu(x, inplace=True),
    "hardsigmoid_": lambda x: F.hardsigmoid(x, inplace=True),
}


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
@pytest.mark.parametrize("name", sorted(BAD_DTYPE_OPS))
def test_bool_and_integer_inputs_as_torch(name, dtype):
    """torch's error for bool and integer inputs, raised on the device (hardtanh clamps
    integers)."""
    fn = BAD_DTYPE_OPS[name]
    x = torch.tensor([-2, 0, 1, 3]).to(dtype)
    try:
        want = fn(x.clone())
    except Exception as e:  # noqa: BLE001  (the error torch raises is the expectation)
        # e.g. "silu_cpu" not implemented for 'Long': the part after the kernel's name
        with pytest.raises(type(e), match=re.escape(str(e).split('"')[-1])):
            fn(x.to(OCL))
        return
    _same(fn(x.to(OCL)), want)


SPECIAL_OPS = {
    "clamp_min": lambda a, b: (a.clamp_min(0.5), a.clamp_min(NAN), a.clamp_min(b)),
    "clamp_max": lambda a, b: (a.clamp_max(0.5), a.clamp_max(NAN), a.clamp_max(b)),
    "nan_to_num": lambda a, b: (torch.nan_to_num(a), torch.nan_to_num(a, 1.0, 2.0, -3.0)),
    "xlogy": lambda a, b: (torch.xlogy(a, b), torch.xlogy(a * 0, b), torch.xlogy(a, 2.0)),
}


@pytest.mark.parametrize("name", sorted(SPECIAL_OPS))
def test_special_values_of_clamps_nan_to_num_and_xlogy(name):
    """NaN and infinite operands and bounds: a NaN bound gives NaN, as torch."""
    x = torch.tensor([NAN, -INF, INF, -1.0, 0.5, 2.0, NAN, 1.0, 0.0], dtype=torch.float64)
    b = torch.tensor([0.0, NAN, 1.0, -2.0, NAN, 3.0, NAN, INF, NAN], dtype=torch.float64)
    fn = SPECIAL_OPS[name]
    for got, want in zip(fn(x.to(OCL), b.to(OCL)), fn(x, b), strict=True):
        _same(got, want, 1e-12)


def test_integer_and_bool_clamps_and_nan_to_num():
    i = torch.tensor([[-3, 0, 2, 5]])
    b = i > 0
    for fn in (lambda t: t.clamp_min(1), lambda t: t.clamp_max(1.5),
               lambda t: torch.clamp_min(t, torch.tensor([0, 1, 2, 3], device=t.device)), torch.nan_to_num,
               lambda t: torch.xlogy(t, 2)):
        for t in (i, b):
            _same(fn(t.to(OCL)), fn(t))


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(6, 8), torch.nn.SiLU(), torch.nn.Linear(8, 8), torch.nn.Hardswish(),
        torch.nn.LeakyReLU(0.1), torch.nn.Linear(8, 8), torch.nn.ELU(), torch.nn.Softplus(),
        torch.nn.Linear(8, 8), torch.nn.Mish(), torch.nn.Hardsigmoid(), torch.nn.Linear(8, 2))


def _step(model, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    return loss, model(x)


def test_model_trains_a_step_on_device(monkeypatch):
    """A model of these activations trains a step without any CPU fallback, as CPU torch."""
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "")
    monkeypatch.setattr(ct_fallback, "_FELL_BACK", set())  # fallback_ops() of this test alone
    gen = torch.Generator().manual_seed(3)
    x, y = torch.randn(5, 6, generator=gen), torch.randn(5, 2, generator=gen)
    want = _step(_model(), x, y)
    got = _step(_model().to(OCL), x.to(OCL), y.to(OCL))
    assert ct.fallback_ops() == []
    for g, w in zip(got, want):
        _same(g, w, 1e-5)
