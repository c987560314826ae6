"""Bad input answered with a clear error, and NaN/Inf propagated as torch does: the rows of
docs/errors.md that no area's own test file covers."""
import gc
import math

import numpy as np
import pytest

import cltensor as ct
import cltensor.nn.functional as F
from cltensor.conv import conv2d
from cltensor.ops import gemm as gemm_ops
from cltensor.testing import random_array


def T(a, device):
    return ct.from_numpy(np.ascontiguousarray(a), device=device)


# ---- mixed devices ---------------------------------------------------------------------------

_TWINS = {}


def _twin(device):
    """The same hardware in another context: tensors on it cannot meet the device's tensors.
    One per device: compiled programs are cached by device index, so a second Device with the
    same index would be handed the first one's kernels (another context)."""
    if device.index not in _TWINS:
        _TWINS[device.index] = ct.Device(device.index + "-errors-twin", device.cl_device)
    return _TWINS[device.index]


def test_mixed_devices_in_layers_and_losses(device, rng):
    twin = _twin(device)
    x = T(random_array(rng, (2, 3, 5, 5)), device)
    x2 = T(random_array(rng, (2, 3)), device)
    on_twin = lambda *shape: T(random_array(rng, shape), twin)
    bad = [
        ("conv2d", lambda: conv2d(x, on_twin(4, 3, 3, 3))),
        ("conv2d", lambda: conv2d(x, ct.ones(4, 3, 3, 3, device=device), on_twin(4))),
        ("matmul", lambda: F.linear(x2, on_twin(4, 3))),
        ("batch_norm", lambda: F.batch_norm(x, ct.zeros(3, device=twin), ct.ones(3, device=twin),
                                            training=True)),
        ("cross_entropy", lambda: F.cross_entropy(x2, ct.tensor([0, 1], device=twin))),
        ("mse_loss", lambda: F.mse_loss(x2, on_twin(2, 3))),
        ("embedding", lambda: F.embedding(ct.tensor([0, 1], device=twin),
                                          T(random_array(rng, (4, 3)), device))),
    ]
    for op, fn in bad:
        with pytest.raises(RuntimeError, match=f"{op}: expected all tensors on the same device"):
            fn()


@pytest.mark.parametrize("make", [lambda p: ct.optim.SGD(p, lr=0.1, momentum=0.9),
                                  lambda p: ct.optim.Adam(p, lr=0.1)], ids=["sgd", "adam"])
def test_optimizer_rejects_gradient_on_another_device(device, make):
    p = ct.nn.Parameter(ct.ones(3, device=device))
    p.grad = ct.ones(3, device=_twin(device))
    opt = make([p])
    with pytest.raises(RuntimeError, match="gradient on .*-errors-twin.*, parameter on"):
        opt.step()
    assert p.numpy().tolist() == [1, 1, 1]


# ---- fp64 on a device without cl_khr_fp64 ------------------------------------------------------

def test_fp64_rejected_in_every_way_in(device):
    fake = ct.Device(device.index + "-nofp64", device.cl_device)
    fake.has_fp64 = False
    ways = [lambda: ct.from_numpy(np.zeros(2), device=fake),
            lambda: ct.tensor([1.0, 2.0], dtype=ct.float64, device=fake),
            lambda: ct.ones(2, device=fake).to(ct.float64),
            lambda: ct.ones(2, dtype=ct.float64 if device.has_fp64 else ct.float32,
                            device=device).to(fake, ct.float64)]
    for way in ways:
        with pytest.raises(TypeError, match="float64 is not supported on .*lacks cl_khr_fp64"):
            way()


# ---- allocations beyond the device's largest allocation -----------------------------------------

def test_op_result_beyond_max_allocation(device):
    big = device.max_alloc // 4 + 1
    # NOTE: pyopencl's pool collects garbage when an allocation fails, which frees earlier
    # tests' unreachable tensors: collect them first
    gc.collect()
    before = ct.memory_stats(device)["allocated"]
    with pytest.raises(ct.OutOfMemoryError, match="the device's largest allocation is"):
        ct.ones(1, device=device).expand(big).contiguous()
    side = math.isqrt(big) + 1
    with pytest.raises(ct.OutOfMemoryError, match="cannot allocate"):
        ct.ones(side, 1, device=device) @ ct.ones(1, side, device=device)
    assert ct.memory_stats(device)["allocated"] == before


# ---- zero and negative sizes -------------------------------------------------------------------

def test_negative_sizes(device):
    with pytest.raises(ValueError, match="negative dimension -1"):
        ct.randn(-1, device=device)
    with pytest.raises(ValueError, match=r"invalid shape \(-2, 3\)"):
        ct.ones(6, device=device).reshape(-2, 3)
    with pytest.raises(ValueError, match=r"shape \(4, 2\) is invalid for input of size 6"):
        ct.ones(6, device=device).view(4, 2)


def test_empty_weights_rejected_empty_batches_run(device, rng):
    x = T(random_array(rng, (2, 3, 5, 5)), device)
    with pytest.raises(ValueError, match="the weight has an empty dimension"):
        conv2d(x, ct.ones(0, 3, 3, 3, device=device))
    w = T(random_array(rng, (4, 3, 3, 3)), device)
    assert conv2d(ct.ones(0, 3, 5, 5, device=device), w).shape == (0, 4, 3, 3)
    assert F.max_pool2d(ct.ones(0, 3, 4, 4, device=device), 2).shape == (0, 3, 2, 2)
    assert F.softmax(ct.ones(0, 3, device=device), 1).shape == (0, 3)
    assert F.linear(ct.ones(0, 3, device=device), ct.ones(4, 3, device=device)).shape == (0, 4)
    empty_target = ct.tensor([], dtype=ct.int64, device=device)
    assert math.isnan(F.cross_entropy(ct.ones(0, 3, device=device), empty_target).item())


