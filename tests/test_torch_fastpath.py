"""Host-side fast paths of the "opencl" kernels: ReLU's gradient taken inside the
convolution's backward (relu_grad.py), taken only where it applies, with CPU torch's values in
float64 there and on every general path (another threshold or consumer, a kept or read
gradient, a transposed convolution, broadcast operands); the device guard's index search
skipped where OpenCL has one device; pointwise ops on alike operands without a Meta pass;
batch norm on cltensor's batch-norm kernels."""
import numpy as np
import pytest

# torch (skipping when it is missing or too old) and the fixture making `device` opencl:0
from test_torch_device import ct, ocl, torch  # noqa: F401

import cltensor
from cltensor.torch import _backend as be
from cltensor.torch import conv_ops, math_ops, nn_ops, norm_ops, relu_grad

pytestmark = pytest.mark.usefixtures("ocl")
OCL = "opencl"
F = torch.nn.functional
aten = torch.ops.aten


def _close(got, want, rtol=1e-6, atol=1e-8):
    assert got.device.type == OCL and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=rtol,
                               atol=atol)


def _randn(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _refuse(*args, **kwargs):
    raise AssertionError("the general path ran")


def _counting(monkeypatch, module, name):
    """Count the calls of module.name (still calling it); returns the list of call counts."""
    calls, fn = [], getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return fn(*args, **kwargs)
    monkeypatch.setattr(module, name, counted)
    return calls


def _net(seed, transposed=False):
    """(CPU float64 parameters, opencl copies requiring grad) of two convolutions."""
    shapes = [(6, 3, 3, 3), (6,), (4, 6, 3, 3), (4,)]
    if transposed:
        shapes[0] = (3, 6, 3, 3)
    cpu = [_randn(*s, seed=seed + i).requires_grad_() for i, s in enumerate(shapes)]
    return cpu, [p.detach().to(OCL).requires_grad_() for p in cpu]


def _forward(x, w1, b1, w2, b2, transposed=False, keep=None):
    conv = F.conv_transpose2d if transposed else F.conv2d
    y = conv(x, w1, b1, padding=1)
    if keep is not None:
        y.retain_grad()
        keep.append(y)
    return F.conv2d(F.relu(y), w2, b2, padding=1)


@pytest.mark.parametrize("steps", [1, 2])
def test_relu_gradient_taken_inside_the_convolution_backward(monkeypatch, steps):
    """threshold_backward never takes its general path; from the second step of a signature
    the convolution's backward applies the mask itself."""
    monkeypatch.setattr(nn_ops.activation, "hardtanh_backward", _refuse)
    fused = _counting(monkeypatch, conv_ops, "backward_through_relu")
    x = _randn(2, 3, 7, 7, seed=9)
    cpu, dev = _net(10)
    g = _randn(2, 4, 7, 7, seed=11)
    _forward(x, *cpu).backward(g)
    for _ in range(steps):
        for p in dev:
            p.grad = None
        _forward(x.to(OCL).requires_grad_(), *dev).backward(g.to(OCL))
    assert len(fused) == steps
    for d, c in zip(dev, cpu):
        _close(d.grad, c.grad)


def test_kept_relu_gradient_is_computed():
    """A tensor still holding the thresholded gradient (retain_grad) gets its values."""
    x = _randn(2, 3, 7, 7, seed=1)
    cpu, dev = _net(2)
    g = _randn(2, 4, 7, 7, seed=3)
    kept_cpu, kept_dev = [], []
    _forward(x, *cpu, keep=kept_cpu).backward(g)
    for _ in range(2):  # the second step takes the fused path
        for p in dev:
            p.grad = None
        kept_dev.clear()
        _forward(x.to(OCL), *dev, keep=kept_dev).backward(g.to(OCL))
    _close(kept_dev[0].grad, kept_cpu[0].grad)
    for d, c in zip(dev, cpu):
        _close(d.grad, c.grad)


def test_transposed_convolution_takes_the_general_backward(monkeypatch):
    fused = _counting(monkeypatch, relu_grad, "_launch")
    x = _randn(2, 3, 5, 5, seed=4)
    cpu, dev = _net(5, transposed=True)
    g = _randn(2, 4, 5, 5, seed=6)
    _forward(x, *cpu, transposed=True).backward(g)
    for _ in range(2):
        for p in dev:
            p.grad = None
        _forward(x.to(OCL), *dev, transposed=True).backward(g.to(OCL))
    assert len(fused) == 2  # the gradient launched by itself before each backward
    for d, c in zip(dev, cpu):
        _close(d.grad, c.grad)


def test_deferred_relu_gradient_read_and_consumed():
    """The deferred result read directly, fed to another kernel, and written in place."""
    g, y = _randn(3, 5, seed=7), _randn(3, 5, seed=8)
    y[0, 0] = float("nan")  # torch passes the gradient where the saved output is NaN
    want = aten.threshold_backward(g, y, 0)
    _close(aten.threshold_backward(g.to(OCL), y.to(OCL), 0), want)
    _close(aten.threshold_backward(g.to(OCL), y.to(OCL), 0.0) * 2, want * 2)
    r = aten.threshold_backward(g.to(OCL), y.to(OCL), 0)
    r.add_(1)
    _close(r, want + 1)
    out = torch.full((3, 5), float("nan"), dtype=torch.float64, device=OCL)
    aten.threshold_backward.grad_input(g.to(OCL), y.to(OCL), 0, grad_input=out)
    _close(out, want)


@pytest.mark.parametrize("case", ["threshold", "broadcast", "float16"])
def test_threshold_backward_general_paths(monkeypatch, case):
    monkeypatch.setattr(relu_grad, "_Pending", _refuse)
    g, y, t = _randn(3, 5, seed=12), _randn(3, 5, seed=13), 0
    if case == "threshold":
        t = 0.25
    elif case == "broadcast":
        y = y[:1]
    else:
        g, y = g.half(), y.half()
    _close(aten.threshold_backward(g.to(OCL), y.to(OCL), t), aten.threshold_backward(g, y, t))


def test_one_device_skips_the_device_index_search(monkeypatch):
    """With one OpenCL device every opencl tensor is on the current device: the kernels' guard
    looks for no index (test_torch_multidevice.py runs the guard over two devices)."""
    if len(cltensor.device.all_devices()) > 1:
        pytest.skip("several OpenCL devices: the guard searches the index")
    monkeypatch.setattr(be, "_first_index", _refuse)
    x, y = _randn(3, 4), _randn(3, 4, seed=1)
    _close(x.to(OCL) * y.to(OCL) + 1, x * y + 1)
    assert torch.opencl.current_device() == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pointwise_of_alike_operands_skips_the_meta_pass(monkeypatch, dtype):
    """Float tensors of one shape, dtype and device: no Meta result, torch's values and a new
    result tensor."""
    monkeypatch.setattr(math_ops, "meta_result", _refuse)
    x, y = _randn(2, 3, 4, dtype=dtype), _randn(2, 3, 4, seed=1, dtype=dtype).abs() + 0.5
    xd, yd = x.to(OCL), y.to(OCL)
    for op in (torch.add, torch.sub, torch.mul, torch.div, torch.maximum, torch.minimum):
        _close(op(xd, yd), op(x, y))
    for op in (torch.neg, torch.abs, torch.exp, torch.sigmoid, torch.tanh, torch.relu):
        _close(op(xd), op(x))
    _close(torch.sqrt(yd), torch.sqrt(y))
    _close(xd.mT * yd.mT, x.mT * y.mT)  # strided operands of one shape
    s = xd + yd
    monkeypatch.undo()
    s.add_(1)  # the result is a tensor of its own
    _close(xd, x)


@pytest.mark.parametrize("case", ["broadcast", "dtypes", "int", "alpha", "cpu_scalar", "pow"])
def test_pointwise_general_paths(monkeypatch, case):
    """Operands the fast path does not take reach torch's Meta checks, with torch's values."""
    metas = _counting(monkeypatch, math_ops, "meta_result")
    x, y = _randn(3, 4), _randn(3, 4, seed=1)
    op, kwargs = torch.add, {}
    if case == "broadcast":
        y = y[:1]
    elif case == "dtypes":
        y = y.float()
    elif case == "int":
        x, y = (x * 10).long(), (y * 10).long()
    elif case == "alpha":
        kwargs = {"alpha": 2}
    elif case == "pow":
        op, x = torch.pow, x.abs()
    xd = x.to(OCL)
    yd = torch.tensor(1.5, dtype=torch.float64) if case == "cpu_scalar" else y.to(OCL)
    y = yd if case == "cpu_scalar" else y
    _close(op(xd, yd, **kwargs), op(x, y, **kwargs))
    assert metas


def _bn_pair(dtype, affine=True, track=True, seed=20):
    """(CPU, opencl) BatchNorm2d(3) with the same random parameters and running statistics."""
    cpu = torch.nn.BatchNorm2d(3, affine=affine, track_running_stats=track, dtype=dtype)
    with torch.no_grad():
        for t in (*cpu.parameters(), *cpu.buffers()):
            if t.is_floating_point():
                t.copy_(_randn(*t.shape, seed=seed, dtype=dtype).abs() + 0.5)
    dev = torch.nn.BatchNorm2d(3, affine=affine, track_running_stats=track, dtype=dtype)
    dev.load_state_dict(cpu.state_dict())
    return cpu, dev.to(OCL)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mode", ["train", "eval", "channels_last", "no_affine", "no_running"])
def test_batch_norm_on_cltensor_kernels(monkeypatch, dtype, mode):
    """native_batch_norm and its backward on cltensor's batch-norm kernels: torch's output,
    saved statistics, running statistics and gradients."""
    kernels = [_counting(monkeypatch, nn, name) for nn, name in
               ((norm_ops.norm, "batch_norm_train"), (norm_ops.norm, "batch_norm_eval"),
                (norm_ops.norm, "batch_norm_backward"))]
    cpu, dev = _bn_pair(dtype, affine=mode != "no_affine", track=mode != "no_running")
    if mode == "eval":
        cpu.eval(), dev.eval()
    x = _randn(4, 3, 5, 6, seed=21, dtype=dtype).requires_grad_()
    xd = x.detach().to(OCL)
    if mode == "channels_last":
        xd = xd.contiguous(memory_format=torch.channels_last)
    xd.requires_grad_()
    g = _randn(4, 3, 5, 6, seed=22, dtype=dtype)
    y, yd = cpu(x), dev(xd)
    y.backward(g)
    yd.backward(g.to(OCL))
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else {}
    for got, want in ((yd, y), (xd.grad, x.grad), *zip(dev.parameters(), cpu.parameters()),
                      *((d.grad, c.grad) for d, c in zip(dev.parameters(), cpu.parameters())),
                      *zip(dev.buffers(), cpu.buffers())):
        if want.is_floating_point():
            _close(got, want, **tol)
    assert sum(map(len, kernels)) == 2  # one forward and one backward on the kernels


@pytest.mark.parametrize("views", ["strided", "offset"])
def test_batch_norm_general_paths(views):
    """Operands cltensor's kernels do not take (strided running statistics, vectors starting
    past their buffer's start, one value per channel in eval) keep the composed path, with
    torch's values."""
    x, wb = _randn(2, 3, 4, 4, seed=30), _randn(7, seed=31)
    stats = _randn(6, seed=33).abs() + 0.5
    w, b = (wb[:3], wb[3:6]) if views == "strided" else (wb[1:4], wb[4:])
    args = (x, w, b, stats[::2].clone(), stats[1::2].clone(), True, 0.1, 1e-5)
    dev_stats, dev_wb = stats.to(OCL), wb.to(OCL)
    if views == "strided":  # strided running statistics
        rm, rv, wd, bd = dev_stats[::2], dev_stats[1::2], dev_wb[:3], dev_wb[3:6]
    else:  # weight and bias past their buffer's start
        rm, rv, wd, bd = args[3].to(OCL), args[4].to(OCL), dev_wb[1:4], dev_wb[4:]
    want = aten.native_batch_norm(*args)  # updates args' running statistics
    got = aten.native_batch_norm(x.to(OCL), wd, bd, rm, rv, True, 0.1, 1e-5)
    for gd, wt in zip(got, want):
        _close(gd, wt)
    _close(rm, args[3]), _close(rv, args[4])
    g = _randn(2, 3, 4, 4, seed=35)
    mask = [True, True, True]
    want = aten.native_batch_norm_backward(g, x, w, args[3], args[4], want[1], want[2], True,
                                           1e-5, mask)
    got = aten.native_batch_norm_backward(g.to(OCL), x.to(OCL), wd, rm, rv, got[1], got[2],
                                          True, 1e-5, mask)
    for gd, wt in zip(got, want):
        _close(gd, wt, rtol=1e-5)
    x1 = _randn(1, 3, seed=34)
    want = aten.native_batch_norm(x1, w, b, stats[:3], stats[3:], False, 0.1, 1e-5)[0]
    got = aten.native_batch_norm(x1.to(OCL), w.to(OCL), b.to(OCL), stats[:3].to(OCL),
                                 stats[3:].to(OCL), False, 0.1, 1e-5)[0]
    _close(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_in_place_pointwise_of_alike_operands_skips_the_meta_pass(monkeypatch, dtype):
    """A dense self and float operands of its shape, dtype and device: written in place with no
    Meta pass, torch's values, self returned."""
    x, y = _randn(3, 4, dtype=dtype), _randn(3, 4, seed=1, dtype=dtype)
    xd, yd = x.to(OCL), y.to(OCL)
    metas = _counting(monkeypatch, math_ops, "meta_result")
    for name in ("add_", "sub_", "mul_", "maximum", "relu_", "exp_"):
        if name == "maximum":  # no in-place form in torch's API: its out= form writes xd
            torch.maximum(xd, yd, out=xd), torch.maximum(x, y, out=x)
            continue
        args = () if name in ("relu_", "exp_") else (yd,)
        assert getattr(xd, name)(*args) is xd
        getattr(x, name)(*((y,) if args else ()))
        _close(xd, x)
    xd.add_(xd)  # self as the other operand
    x.add_(x)
    _close(xd, x)
    assert len(metas) == 2  # only torch.maximum's out= form met the Meta checks


def test_in_place_general_paths():
    """A self that is not dense keeps the general path's checks: an expanded self raises the
    overlap error, a transposed one gets torch's values."""
    x, y = _randn(1, 4), _randn(3, 4, seed=1)
    with pytest.raises(RuntimeError, match="memory location"):
        x.to(OCL).expand(3, 4).add_(y.to(OCL))
    a, b = _randn(4, 3, seed=2), _randn(3, 4, seed=3)
    ad = a.to(OCL)
    ad.t().mul_(b.to(OCL))
    a.t().mul_(b)
    _close(ad, a)
