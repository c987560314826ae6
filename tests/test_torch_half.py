"""float16 and bfloat16 on the "opencl" device, and torch.autocast("opencl") with
torch.amp.GradScaler("opencl"): dtypes and values against CPU torch."""
import warnings

import numpy as np
import pytest

# torch (skipping when it is missing or too old) and the fixture making `device` opencl:0
from test_torch_device import ct, ocl, torch  # noqa: F401

pytestmark = pytest.mark.usefixtures("ocl")
OCL = "opencl"
F = torch.nn.functional
HALVES = [torch.float16, torch.bfloat16]


def _close(got, want, tol=1e-6):
    assert got.device.type == "opencl" and got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got.detach().cpu().float().numpy(), want.detach().float().numpy(),
                               rtol=tol, atol=tol)


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("dtype", HALVES)
def test_16_bit_tensors(dtype, monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    x, y = _randn(3, 5).to(dtype), _randn(3, 5, seed=1).to(dtype)
    xd, yd = x.to(OCL), y.to(OCL)
    assert xd.dtype == dtype and torch.equal(xd.cpu(), x)  # exact both ways
    assert torch.equal(x.t().to(OCL).cpu(), x.t())
    _close(xd + yd, x + y)  # computed in float32, rounded once, as torch does
    _close(xd * 3, x * 3)
    _close(xd + yd.float(), x + y.float())  # promotion to float32
    _close(xd.float(), x.float())
    _close(_randn(4).to(OCL).to(dtype), _randn(4).to(dtype))
    _close(F.relu(xd), F.relu(x))
    _close(xd.sum(1), x.sum(1), 1e-2)
    _close(xd @ yd.t(), x @ y.t(), 2e-2)
    _close(torch.softmax(xd, -1), torch.softmax(x, -1), 1e-2)


# op -> the dtype torch's CUDA autocast gives it from float32 operands (None: the autocast dtype)
AUTOCAST_DTYPES = {
    "linear": None, "matmul": None, "conv2d": None, "bmm": None,
    "softmax": torch.float32, "log_softmax": torch.float32, "sum": torch.float32,
    "exp": torch.float32, "pow": torch.float32, "nll_loss": torch.float32, "layer_norm": torch.float32,
    "add": torch.float32, "addcmul": torch.float32,
}


def _autocast_ops(x, w, img, k):
    target = torch.tensor([0, 1, 2, 0]).to(x.device)
    return {
        "linear": lambda: F.linear(x, w), "matmul": lambda: x @ w.t(),
        "conv2d": lambda: F.conv2d(img, k), "bmm": lambda: torch.bmm(x[None], w.t()[None]),
        "softmax": lambda: torch.softmax(F.linear(x, w), -1),
        "log_softmax": lambda: F.log_softmax(F.linear(x, w), -1),
        "sum": lambda: F.linear(x, w).sum(), "exp": lambda: torch.exp(F.linear(x, w)),
        "pow": lambda: F.linear(x, w) ** 2,
        "nll_loss": lambda: F.nll_loss(F.linear(x, w), target),
        "layer_norm": lambda: F.layer_norm(F.linear(x, w), (3,)),
        "add": lambda: F.linear(x, w) + x[:, :3],  # 16-bit + float32: plain promotion
        "addcmul": lambda: torch.addcmul(x[:, :3], F.linear(x, w), x[:, :3]),  # widest operand
    }


@pytest.mark.parametrize("dtype", HALVES)
def test_autocast_casts_as_cuda_autocast(dtype, monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    x, w, img, k = _randn(4, 6), _randn(3, 6, seed=1), _randn(2, 3, 5, 5, seed=2), \
        _randn(4, 3, 3, 3, seed=3)
    dev = _autocast_ops(*(t.to(OCL) for t in (x, w, img, k)))
    # the reference: the same ops on CPU with the operands cast by hand where CUDA casts them
    low = _autocast_ops(*(t.to(dtype) for t in (x, w, img, k)))
    with torch.autocast(OCL, dtype=dtype):
        got = {name: fn() for name, fn in dev.items()}
    with torch.autocast("cpu", dtype=dtype):  # CPU autocast agrees with CUDA's on these
        cpu = {name: fn() for name, fn in _autocast_ops(x, w, img, k).items()
               if AUTOCAST_DTYPES[name] is None}
    for name, want_dtype in AUTOCAST_DTYPES.items():
        assert got[name].dtype == (want_dtype or dtype), name
        if want_dtype is None:
            _close(got[name], low[name](), 1e-2)
            _close(got[name], cpu[name], 1e-2)
    with torch.autocast(OCL, dtype=dtype):
        cpu_linear = F.linear(x, w)  # CPU tensors: not this device's autocast
        wide = F.linear(x.double().to(OCL), w.double().to(OCL))  # float64 is never cast
    assert cpu_linear.dtype == torch.float32 and wide.dtype == torch.float64
    _close(got["softmax"], torch.softmax(F.linear(x.to(dtype), w.to(dtype)).float(), -1), 1e-5)
    assert F.linear(x.to(OCL), w.to(OCL)).dtype == torch.float32  # outside the region


def test_autocast_refuses_binary_cross_entropy():
    p, t = torch.rand(4).to(OCL), torch.rand(4).to(OCL)
    with torch.autocast(OCL, dtype=torch.bfloat16):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(p, t)


def _train(dev, dtype, steps=4, bad_step=1):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(64, 3)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler(dev, init_scale=2.0 ** 10, growth_interval=2)
    x, y = _randn(8, 2, 6, 6).to(dev), torch.arange(8).remainder(3).to(dev)
    losses, scales = [], []
    for step in range(steps):
        opt.zero_grad()
        with torch.autocast(dev, dtype=dtype):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        if step == bad_step:  # an overflowing gradient: the step is skipped, the scale halves
            model[0].weight.grad.view(-1)[0] = float("inf")
            before = [p.detach().cpu().clone() for p in model.parameters()]
        scaler.step(opt)
        scaler.update()
        if step == bad_step:
            assert all(torch.equal(p.detach().cpu(), b) for p, b in zip(model.parameters(), before))
        losses.append(loss.item())
        scales.append(scaler.get_scale())
    return losses, scales


@pytest.mark.parametrize("dtype", HALVES)
def test_grad_scaler_trains_under_autocast(dtype, monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # CPU autocast's notes on float16
        want_losses, want_scales = _train("cpu", dtype)
    losses, scales = _train(OCL, dtype)
    assert scales == want_scales == [2.0 ** 10, 2.0 ** 9, 2.0 ** 9, 2.0 ** 10]
    np.testing.assert_allclose(losses, want_losses, rtol=3e-2)
    assert losses[-1] < losses[0]
