"""PyTorch's "opencl" device (cltensor.torch): registration, the device module, copies, views,
the CPU fallback and the registered aten kernels, each checked against CPU torch."""
import copy
import subprocess
import sys
import warnings

import numpy as np
import pytest

import cltensor
from cltensor.device import all_devices

from conftest import subprocess_env, torch_for_the_device

torch = torch_for_the_device()
import cltensor.torch as ct  # noqa: E402  (only once torch is known present)
from cltensor.torch import fallback as ct_fallback  # noqa: E402


@pytest.fixture
def ocl(device):
    """"opencl" with `device` as opencl:0 for the test."""
    prev = cltensor.default_device()
    cltensor.set_default_device(device)
    yield "opencl"
    cltensor.set_default_device(prev)


@pytest.fixture
def device_only(monkeypatch):
    """Every operator must run on the device: a CPU fallback raises, and so does its warning."""
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ct.CPUFallbackWarning)
        yield


def _same(got, want, rtol=1e-5, atol=1e-6):
    assert got.device.type == "opencl"
    assert got.dtype == want.dtype and got.shape == want.shape
    host = got.cpu()
    assert host.shape == want.shape and host.dtype == want.dtype
    np.testing.assert_allclose(host.numpy(), want.numpy(), rtol=rtol, atol=atol)


# ---- (1) registration and the device module ---------------------------------------------------
def test_device_module(ocl, device):
    assert torch.opencl.is_available()
    assert torch.opencl.device_count() == len(all_devices())
    assert torch.opencl.current_device() == 0
    assert torch.opencl.get_device_name() == device.name
    before = torch.opencl.memory_allocated()
    x = torch.zeros(1000, device=ocl)
    torch.opencl.synchronize()
    assert torch.opencl.memory_allocated() >= before + 4000
    assert torch.opencl.max_memory_allocated() >= torch.opencl.memory_allocated()
    del x


def test_device_guard_and_bad_index(ocl):
    with torch.opencl.device(0):
        assert torch.opencl.current_device() == 0
    with torch.opencl.device("opencl:0"):
        assert torch.zeros(2, device=ocl).device == torch.device("opencl:0")
    n = torch.opencl.device_count()
    with pytest.raises(RuntimeError, match="invalid device index"):
        torch.opencl.set_device(n)
    with pytest.raises(RuntimeError, match="invalid device index"):
        torch.zeros(2, device=f"opencl:{n}")
    assert torch.opencl.current_device() == 0


# ---- (2) factories, copies, printing, views ------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32, torch.bool])
def test_round_trip(ocl, dtype):
    src = (torch.arange(12) % 3 - 1).to(dtype).reshape(3, 4)
    x = src.to(ocl)
    assert x.device.type == "opencl" and x.dtype == dtype and x.stride() == (4, 1)
    assert torch.equal(x.cpu(), src)
    assert torch.equal(src.t().to(ocl).cpu(), src.t())  # strided source
    assert torch.equal(x.to(torch.float64).cpu(), src.to(torch.float64))  # cast on the device


def test_factories_and_unsupported_dtype(ocl):
    assert torch.equal(torch.zeros(2, 3, device=ocl).cpu(), torch.zeros(2, 3))
    assert torch.equal(torch.full((2,), 7, device=ocl).cpu(), torch.full((2,), 7))
    e = torch.empty_strided((2, 3), (1, 2), device=ocl)
    assert e.stride() == (1, 2)
    with pytest.raises(TypeError, match="int16 is not supported"):
        torch.zeros(2, dtype=torch.int16, device=ocl)


def test_zero_dim_round_trip(ocl):
    x = torch.tensor(3.5, dtype=torch.float64).to(ocl)
    assert x.shape == () and x.cpu().shape == () and x.item() == 3.5
    s = torch.arange(4.0).to(ocl).sum()
    assert s.shape == () and s.cpu().shape == () and s.cpu().item() == 6.0


def test_copy_between_devices(ocl):
    dst = torch.zeros(2, 3, device=ocl, dtype=torch.float64)
    dst.copy_(torch.tensor([1.5, 2.5, 3.5]))  # broadcast and cast from the CPU
    _same(dst, torch.tensor([1.5, 2.5, 3.5], dtype=torch.float64).expand(2, 3).clone())
    out = torch.empty(2, 3)
    out.copy_(dst)
    assert torch.equal(out, dst.cpu().float())
    with pytest.raises(RuntimeError):
        dst.copy_(torch.ones(4))


def test_repr(ocl):
    text = repr(torch.tensor([1.0, 2.0], device=ocl))
    assert "device='opencl:0'" in text and "1." in text and "2." in text


