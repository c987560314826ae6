"""Adadelta, Adagrad, Adamax, NAdam, RAdam, ASGD, Rprop and LBFGS against torch.optim step by
step; state_dict round trips; torch's errors for bad hyperparameters; schedulers' lr sequences
against torch.optim.lr_scheduler."""
import inspect
import warnings

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


KERNELS = {"Adagrad": "adagrad_step", "Adadelta": "adadelta_step", "Adamax": "adamax_step",
           "NAdam": "nadam_step", "RAdam": "radam_step", "ASGD": "asgd_step",
           "Rprop": "rprop_step"}


@pytest.mark.parametrize("name", list(KERNELS))
def test_one_fused_launch_per_parameter(device, rng, name):
    """After the first step (which creates the state), a step is one kernel per parameter."""
    ps = [cltensor.from_numpy(rng.standard_normal(s).astype(np.float32),
                              device=device).requires_grad_() for s in ((4, 3), (5,))]
    opt = getattr(optim, name)(ps, weight_decay=0.1) if name != "Rprop" else optim.Rprop(ps)
    for step in range(2):
        for p in ps:
            p.grad = cltensor.from_numpy(rng.standard_normal(p.shape).astype(np.float32),
                                         device=device)
        cltensor.synchronize()
        with cltensor.profile() as prof:
            opt.step()
        if step:
            assert [r["name"] for r in prof.records()] == [KERNELS[name]] * len(ps)


GROUP_OVERRIDES = {"Rprop": {"etas": (0.4, 1.3), "maximize": True},
                   "Adadelta": {"rho": 0.5, "weight_decay": 0.05, "maximize": True}}


@pytest.mark.parametrize("name", list(KERNELS))
def test_param_groups_match_torch(device, rng, name):
    """Two groups, the second overriding lr and other hyperparameters."""
    override = GROUP_OVERRIDES.get(name, {"lr": 0.03, "weight_decay": 0.05, "maximize": True})
    values, mine = _params(rng, device, np.float64 if device.has_fp64 else np.float32)
    theirs = [torch.tensor(v, requires_grad=True) for v in values]
    opts = [getattr(lib, name)([{"params": ps[:2]}, {"params": ps[2:], **override}], lr=0.02)
            for lib, ps in ((torch.optim, theirs), (optim, mine))]
    for _ in range(6):
        _step_both(opts[0], theirs, opts[1], mine, rng, device)
    _assert_same(theirs, mine)


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


@pytest.mark.parametrize("name,kwargs", ROUND_TRIP,
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(ROUND_TRIP)])
def test_loads_torch_state_dict(device, rng, name, kwargs):
    """torch's state_dict (0-d tensors for step, eta, mu, mu_product) loads, and the run
    continues as torch's."""
    t_opt, t_params, c_opt, c_params = _pair(name, kwargs, rng, device, np.dtype(np.float32))
    for _ in range(4):
        _step_both(t_opt, t_params, c_opt, c_params, rng, device)
    fresh = getattr(optim, name)(c_params, lr=123.0)
    fresh.load_state_dict(t_opt.state_dict())
    for _ in range(4):
        _step_both(t_opt, t_params, fresh, c_params, rng, device)
    _assert_same(t_params, c_params)


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


ALL_OPTIMIZERS = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam",
                  "RAdam", "ASGD", "Rprop", "LBFGS", "SparseAdam"]


@pytest.mark.parametrize("name", ALL_OPTIMIZERS)
def test_signature_is_torchs(name):
    """The same argument names, kinds (positional or keyword-only) and defaults as torch's."""
    assert _arguments(getattr(optim, name)) == _arguments(getattr(torch.optim, name))


def _arguments(cls):
    return [(p.name, p.kind, p.default)
            for p in inspect.signature(cls.__init__).parameters.values()]


@pytest.mark.parametrize("name", ["Adam", "AdamW", "RMSprop"])
def test_existing_optimizers_take_torchs_flags(device, name):
    p = [cltensor.zeros(2, device=device, requires_grad=True)]
    with pytest.raises(NotImplementedError, match="differentiable"):
        getattr(optim, name)(p, differentiable=True)
    mine = getattr(optim, name)(p, foreach=True, capturable=True)
    theirs = getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)])
    assert sorted(mine.param_groups[0]) == sorted(theirs.param_groups[0])


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


