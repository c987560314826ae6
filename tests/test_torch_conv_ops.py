"""Transposed convolution, unfold/fold and trace on the "opencl" device (cltensor/torch/
conv_ops.py), values and gradients against CPU torch, with nothing run through the CPU
fallback."""

import pytest

from test_torch_device import ct, device_only, ocl, torch  # noqa: F401
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

pytestmark = pytest.mark.usefixtures("ocl", "device_only")
OCL = "opencl"
TOL = {torch.float64: 1e-10, torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}



def _close(got, want, dtype):
    """got (opencl) matches want (CPU) in dtype, shape and values, norm-relative."""
    assert got.device.type == OCL and got.dtype == want.dtype and got.shape == want.shape
    got, want = got.detach().cpu().double(), want.detach().double()
    err = (got - want).norm().item()
    assert err <= TOL[dtype] * max(want.norm().item(), 1.0), (err, want.norm().item())


def _check(fn, shapes, dtype, seed=0):
    """fn's value and its operands' gradients on opencl against CPU torch: 16-bit operands are
    compared with CPU torch's float32 run cast back."""
    gen = torch.Generator().manual_seed(seed)
    values = [torch.randn(s, generator=gen, dtype=torch.float64).to(dtype) for s in shapes]
    ref = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    want_in = [v.to(ref, copy=True).requires_grad_() for v in values]
    got_in = [v.to(OCL).requires_grad_() for v in values]
    want, got = fn(*want_in), fn(*got_in)
    g = torch.randn(want.shape, generator=gen, dtype=torch.float64).to(dtype)
    want.backward(g.to(ref))
    got.backward(g.to(OCL))
    _close(got, want.to(dtype), dtype)
    for a, b in zip(got_in, want_in):
        _close(a.grad, b.grad.to(dtype), dtype)


# (input, weight, bias shapes, conv_transpose2d's keyword arguments): odd sizes, stride > kernel,
# output_padding at its maximum, groups with dilation, an empty batch, an unbatched input
CASES_2D = [
    ([(2, 4, 5, 6), (4, 3, 3, 3), (3,)], dict(stride=2, padding=1, output_padding=1)),
    ([(2, 4, 5, 3), (4, 3, 2, 3), (6,)],
     dict(stride=(3, 2), padding=(1, 0), output_padding=(2, 1), groups=2, dilation=(1, 2))),
    ([(1, 6, 3, 4), (6, 1, 3, 2), None], dict(stride=(1, 2), groups=3, dilation=(2, 3),
                                              output_padding=(1, 2))),
    ([(2, 2, 3, 3), (2, 2, 2, 2), (2,)], dict(stride=4)),
    ([(0, 4, 3, 3), (4, 3, 3, 3), (3,)], dict(stride=2)),
    ([(4, 3, 5), (4, 3, 3, 3), (3,)], dict(stride=2, padding=1)),
]
CASES_1D = [
    ([(2, 4, 7), (4, 3, 3), (6,)], dict(stride=3, padding=1, output_padding=2, groups=2,
                                        dilation=2)),
    ([(4, 5), (4, 2, 2), None], dict(stride=3)),
    ([(0, 4, 5), (4, 2, 3), (2,)], dict(stride=2)),
]


def _with_bias(fn, shapes, kw):
    """fn(x, w, bias, **kw) over the operands `shapes` names (None: no bias)."""
    if shapes[2] is None:
        return (lambda x, w: fn(x, w, None, **kw)), shapes[:2]
    return (lambda x, w, b: fn(x, w, b, **kw)), shapes


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_conv_transpose(dtype, device):
    if dtype == torch.float64 and not device.has_fp64:
        pytest.skip(f"{device.name} has no float64")
    for fn, cases in ((F.conv_transpose2d, CASES_2D), (F.conv_transpose1d, CASES_1D)):
        for shapes, kw in cases:
            try:
                _check(*_with_bias(fn, shapes, kw), dtype)
            except AssertionError as e:
                raise AssertionError(f"{fn.__name__} {shapes} {kw}: {e}") from e


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_conv_transpose_16bit(dtype):
    """16-bit operands run on float32 copies; results and gradients come back in their dtype."""
    for fn, (shapes, kw) in ((F.conv_transpose2d, CASES_2D[1]), (F.conv_transpose1d, CASES_1D[0])):
        _check(*_with_bias(fn, shapes, kw), dtype)


@pytest.mark.parametrize("cls,size,shape", [(nn.ConvTranspose2d, (12, 9), (2, 4, 6, 5)),
                                            (nn.ConvTranspose1d, (12,), (2, 4, 6))])