VIEWS = [
    ("t", lambda a: a.t()), ("slice", lambda a: a[1:, ::2]), ("select", lambda a: a[:, 2]),
    ("permute", lambda a: a.reshape(2, 3, 2).permute(2, 0, 1)), ("view", lambda a: a.view(2, 6)),
    ("expand", lambda a: a[:1].expand(4, 4)), ("transpose", lambda a: a.transpose(0, 1)[1]),
    ("unsqueeze", lambda a: a.unsqueeze(1)), ("diagonal", lambda a: a.diagonal()),
]


@pytest.mark.parametrize("name,fn", VIEWS, ids=[v[0] for v in VIEWS])
def test_views_share_storage(ocl, name, fn):
    base = torch.arange(12.0).reshape(3, 4)
    x = base.to(ocl)
    v, want = fn(x), fn(base)
    assert v.shape == want.shape and v.stride() == want.stride()
    assert v.storage_offset() == want.storage_offset() and v._base is x
    assert torch.equal(v.cpu(), want)
    if name != "expand":  # writes through the view reach the base, as in torch
        v.fill_(-1.0)
        want.fill_(-1.0)
        assert torch.equal(x.cpu(), base)


IN_PLACE_VIEWS = [("squeeze_", lambda a: a[:1].squeeze_(0)), ("unsqueeze_", lambda a: a.unsqueeze_(1)),
                  ("t_", lambda a: a.t_()), ("transpose_", lambda a: a.transpose_(0, 1)),
                  ("as_strided_", lambda a: a.as_strided_((2, 2), (1, 4), 1))]


@pytest.mark.parametrize("name,fn", IN_PLACE_VIEWS, ids=[v[0] for v in IN_PLACE_VIEWS])
def test_in_place_views(ocl, name, fn, monkeypatch):
    """In-place view ops change the tensor's own geometry over the same device buffer, as torch
    (they reach as_strided_), and a geometry past the buffer is torch's RuntimeError."""
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    base = torch.arange(12.0).reshape(3, 4)
    x = base.to(ocl)
    got, want = fn(x), fn(base.clone())
    assert got.shape == want.shape and got.stride() == want.stride()
    assert got.storage_offset() == want.storage_offset()
    assert torch.equal(got.cpu(), want)
    with pytest.raises(RuntimeError, match="storage"):
        torch.zeros(4, device=ocl).as_strided_((5,), (1,))


def test_view_errors_are_torchs(ocl):
    x = torch.zeros(3, 4, device=ocl).t()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        x.view(12)
    assert torch.equal(x.reshape(12).cpu(), torch.zeros(12))  # reshape copies instead