# ---- LBFGS ---------------------------------------------------------------------------------------

LBFGS_CASES = [{"max_iter": 5}, {"max_iter": 6, "history_size": 2, "line_search_fn": "strong_wolfe"},
               {"line_search_fn": "strong_wolfe", "lr": 0.5},
               {"tolerance_grad": 0.05, "max_iter": 30, "line_search_fn": "strong_wolfe"},
               {"tolerance_change": 1e-3, "lr": 0.2, "max_iter": 40, "history_size": 4},
               {"max_iter": 8, "max_eval": 6, "line_search_fn": "strong_wolfe"}]


class _Fit:
    """A small least-squares fit of tanh(X W^T + b) to Y, on torch or on cltensor."""

    def __init__(self, lib, dtype, device=None, params=None):
        rng = np.random.default_rng(7)
        x, y = rng.standard_normal((8, 4)), 0.5 * rng.standard_normal((8, 3))
        w, b = params or (0.3 * rng.standard_normal((3, 4)), 0.1 * rng.standard_normal(3))
        if lib is torch:
            make = lambda a: torch.tensor(np.asarray(a, dtype))  # noqa: E731
        else:
            make = lambda a: cltensor.from_numpy(np.asarray(a, dtype), device=device)  # noqa
        self.lib, self.x, self.y = lib, make(x), make(y)
        self.params = [make(w).requires_grad_(), make(b).requires_grad_()]

    def closure(self, opt):
        def evaluate():
            opt.zero_grad()
            w, b = self.params
            loss = ((self.lib.tanh(self.x @ w.t() + b) - self.y) ** 2).sum()
            loss.backward()
            return loss
        return evaluate

    def values(self):
        return [p.detach().numpy().copy() for p in self.params]


def _lbfgs_steps(fit, opt, steps):
    out = []
    for _ in range(steps):
        loss = float(opt.step(fit.closure(opt)).detach())
        state = opt.state[fit.params[0]]
        out.append((loss, fit.values(), state["func_evals"], state["n_iter"]))
    return out


def _assert_lbfgs_same(mine, theirs, tol):
    for (l1, v1, e1, n1), (l2, v2, e2, n2) in zip(mine, theirs):
        assert (e1, n1) == (e2, n2)
        np.testing.assert_allclose(l1, l2, **tol)
        for a, b in zip(v1, v2):
            np.testing.assert_allclose(a, b, **tol)


@pytest.mark.parametrize("kwargs", LBFGS_CASES)
def test_lbfgs_matches_torch(device, fp_dtypes, kwargs):
    """Three steps in float64 (the same closure evaluations and iterations as torch); the first
    in float32, before rounding makes the stopping tests differ near convergence."""
    for dtype in fp_dtypes:
        steps, tol = (3, TOL[np.dtype(np.float64)]) if dtype == cltensor.float64 else \
            (1, dict(rtol=1e-4, atol=1e-5))
        theirs, mine = _Fit(torch, dtype), _Fit(cltensor, dtype, device)
        _assert_lbfgs_same(
            _lbfgs_steps(mine, optim.LBFGS(mine.params, **kwargs), steps),
            _lbfgs_steps(theirs, torch.optim.LBFGS(theirs.params, **kwargs), steps), tol)


def test_lbfgs_line_search_extrapolation_matches_torch(device):
    """A first step far too short: the line search grows it (float64 only: in float32 the
    cubic fit through nearly equal losses depends on how the loss's sum was rounded)."""
    if not device.has_fp64:
        pytest.skip("the device has no float64")
    kwargs = {"max_iter": 4, "lr": 0.01, "line_search_fn": "strong_wolfe"}
    theirs, mine = _Fit(torch, np.float64), _Fit(cltensor, np.float64, device)
    _assert_lbfgs_same(_lbfgs_steps(mine, optim.LBFGS(mine.params, **kwargs), 2),
                       _lbfgs_steps(theirs, torch.optim.LBFGS(theirs.params, **kwargs), 2),
                       TOL[np.dtype(np.float64)])


