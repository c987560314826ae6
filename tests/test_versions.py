"""Every write to a tensor's buffer bumps its storage's version: weight-transform caches make
their transform again, and autograd refuses a backward through a saved tensor changed since."""
import numpy as np
import pytest

import cltensor as ct
from cltensor.conv import conv2d
from cltensor.testing import random_array

INPLACE_ERROR = "modified by an inplace operation"


def T(a, device):
    return ct.from_numpy(np.ascontiguousarray(a), device=device)


@pytest.mark.parametrize("algo, k, stride", [("winograd", 3, 1), ("winograd_4x4", 3, 1),
                                              ("implicit_gemm", 3, 1), ("s2d_winograd", 3, 2),
                                              ("gemm_1x1", 1, 1), ("im2col", 3, 1)])
def test_conv_weight_written_through_out(device, rng, algo, k, stride):
    x = T(random_array(rng, (1, 2, 8, 8)), device)
    w = T(random_array(rng, (2, 2, k, k)), device)
    for _ in range(3):  # caches the filter transform and records the launches
        conv2d(x, w, stride=stride, padding=k // 2, algo=algo)
    ct.mul(w, 0.0, out=w)
    got = conv2d(x, w, stride=stride, padding=k // 2, algo=algo)
    np.testing.assert_array_equal(got.numpy(), 0.0)


# each writes zeros into all of w
WRITES = {
    "out=": lambda w: ct.mul(w, 0.0, out=w),
    "copy_": lambda w: w.copy_(ct.zeros(w.shape, device=w.device)),
    "copy_scalar": lambda w: w.copy_(0.0),
    "fill_": lambda w: w.fill_(0.0),
    "zero_": lambda w: w.zero_(),
    "setitem": lambda w: w.__setitem__(slice(None), 0.0),
    "setitem_mask": lambda w: w.__setitem__(w == w, 0.0),
    "mul_": lambda w: w.mul_(0.0),
    "view_out=": lambda w: ct.mul(w.view(-1), 0.0, out=w.view(-1)),
}


@pytest.mark.parametrize("write", list(WRITES))
def test_every_write_bumps_the_version(device, write):
    w = ct.ones(2, 3, device=device)
    before = w.storage.version
    WRITES[write](w)
    assert w.storage.version > before
    np.testing.assert_array_equal(w.numpy(), 0.0)


def test_matmul_out_bumps_the_version(device, rng):
    a = T(random_array(rng, (2, 2)), device)
    out = ct.zeros(2, 2, device=device)
    before = out.storage.version
    ct.matmul(a, a, out=out)
    assert out.storage.version > before


def test_refused_out_keeps_its_version(device):
    out = ct.ones(3, dtype=ct.int32, device=device)
    before = out.storage.version
    with pytest.raises(TypeError, match="can't be cast"):
        ct.mul(out, 1.5, out=out)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        ct.add(out, ct.ones(4, dtype=ct.int32, device=device), out=out)
    assert out.storage.version == before


def test_autograd_sees_a_write_through_out(device):
    w = ct.ones(3, device=device, requires_grad=True)
    y = w.exp()  # exp's backward uses its result y
    with ct.no_grad():
        ct.mul(y, 10.0, out=y)
    with pytest.raises(RuntimeError, match=INPLACE_ERROR):
        y.sum().backward()


def test_autograd_sees_copy_into_a_saved_input(device):
    w = ct.ones(3, device=device, requires_grad=True)
    x = ct.full((3,), 2.0, device=device)
    y = (w * x).sum()  # mul's backward uses x
    x.copy_(ct.zeros(3, device=device))
    with pytest.raises(RuntimeError, match=INPLACE_ERROR):
        y.backward()


def test_autograd_unchanged_saved_tensor_still_works(device):
    w = ct.ones(3, device=device, requires_grad=True)
    x = ct.full((3,), 2.0, device=device)
    z = ct.zeros(3, device=device)
    y = (w * x).sum()
    ct.mul(z, 3.0, out=z)  # another tensor: no effect on y's graph
    y.backward()
    np.testing.assert_array_equal(w.grad.numpy(), 2.0)


OPTIMIZERS = {
    "SGD": (dict(lr=0.1), []),
    "SGD_momentum": (dict(lr=0.1, momentum=0.9), ["momentum_buffer"]),
    "Adam": (dict(lr=0.1, amsgrad=True), ["exp_avg", "exp_avg_sq", "max_exp_avg_sq"]),
    "RMSprop": (dict(lr=0.1, centered=True, momentum=0.5),
                ["square_avg", "grad_avg", "momentum_buffer"]),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_step_bumps_the_versions(device, rng, name):
    kwargs, buffers = OPTIMIZERS[name]
    w = T(random_array(rng, (3,)), device).requires_grad_(True)
    w.grad = ct.ones(3, device=device)
    opt = getattr(ct.optim, name.split("_")[0])([w], **kwargs)
    opt.step()  # makes the state
    state = opt.state[w]
    before = [w.storage.version] + [state[b].storage.version for b in buffers]
    opt.step()
    after = [w.storage.version] + [state[b].storage.version for b in buffers]
    assert all(a > b for a, b in zip(after, before)), (before, after)


def test_load_state_dict_refreshes_conv_transform(device, rng):
    conv = ct.nn.Conv2d(2, 2, 3, padding=1, bias=False).to(device)
    x = T(random_array(rng, (1, 2, 6, 6)), device)
    with ct.no_grad():
        conv2d(x, conv.weight, padding=1, algo="winograd")
        conv.load_state_dict({"weight": ct.zeros(2, 2, 3, 3, device=device)})
        y = conv2d(x, conv.weight, padding=1, algo="winograd")
    np.testing.assert_array_equal(y.numpy(), 0.0)


# each: (forward from x and an index or mask tensor, an in-place change of that tensor)
INDEX_USES = {
    "gather": (lambda x, i: x.gather(0, i), lambda i: i.fill_(0)),
    "index_select": (lambda x, i: x.index_select(0, i), lambda i: i.fill_(0)),
    "scatter_add": (lambda x, i: x.scatter_add(0, i, x[:2] * 1), lambda i: i.fill_(0)),
    "advanced_index": (lambda x, i: x[i], lambda i: i.fill_(0)),
    "masked_fill": (lambda x, m: x.masked_fill(m, 0.0), lambda m: m.fill_(False)),
    "masked_select": (lambda x, m: x.masked_select(m), lambda m: m.fill_(False)),
}


@pytest.mark.parametrize("use", list(INDEX_USES))
def test_autograd_sees_a_changed_index(device, use):
    forward, change = INDEX_USES[use]
    x = ct.arange(1.0, 4.0, device=device).requires_grad_(True)
    idx = ct.tensor([2, 1], device=device) if "mask" not in use else \
        ct.tensor([True, False, True], device=device)
    y = forward(x, idx).sum()
    change(idx)
    with pytest.raises(RuntimeError, match=INPLACE_ERROR):
        y.backward()


@pytest.mark.parametrize("use", list(INDEX_USES))
def test_autograd_unchanged_index_still_works(device, use):
    torch = pytest.importorskip("torch")
    forward, _ = INDEX_USES[use]
    x = ct.arange(1.0, 4.0, device=device).requires_grad_(True)
    tx = torch.arange(1.0, 4.0, dtype=torch.float64).requires_grad_(True)
    mask = "mask" in use
    idx, tidx = (ct.tensor([True, False, True], device=device), torch.tensor([True, False, True])) \
        if mask else (ct.tensor([2, 1], device=device), torch.tensor([2, 1]))
    forward(x, idx).sum().backward()
    forward(tx, tidx).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
