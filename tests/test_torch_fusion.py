"""A convolution followed by relu on the "opencl" device: one launch with the ReLU fused into
the convolution (lazy_relu.py), torch's values in every case, including programs that keep the
pre-ReLU output, read part of it, or write the convolution's operands in between; and max
pooling's int64 indices, made only when something other than its backward reads them."""
import numpy as np
import pytest

import cltensor

# torch (skipping when it is missing or too old) and the fixture making `device` opencl:0
from test_torch_device import ct, ocl, torch  # noqa: F401

pytestmark = pytest.mark.usefixtures("ocl")
OCL = "opencl"
F = torch.nn.functional


def _operands(seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(2, 3, 6, 6, generator=g), torch.randn(4, 3, 3, 3, generator=g),
            torch.randn(4, generator=g))


def _close(got, want):
    assert got.device.type == "opencl"
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=1e-5,
                               atol=1e-5)


def _elementwise_launches(fn):
    """fn's result and how many elementwise kernels it launched."""
    with cltensor.profile() as prof:
        out = fn()
        torch.opencl.synchronize()
    return out, sum(calls for name, calls, *_ in prof.table() if name.startswith("ew_"))


def test_conv_relu_is_one_launch_with_torch_values_and_gradients():
    x, w, b = _operands()
    xd, wd, bd = (t.to(OCL).requires_grad_() for t in (x, w, b))
    x.requires_grad_(), w.requires_grad_(), b.requires_grad_()
    got, launches = _elementwise_launches(lambda: F.relu(F.conv2d(xd, wd, bd, padding=1)))
    assert launches == 0  # the ReLU ran in the convolution's epilogue
    want = F.relu(F.conv2d(x, w, b, padding=1))
    _close(got, want)
    got.square().sum().backward()
    want.square().sum().backward()
    for d, c in ((xd, x), (wd, w), (bd, b)):
        _close(d.grad, c.grad)


def test_inplace_relu_fuses_into_the_output():
    x, w, b = _operands(1)
    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(inplace=True))
    dev = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(inplace=True)).to(OCL)
    dev.load_state_dict(conv.state_dict())
    got, launches = _elementwise_launches(lambda: dev(x.to(OCL)))
    assert launches == 0
    _close(got, conv(x))


def test_kept_pre_relu_output_keeps_its_values():
    x, w, b = _operands(2)
    y = F.conv2d(x.to(OCL), w.to(OCL), b.to(OCL))
    z = F.relu(y)
    assert (y.cpu() < 0).any()  # read after the fused ReLU: the plain convolution
    want = F.conv2d(x, w, b)
    _close(y, want)
    _close(z, F.relu(want))
    _close(z - y, F.relu(want) - want)


def test_kept_output_survives_a_write_to_the_weight():
    x, w, b = _operands(3)
    wd = w.to(OCL)
    y = F.conv2d(x.to(OCL), wd, b.to(OCL))
    z = F.relu(y)
    wd.mul_(-1)  # the next kernel: y is computed before it writes the weight
    _close(y, F.conv2d(x, w, b))
    _close(z, F.relu(F.conv2d(x, w, b)))


def test_writes_and_partial_reads_before_the_relu():
    x, w, b = _operands(4)
    xd = x.to(OCL)
    y = F.conv2d(xd, w.to(OCL), b.to(OCL))
    xd.add_(1)  # a write to the input runs after the convolution
    _close(F.relu(y), F.relu(F.conv2d(x, w, b)))
    y2 = F.conv2d(xd, w.to(OCL), b.to(OCL))
    part = F.relu(y2[:, 1:])  # relu of a part: the convolution runs unfused first
    want = F.conv2d(x + 1, w, b)
    _close(part, F.relu(want[:, 1:]))
    _close(y2, want)
    y3 = F.conv2d(xd, w.to(OCL), b.to(OCL))
    _close(torch.relu_(y3), F.relu(want))
    _close(y3, F.relu(want))


def _index_launches(fn):
    """fn's result and its launches of the kernels that turn max pooling's argmax taps into
    torch's int64 indices and back."""
    with cltensor.profile() as prof:
        out = fn()
        torch.opencl.synchronize()
    return out, sum(calls for name, calls, *_ in prof.table()
                    if name in ("max_pool2d_indices", "max_pool2d_taps"))


@pytest.mark.parametrize("read_first", [False, True])
def test_max_pool_indices_made_only_when_read(read_first):
    """max_pool2d's int64 indices wait in the kernel's argmax taps: the backward reads those, so
    a training step makes no indices; a read (or a write) of the indices makes them first, and
    the backward then turns the indices it is given back into taps. torch's values either way."""
    x = _operands(5)[0].requires_grad_()
    xd = x.detach().to(OCL).contiguous(memory_format=torch.channels_last).requires_grad_()
    (yd, idx_d), launches = _index_launches(
        lambda: F.max_pool2d(xd, 3, 2, 1, return_indices=True))
    assert launches == 0  # no indices made
    y, idx = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    if read_first:
        assert torch.equal(idx_d.cpu(), idx)
    _, launches = _index_launches(lambda: yd.square().sum().backward())
    assert launches == (1 if read_first else 0)  # taps from the indices, or the forward's own
    y.square().sum().backward()
    _close(xd.grad, x.grad)
    assert torch.equal(idx_d.cpu(), idx) and idx_d.dtype == torch.int64
    _, idx_d = F.max_pool2d(xd.detach(), 2, return_indices=True)
    idx_d.add_(1)  # a write makes the indices first, then adds
    assert torch.equal(idx_d.cpu(), F.max_pool2d(x.detach(), 2, return_indices=True)[1] + 1)