@pytest.mark.parametrize("x0", [(0.0, 0.0), (-1.2, 1.0)])
def test_lbfgs_rosenbrock_matches_torch(device, x0):
    """Rosenbrock's valley in float64: line searches that zoom inside their bracket."""
    if not device.has_fp64:
        pytest.skip("the device has no float64")
    kwargs = {"line_search_fn": "strong_wolfe", "lr": 2, "history_size": 3, "max_iter": 10}
    runs = []
    for lib, x in ((torch, torch.tensor(x0, dtype=torch.float64)),
                   (cltensor, cltensor.from_numpy(np.array(x0), device=device))):
        x.requires_grad_()
        opt = lib.optim.LBFGS([x], **kwargs)

        def closure():
            opt.zero_grad()
            loss = (1 - x[0]) ** 2 + 100 * (x[1] - x[0] * x[0]) ** 2
            loss.backward()
            return loss
        runs.append([])
        for _ in range(3):
            opt.step(closure)
            runs[-1].append(x.detach().numpy().copy())
    np.testing.assert_allclose(runs[1], runs[0], **TOL[np.dtype(np.float64)])


def test_lbfgs_state_dict_round_trip(device):
    if not device.has_fp64:
        pytest.skip("the device has no float64")
    kwargs = {"max_iter": 4, "history_size": 3, "line_search_fn": "strong_wolfe"}
    theirs = _Fit(torch, np.float64)
    t_opt = torch.optim.LBFGS(theirs.params, **kwargs)
    expect = _lbfgs_steps(theirs, t_opt, 3)
    first = _Fit(cltensor, np.float64, device)
    opt = optim.LBFGS(first.params, **kwargs)
    _lbfgs_steps(first, opt, 1)
    saved = opt.state_dict()
    assert set(saved["state"][0]) == set(t_opt.state_dict()["state"][0])
    resumed = _Fit(cltensor, np.float64, device, params=first.values())
    opt2 = optim.LBFGS(resumed.params, lr=3.0)
    opt2.load_state_dict(saved)
    del opt
    _assert_lbfgs_same(_lbfgs_steps(resumed, opt2, 2), expect[1:], TOL[np.dtype(np.float64)])


def test_lbfgs_bad_arguments(device):
    p = [cltensor.zeros(2, device=device, requires_grad=True)]
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        optim.LBFGS(p, lr=-1)
    with pytest.raises(ValueError, match="line_search_fn must be None or 'strong_wolfe'"):
        optim.LBFGS(p, line_search_fn="armijo")
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        optim.LBFGS([{"params": p}, {"params": [cltensor.zeros(1, requires_grad=True)]}])
    opt = optim.LBFGS(p)
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        opt.add_param_group({"params": [cltensor.zeros(1, requires_grad=True)]})
    with pytest.raises(RuntimeError, match="needs a closure"):
        opt.step(None)

    def wrong_grad():
        p[0].grad = cltensor.ones(3, device=device)
        return p[0].sum()
    with pytest.raises(RuntimeError, match="gradient of shape"):
        opt.step(wrong_grad)


# ---- schedulers ----------------------------------------------------------------------------------

def _sgd_pair(optimizer="SGD"):
    """A torch and a cltensor optimizer of two groups (lr 0.1 and 0.02), no parameter needed
    on the device since schedulers only touch the groups."""
    kwargs = {"momentum": 0.9} if optimizer == "SGD" else {}
    pairs = []
    for lib, make in ((torch, lambda: torch.zeros(2, requires_grad=True)),
                      (cltensor, lambda: cltensor.zeros(2, requires_grad=True))):
        groups = [{"params": [make()], "lr": 0.1}, {"params": [make()], "lr": 0.02}]
        pairs.append(getattr(lib.optim, optimizer)(groups, lr=0.1, **kwargs))
    return pairs