# ---- (3) the CPU fallback -----------------------------------------------------------------------
def test_fallback_warns_once_and_lists(ocl):
    ct_fallback._FELL_BACK.discard("aten::igamma.out")
    a = torch.arange(1.0, 7.0).reshape(2, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.igamma(a.to(ocl), a.to(ocl))
        torch.igamma(a.to(ocl), a.flip(0).to(ocl))
    notes = [w for w in caught if issubclass(w.category, ct.CPUFallbackWarning)
             and "aten::igamma.out" in str(w.message)]
    assert len(notes) == 1
    assert "aten::igamma.out" in ct.fallback_ops()
    _same(got, torch.igamma(a, a))


def test_fallback_in_place_writes_back(ocl):
    ct_fallback._FELL_BACK.discard("aten::logit_")
    a = torch.tensor([[0.1, 0.2], [0.7, 0.9]])
    x = a.to(ocl)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x.logit_()
    assert any("aten::logit_" in str(w.message) for w in caught)  # it did fall back
    _same(x, a.logit())


def test_fallback_error_mode(ocl, monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    with pytest.raises(NotImplementedError, match="aten::igamma.out has no opencl kernel"):
        torch.igamma(torch.ones(2, 3, device=ocl), torch.ones(2, 3, device=ocl))


def test_coverage_cli():
    res = subprocess.run([sys.executable, "-m", "cltensor.torch", "--coverage"], capture_output=True,
                         text=True, env=subprocess_env(), timeout=120)
    assert res.returncode == 0, res.stderr
    assert "aten::copy_" in res.stdout.split("\n") and "run on the opencl device" in res.stdout


# ---- (4) pointwise, reductions, matrix products: a conformance table against CPU torch -----------
def _inputs(layout, dtype, shapes, positive=False):
    """CPU tensors of `shapes` in `layout`: contiguous, transposed (strided) or broadcast."""
    gen = torch.Generator().manual_seed(len(shapes) * 7 + len(layout))
    out = []
    for i, shape in enumerate(shapes):
        if layout == "broadcast" and i == 1:
            shape = shape[-1:]  # a row broadcast against the first operand
        if layout == "transposed":
            t = torch.randn(shape[::-1], generator=gen, dtype=dtype).t()
        else:
            t = torch.randn(shape, generator=gen, dtype=dtype)
        out.append(t.abs() + 0.5 if positive else t)
    return out


BINARY = {"add": lambda a, b: torch.add(a, b, alpha=2), "sub": torch.sub, "mul": torch.mul,
          "div": torch.div, "pow": torch.pow, "maximum": torch.maximum, "atan2": torch.atan2,
          "eq": torch.eq, "lt": torch.lt, "remainder": torch.remainder}
UNARY = {"exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "tanh": torch.tanh,
         "sigmoid": torch.sigmoid, "relu": torch.relu, "neg": torch.neg, "abs": torch.abs,
         "floor": torch.floor, "reciprocal": torch.reciprocal}


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "broadcast"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", list(BINARY) + list(UNARY))
def test_pointwise_conformance(ocl, name, dtype, layout, monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")  # each op must run on the device
    fn = BINARY.get(name) or UNARY[name]
    args = _inputs(layout, dtype, [(3, 4)] * (2 if name in BINARY else 1),
                   positive=name in ("log", "sqrt", "pow"))
    _same(fn(*[a.to(ocl) for a in args]), fn(*args))


@pytest.mark.parametrize("name", ["add", "mul", "div", "pow", "exp", "sqrt", "neg"])
def test_pointwise_in_place_and_out(ocl, name, monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    args = _inputs("broadcast", torch.float64, [(3, 4), (3, 4)][:2 if name in BINARY else 1],
                   positive=True)
    dev = [a.to(ocl) for a in args]
    out = torch.empty(0, dtype=torch.float64, device=ocl)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch warns that out= was resized
        getattr(torch, name)(*dev, out=out)
    _same(out, getattr(torch, name)(*args))
    base = dev[0].clone()
    getattr(base[1:], name + "_")(*dev[1:])  # in place through a view
    want = args[0].clone()
    getattr(want[1:], name + "_")(*args[1:])
    _same(base, want)


def test_promotion_scalars_and_errors(ocl, monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    i = torch.arange(6).reshape(2, 3)
    f = torch.tensor([0.5, 1.5, 2.5], dtype=torch.float64)
    di, df = i.to(ocl), f.to(ocl)
    for got, want in [(di / 2, i / 2), (di + 1.5, i + 1.5), (di * df, i * f), (di > 2, i > 2),
                      (di + torch.tensor(2.0), i + torch.tensor(2.0)), (di // 4, i // 4),
                      (df.float() + di, f.float() + i), (di == di.t().t(), i == i)]:
        _same(got, want)
    with pytest.raises(RuntimeError):
        di.add_(1.5)  # in place: the float result cannot be written to int64
    with pytest.raises(RuntimeError, match="same device"):
        df + f
    with pytest.raises(RuntimeError):
        df + torch.ones(2, device=ocl, dtype=torch.float64)  # shapes do not broadcast


REDUCTIONS = [("sum", lambda a: a.sum()), ("sum_dim", lambda a: a.sum(1, keepdim=True)),
              ("sum_int", lambda a: (a > 0).sum(0)), ("mean", lambda a: a.mean((0, 1))),
              ("amax", lambda a: a.amax(0)), ("argmax", lambda a: a.argmax(1)),
              ("max", lambda a: a.max()), ("min", lambda a: a.min())]


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name,fn", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
def test_reduction_conformance(ocl, name, fn, dtype, layout, monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    (a,) = _inputs(layout, dtype, [(5, 6)])
    _same(fn(a.to(ocl)), fn(a))


PRODUCTS = [("mm", lambda a, b, c: a @ b), ("addmm", lambda a, b, c: torch.addmm(c, a, b, beta=0.5,
                                                                                  alpha=2)),
            ("bmm", lambda a, b, c: torch.bmm(a.expand(2, 4, 5), b.expand(2, 5, 3))),
            ("baddbmm", lambda a, b, c: torch.baddbmm(c, a.unsqueeze(0), b.unsqueeze(0))),
            ("mv", lambda a, b, c: torch.mv(b, c)),
            ("addmv", lambda a, b, c: torch.addmv(a[:, 0], a, b[:, 1], beta=0.5, alpha=2)),
            ("vector @ matrix", lambda a, b, c: a[0] @ b), ("matrix @ vector", lambda a, b, c: a @ b[:, 0])]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name,fn", PRODUCTS, ids=[p[0] for p in PRODUCTS])
def test_product_conformance(ocl, name, fn, dtype, monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    a, b = _inputs("transposed", dtype, [(4, 5), (5, 3)])
    (c,) = _inputs("contiguous", dtype, [(3,)])
    _same(fn(a.to(ocl), b.to(ocl), c.to(ocl)), fn(a, b, c), rtol=1e-4, atol=1e-5)
    out = torch.empty(4, 3, dtype=dtype, device=ocl)
    if name == "mm":
        torch.mm(a.to(ocl), b.to(ocl), out=out)
        _same(out, a @ b, rtol=1e-4, atol=1e-5)
    if name == "addmv":  # in place, on a view with a storage offset
        x, y = torch.zeros(5, dtype=dtype), torch.zeros(5, dtype=dtype, device=ocl)
        x[1:].addmv_(a, b[:, 1], alpha=2)
        y[1:].addmv_(a.to(ocl), b[:, 1].to(ocl), alpha=2)
        _same(y, x, rtol=1e-4, atol=1e-5)
    with pytest.raises(RuntimeError):
        torch.mm(a.to(ocl), a.to(ocl))  # inner sizes differ


def test_autograd_through_device_ops(ocl):
    x = torch.randn(4, 5, dtype=torch.float64)
    w = torch.randn(5, 3, dtype=torch.float64)
    grads = []
    for dev in ("cpu", ocl):
        xd, wd = x.to(dev, copy=True).requires_grad_(), w.to(dev, copy=True).requires_grad_()
        loss = ((xd @ wd).relu() * 2 - xd.sum(1, keepdim=True)).exp().mean()
        loss.backward()
        grads.append((loss.detach().cpu(), xd.grad.cpu(), wd.grad.cpu()))
    for got, want in zip(grads[1], grads[0]):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


def test_reduction_out_and_dtype(ocl, monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    a = torch.randn(3, 4, dtype=torch.float64)
    out = torch.empty(3, device=ocl, dtype=torch.float64)
    torch.sum(a.to(ocl), 1, out=out)
    _same(out, a.sum(1))
    out = torch.empty(0, device=ocl, dtype=torch.float64)  # empty: resized without a warning
    torch.mean(a.to(ocl), 0, keepdim=True, out=out)
    _same(out, a.mean(0, keepdim=True))
    i = torch.arange(6).reshape(2, 3)
    _same(i.to(ocl).sum(0, dtype=torch.float32), i.sum(0, dtype=torch.float32))
    with pytest.raises(RuntimeError):
        i.to(ocl).mean()  # torch: mean needs a floating dtype


# ---- (5) layers: forward and gradients through torch.autograd, then a CNN trained 3 steps --------
def _grads(fn, tensors, dev, n_grads):
    """fn's output and the gradients of (output * fixed weights).sum() for the first n_grads
    tensors, on dev."""
    leaves = [t.to(dev, copy=True).requires_grad_(i < n_grads) for i, t in enumerate(tensors)]
    out = fn(*leaves)
    weights = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape)
    (out * weights.to(dev)).sum().backward()
    return [out.detach().cpu()] + [t.grad.cpu() for t in leaves if t.requires_grad]


def _conv(x, w, b):
    return torch.nn.functional.conv2d(x, w, b, stride=(2, 1), padding=1, groups=2)


def _conv1d(x, w, b):
    return torch.nn.functional.conv1d(x, w, b, stride=2, padding=2, dilation=2).relu()


def _pool(x):
    return torch.nn.functional.max_pool2d(x.relu(), 3, stride=2, padding=1)  # overlapping windows


def _loss(reduction):
    return lambda x, t, w: torch.nn.functional.nll_loss(x.log_softmax(1), t, weight=w,
                                                        ignore_index=1, reduction=reduction)


LAYERS = {"conv2d": (_conv, [(2, 4, 7, 6), (6, 2, 3, 3), (6,)]),
          "conv1d": (_conv1d, [(2, 3, 9), (5, 3, 3), (5,)]),
          "max_pool2d": (_pool, [(2, 3, 7, 8)]),
          "softmax": (lambda x: x.softmax(1) * x, [(3, 5)]),
          "nll_mean": (_loss("mean"), [(6, 4), "target", (4,)]),
          "nll_sum": (_loss("sum"), [(6, 4), "target", (4,)]),
          "nll_none": (_loss("none"), [(6, 4), "target", (4,)])}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", list(LAYERS))
def test_layer_conformance(ocl, name, dtype, monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    fn, specs = LAYERS[name]
    gen = torch.Generator().manual_seed(3)
    tensors = [torch.tensor([0, 1, 3, 2, 1, 0]) if s == "target" else
               torch.randn(s, generator=gen, dtype=dtype).abs() + 0.1 if len(s) == 1 else
               torch.randn(s, generator=gen, dtype=dtype) for s in specs]
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-12)
    n_grads = 3 if name.startswith("conv") else 1  # not the targets or the class weights
    for got, want in zip(_grads(fn, tensors, ocl, n_grads), _grads(fn, tensors, "cpu", n_grads)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), **tol)


def test_layer_errors(ocl):
    x = torch.randn(3, 4, device=ocl).log_softmax(1)
    with pytest.raises(IndexError, match="out of bounds"):
        torch.nn.functional.nll_loss(x, torch.tensor([0, 4, 1], device=ocl))
    with pytest.raises(RuntimeError):  # channels differ from the weight's
        torch.nn.functional.conv2d(torch.randn(1, 3, 5, 5, device=ocl), torch.randn(2, 4, 3, 3, device=ocl))


def test_unsupported_conv_form_falls_back(ocl):
    ct_fallback._FELL_BACK.discard("aten::convolution")
    x, w = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3)
    args = (None, [1, 1], [0, 0], [1, 1], False, [1, 1], 1)  # plain, with an output_padding
    with pytest.warns(ct.CPUFallbackWarning, match="aten::convolution"):
        got = torch.ops.aten.convolution(x.to(ocl), w.to(ocl), *args)
    _same(got, torch.ops.aten.convolution(x, w, *args), rtol=1e-4, atol=1e-5)


def _train_cnn(dev, steps=3):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(64, 3))
    model.to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(5, 2, 8, 8, generator=torch.Generator().manual_seed(1))
    y = torch.tensor([0, 2, 1, 2, 0])
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.CrossEntropyLoss()(model(x.to(dev)), y.to(dev))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]


def test_cnn_trains_like_cpu(ocl, monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")  # every op of the step on the device
    (got_losses, got), (want_losses, want) = _train_cnn(ocl), _train_cnn("cpu")
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-5)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-6)


def test_random_fills_on_device(ocl, monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    torch.opencl.manual_seed(5)
    a = torch.empty(4000, device=ocl).normal_(2.0, 0.5).cpu()
    torch.opencl.manual_seed(5)
    assert torch.equal(torch.empty(4000, device=ocl).normal_(2.0, 0.5).cpu(), a)  # seeded
    assert abs(a.mean().item() - 2.0) < 0.05 and abs(a.std().item() - 0.5) < 0.05
    u = torch.empty(4000, device=ocl, dtype=torch.float64).uniform_(-1, 3).cpu()
    assert u.min() >= -1 and u.max() < 3 and abs(u.mean().item() - 1.0) < 0.1


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_batch_norm(ocl, dtype, training, monkeypatch):
    """batch_norm also passes an empty uint8 placeholder between its ops."""
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(4, 3, 5, 5, generator=gen, dtype=dtype) * 2 + 1
    mods = []
    for dev in ("cpu", ocl):
        bn = torch.nn.BatchNorm2d(3).to(dtype)
        with torch.no_grad():
            bn.weight.copy_(torch.tensor([0.5, 1.5, -1.0]))
            bn.bias.copy_(torch.tensor([0.1, 0.0, -0.2]))
            bn.running_var.fill_(2.0)
        bn.train(training)
        mods.append(bn.to(dev))
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-12)
    for got, want in zip(_grads(mods[1], [x], ocl, 1), _grads(mods[0], [x], "cpu", 1)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), **tol)
    for name in ("running_mean", "running_var", "weight", "bias"):
        got, want = getattr(mods[1], name), getattr(mods[0], name)
        np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), **tol)
    np.testing.assert_allclose(mods[1].weight.grad.cpu().numpy(), mods[0].weight.grad.numpy(), **tol)
    assert torch.empty(0, dtype=torch.uint8, device=ocl).cpu().dtype == torch.uint8

