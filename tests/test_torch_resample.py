"""F.interpolate (nearest, nearest-exact, bilinear, bicubic; 1-d nearest, nearest-exact and
linear) and F.pad's reflect and replicate modes on the "opencl" device
(cltensor/torch/resample_ops.py), forward and backward, against CPU torch in float64, with
nothing run through the CPU fallback."""
import pytest

from test_torch_device import ct, ocl, torch  # noqa: F401
from torch.nn import functional as F  # noqa: E402

pytestmark = pytest.mark.usefixtures("ocl")


@pytest.fixture(autouse=True)
def no_fallback(monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")


def _check(fn, x):
    """fn's value and input gradient on opencl against CPU torch (float64)."""
    want_x = x.double().requires_grad_()
    got_x = want_x.detach().to("opencl").requires_grad_()
    want, got = fn(want_x), fn(got_x)
    g = torch.randn(want.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    want.backward(g)
    got.backward(g.to("opencl"))
    assert got.device.type == "opencl"
    torch.testing.assert_close(got.cpu(), want.detach(), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(got_x.grad.cpu(), want_x.grad, rtol=1e-10, atol=1e-12)


SIZES = [{"scale_factor": 2}, {"size": (7, 9)}, {"scale_factor": (1.5, 0.7)}, {"size": (3, 4)}]


@pytest.mark.parametrize("mode,align", [("nearest", None), ("nearest-exact", None),
                                        ("bilinear", False), ("bilinear", True),
                                        ("bicubic", False), ("bicubic", True)])
def test_interpolate(mode, align):
    x = torch.randn(2, 3, 5, 6, generator=torch.Generator().manual_seed(0))
    corners = {} if align is None else {"align_corners": align}
    for size in SIZES:
        _check(lambda t: F.interpolate(t, mode=mode, **size, **corners), x)
    _check(lambda t: F.interpolate(t.to(memory_format=torch.channels_last), scale_factor=1.7,
                                   mode=mode, recompute_scale_factor=True, **corners), x)


SIZES_1D = [{"scale_factor": 2}, {"size": 11}, {"scale_factor": 0.7}, {"size": 3},
            {"scale_factor": 1.7, "recompute_scale_factor": True}]


@pytest.mark.parametrize("mode,align", [("nearest", None), ("nearest-exact", None),
                                        ("linear", False), ("linear", True)])
def test_interpolate_1d(mode, align):
    """1-d signals (N, C, L), as the 2-d forms over a height of 1; scales given or not."""
    x = torch.randn(2, 3, 6, generator=torch.Generator().manual_seed(0))
    corners = {} if align is None else {"align_corners": align}
    for size in SIZES_1D:
        _check(lambda t: F.interpolate(t, mode=mode, **size, **corners), x)
    _check(lambda t: F.interpolate(t[:, :, ::2], scale_factor=3, mode=mode, **corners), x)


@pytest.mark.parametrize("name,args", [("upsample_nearest1d", ([9], 1.6)),
                                       ("_upsample_nearest_exact1d", ([9],)),
                                       ("upsample_linear1d", ([9], False, 1.6))])
def test_out_forms_1d(name, args):
    x = torch.randn(1, 2, 5, dtype=torch.float64)
    g = torch.randn(1, 2, 9, dtype=torch.float64)
    op, back = getattr(torch.ops.aten, name), getattr(torch.ops.aten, name + "_backward")
    out = torch.empty(0, dtype=torch.float64, device="opencl")
    assert op.out(x.to("opencl"), *args, out=out) is out
    torch.testing.assert_close(out.cpu(), op.default(x, *args), rtol=1e-10, atol=1e-12)
    grad_args = (args[0], [1, 2, 5], *args[1:])
    gx = torch.empty(0, dtype=torch.float64, device="opencl")
    assert back.grad_input(g.to("opencl"), *grad_args, grad_input=gx) is gx
    torch.testing.assert_close(gx.cpu(), back.default(g, *grad_args), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_modes(mode):
    x = torch.randn(2, 3, 5, 6, generator=torch.Generator().manual_seed(0))
    _check(lambda t: F.pad(t, (1, 2, 3, 1), mode=mode), x)
    _check(lambda t: F.pad(t[0], (2, 1), mode=mode), x)
    with pytest.raises(RuntimeError):
        F.pad(x.to("opencl"), (6, 6, 0, 0), mode="reflect")  # wider than the input


OUT_FORMS = [("upsample_nearest2d", ([7, 9],)), ("_upsample_nearest_exact2d", ([7, 9],)),
             ("upsample_bilinear2d", ([7, 9], True)), ("upsample_bicubic2d", ([7, 9], False))]


@pytest.mark.parametrize("name,args", OUT_FORMS, ids=[f[0] for f in OUT_FORMS])
def test_out_forms(name, args):
    """The out= overloads of the forward and backward write what the functional forms give."""
    x = torch.randn(1, 2, 5, 6, dtype=torch.float64)
    g = torch.randn(1, 2, 7, 9, dtype=torch.float64)
    op, back = getattr(torch.ops.aten, name), getattr(torch.ops.aten, name + "_backward")
    out = torch.full((1, 2, 7, 9), float("nan"), dtype=torch.float64, device="opencl")
    assert op.out(x.to("opencl"), *args, out=out) is out
    torch.testing.assert_close(out.cpu(), op.default(x, *args), rtol=1e-10, atol=1e-12)
    grad_args = (args[0], [1, 2, 5, 6], *args[1:])
    gx = torch.full((1, 2, 5, 6), float("nan"), dtype=torch.float64, device="opencl")
    assert back.grad_input(g.to("opencl"), *grad_args, grad_input=gx) is gx
    torch.testing.assert_close(gx.cpu(), back.default(g, *grad_args), rtol=1e-10, atol=1e-12)
    for pad, pads, t in [(p + d, pads, t) for p in ("reflection_pad", "replication_pad")
                         for d, pads, t in (("2d", [1, 2, 2, 1], x), ("1d", [2, 1], x[0]))]:
        pad_op, pad_back = getattr(torch.ops.aten, pad), getattr(torch.ops.aten, pad + "_backward")
        out = torch.empty(0, dtype=torch.float64, device="opencl")
        pad_op.out(t.to("opencl"), pads, out=out)
        torch.testing.assert_close(out.cpu(), pad_op.default(t, pads))
        gp = torch.randn(out.shape, dtype=torch.float64)
        gx = torch.empty(0, dtype=torch.float64, device="opencl")
        pad_back.grad_input(gp.to("opencl"), t.to("opencl"), pads, grad_input=gx)
        torch.testing.assert_close(gx.cpu(), pad_back.default(gp, t, pads))
