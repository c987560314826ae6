"""Ops that take a dtype's limits (finfo's max, min, eps, tiny) on float16 and bfloat16 tensors:
the limits come from cltensor.finfo, since numpy has no bfloat16 (its storage is uint16), and
the results match torch CPU in the same dtype."""
import numpy as np
import pytest
import torch

import cltensor as ct
import cltensor.nn.functional as F

HALF = ["float16", "bfloat16"]


def _pair(values, name, device):
    tt = torch.tensor(values, dtype=torch.float32).to(getattr(torch, name))
    return ct.from_numpy(tt.float().numpy(), device=device).to(getattr(ct, name)), tt


def _close(ours, theirs, name, rtol=None):
    assert str(ours.dtype).endswith(name), ours.dtype
    tol = rtol or (2e-2 if name == "bfloat16" else 2e-3)
    np.testing.assert_allclose(ours.float().numpy(), theirs.float().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", HALF)
def test_nan_to_num_uses_the_dtypes_range(device, name):
    x, tx = _pair([1.5, float("nan"), float("inf"), -float("inf"), -2.0], name, device)
    ours, theirs = ct.nan_to_num(x), torch.nan_to_num(tx)
    np.testing.assert_array_equal(ours.float().numpy(), theirs.float().numpy())
    assert ours.float().numpy()[2] == ct.finfo(getattr(ct, name)).max


@pytest.mark.parametrize("name", HALF)
def test_rms_norm_default_eps_and_kl_div(device, name, rng):
    vals = rng.standard_normal((3, 8)).tolist()
    x, tx = _pair(vals, name, device)
    _close(F.rms_norm(x, (8,)), torch.nn.functional.rms_norm(tx, (8,)), name)
    target = rng.random((3, 8))
    target[0, :3] = 0  # 0 * log(0) terms
    t, tt = _pair(target.tolist(), name, device)
    logp, tlogp = F.log_softmax(x.float(), 1).to(getattr(ct, name)), \
        torch.log_softmax(tx.float(), 1).to(getattr(torch, name))
    _close(F.kl_div(logp, t, reduction="batchmean"),
           torch.nn.functional.kl_div(tlogp, tt, reduction="batchmean"), name, rtol=5e-2)


@pytest.mark.parametrize("name", HALF)
def test_uniform_range_checked_in_the_dtype(device, name):
    x = ct.empty(1000, dtype=getattr(ct, name), device=device).uniform_(-2, 3)
    v = x.float().numpy()
    assert v.min() >= -2 and v.max() <= 3 and v.std() > 1
    with pytest.raises(ValueError, match="to - from must be finite"):
        ct.empty(4, dtype=getattr(ct, name), device=device).uniform_(-3e38, 3e38)


@pytest.mark.parametrize("name", HALF)
def test_distributions_on_16_bit_parameters(device, name):
    p, tp = _pair([0.0, 0.25, 1.0], name, device)
    one, tone = _pair([1.0, 1.0, 1.0], name, device)
    _close(ct.distributions.Bernoulli(probs=p).log_prob(one),
           torch.distributions.Bernoulli(probs=tp).log_prob(tone), name)
    logits, tl = _pair([-1.0, 0.5, 2.0, -float("inf")], name, device)
    _close(ct.distributions.Categorical(logits=logits).entropy(),
           torch.distributions.Categorical(logits=tl).entropy(), name)
