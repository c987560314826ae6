"""nn.GroupNorm / F.group_norm on "opencl" (native_group_norm and its backward) against CPU
torch: 3-, 4- and 5-d inputs, one group to one per channel, with and without the affine
parameters, channels_last, an empty batch, the 16-bit dtypes computed in float32, and torch's
errors."""
import numpy as np
import pytest

# torch (skipping when it is missing or too old) and the fixtures making `device` opencl:0
from test_torch_device import device_only, ocl, torch  # noqa: F401

pytestmark = pytest.mark.usefixtures("ocl", "device_only")
OCL = "opencl"
F = torch.nn.functional
TOL = {torch.float64: 1e-10, torch.float32: 2e-5, torch.float16: 1e-2, torch.bfloat16: 6e-2}


@pytest.fixture(autouse=True)
def _no_fallback(monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")


def _close(got, want, dtype):
    assert got.device.type == OCL and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.detach().cpu().double().numpy(),
                               want.detach().double().numpy(), rtol=TOL[dtype], atol=TOL[dtype])


# (input shape, groups, affine, channels_last)
CASES = [((2, 6, 5, 4), 3, True, False), ((3, 4, 7), 1, False, False),
         ((2, 4, 3, 3), 4, True, True), ((1, 8, 2, 3, 2), 2, True, False),
         ((0, 4, 3, 3), 2, True, False)]


@pytest.mark.parametrize("dtype", list(TOL))
def test_group_norm_matches_cpu(dtype):
    """Output, and the input, weight and bias gradients (16-bit against CPU torch in float32,
    cast back)."""
    ref = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    for shape, groups, affine, channels_last in CASES:
        gen = torch.Generator().manual_seed(len(shape) * groups)
        x = (torch.randn(shape, generator=gen, dtype=torch.float64) * 3 + 1).to(dtype)
        g = torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        outs = []
        for dev, dt in ((OCL, dtype), ("cpu", ref)):
            m = torch.nn.GroupNorm(groups, shape[1], affine=affine, eps=1e-4).to(dt)
            if affine:
                with torch.no_grad():
                    m.weight.copy_(torch.linspace(0.5, 2.0, shape[1]))
                    m.bias.copy_(torch.linspace(-1.0, 1.0, shape[1]))
            m = m.to(dev)
            xi = x.to(dev, dt).requires_grad_()
            y = m(xi)
            y.backward(g.to(dev, dt))
            grads = [xi.grad] + ([m.weight.grad, m.bias.grad] if affine else [])
            outs.append([y] + grads)
        for got, want in zip(*outs):
            _close(got, want.to(got.dtype) if got.dtype != want.dtype else want, dtype)


def test_group_norm_saved_statistics_and_errors():
    x = torch.randn(2, 6, 4, generator=torch.Generator().manual_seed(1))
    got = torch.ops.aten.native_group_norm(x.to(OCL), None, None, 2, 6, 4, 3, 1e-5)
    want = torch.ops.aten.native_group_norm(x, None, None, 2, 6, 4, 3, 1e-5)
    for a, b in zip(got, want):
        _close(a, b, torch.float32)
    with pytest.raises(RuntimeError, match="divisible|groups"):
        F.group_norm(x.to(OCL), 4)
    with pytest.raises(RuntimeError, match="weight|shape|size"):
        F.group_norm(x.to(OCL), 3, torch.ones(5, device=OCL))