def test_deepcopy_on_device(ocl):
    x = torch.arange(6.0).reshape(2, 3).to(ocl)
    y = copy.deepcopy(x)  # crashed: torch's storage path allocates opencl storage
    y.add_(1)
    _same(x, torch.arange(6.0).reshape(2, 3))
    _same(y, torch.arange(6.0).reshape(2, 3) + 1)
    lin = torch.nn.Linear(3, 2).to(ocl)
    twin = copy.deepcopy(lin)
    assert twin.weight.device.type == "opencl" and torch.equal(twin.weight.cpu(), lin.weight.cpu())


def test_checkpoint_to_cpu_torch_and_back(ocl, tmp_path):
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2).to(ocl)
    path = tmp_path / "ckpt.pt"
    torch.save(lin.state_dict(), path)
    code = (f"import torch; sd = torch.load({str(path)!r}, map_location='cpu'); "
            f"print(sd['weight'].device, sd['weight'].sum().item())")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr  # plain CPU torch, without cltensor
    device, total = res.stdout.split()
    assert device == "cpu" and abs(float(total) - lin.weight.sum().item()) < 1e-6
    back = torch.nn.Linear(3, 2).to(ocl)
    back.load_state_dict(torch.load(path, map_location="cpu"))
    _same(back.weight.detach(), lin.weight.detach().cpu())
    assert torch.load(path)["bias"].device.type == "opencl"