SCHEDULERS = {
    "StepLR": lambda L, o: L.StepLR(o, step_size=3, gamma=0.5),
    "MultiStepLR": lambda L, o: L.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3),
    "ExponentialLR": lambda L, o: L.ExponentialLR(o, gamma=0.8),
    "LambdaLR": lambda L, o: L.LambdaLR(o, lambda e: 1 / (1 + e)),
    "LinearLR": lambda L, o: L.LinearLR(o, start_factor=0.25, total_iters=4),
    "CosineAnnealingLR": lambda L, o: L.CosineAnnealingLR(o, T_max=4, eta_min=0.001),
    "OneCycleLR": lambda L, o: L.OneCycleLR(o, max_lr=[0.5, 0.1], total_steps=14),
    "OneCycleLR3": lambda L, o: L.OneCycleLR(o, max_lr=0.5, total_steps=14, three_phase=True,
                                             anneal_strategy="linear"),
    "ConstantLR": lambda L, o: L.ConstantLR(o, factor=0.4, total_iters=3),
    "MultiplicativeLR": lambda L, o: L.MultiplicativeLR(o, [lambda e: 0.9, lambda e: 1.1]),
    "PolynomialLR": lambda L, o: L.PolynomialLR(o, total_iters=6, power=2.0),
    "CosineAnnealingWarmRestarts": lambda L, o: L.CosineAnnealingWarmRestarts(
        o, T_0=3, T_mult=2, eta_min=0.01),
    "CyclicLR": lambda L, o: L.CyclicLR(o, base_lr=0.01, max_lr=[0.1, 0.2], step_size_up=3),
    "CyclicLR2": lambda L, o: L.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2,
                                         step_size_down=3, mode="triangular2"),
    "CyclicLR-exp": lambda L, o: L.CyclicLR(o, base_lr=[0.01, 0.02], max_lr=0.1, step_size_up=2,
                                            mode="exp_range", gamma=0.9, base_momentum=0.7,
                                            max_momentum=0.95),
    "CyclicLR-nomomentum": lambda L, o: L.CyclicLR(o, 0.01, 0.1, 2, cycle_momentum=False),
    "SequentialLR": lambda L, o: L.SequentialLR(
        o, [L.LinearLR(o, start_factor=0.1, total_iters=3), L.ExponentialLR(o, gamma=0.7),
            L.StepLR(o, step_size=2)], milestones=[3, 7]),
    "ChainedScheduler": lambda L, o: L.ChainedScheduler(
        [L.ConstantLR(o, factor=0.5, total_iters=4), L.ExponentialLR(o, gamma=0.9)]),
}
SCHED_STEPS = 14


def _history(sched, opt, steps, epochs=None):
    """get_last_lr, the groups' lr and momentum, and last_epoch after each step."""
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(steps):
            opt.step()
            sched.step() if epochs is None else sched.step(epochs[i])
            out.append((list(sched.get_last_lr()), [g["lr"] for g in opt.param_groups],
                        [g.get("momentum") for g in opt.param_groups],
                        getattr(sched, "last_epoch", None)))
    return out


def _assert_histories(mine, theirs):
    assert len(mine) == len(theirs)
    for (a_last, a_lr, a_mom, a_ep), (b_last, b_lr, b_mom, b_ep) in zip(mine, theirs):
        np.testing.assert_allclose(a_last, b_last, rtol=1e-13, atol=1e-16)
        np.testing.assert_allclose(a_lr, b_lr, rtol=1e-13, atol=1e-16)
        np.testing.assert_allclose(a_mom, b_mom, rtol=1e-13, atol=1e-16)
        assert a_ep == b_ep


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_scheduler_matches_torch(name):
    t_opt, c_opt = _sgd_pair()
    make = SCHEDULERS[name]
    t_sched, c_sched = make(torch.optim.lr_scheduler, t_opt), make(optim.lr_scheduler, c_opt)
    np.testing.assert_allclose(c_sched.get_last_lr(), t_sched.get_last_lr(), rtol=1e-13)
    _assert_histories(_history(c_sched, c_opt, SCHED_STEPS),
                      _history(t_sched, t_opt, SCHED_STEPS))


@pytest.mark.parametrize("name", [n for n in SCHEDULERS if not n.startswith("OneCycle")])
def test_scheduler_state_dict_round_trip(name):
    """Saved after 5 steps and loaded into a fresh scheduler of an optimizer with the same
    groups, the lr sequence continues as torch's uninterrupted one."""
    t_opt, c_opt = _sgd_pair()
    make = SCHEDULERS[name]
    t_sched, c_sched = make(torch.optim.lr_scheduler, t_opt), make(optim.lr_scheduler, c_opt)
    _history(t_sched, t_opt, 5)
    _history(c_sched, c_opt, 5)
    saved, groups = c_sched.state_dict(), c_opt.state_dict()["param_groups"]
    # NOTE: LambdaLR's state_dict leaves 'lr_lambdas' out (test_optim.py requires it)
    assert set(saved) | {"lr_lambdas"} == set(t_sched.state_dict()) | {"lr_lambdas"}
    _, c_opt2 = _sgd_pair()
    c_opt2.load_state_dict({"state": {}, "param_groups": groups})
    c_sched2 = make(optim.lr_scheduler, c_opt2)
    c_sched2.load_state_dict(saved)
    for group, old in zip(c_opt2.param_groups, groups):
        group.update({k: v for k, v in old.items() if k != "params"})
    _assert_histories(_history(c_sched2, c_opt2, 6), _history(t_sched, t_opt, 6))