def test_invalid_layer_parameters(device, rng):
    x = T(random_array(rng, (2, 3, 5, 5)), device)
    bad = [
        (ValueError, "more than 1 value per channel when training",
         lambda: F.batch_norm(ct.ones(1, 3, device=device), None, None, training=True)),
        (ValueError, "size must be a positive int", lambda: F.local_response_norm(x, 0)),
        (ValueError, "dropout probability has to be between 0 and 1", lambda: F.dropout(x, 1.5)),
        (ValueError, "has 3 features but weight of shape", lambda: F.linear(
            ct.ones(2, 3, device=device), ct.ones(4, 5, device=device))),
        (ValueError, "step must be nonzero", lambda: ct.arange(0, 5, 0, device=device)),
        (ValueError, "expects 'from' to be less than 'to'",
         lambda: ct.randint(5, 5, (3,), device=device)),
    ]
    for exc, match, fn in bad:
        with pytest.raises(exc, match=match):
            fn()


# ---- NaN and Inf inputs -----------------------------------------------------------------------

@pytest.mark.parametrize("family", gemm_ops.FAMILIES)
def test_nan_inf_through_every_gemm_family(device, rng, family, monkeypatch):
    monkeypatch.setattr(gemm_ops, "FORCE_FAMILY", family)
    a, b = random_array(rng, (5, 7)), random_array(rng, (7, 6))
    a[2, 3], a[4, 1] = np.nan, np.inf
    got = (T(a, device) @ T(b, device)).numpy()
    with np.errstate(invalid="ignore"):
        want = a.astype(np.float64) @ b
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    assert np.isfinite(got[[0, 1, 3]]).all()


@pytest.mark.parametrize("algo", ["im2col", "implicit_gemm", "winograd"])
def test_nan_spreads_to_the_windows_that_hold_it(device, rng, algo):
    x = random_array(rng, (1, 3, 6, 6))
    x[0, 1, 2, 2] = np.nan
    y = conv2d(T(x, device), T(random_array(rng, (2, 3, 3, 3)), device), padding=1,
               algo=algo).numpy()
    hit = np.zeros(y.shape, bool)
    hit[:, :, 1:4, 1:4] = True       # the outputs whose 3x3 window covers (2, 2)
    np.testing.assert_array_equal(np.isnan(y), hit)


def test_nan_in_pooling_normalization_and_activations(device, rng):
    x = random_array(rng, (2, 3, 4, 4))
    x[0, 1, 0, 1] = np.nan
    t = T(x, device)
    for y in (F.max_pool2d(t, 2), F.avg_pool2d(t, 2)):
        nan = np.isnan(y.numpy())
        assert nan[0, 1, 0, 0] and nan.sum() == 1
    bn = F.batch_norm(t, None, None, training=True).numpy()
    assert np.isnan(bn[:, 1]).all() and np.isfinite(bn[:, [0, 2]]).all()
    s = np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)
    np.testing.assert_array_equal(F.relu(T(s, device)).numpy(), [np.nan, np.inf, 0, 1])
    np.testing.assert_allclose(F.sigmoid(T(s, device)).numpy(),
                               [np.nan, 1, 0, 1 / (1 + np.e ** -1)], rtol=1e-6)


def test_nan_gradient_reaches_the_parameter_as_in_torch(device):
    p = ct.nn.Parameter(ct.ones(3, device=device))
    p.grad = T(np.array([1, np.nan, 1], np.float32), device)
    ct.optim.SGD([p], lr=0.1).step()
    np.testing.assert_allclose(p.numpy(), [0.9, np.nan, 0.9], rtol=1e-6)


def test_softmax_of_rows_with_nan_and_minus_inf(device):
    s = np.array([[1, -np.inf, 2], [np.nan, 0, 1], [-np.inf, -np.inf, -np.inf]], np.float32)
    t = T(s, device)
    e = np.exp([1.0, 2.0]) / np.exp([1.0, 2.0]).sum()
    for y, row0 in ((F.softmax(t, 1), [e[0], 0, e[1]]),
                    (F.log_softmax(t, 1), [np.log(e[0]), -np.inf, np.log(e[1])])):
        got = y.numpy()
        np.testing.assert_allclose(got[0], row0, rtol=1e-6)
        assert np.isnan(got[1:]).all()    # torch: a NaN, or a row of only -inf, gives NaN rows
    loss = F.cross_entropy(t, ct.tensor([0, 0, 1], device=device), reduction="none").numpy()
    assert np.isclose(loss[0], -np.log(e[0]), rtol=1e-6) and np.isnan(loss[1:]).all()


def test_softmax_of_a_row_with_plus_inf_is_nan_as_torch(device):
    t = T(np.array([[1, np.inf, 2]], np.float32), device)
    assert np.isnan(F.softmax(t, 1).numpy()).all()
    assert np.isnan(F.log_softmax(t, 1).numpy()).all()
    assert np.isnan(F.cross_entropy(t, ct.tensor([0], device=device)).item())