def test_fallback_output_of_unsupported_dtype_raises(ocl):
    x = torch.ones(3, device=ocl)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ct.CPUFallbackWarning)
        with pytest.raises(TypeError, match="complex64 is not supported"):
            torch.polar(x, x)  # runs on the CPU; its complex result cannot come back


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cat_stack_index_select(ocl, dtype, monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    a, b = _inputs("transposed", dtype, [(3, 4), (3, 4)])
    i = torch.arange(4).reshape(1, 4)
    da, db, di = a.to(ocl), b.to(ocl), i.to(ocl)
    _same(torch.cat([da, db, di], 0), torch.cat([a, b, i], 0))  # promoted, strided inputs
    _same(torch.cat([da, torch.empty(0, device=ocl, dtype=dtype), db], 1),
          torch.cat([a, torch.empty(0, dtype=dtype), b], 1))  # 1-D empty tensors are skipped
    _same(torch.stack([da, db], 2), torch.stack([a, b], 2))
    out = torch.empty(0, device=ocl, dtype=dtype)
    torch.cat([da, db], -1, out=out)
    _same(out, torch.cat([a, b], -1))
    idx = torch.tensor([2, 0, 2])
    _same(da.index_select(1, idx.to(ocl)), a.index_select(1, idx))
    emb = torch.nn.Embedding(5, 3).to(dtype)
    want = emb(idx).detach()
    _same(emb.to(ocl)(idx.to(ocl)).detach(), want)  # Module.to moves emb itself
    with pytest.raises(RuntimeError, match="same device"):
        torch.cat([da, b])
    with pytest.raises(RuntimeError):
        torch.cat([da, torch.ones(2, 2, device=ocl, dtype=dtype)])  # sizes differ off dim 0


def test_dropout(ocl, monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    x = torch.ones(4000, dtype=torch.float64, device=ocl, requires_grad=True)
    y = torch.nn.functional.dropout(x, 0.25)
    kept = (y != 0).cpu()
    assert abs(kept.double().mean().item() - 0.75) < 0.03
    assert torch.allclose(y.cpu()[kept], torch.tensor(1 / 0.75, dtype=torch.float64))
    y.sum().backward()
    assert torch.equal(x.grad.cpu(), kept.double() / 0.75)
    x2 = torch.randn(5, device=ocl)
    assert torch.equal(torch.nn.functional.dropout(x2, 0.5, training=False).cpu(), x2.cpu())


TERNARY = {"addcmul": lambda a, b, c: torch.addcmul(a, b, c, value=0.5),
           "addcdiv": lambda a, b, c: torch.addcdiv(a, b, c.abs() + 1, value=-2),
           "lerp": lambda a, b, c: torch.lerp(a, b, 0.3), "lerp_tensor": torch.lerp}
TERNARY_INPLACE = {"addcmul": lambda a, b, c: a.addcmul_(b, c, value=3),
                   "addcdiv": lambda a, b, c: a.addcdiv_(b, c.abs() + 1),
                   "lerp": lambda a, b, c: a.lerp_(b, 0.3), "lerp_tensor": lambda a, b, c: a.lerp_(b, c)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", list(TERNARY))
def test_ternary_conformance(ocl, name, dtype, monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    args = _inputs("broadcast", dtype, [(3, 4)] * 3)
    _same(TERNARY[name](*[a.to(ocl) for a in args]), TERNARY[name](*args))
    base, want = args[0].to(ocl), args[0].clone()
    TERNARY_INPLACE[name](base, *[a.to(ocl) for a in args[1:]])
    _same(base, TERNARY_INPLACE[name](want, *args[1:]))


@pytest.mark.parametrize("opt_name", ["Adam", "AdamW"])
def test_optimizers_step_like_cpu(ocl, opt_name, monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    results = []
    for dev in ("cpu", ocl):
        torch.manual_seed(0)
        lin = torch.nn.Linear(4, 3).double().to(dev)
        opt = getattr(torch.optim, opt_name)(lin.parameters(), lr=0.05, weight_decay=0.01)
        x = torch.randn(6, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
        for _ in range(3):
            opt.zero_grad()
            lin(x.to(dev)).pow(2).mean().backward()
            opt.step()
        results.append([p.detach().cpu() for p in lin.parameters()])
    for got, want in zip(*results[::-1]):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


def test_fallback_refuses_view_ops(ocl):
    x = torch.zeros(4, device=ocl)
    with pytest.raises(NotImplementedError, match="aten::alias is a view op"):
        ct_fallback.cpu_fallback(torch.ops.aten.alias.default, x)
    y = x.view(torch.int32)  # torch's own dtype view shares the buffer
    y.fill_(1)
    assert torch.equal(x.cpu(), torch.ones(4, dtype=torch.int32).view(torch.float32))


@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_backward(ocl, padding_idx, monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    idx = torch.tensor([[0, 2, 4], [2, 2, 1]])
    emb = torch.nn.Embedding(5, 3, padding_idx=padding_idx).double()
    want_out = _grads(emb, [idx], "cpu", 0)[0]
    want_grad = emb.weight.grad.clone()
    emb.weight.grad = None
    got_out = _grads(emb.to(ocl), [idx], ocl, 0)[0]  # Module.to moves emb and its weight
    np.testing.assert_allclose(got_out.numpy(), want_out.numpy(), rtol=1e-12)
    np.testing.assert_allclose(emb.weight.grad.cpu().numpy(), want_grad.numpy(), rtol=1e-12)


INDEXING = [("rows", lambda x, i, j: x[i]), ("cols", lambda x, i, j: x[:, j]),
            ("pairs", lambda x, i, j: x[i[:2], j]), ("grid", lambda x, i, j: x[i.unsqueeze(1), j]),
            ("negative", lambda x, i, j: x[-i - 1]), ("middle", lambda x, i, j: x.t()[:, i])]


@pytest.mark.parametrize("name,fn", INDEXING, ids=[c[0] for c in INDEXING])
def test_index_tensor(ocl, name, fn, monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    x = torch.arange(20.0, dtype=torch.float64).reshape(4, 5)
    i, j = torch.tensor([2, 0, 3]), torch.tensor([4, 1])
    _same(fn(x.to(ocl), i.to(ocl), j.to(ocl)), fn(x, i, j))
    with pytest.raises((IndexError, RuntimeError)):
        x.to(ocl)[torch.tensor([4]).to(ocl)]  # out of range


MASKS = [("whole", lambda x: x > 2, lambda x, m: x[m]), ("rows", lambda x: x[:, 0] > 0,
                                                             lambda x, m: x[m]),
         ("cols", lambda x: x[0] < 4, lambda x, m: x[:, m]), ("none", lambda x: x > 99,
                                                              lambda x, m: x[m]),
         ("and ints", lambda x: x[:, 1] > 2, lambda x, m: x[m, torch.tensor([0, 2])[:1]])]


@pytest.mark.parametrize("name,mask,fn", MASKS, ids=[c[0] for c in MASKS])
@pytest.mark.parametrize("where", ["opencl", "cpu"])
def test_index_with_masks_and_cpu_indices(ocl, name, mask, fn, where, monkeypatch):
    """Boolean masks index on the device (torch's rule: a mask is its nonzero() indices), and
    index tensors may live on the CPU, as torch's CUDA indexing allows; reads and writes."""
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    x = torch.arange(12.0).reshape(3, 4) - 3
    m = mask(x)
    _same(fn(x.to(ocl), m.to(where)), fn(x, m))
    got, want = x.to(ocl), x.clone()
    if name in ("whole", "rows", "none"):
        got[m.to(where)] = -1.0
        want[m] = -1.0
        _same(got, want)
    with pytest.raises(IndexError, match="shape of the mask"):
        x.to(ocl)[torch.tensor([True, False])]


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_and_index_backward(ocl, accumulate, monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    x = torch.zeros(4, 3, dtype=torch.float64)
    i = torch.tensor([2, 0, 2]) if accumulate else torch.tensor([2, 0, 3])
    v = torch.arange(9.0, dtype=torch.float64).reshape(3, 3)
    got = x.to(ocl).index_put_((i.to(ocl),), v.to(ocl), accumulate=accumulate)
    _same(got, x.clone().index_put_((i,), v, accumulate=accumulate))
    w = torch.randn(5, 3, dtype=torch.float64)
    grads = []
    for dev in ("cpu", ocl):
        wd = w.to(dev, copy=True).requires_grad_()
        (wd[i.to(dev)] * v.to(dev)).sum().backward()  # index's backward accumulates rows
        grads.append(wd.grad.cpu())
    np.testing.assert_allclose(grads[1].numpy(), grads[0].numpy(), rtol=1e-12)


def test_clip_grad_norm_on_device(ocl, monkeypatch):
    """torch.nn.utils.clip_grad_norm_ (its total norm is linalg_vector_norm) runs on the device
    and clips as on the CPU."""
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))
    dev = copy.deepcopy(cpu).to(ocl)
    x = torch.randn(5, 4)
    norms = []
    for model, inp in ((cpu, x), (dev, x.to(ocl))):
        (model(inp) ** 2).sum().backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5).cpu())
    torch.testing.assert_close(norms[1], norms[0])
    for p, q in zip(cpu.parameters(), dev.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad)


RANGES = [("arange", lambda **k: torch.arange(10, **k)),
          ("arange steps", lambda **k: torch.arange(-3, 7, 2, dtype=torch.float64, **k)),
          ("arange down", lambda **k: torch.arange(10, 0, -1, **k)),
          ("arange empty", lambda **k: torch.arange(0, dtype=torch.float32, **k)),
          ("linspace", lambda **k: torch.linspace(-5, 5, 11, dtype=torch.float64, **k)),
          ("logspace", lambda **k: torch.logspace(0, 3, 4, base=2, dtype=torch.float64, **k)),
          ("eye", lambda **k: torch.eye(3, **k)),
          ("eye m", lambda **k: torch.eye(2, 4, dtype=torch.int64, **k))]


@pytest.mark.parametrize("name,fn", RANGES, ids=[r[0] for r in RANGES])
def test_ranges_on_device(ocl, name, fn, monkeypatch):
    """The factories' out= forms (arange(..., device="opencl") reaches arange.start_out) fill the
    tensor on the device, with torch's checks."""
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    got, want = fn(device=ocl), fn()
    assert got.device.type == "opencl" and got.dtype == want.dtype
    assert torch.equal(got.cpu(), want)
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        torch.arange(0, 10, 0, device=ocl)
    out = torch.empty(2, dtype=want.dtype, device=ocl)  # resized as torch resizes out=
    assert fn(out=out) is out and torch.equal(out.cpu(), want)


def test_where_of_a_condition_alone(ocl, monkeypatch):
    """torch.where(condition) is its nonzero() as one index tensor per dim."""
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    for c in (torch.tensor([[1, 0, 2], [0, 3, 0]]), torch.tensor([0.5, 0.0]), torch.zeros(0)):
        got, want = torch.where(c.to(ocl)), torch.where(c)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.device.type == "opencl" and torch.equal(g.cpu(), w)


def test_fallback_of_a_factory(ocl):
    """A factory without a kernel (device="opencl" among its arguments) runs on the CPU once
    and returns an opencl tensor (its device argument made the CPU for the CPU call)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ct.CPUFallbackWarning)
        got = torch.tril_indices(4, 3, -1, device=ocl)
    assert got.device.type == "opencl"
    assert torch.equal(got.cpu(), torch.tril_indices(4, 3, -1))


def test_equal(ocl, monkeypatch):
    """torch.equal: same shape and every element equal after promotion; NaN equals nothing;
    tensors on two devices are torch's device error."""
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    x = torch.randn(2, 3)
    cases = [(x, x), (x, x + 1), (torch.ones(2), torch.ones(3)),
             (torch.tensor([float("nan")]), torch.tensor([float("nan")])),
             (torch.tensor([1.0]), torch.tensor([1]))]
    for a, b in cases:
        assert torch.equal(a.to(ocl), b.to(ocl)) == torch.equal(a, b)
    with pytest.raises(RuntimeError, match="same device"):
        torch.equal(x, x.to(ocl))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.float16])
def test_fill_from_a_0d_tensor_stays_on_the_device(ocl, monkeypatch, dtype):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    for value in (torch.tensor(2.7, dtype=torch.float64), torch.tensor(3, dtype=torch.int32),
                  torch.tensor(True)):
        want = torch.zeros(3, 4, dtype=dtype).fill_(value)
        for where in ("cpu", ocl):  # a strided destination, a CPU or device value
            got = torch.zeros(3, 4, dtype=dtype).to(ocl).t().fill_(value.to(where)).t()
            assert torch.equal(got.cpu(), want), (dtype, value, where)
    with pytest.raises(RuntimeError, match="0-dimension value tensor"):
        torch.zeros(3, device=ocl).fill_(torch.ones(2, device=ocl))


_LAYOUTS = {  # CPU tensors whose layout .to() keeps (dense) or whose stride order it keeps
    "channels_last": lambda: torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
    "permuted": lambda: torch.randn(2, 3, 4, 5).permute(0, 2, 3, 1),
    "permuted, strided": lambda: torch.randn(2, 3, 4, 5).permute(0, 2, 3, 1)[:, ::2],
    "expanded": lambda: torch.randn(3, 1, 4).expand(3, 5, 4),
    "size-1 dim": lambda: torch.randn(5, 1, 3).permute(2, 1, 0),
    "transposed": lambda: torch.randn(4, 5).t(),
    "0-d": lambda: torch.tensor(3.0),
    "empty": lambda: torch.randn(0, 3).t(),
}


@pytest.mark.parametrize("layout", list(_LAYOUTS))
def test_to_keeps_torch_strides_both_ways(ocl, layout):
    """_to_copy's result strides are torch's: a dense source's own, else dense ones in the
    source's stride order, or those of an explicit memory_format; the values copied."""
    x = _LAYOUTS[layout]()
    on_device = x.to(ocl)
    for kw in ({}, {"dtype": torch.float64}, {"dtype": torch.int64},
               {"memory_format": torch.contiguous_format}):
        want = x.to(copy=True, **kw)
        for got in (x.to(ocl, **kw), on_device.to(copy=True, **kw),
                    on_device.to("cpu", copy=True, **kw)):
            assert got.stride() == want.stride(), (kw, got.device)
            assert got.dtype == want.dtype and torch.equal(got.cpu(), want), (kw, got.device)
    copied = on_device.to(copy=True)
    copied.add_(1)  # a copy, not a view of the source
    assert torch.equal(on_device.cpu(), x)
    if x.dim() == 4:
        assert x.to(ocl, memory_format=torch.channels_last).stride() == \
            x.to(memory_format=torch.channels_last, copy=True).stride()
    else:
        with pytest.raises(RuntimeError, match="channels_last"):
            x.to(ocl, memory_format=torch.channels_last)
