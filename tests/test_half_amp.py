"""Autocast and GradScaler: autocast's dtype per op against torch.autocast on the CPU, its
context manager, decorator and nesting; GradScaler's unscaling, skipping and backoff on
injected inf/NaN gradients, growth and state_dict against torch.amp.GradScaler's rules; and a
small network on digits trained under float16 autocast."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

import cltensor as ct
import cltensor.nn.functional as F
from cltensor import nn
from cltensor.amp import mixed
from test_nvidia_plugin import EMULATED_CONFIGS, _emulated, only_plugins

# op -> f(module, functional, x, w, v, labels): x (4, 6) and w (5, 6) float32; v (4, 6)
# the same dtype as x or lower; labels (4,) int64
OPS = {
    "matmul": lambda m, f, x, w, v, y: m.matmul(x, w.t()),
    "mm": lambda m, f, x, w, v, y: m.mm(x, w.t()),
    "bmm": lambda m, f, x, w, v, y: m.bmm(x.unsqueeze(0), w.t().unsqueeze(0)),
    "addmm": lambda m, f, x, w, v, y: m.addmm(w[:, 0], x, w.t()),
    "operator @": lambda m, f, x, w, v, y: x @ w.t(),
    "linear": lambda m, f, x, w, v, y: f.linear(x, w, w[:, 1]),
    "conv2d": lambda m, f, x, w, v, y: f.conv2d(x.reshape(1, 4, 2, 3), x.reshape(4, 1, 2, 3)
                                                .expand(4, 4, 2, 3).contiguous()),
    "conv1d": lambda m, f, x, w, v, y: f.conv1d(x.reshape(1, 4, 6), x[:, :3].reshape(4, 1, 3)
                                                .expand(4, 4, 3).contiguous()),
    "softmax": lambda m, f, x, w, v, y: f.softmax(x, dim=1),
    "log_softmax": lambda m, f, x, w, v, y: f.log_softmax(x, dim=1),
    "cross_entropy": lambda m, f, x, w, v, y: f.cross_entropy(x, y),
    "mse_loss": lambda m, f, x, w, v, y: f.mse_loss(x, v),
    "layer_norm": lambda m, f, x, w, v, y: f.layer_norm(x, (6,)),
    "sum": lambda m, f, x, w, v, y: x.sum(1),
    "mean": lambda m, f, x, w, v, y: m.mean(x),
    "exp": lambda m, f, x, w, v, y: m.exp(x),
    "relu": lambda m, f, x, w, v, y: f.relu(x),
    "add mixed": lambda m, f, x, w, v, y: x + v,
    "mul mixed": lambda m, f, x, w, v, y: v * x,
}


def _inputs(rng, device, low):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    w = rng.standard_normal((5, 6)).astype(np.float32)
    y = np.array([0, 3, 5, 1])
    mine = [ct.from_numpy(a, device=device) for a in (x, w, x, y)]
    theirs = [torch.from_numpy(a) for a in (x, w, x, y)]
    mine[2] = mine[2].to(getattr(ct, low))
    theirs[2] = theirs[2].to(getattr(torch, low))
    return mine, theirs


@pytest.mark.parametrize("low", ["bfloat16", "float16"])
@pytest.mark.parametrize("op", list(OPS))
def test_autocast_dtype_per_op_matches_torch(device, rng, low, op):
    (x, w, v, y), (tx, tw, tv, ty) = _inputs(rng, device, low)
    with torch.autocast("cpu", dtype=getattr(torch, low)):
        want = OPS[op](torch, torch.nn.functional, tx, tw, tv, ty)
    with ct.autocast("opencl", dtype=getattr(ct, low)):
        got = OPS[op](ct, F, x, w, v, y)
    assert got.dtype.name == str(want.dtype)[6:]
    ref = want.float().detach().numpy()
    tol = 2e-2 if low == "bfloat16" else 2e-3
    np.testing.assert_allclose(got.float().numpy(), ref, rtol=tol, atol=tol * np.abs(ref).max())


@pytest.mark.parametrize("op", ["softmax", "sum", "exp", "layer_norm"])
def test_float32_ops_widen_low_precision_inputs(device, rng, op):
    # NOTE: torch's CUDA lists (softmax, sum, exp, layer_norm: float32); its CPU lists keep a
    # bfloat16 input's dtype for these ones
    (_, _, v, y), _ = _inputs(rng, device, "bfloat16")
    with ct.autocast("cuda", dtype=torch.bfloat16):
        got = OPS[op](ct, F, v, v, v, y)
    assert got.dtype is ct.float32
    assert OPS[op](ct, F, v, v, v, y).dtype is ct.bfloat16  # outside: as written


def test_autocast_nesting_decorator_and_errors(device):
    x = ct.ones(2, 3, device=device)
    with ct.autocast("opencl", dtype=ct.bfloat16):
        assert (x @ x.t()).dtype is ct.bfloat16
        with ct.autocast("opencl", dtype=ct.float16):
            assert (x @ x.t()).dtype is ct.float16
            with ct.autocast("opencl", enabled=False):
                assert (x @ x.t()).dtype is ct.float32
            assert ct.amp.is_autocast_enabled()
        assert (x @ x.t()).dtype is ct.bfloat16
    assert (x @ x.t()).dtype is ct.float32 and not ct.amp.is_autocast_enabled()

    @ct.autocast("cuda")
    def product(a):
        return a @ a.t()
    assert product(x).dtype is ct.float16 and (x @ x.t()).dtype is ct.float32
    assert ct.autocast("cpu").fast_dtype is ct.bfloat16
    with ct.cuda.amp.autocast(dtype=ct.bfloat16):
        assert (x @ x.t()).dtype is ct.bfloat16
    with pytest.raises(ValueError, match="device_type"):
        ct.autocast("tpu")
    with pytest.raises(ValueError, match="float16 or cltensor.bfloat16"):
        ct.autocast("opencl", dtype=ct.float64)
    with pytest.raises(RuntimeError):  # the block is left as it was after an error
        with ct.autocast("opencl"):
            raise RuntimeError
    assert not ct.amp.is_autocast_enabled()


def test_autocast_gradients_flow_to_float32_parameters(device, rng):
    lin = nn.Linear(6, 3).to(device)
    x = ct.from_numpy(rng.standard_normal((4, 6)).astype(np.float32), device=device)
    with ct.autocast("opencl", dtype=ct.bfloat16):
        out = lin(x)
        loss = F.cross_entropy(out, ct.tensor([0, 1, 2, 0], device=device))
    assert out.dtype is ct.bfloat16 and loss.dtype is ct.float32
    loss.backward()
    assert lin.weight.grad.dtype is ct.float32 and lin.bias.grad.dtype is ct.float32
    t = torch.nn.Linear(6, 3)
    with torch.no_grad():
        t.weight.copy_(torch.from_numpy(lin.weight.detach().numpy()))
        t.bias.copy_(torch.from_numpy(lin.bias.detach().numpy()))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tl = torch.nn.functional.cross_entropy(t(torch.from_numpy(x.numpy())),
                                               torch.tensor([0, 1, 2, 0]))
    tl.backward()
    np.testing.assert_allclose(lin.weight.grad.numpy(), t.weight.grad.numpy(), atol=3e-2)


@pytest.mark.parametrize("low", ["bfloat16", "float16"])
def test_linear_casts_where_tensor_cores_multiply_16bit(device, rng, monkeypatch, low):
    """Where a plug-in multiplies 16-bit operands (the NVIDIA one, emulated here), autocast's
    linear casts its float32 parameters as torch does, and all three of its products reach
    the plug-in with 16-bit operands; elsewhere it reads them as they are (amp/mixed.py)."""
    lin = nn.Linear(24, 16).to(device)
    x_np = rng.standard_normal((8, 24)).astype(np.float32)
    x = ct.from_numpy(x_np, device=device).requires_grad_()
    with only_plugins():
        assert mixed.applies(x.to(getattr(ct, low)), lin.weight, lin.bias)
    pl, operands = _emulated(EMULATED_CONFIGS[0]), []
    real = type(pl).gemm
    monkeypatch.setattr(pl, "gemm", lambda p, *a: operands.append(
        (p.a.t.dtype.name, p.b.t.dtype.name)) or real(pl, p, *a))
    with only_plugins(pl):
        assert not mixed.applies(x.to(getattr(ct, low)), lin.weight, lin.bias)
        with ct.autocast("opencl", dtype=getattr(ct, low)):
            out = lin(x)
        out.float().sum().backward()
    assert out.dtype is getattr(ct, low) and lin.weight.grad.dtype is ct.float32
    assert len(operands) == 3 and set(operands) == {(low, low)}, operands
    t = torch.nn.Linear(24, 16)
    with torch.no_grad():
        t.weight.copy_(torch.from_numpy(lin.weight.detach().numpy()))
        t.bias.copy_(torch.from_numpy(lin.bias.detach().numpy()))
    tx = torch.from_numpy(x_np).requires_grad_()
    with torch.autocast("cpu", dtype=getattr(torch, low)):
        tout = t(tx)
    tout.float().sum().backward()
    tol = dict(rtol=1.6e-2, atol=1e-2) if low == "bfloat16" else dict(rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(out.float().detach().numpy(), tout.float().detach().numpy(), **tol)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **tol)
    np.testing.assert_allclose(lin.weight.grad.numpy(), t.weight.grad.numpy(), **tol)


# ---- GradScaler -------------------------------------------------------------------------------

def _twin_models(rng, device):
    w = rng.standard_normal((3, 4)).astype(np.float32)
    mine, theirs = nn.Linear(4, 3, bias=False).to(device), torch.nn.Linear(4, 3, bias=False)
    with ct.no_grad():
        mine.weight.copy_(ct.from_numpy(w, device=device))
    with torch.no_grad():
        theirs.weight.copy_(torch.from_numpy(w))
    return mine, theirs


def test_grad_scaler_skips_backs_off_and_grows_as_torch(device, rng):
    mine, theirs = _twin_models(rng, device)
    opt, topt = ct.optim.SGD(mine.parameters(), lr=0.1), torch.optim.SGD(theirs.parameters(), lr=0.1)
    kw = dict(init_scale=2.0 ** 10, growth_interval=2)
    scaler, tscaler = ct.amp.GradScaler("opencl", **kw), torch.amp.GradScaler("cpu", **kw)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    scales = []
    for step in range(7):
        for model, s, o, xx in ((mine, scaler, opt, ct.from_numpy(x, device=device)),
                                (theirs, tscaler, topt, torch.from_numpy(x))):
            o.zero_grad()
            s.scale((model(xx) ** 2).mean()).backward()
            if step in (2, 5):  # an overflowed gradient: the step is skipped, the scale halved
                model.weight.grad[1, 2] = float("inf") if step == 2 else float("nan")
            s.step(o)
            s.update()
        scales.append((scaler.get_scale(), tscaler.get_scale()))
        np.testing.assert_allclose(mine.weight.detach().numpy(), theirs.weight.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
    assert [a for a, _ in scales] == [b for _, b in scales]
    assert scales[2][0] == scales[1][0] / 2 and scales[1][0] == 2 * scales[0][0]
    assert scaler.state_dict() == {k: (v.item() if hasattr(v, "item") else v)
                                   for k, v in tscaler.state_dict().items()}


def test_grad_scaler_unscales_many_gradients_in_few_launches(device, rng, monkeypatch):
    params = [ct.zeros(n, device=device, requires_grad=True) for n in (3, 1, 7, 2, 5, 4, 6, 1, 9, 2)]
    grads = [rng.standard_normal(p.shape).astype(np.float32) * 1024 for p in params]
    for p, g in zip(params, grads):
        p.grad = ct.from_numpy(g, device=device)
    opt = ct.optim.SGD(params, lr=1.0)
    launches = []
    real = ct.amp.kernels._launch
    monkeypatch.setattr(ct.amp.kernels, "_launch", lambda *a: launches.append(1) or real(*a))
    scaler = ct.amp.GradScaler(init_scale=1024.0)
    scaler.unscale_(opt)
    assert len(launches) == 2  # eight gradients a launch
    for p, g in zip(params, grads):
        np.testing.assert_array_equal(p.grad.numpy(), g / 1024)
    assert scaler.step(opt) is None and params[0].numpy()[0] != 0  # clean: stepped
    scaler.update()
    params[-1].grad[1] = float("nan")  # in the second launch's last slot
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 512.0


def test_grad_scaler_misuse_raises_as_torch(device):
    p = ct.ones(2, device=device, requires_grad=True)
    p.grad = ct.ones(2, device=device)
    opt = ct.optim.SGD([p], lr=0.1)
    scaler = ct.amp.GradScaler()
    with pytest.raises(RuntimeError, match="No inf checks"):
        scaler.update()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="Closure"):
        ct.amp.GradScaler().step(opt, closure=lambda: 0)
    h = ct.ones(2, dtype=ct.float16, device=device, requires_grad=True)
    h.grad = ct.ones(2, dtype=ct.float16, device=device)
    with pytest.raises(ValueError, match="FP16 gradients"):
        ct.amp.GradScaler().unscale_(ct.optim.SGD([h], lr=0.1))
    with pytest.raises(TypeError, match="GradScaler.scale"):
        scaler.scale(3.0)
    off = ct.amp.GradScaler(enabled=False)
    assert off.scale(p) is p and off.state_dict() == {} and off.get_scale() == 1.0
    with pytest.raises(RuntimeError, match="state dict is empty"):
        ct.amp.GradScaler().load_state_dict({})
    fresh = ct.amp.GradScaler()
    fresh.load_state_dict({"scale": 8.0, "growth_factor": 3.0, "backoff_factor": 0.25,
                           "growth_interval": 5, "_growth_tracker": 4})
    assert fresh.get_scale() == 8.0 and fresh.get_growth_interval() == 5
    assert ct.cuda.amp.GradScaler is ct.amp.GradScaler
    loss = ct.tensor(2.0, dtype=ct.float16, device=device)
    assert fresh.scale(loss).dtype is ct.float32  # a 0-d float32 scale, as torch's


def test_digits_trains_under_float16_autocast(device):
    pytest.importorskip("sklearn", reason="the digits data ships with scikit-learn")
    spec = importlib.util.spec_from_file_location(
        "digits_example", Path(__file__).resolve().parent.parent / "examples" / "digits.py")
    digits = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(digits)
    x_train, y_train, x_test, y_test = digits.load_data()
    ct.manual_seed(0)
    model = digits.build_model("mlp").to(device)
    opt = ct.optim.Adam(model.parameters(), lr=3e-3)
    scaler = ct.amp.GradScaler()
    xs, ys = ct.from_numpy(x_train, device=device), ct.from_numpy(y_train, device=device)
    for epoch in range(6):
        order = np.random.default_rng(epoch).permutation(len(y_train))
        for start in range(0, len(order), 64):
            idx = ct.from_numpy(order[start:start + 64], device=device)
            opt.zero_grad()
            with ct.autocast("opencl", dtype=ct.float16):
                logits = model(xs[idx])
                loss = F.cross_entropy(logits, ys[idx])
            assert logits.dtype is ct.float16 and loss.dtype is ct.float32
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    with ct.no_grad(), ct.autocast("opencl", dtype=ct.float16):
        pred = model(ct.from_numpy(x_test, device=device)).argmax(1).numpy()
    assert (pred == y_test).mean() >= 0.95
    assert all(p.dtype is ct.float32 for p in model.parameters())
