"""Volumes on the "opencl" device (cltensor/torch/volume_ops.py): F.avg_pool3d (and
F.local_response_norm through it), F.max_pool3d with its indices, F.interpolate's trilinear
mode and F.max_unpool2d / F.max_unpool3d, forward and backward against CPU torch, with nothing
run through the CPU fallback."""
import pytest

# torch (skipping when it is missing or too old) and the fixtures making `device` opencl:0
from test_torch_device import ct, device_only, ocl, torch  # noqa: F401
from torch.nn import functional as F  # noqa: E402

pytestmark = pytest.mark.usefixtures("ocl", "device_only")
OCL = "opencl"
TOL = {torch.float64: (1e-12, 1e-12), torch.float32: (1e-5, 1e-6), torch.float16: (2e-3, 2e-3),
       torch.bfloat16: (1e-2, 1e-2)}


@pytest.fixture(autouse=True)
def no_fallback(monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")


def _data(shape, dtype=torch.float64, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _check(fn, x, dtype=torch.float64, grad=True):
    """fn(x)'s values (and integer extras exactly), and x's gradient, on opencl against CPU
    torch."""
    want_x = x.detach().to(dtype).clone().requires_grad_(grad)
    got_x = want_x.detach().to(OCL).requires_grad_(grad)
    want, got = fn(want_x), fn(got_x)
    if isinstance(want, tuple):
        for w, g in zip(want[1:], got[1:]):
            assert g.device.type == OCL and torch.equal(g.cpu(), w)
        want, got = want[0], got[0]
    rtol, atol = TOL[dtype]
    assert got.device.type == OCL and got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want.detach(), rtol=rtol, atol=atol)
    if grad:
        g = _data(want.shape, dtype, seed=1)
        want.backward(g)
        got.backward(g.to(OCL))
        torch.testing.assert_close(got_x.grad.cpu(), want_x.grad, rtol=rtol, atol=atol)


# (kernel, stride, padding, ceil_mode): odd sizes, uneven windows, ceil_mode's clipped windows
WINDOWS = [(2, None, 0, False), (3, 2, 1, False), ((3, 2, 3), (2, 1, 2), (1, 1, 0), True),
           ((1, 3, 2), (1, 2, 3), (0, 1, 1), True)]


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("include_pad", [True, False])
def test_avg_pool3d(window, include_pad):
    k, s, p, ceil = window
    _check(lambda x: F.avg_pool3d(x, k, s, p, ceil, include_pad), _data((2, 3, 5, 6, 7)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_avg_pool3d_divisor_unbatched_and_dtypes(dtype):
    _check(lambda x: F.avg_pool3d(x, (3, 2, 3), (2, 1, 2), (1, 1, 0), True,
                                  divisor_override=5), _data((2, 3, 5, 6, 7)), dtype)
    _check(lambda x: F.avg_pool3d(x, 2, 1), _data((3, 4, 5, 3)), dtype)  # (C, D, H, W)


def test_avg_pool3d_out_and_empty_batch():
    x = _data((2, 3, 5, 6, 7))
    out = torch.full((2, 3, 3, 3, 4), float("nan"), dtype=torch.float64, device=OCL)
    torch.ops.aten.avg_pool3d.out(x.to(OCL), [3, 3, 3], [2, 2, 2], [1, 1, 1], out=out)
    torch.testing.assert_close(out.cpu(), F.avg_pool3d(x, 3, 2, 1), rtol=1e-12, atol=1e-12)
    _check(lambda x: F.avg_pool3d(x, 2), _data((0, 3, 4, 4, 4)))


def test_local_response_norm_runs_avg_pool3d():
    _check(lambda x: F.local_response_norm(x, 3), _data((2, 5, 4, 3)))
    _check(lambda x: F.local_response_norm(x, 2, k=2.0), _data((2, 4, 3, 2, 3)), torch.float32)


# (kernel, stride, padding, dilation, ceil_mode)
MAX_WINDOWS = [(2, None, 0, 1, False), (3, 2, 1, 1, False),
               ((3, 2, 2), (2, 1, 2), (1, 0, 1), (1, 2, 1), True),
               ((2, 3, 1), (1, 2, 1), (0, 1, 0), (2, 1, 1), True)]


@pytest.mark.parametrize("window", MAX_WINDOWS)
def test_max_pool3d_values_indices_and_gradient(window):
    k, s, p, d, ceil = window
    _check(lambda x: F.max_pool3d(x, k, s, p, d, ceil, return_indices=True),
           _data((2, 3, 5, 6, 7)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_max_pool3d_ties_unbatched_and_overlap(dtype):
    """Ties (integer-valued data) pick torch's first maximum; overlapping windows sum the
    gradients of a shared maximum."""
    ties = torch.randint(0, 3, (2, 2, 5, 5, 6), generator=torch.Generator().manual_seed(2))
    _check(lambda x: F.max_pool3d(x, 3, 1, 1, return_indices=True), ties, dtype)
    _check(lambda x: F.max_pool3d(x, 2, 1, return_indices=True), _data((3, 4, 5, 3)), dtype)


def test_max_pool3d_out_forms_and_empty_batch():
    x = _data((2, 3, 5, 6, 7))
    want, want_i = torch.ops.aten.max_pool3d_with_indices(x, [3, 3, 3], [2, 2, 2], [1, 1, 1])
    out = torch.full(want.shape, float("nan"), dtype=torch.float64, device=OCL)
    idx = torch.full(want.shape, -1, dtype=torch.int64, device=OCL)
    torch.ops.aten.max_pool3d_with_indices.out(x.to(OCL), [3, 3, 3], [2, 2, 2], [1, 1, 1],
                                               out=out, indices=idx)
    assert torch.equal(out.cpu(), want) and torch.equal(idx.cpu(), want_i)
    g = _data(want.shape, seed=3)
    gx = torch.full(x.shape, float("nan"), dtype=torch.float64, device=OCL)
    args = ([3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1], False)
    torch.ops.aten.max_pool3d_with_indices_backward.grad_input(
        g.to(OCL), x.to(OCL), *args, idx, grad_input=gx)
    torch.testing.assert_close(gx.cpu(), torch.ops.aten.max_pool3d_with_indices_backward(
        g, x, *args, want_i), rtol=0, atol=1e-15)
    _check(lambda x: F.max_pool3d(x, 2, return_indices=True), _data((0, 3, 4, 4, 4)))


def test_pool3d_errors_are_torchs():
    x = _data((1, 2, 4, 4, 4)).to(OCL)
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        F.avg_pool3d(x, 2, 1, 2)
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        F.max_pool3d(x, 2, 1, 2)
    with pytest.raises(RuntimeError):
        F.max_pool3d(_data((4, 4)).to(OCL), 2)


# (size or scale_factor, align_corners)
TRILINEAR = [({"size": (4, 9, 3)}, False), ({"size": (4, 9, 3)}, True),
             ({"size": (1, 1, 7)}, True), ({"scale_factor": (1.7, 0.6, 2.3)}, False),
             ({"scale_factor": 2.0}, True)]


@pytest.mark.parametrize("how, corners", TRILINEAR)
def test_trilinear(how, corners):
    _check(lambda x: F.interpolate(x, mode="trilinear", align_corners=corners, **how),
           _data((2, 3, 5, 6, 7)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_trilinear_dtypes_and_out(dtype):
    _check(lambda x: F.interpolate(x, size=(3, 8, 5), mode="trilinear"), _data((2, 2, 4, 5, 3)),
           dtype)
    x = _data((1, 2, 3, 4, 5), dtype)
    out = torch.full((1, 2, 5, 3, 7), float("nan"), dtype=dtype, device=OCL)
    torch.ops.aten.upsample_trilinear3d.out(x.to(OCL), [5, 3, 7], False, out=out)
    want = torch.ops.aten.upsample_trilinear3d(x, [5, 3, 7], False)
    torch.testing.assert_close(out.cpu(), want, rtol=TOL[dtype][0], atol=TOL[dtype][1])
    g = _data(want.shape, dtype, seed=4)
    gx = torch.full(x.shape, float("nan"), dtype=dtype, device=OCL)
    torch.ops.aten.upsample_trilinear3d_backward.grad_input(
        g.to(OCL), [5, 3, 7], [1, 2, 3, 4, 5], False, grad_input=gx)
    torch.testing.assert_close(gx.cpu(), torch.ops.aten.upsample_trilinear3d_backward(
        g, [5, 3, 7], [1, 2, 3, 4, 5], False), rtol=TOL[dtype][0], atol=TOL[dtype][1])


def test_max_unpool2d_and_3d():
    y, i = F.max_pool2d(_data((2, 3, 7, 8)), 2, return_indices=True)
    _check(lambda v: F.max_unpool2d(v, i.to(v.device), 2, output_size=(7, 8)), y)
    _check(lambda v: F.max_unpool2d(v, i[0].to(v.device), 2), y[0], torch.float32)
    y, i = F.max_pool3d(_data((2, 3, 5, 6, 7)), 2, return_indices=True)
    _check(lambda v: F.max_unpool3d(v, i.to(v.device), 2, output_size=(5, 6, 7)), y)
    _check(lambda v: F.max_unpool3d(v, i.to(v.device), (2, 3, 2), (2, 3, 2)), y,
           torch.float32)


def test_max_unpool_out_and_bad_index():
    y, i = F.max_pool2d(_data((2, 3, 6, 6)), 2, return_indices=True)
    out = torch.full((2, 3, 6, 6), float("nan"), dtype=torch.float64, device=OCL)
    torch.ops.aten.max_unpool2d.out(y.to(OCL), i.to(OCL), [6, 6], out=out)
    assert torch.equal(out.cpu(), torch.ops.aten.max_unpool2d(y, i, [6, 6]))
    bad = i.clone()
    bad[1, 2, 0, 1] = 36
    with pytest.raises(RuntimeError, match="Found an invalid max index: 36"):
        F.max_unpool2d(y.to(OCL), bad.to(OCL), 2)
    with pytest.raises(RuntimeError):
        F.max_unpool2d(y.to(OCL), i[:, :, :2].to(OCL), 2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_volumes(dtype):
    """max_pool3d and trilinear in 16 bits (computed in float32), where CPU torch has them."""
    x = _data((2, 3, 5, 4, 6))
    _check(lambda v: F.max_pool3d(v, 3, 2, 1, return_indices=True), x, dtype)
    _check(lambda v: F.interpolate(v, size=(3, 7, 4), mode="trilinear", align_corners=True), x,
           dtype, grad=False)


def test_max_pool3d_nan_wins_as_torchs():
    x = _data((2, 2, 5, 5, 6))
    x[0, 0, 1, 2, 3] = x[0, 0, 1, 2, 4] = x[1, 1, 2, 2, 2] = float("nan")
    want, want_i = F.max_pool3d(x, 3, 2, 1, return_indices=True)
    got, got_i = F.max_pool3d(x.to(OCL), 3, 2, 1, return_indices=True)
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, rtol=0, atol=0)
    assert torch.equal(got_i.cpu(), want_i)