CLOSED_FORM = ["StepLR", "MultiStepLR", "ExponentialLR", "LinearLR", "CosineAnnealingLR",
               "ConstantLR", "PolynomialLR", "CosineAnnealingWarmRestarts", "LambdaLR"]


@pytest.mark.parametrize("name", CLOSED_FORM)
def test_scheduler_step_with_epoch_matches_torch(name):
    epochs = [2, 3, 7, 4, 0, 11, 6.5 if name == "CosineAnnealingWarmRestarts" else 6]
    t_opt, c_opt = _sgd_pair()
    make = SCHEDULERS[name]
    t_sched, c_sched = make(torch.optim.lr_scheduler, t_opt), make(optim.lr_scheduler, c_opt)
    _assert_histories(_history(c_sched, c_opt, len(epochs), epochs),
                      _history(t_sched, t_opt, len(epochs), epochs))


RESUMED = {
    "ExponentialLR": lambda L, o, e: L.ExponentialLR(o, gamma=0.8, last_epoch=e),
    "StepLR": lambda L, o, e: L.StepLR(o, step_size=3, last_epoch=e),
    "CosineAnnealingLR": lambda L, o, e: L.CosineAnnealingLR(o, T_max=4, last_epoch=e),
    "LinearLR": lambda L, o, e: L.LinearLR(o, start_factor=0.25, total_iters=6, last_epoch=e),
    "ConstantLR": lambda L, o, e: L.ConstantLR(o, factor=0.4, total_iters=6, last_epoch=e),
    "PolynomialLR": lambda L, o, e: L.PolynomialLR(o, total_iters=8, last_epoch=e),
    "MultiplicativeLR": lambda L, o, e: L.MultiplicativeLR(o, lambda k: 0.9, last_epoch=e),
    "CosineAnnealingWarmRestarts": lambda L, o, e: L.CosineAnnealingWarmRestarts(
        o, T_0=3, last_epoch=e),
    "CyclicLR": lambda L, o, e: L.CyclicLR(o, 0.01, 0.1, step_size_up=3, last_epoch=e),
}


@pytest.mark.parametrize("name", list(RESUMED))
def test_scheduler_resumed_with_last_epoch_matches_torch(name):
    """Made with last_epoch=4 (resuming, the groups holding initial_lr), as torch's."""
    t_opt, c_opt = _sgd_pair()
    scheds = []
    for lib, opt in ((torch, t_opt), (cltensor, c_opt)):
        for group in opt.param_groups:
            group["initial_lr"] = group["lr"]
        scheds.append(RESUMED[name](lib.optim.lr_scheduler, opt, 4))
    assert scheds[1].get_last_lr() == pytest.approx(scheds[0].get_last_lr(), rel=1e-13)
    _assert_histories(_history(scheds[1], c_opt, 6), _history(scheds[0], t_opt, 6))


class _Decay:
    """A callable object: its attribute is scheduler state, as torch saves it."""

    def __init__(self, rate):
        self.rate = rate

    def __call__(self, epoch):
        return self.rate ** epoch


def test_lambda_lr_loads_torchs_state_dict():
    """torch's LambdaLR state_dict ('lr_lambdas': None per function, attributes of callable
    objects) loads: the functions stay, the objects get the saved attributes."""
    t_opt, c_opt = _sgd_pair()
    t_sched = torch.optim.lr_scheduler.LambdaLR(t_opt, [_Decay(0.5), lambda e: 0.9 ** e])
    _history(t_sched, t_opt, 3)
    mine = optim.lr_scheduler.LambdaLR(c_opt, [_Decay(0.8), lambda e: 0.9 ** e])
    mine.load_state_dict(t_sched.state_dict())
    assert mine.lr_lambdas[0].rate == 0.5 and callable(mine.lr_lambdas[1])
    _assert_histories(_history(mine, c_opt, 3), _history(t_sched, t_opt, 3))