def test_conv_transpose_output_size(cls, size, shape):
    """torch derives output_padding from output_size in Python, then calls convolution."""
    ref = cls(4, 3, 3, stride=2, padding=1).double()
    mod = cls(4, 3, 3, stride=2, padding=1).double().to(OCL)
    mod.load_state_dict(ref.state_dict())
    x = torch.randn(shape, dtype=torch.float64)
    _close(mod(x.to(OCL), output_size=size), ref(x, output_size=size), torch.float64)


def test_conv_transpose_bad_arguments():
    x, w = torch.randn(1, 4, 3, 3, device=OCL), torch.randn(4, 2, 3, 3, device=OCL)
    with pytest.raises(ValueError, match="output_padding .* must be smaller"):  # cltensor's check
        F.conv_transpose2d(x, w, stride=2, output_padding=2)
    with pytest.raises(ValueError, match="input has 3 channels"):
        F.conv_transpose2d(x[:, :3], w)
    with pytest.raises(ValueError, match="groups=3"):
        F.conv_transpose2d(x, w, groups=3)


def test_conv_transpose_plans_are_taken(monkeypatch):
    """The checks and parameters of a signature are made once, forward and backward."""
    from cltensor.torch import conv_ops

    def run():
        x = torch.randn(2, 4, 5, 6, device=OCL, requires_grad=True)
        w = torch.randn(4, 3, 3, 3, device=OCL, requires_grad=True)
        F.conv_transpose2d(x, w, stride=2, output_padding=1).sum().backward()
        return x, w

    run()

    def refuse(*args):
        raise AssertionError("the general path ran")
    monkeypatch.setattr(conv_ops, "meta_result", refuse)
    monkeypatch.setattr(conv_ops, "transposed_params", refuse)
    x, w = run()
    want_x, want_w = (t.detach().cpu().requires_grad_() for t in (x, w))
    F.conv_transpose2d(want_x, want_w, stride=2, output_padding=1).sum().backward()
    _close(x.grad, want_x.grad, torch.float32)
    _close(w.grad, want_w.grad, torch.float32)
    with pytest.raises(AssertionError, match="general path"):  # another signature
        F.conv_transpose2d(x, w, stride=2)


def generator():
    """A DCGAN-like generator at a tiny width: latent (N, 8, 1, 1) to a (N, 3, 8, 8) image."""
    return nn.Sequential(
        nn.ConvTranspose2d(8, 16, 2, bias=False), nn.BatchNorm2d(16), nn.ReLU(True),
        nn.ConvTranspose2d(16, 8, 4, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(True),
        nn.ConvTranspose2d(8, 3, 4, 2, 1), nn.Tanh())


def test_dcgan_generator_trains_like_cpu():
    torch.manual_seed(0)
    ref = generator()
    model = generator().to(OCL)
    model.load_state_dict(ref.state_dict())
    opts = [torch.optim.Adam(m.parameters(), lr=1e-2) for m in (ref, model)]
    gen = torch.Generator().manual_seed(1)
    for _ in range(3):
        z, target = torch.randn(4, 8, 1, 1, generator=gen), torch.rand(4, 3, 8, 8, generator=gen)
        losses = []
        for m, opt, dev in ((ref, opts[0], "cpu"), (model, opts[1], OCL)):
            opt.zero_grad()
            loss = F.mse_loss(m(z.to(dev)), target.to(dev))
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert abs(losses[1] - losses[0]) <= 1e-4 * abs(losses[0]), losses
    for (name, a), b in zip(model.state_dict().items(), ref.state_dict().values()):
        err = (a.cpu().double() - b.double()).norm().item()
        assert err <= 1e-4 * max(b.double().norm().item(), 1.0), (name, err)


# F.unfold's and F.fold's arguments (kernel_size, dilation, padding, stride; fold: output_size
# first) on inputs of these shapes: odd sizes, uneven pairs, stride > kernel, unbatched
UNFOLD = [((2, 3, 5, 7), ((2, 3), (1, 2), 1, (2, 1))), ((3, 5, 4), (2,)),
          ((1, 2, 6, 5), (2, 1, 0, 3)), ((0, 2, 4, 4), (2,))]
FOLD = [((2, 12, 10), ((5, 6), (2, 3), (2, 1), (1, 0), (1, 2))), ((8, 9), ((4, 4), 2)),
        ((1, 4, 2), ((5, 4), 2, 1, 0, 3)), ((0, 8, 9), ((4, 4), 2))]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_unfold_fold(dtype, device):
    if dtype == torch.float64 and not device.has_fp64:
        pytest.skip(f"{device.name} has no float64")
    for shape, args in UNFOLD:
        _check(lambda x, a=args: F.unfold(x, *a), [shape], dtype)
    for shape, args in FOLD:
        _check(lambda x, a=args: F.fold(x, *a), [shape], dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.bool])
