"""Adadelta, Adagrad, Adamax, NAdam, RAdam, ASGD, Rprop and LBFGS against torch.optim step by
step; state_dict round trips; torch's errors for bad hyperparameters; schedulers' lr sequences
against torch.optim.lr_scheduler."""
import numpy as np
import pytest
import torch

import cltensor
from cltensor import optim

STEPS = 12
SHAPES = ((3, 4), (5,), "strided")
TOL = {np.dtype(np.float32): dict(rtol=2e-5, atol=2e-6),
       np.dtype(np.float64): dict(rtol=1e-10, atol=1e-12)}

CASES = [
    ("Adagrad", {}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.05, "weight_decay": 0.1,
                 "initial_accumulator_value": 0.3, "eps": 1e-6}),
    ("Adagrad", {"lr": 0.1, "maximize": True}),
    ("Adadelta", {}),
    ("Adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-4, "weight_decay": 0.1, "maximize": True}),
    ("Adamax", {}),
    ("Adamax", {"lr": 0.05, "betas": (0.8, 0.99), "weight_decay": 0.1, "maximize": True}),
    ("NAdam", {"lr": 0.05}),
    ("NAdam", {"lr": 0.05, "weight_decay": 0.1, "momentum_decay": 0.01}),
    ("NAdam", {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True,
               "maximize": True}),
    ("RAdam", {"lr": 0.05}),
    ("RAdam", {"lr": 0.05, "betas": (0.8, 0.9), "weight_decay": 0.1}),
    ("RAdam", {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True,
               "maximize": True}),
    ("ASGD", {}),
    ("ASGD", {"lr": 0.05, "lambd": 0.01, "alpha": 0.5, "t0": 4}),
    ("ASGD", {"lr": 0.05, "t0": 2, "weight_decay": 0.1, "maximize": True}),
    ("Rprop", {}),
    ("Rprop", {"lr": 0.05, "etas": (0.3, 1.5), "step_sizes": (1e-3, 0.1), "maximize": True}),
]


def _params(rng, device, dtype):
    """Initial values (numpy) and cltensor leaves of SHAPES; the "strided" one is a transposed,
    step-sliced, offset view of a larger tensor."""
    values, leaves = [], []
    for shape in SHAPES:
        if shape == "strided":
            base = cltensor.from_numpy(rng.standard_normal((7, 9)), device=device, dtype=dtype)
            leaf = base.t()[1:8:2, 2:]
            assert not leaf.is_contiguous() and leaf.offset != 0
            values.append(leaf.numpy())
            leaves.append(leaf.requires_grad_())
        else:
            values.append(rng.standard_normal(shape).astype(dtype))
            leaves.append(cltensor.from_numpy(values[-1], device=device).requires_grad_())
    return values, leaves


def _pair(name, kwargs, rng, device, dtype):
    """(torch optimizer, its params, cltensor optimizer, its params) on the same values."""
    values, mine = _params(rng, device, dtype)
    theirs = [torch.tensor(v, requires_grad=True) for v in values]
    return (getattr(torch.optim, name)(theirs, **kwargs), theirs,
            getattr(optim, name)(mine, **kwargs), mine)


def _step_both(t_opt, t_params, c_opt, c_params, rng, device):
    for tp, cp in zip(t_params, c_params):
        g = rng.standard_normal(tp.shape).astype(cp.dtype)
        tp.grad = torch.tensor(g)
        cp.grad = cltensor.from_numpy(g, device=device)
    t_opt.step()
    c_opt.step()


def _assert_same(t_params, c_params):
    for tp, cp in zip(t_params, c_params):
        np.testing.assert_allclose(cp.numpy(), tp.detach().numpy(), **TOL[np.dtype(cp.dtype)])


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_trajectory_matches_torch(device, rng, fp_dtypes, name, kwargs):
    for dtype in fp_dtypes:
        t_opt, t_params, c_opt, c_params = _pair(name, kwargs, rng, device, np.dtype(dtype))
        for _ in range(STEPS):
            _step_both(t_opt, t_params, c_opt, c_params, rng, device)
            _assert_same(t_params, c_params)
        t_state, c_state = t_opt.state_dict(), c_opt.state_dict()
        assert list(c_state["state"][0]) == list(t_state["state"][0])
        assert sorted(c_state["param_groups"][0]) == sorted(t_state["param_groups"][0])