def test_cyclic_lr_cycles_adam_beta1():
    t_opt, c_opt = _sgd_pair("Adam")
    make = SCHEDULERS["CyclicLR"]
    t_sched, c_sched = make(torch.optim.lr_scheduler, t_opt), make(optim.lr_scheduler, c_opt)
    for _ in range(7):
        _history(t_sched, t_opt, 1)
        _history(c_sched, c_opt, 1)
        assert [g["betas"] for g in c_opt.param_groups] == \
            [g["betas"] for g in t_opt.param_groups]


def test_reduce_lr_on_plateau_matches_torch():
    t_opt, c_opt = _sgd_pair()
    kw = dict(mode="max", factor=0.5, patience=1, cooldown=1, threshold=0.1,
              threshold_mode="abs", min_lr=[0.01, 0.0])
    t_sched = torch.optim.lr_scheduler.ReduceLROnPlateau(t_opt, **kw)
    c_sched = optim.lr_scheduler.ReduceLROnPlateau(c_opt, **kw)
    for metric in [1.0, 1.05, 1.0, 0.9, 1.3, 1.3, 1.3, 1.2, 1.0, 1.0, 1.0]:
        t_sched.step(metric)
        c_sched.step(metric)
        assert c_sched.get_last_lr() == t_sched.get_last_lr()
        assert c_sched.last_epoch == t_sched.last_epoch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_sched.step(0.5, epoch=20)
        c_sched.step(0.5, epoch=20)
    assert c_sched.last_epoch == t_sched.last_epoch == 20


SCHED_BAD = [
    lambda L, o: L.ConstantLR(o, factor=1.5),
    lambda L, o: L.MultiplicativeLR(o, [lambda e: 1.0]),
    lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=0),
    lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0),
    lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=2, eta_min="0"),
    lambda L, o: L.CyclicLR(o, 0.01, 0.1, mode="sawtooth"),
    lambda L, o: L.SequentialLR(o, [L.ConstantLR(o)], milestones=[3]),
    lambda L, o: L.SequentialLR(o, [], milestones=[]),
    lambda L, o: L.SequentialLR(o, [L.ReduceLROnPlateau(o)], milestones=[]),
    lambda L, o: L.ChainedScheduler([]),
    lambda L, o: L.ReduceLROnPlateau(o, factor=2),
    lambda L, o: L.ReduceLROnPlateau(o, mode="up"),
    lambda L, o: L.ReduceLROnPlateau(o, threshold_mode="x"),
    lambda L, o: L.ReduceLROnPlateau(o, min_lr=[0.1, 0.2, 0.3]),
]


@pytest.mark.parametrize("index", range(len(SCHED_BAD)))
def test_scheduler_bad_arguments_raise_torchs_error(index):
    t_opt, c_opt = _sgd_pair()
    with pytest.raises(ValueError) as theirs:
        SCHED_BAD[index](torch.optim.lr_scheduler, t_opt)
    with pytest.raises(ValueError) as mine:
        SCHED_BAD[index](optim.lr_scheduler, c_opt)
    assert str(mine.value).startswith(str(theirs.value))


@pytest.mark.parametrize("name", torch.optim.lr_scheduler.__all__)
def test_scheduler_signature_is_torchs(name):
    assert _arguments(getattr(optim.lr_scheduler, name)) == \
        _arguments(getattr(torch.optim.lr_scheduler, name))


def test_custom_scheduler_subclass_matches_torch():
    """A scheduler written as older scripts write them: a subclass of _LRScheduler that
    defines get_lr from last_epoch and base_lrs."""
    histories = []
    for lib, opt in zip((torch, cltensor), _sgd_pair()):
        class Halving(lib.optim.lr_scheduler._LRScheduler):
            def get_lr(self):
                return [base * 0.5 ** (self.last_epoch // 2) for base in self.base_lrs]
        sched = Halving(opt)
        histories.append(_history(sched, opt, 6))
        assert isinstance(sched, lib.optim.lr_scheduler.LRScheduler)
    _assert_histories(histories[1], histories[0])


def test_cyclic_lr_needs_momentum():
    opt = optim.Adagrad([cltensor.zeros(2, requires_grad=True)])
    with pytest.raises(ValueError, match="momentum or beta1"):
        optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1)