def test_unfold_fold_other_dtypes(dtype):
    """16-bit floats and bool go through float32 copies (exact) and come back in their dtype."""
    x = torch.randn(2, 2, 5, 4, generator=torch.Generator().manual_seed(0))
    x = x > 0 if dtype == torch.bool else x.to(dtype)
    cols = F.unfold(x, 2, padding=1)
    got = F.unfold(x.to(OCL), 2, padding=1)
    assert got.dtype == dtype and torch.equal(got.cpu(), cols)
    want = F.fold(cols, (5, 4), 2, padding=1)
    got = F.fold(cols.to(OCL), (5, 4), 2, padding=1)
    assert got.dtype == dtype and torch.equal(got.cpu(), want)


def test_unfold_fold_out_forms_and_bad_input():
    x = torch.randn(1, 2, 5, 4, dtype=torch.float64)
    out = torch.full((1, 8, 30), float("nan"), dtype=torch.float64, device=OCL)
    args = ([2, 2], [1, 1], [1, 1], [1, 1])
    assert torch.ops.aten.im2col.out(x.to(OCL), *args, out=out) is out
    _close(out, torch.ops.aten.im2col(x, *args), torch.float64)
    cols = torch.ops.aten.im2col(x, *args)
    out = torch.empty(0, dtype=torch.float64, device=OCL)
    assert torch.ops.aten.col2im.out(cols.to(OCL), [5, 4], *args, out=out) is out
    _close(out, torch.ops.aten.col2im(cols, [5, 4], *args), torch.float64)
    with pytest.raises(RuntimeError, match="sliding blocks"):
        F.unfold(x.to(OCL), 7)  # larger than the padded input
    with pytest.raises(RuntimeError, match="divisible by the product of kernel_size"):
        F.fold(torch.ones(1, 5, 9, device=OCL), 4, 2)
    with pytest.raises(NotImplementedError, match="int64"):
        F.unfold(torch.ones(1, 1, 3, 3, dtype=torch.int64, device=OCL), 2)


@pytest.mark.parametrize("shape,dim,size,step", [((4, 7, 2), 1, 3, 1), ((4, 8), -1, 2, 3),
                                                 ((5,), 0, 2, 2), ((), 0, 1, 1),
                                                 ((3, 6), 0, 2, 1)])
def test_tensor_unfold_and_its_gradient(shape, dim, size, step):
    """Tensor.unfold is a view of the device tensor; its gradient adds overlapping windows."""
    _check(lambda x: x.unfold(dim, size, step) * 2, [shape], torch.float64)
    got, want = torch.zeros(shape, device=OCL), torch.zeros(shape)
    for t in (got, want):
        t.unfold(dim, size, step).fill_(1.0)  # writes through the view
    assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16,
                                   torch.int64, torch.int32])
def test_trace(dtype):
    """torch.trace of wide, tall and strided matrices (integers summed into int64), and its
    gradient (trace_backward's index_fill_ of the diagonal) on the device."""
    x = (torch.randn(4, 5, generator=torch.Generator().manual_seed(0)) * 4).to(dtype)
    # CPU torch before 2.13 has no 16-bit trace: the reference sums in float32, cast back
    half = dtype in (torch.float16, torch.bfloat16)
    for view in (lambda t: t, lambda t: t.t(), lambda t: t[1:, ::2]):
        want = torch.trace(view(x).float()).to(dtype) if half else torch.trace(view(x))
        got = torch.trace(view(x.to(OCL)))
        assert got.device.type == OCL and got.dtype == want.dtype and got.shape == ()
        if dtype.is_floating_point:
            _close(got, want, dtype)
        else:
            assert got.item() == want.item()
    if dtype.is_floating_point:
        _check(lambda m: torch.trace(m) * 3, [(3, 4)], dtype)


def test_trace_and_index_fill_bad_input():
    with pytest.raises(RuntimeError, match="Bool"):
        torch.trace(torch.ones(2, 2, dtype=torch.bool, device=OCL))
    with pytest.raises(RuntimeError, match="matrix"):
        torch.trace(torch.ones(2, 2, 2, device=OCL))
    x = torch.zeros(3, 4, device=OCL)
    with pytest.raises(RuntimeError, match="0-dimensional value"):
        x.index_fill_(1, torch.tensor([0, 2], device=OCL), torch.ones(2, device=OCL))
    x.index_fill_(1, torch.tensor([0, -1], device=OCL), torch.tensor(2.5))  # a CPU 0-d value
    want = torch.zeros(3, 4).index_fill_(1, torch.tensor([0, -1]), 2.5)
    assert torch.equal(x.cpu(), want)