ROUND_TRIP = [(name, kwargs) for name, kwargs in CASES if kwargs] + [("Adagrad", {})]


@pytest.mark.parametrize("name,kwargs", ROUND_TRIP,
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(ROUND_TRIP)])
def test_state_dict_round_trip(device, rng, name, kwargs):
    """Saved after 5 steps and loaded into a new optimizer over copies of the parameters, the
    run continues as the uninterrupted one (torch's)."""
    t_opt, t_params, c_opt, c_params = _pair(name, kwargs, rng, device, np.dtype(np.float32))
    for _ in range(5):
        _step_both(t_opt, t_params, c_opt, c_params, rng, device)
    saved = c_opt.state_dict()
    copies = [cltensor.from_numpy(p.numpy(), device=device).requires_grad_() for p in c_params]
    resumed = getattr(optim, name)(copies, lr=123.0)
    resumed.load_state_dict(saved)
    del c_opt
    for _ in range(5):
        _step_both(t_opt, t_params, resumed, copies, rng, device)
    _assert_same(t_params, copies)


BAD = [
    ("Adagrad", {"lr": -1.0}), ("Adagrad", {"lr_decay": -0.1}),
    ("Adagrad", {"weight_decay": -1}), ("Adagrad", {"initial_accumulator_value": -1}),
    ("Adagrad", {"eps": -1}), ("Adadelta", {"lr": -1}), ("Adadelta", {"rho": 1.5}),
    ("Adadelta", {"eps": -1e-3}), ("Adadelta", {"weight_decay": -2}), ("Adamax", {"eps": -1}),
    ("Adamax", {"betas": (1.0, 0.9)}), ("Adamax", {"betas": (0.9, -0.1)}),
    ("NAdam", {"momentum_decay": -1}), ("NAdam", {"weight_decay": -1}),
    ("RAdam", {"betas": (0.5, 1.0)}), ("RAdam", {"lr": -0.5}), ("ASGD", {"lr": -1}),
    ("ASGD", {"weight_decay": -1}), ("Rprop", {"etas": (1.0, 1.2)}),
    ("Rprop", {"etas": (0.5, 0.9)}), ("Rprop", {"lr": -1}),
]


@pytest.mark.parametrize("name,kwargs", BAD, ids=[f"{n}-{i}" for i, (n, _) in enumerate(BAD)])
def test_bad_hyperparameters_raise_torchs_error(name, kwargs):
    with pytest.raises(ValueError) as theirs:
        getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **kwargs)
    with pytest.raises(ValueError) as mine:
        getattr(optim, name)([cltensor.zeros(2, requires_grad=True)], **kwargs)
    assert str(mine.value) == str(theirs.value)


def test_refused_and_ignored_flags(device, rng):
    p = [cltensor.zeros(2, device=device, requires_grad=True)]
    with pytest.raises(NotImplementedError, match="sparse"):
        optim.SparseAdam(p)
    with pytest.raises(NotImplementedError, match="differentiable"):
        optim.NAdam(p, differentiable=True)
    with pytest.raises(RuntimeError, match="cannot be `True` together"):
        optim.Adagrad(p, fused=True, foreach=True)
    # foreach / fused / capturable change nothing
    plain = [cltensor.from_numpy(rng.standard_normal(6), device=device).requires_grad_()
             for _ in range(2)]
    same = [cltensor.from_numpy(x.numpy(), device=device).requires_grad_() for x in plain]
    opts = (optim.RAdam(plain, lr=0.1), optim.RAdam(same, lr=0.1, foreach=True, capturable=True))
    for _ in range(3):
        g = cltensor.from_numpy(rng.standard_normal(6), device=device)
        for ps, opt in zip((plain, same), opts):
            for x in ps:
                x.grad = g
            opt.step()
    for a, b in zip(plain, same):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
