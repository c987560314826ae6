"""Activations and clamps at their kinks and at NaN, as torch gives them: values and gradients
(the kernels, and the recorded forms under create_graph=True) against CPU torch in float64."""
import numpy as np
import pytest

import cltensor as ct
import cltensor.nn.functional as F

torch = pytest.importorskip("torch")
POINTS = [-4.0, -3.0, -1.0, 0.0, 3.0, 4.0, float("nan")]


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("name", ["hardswish", "hardsigmoid", "elu", "selu", "celu"])
def test_activation_kinks_and_nan_follow_torch(device, name, create_graph):
    x = ct.tensor(POINTS, dtype=ct.float64, device=device).requires_grad_()
    y = getattr(F, name)(x)
    (g,) = ct.autograd.grad(y, x, ct.ones(len(POINTS), dtype=ct.float64, device=device),
                            create_graph=create_graph)
    tx = torch.tensor(POINTS, dtype=torch.float64, requires_grad=True)
    ty = getattr(torch.nn.functional, name)(tx)
    ty.backward(torch.ones(len(POINTS), dtype=torch.float64))
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(g.detach().numpy(), tx.grad.numpy(), rtol=1e-7)


def test_clamp_with_a_nan_bound_is_nan(device):
    """torch: a NaN bound makes every result NaN; a NaN input stays NaN."""
    a = ct.tensor([1.0, 2.0, float("nan")], device=device)
    nan = float("nan")
    for got in (ct.clamp(a, min=nan), ct.clamp(a, max=nan), ct.clamp(a, nan, 1.0)):
        assert np.isnan(got.numpy()).all()
    np.testing.assert_array_equal(ct.clamp(a, 0.0, 1.5).numpy(), [1.0, 1.5, nan])
    for got in (ct.clamp_min(a, nan), ct.clamp_max(a, nan)):
        assert np.isnan(got.numpy()).all()
