"""Optimizers (SGD, Adam, AdamW) against numpy re-implementations of torch's formulas and, where
torch is installed, against torch.optim step by step; schedulers; state_dict; bad input."""
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cltensor
from cltensor.optim import SGD, Adam, AdamW, Optimizer, RMSprop
from cltensor.optim.lr_scheduler import CosineAnnealingLR, LRScheduler, StepLR
from cltensor.testing import assert_close

STEPS = 4
TOL = {np.dtype(np.float32): (2e-5, 1e-6), np.dtype(np.float64): (1e-12, 1e-14)}


# ---- numpy references (torch's update formulas, in float64) --------------------------------------

def _lr_at(lr, t):
    return lr[t] if isinstance(lr, (list, tuple)) else lr


def np_sgd(p, grads, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
           maximize=False):
    """The parameter after each step."""
    p, buf, out = p.astype(np.float64), None, []
    for t, g in enumerate(grads):
        d = -g.astype(np.float64) if maximize else g.astype(np.float64)
        if weight_decay:
            d = d + weight_decay * p
        if momentum:
            buf = d.copy() if buf is None else momentum * buf + (1 - dampening) * d
            d = d + momentum * buf if nesterov else buf
        p = p - _lr_at(lr, t) * d
        out.append(p)
    return out


def np_adam(p, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False,
            maximize=False, decoupled=False):
    p = p.astype(np.float64)
    m, v, vmax, out = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p), []
    (b1, b2) = betas
    for t, g in enumerate(grads, 1):
        lr_t = _lr_at(lr, t - 1)
        g = -g.astype(np.float64) if maximize else g.astype(np.float64)
        if weight_decay and decoupled:
            p = p * (1 - lr_t * weight_decay)
        elif weight_decay:
            g = g + weight_decay * p
        m = m + (1 - b1) * (g - m)
        v = b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v)
        denom = np.sqrt(vmax if amsgrad else v) / math.sqrt(1 - b2 ** t) + eps
        p = p - lr_t / (1 - b1 ** t) * m / denom
        out.append(p)
    return out


SGD_CASES = [
    {"lr": 0.1},
    {"lr": 0.05, "weight_decay": 0.1},
    {"lr": 0.1, "momentum": 0.9},
    {"lr": 0.1, "momentum": 0.9, "dampening": 0.3},
    {"lr": 0.1, "momentum": 0.8, "nesterov": True},
    {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01, "maximize": True},
    {"lr": 0.02, "momentum": 0.5, "dampening": 0.5, "weight_decay": 0.2},
    {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.05, "maximize": True},
]
ADAM_CASES = [
    {},
    {"lr": 0.01, "betas": (0.8, 0.99), "eps": 1e-6},
    {"lr": 0.01, "weight_decay": 0.1},
    {"lr": 0.01, "amsgrad": True},
    {"lr": 0.01, "maximize": True, "amsgrad": True, "weight_decay": 0.05},
    {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True},
]
def np_rmsprop(p, grads, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
               centered=False, maximize=False):
    """torch.optim.RMSprop's update in float64 numpy, step by step."""
    p = p.astype(np.float64)
    v, m, b, out = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p), []
    for g in grads:
        g = -g if maximize else g.astype(np.float64)
        g = g + weight_decay * p
        v = alpha * v + (1 - alpha) * g * g
        if centered:
            m = m + (1 - alpha) * (g - m)
            d = np.sqrt(v - m * m) + eps
        else:
            d = np.sqrt(v) + eps
        if momentum > 0:
            b = momentum * b + g / d
            p = p - lr * b
        else:
            p = p - lr * g / d
        out.append(p.copy())
    return out


RMSPROP_CASES = [{}, {"lr": 0.05, "alpha": 0.9, "momentum": 0.8},
                 {"centered": True, "weight_decay": 0.1, "eps": 1e-3},
                 {"centered": True, "momentum": 0.5, "maximize": True}]
ADAMW_CASES = [{}, {"lr": 0.01, "weight_decay": 0.1, "amsgrad": True},
               {"lr": 0.02, "weight_decay": 0.0, "maximize": True}]


def _leaf(arr, device, dtype=None):
    return cltensor.from_numpy(arr, device=device, dtype=dtype).requires_grad_()


def _run(opt_cls, kwargs, p0, grads, device, dtype):
    """Step an optimizer over `grads` on one parameter; returns the parameter after each step."""
    p = _leaf(p0, device, dtype)
    opt = opt_cls([p], **kwargs)
    out = []
    for g in grads:
        p.grad = cltensor.from_numpy(g, device=device, dtype=dtype)
        opt.step()
        out.append(p.numpy())
    return out


def _data(rng, shape, steps=STEPS):
    return rng.standard_normal(shape), [rng.standard_normal(shape) for _ in range(steps)]


def _check_steps(got, want, dtype):
    rtol, atol = TOL[np.dtype(dtype)]
    assert len(got) == len(want)
    for a, e in zip(got, want):
        assert_close(a, e, rtol=rtol, atol=atol)


# ---- every option against the numpy reference ----------------------------------------------------

@pytest.mark.parametrize("kwargs", SGD_CASES, ids=str)
def test_sgd_matches_reference(device, rng, fp_dtypes, kwargs):
    p0, grads = _data(rng, (7, 19))
    for dtype in fp_dtypes:
        p0c = p0.astype(dtype)
        got = _run(SGD, kwargs, p0c, [g.astype(dtype) for g in grads], device, dtype)
        _check_steps(got, np_sgd(p0c, [g.astype(dtype) for g in grads], **kwargs), dtype)


@pytest.mark.parametrize("kwargs", ADAM_CASES, ids=str)
def test_adam_matches_reference(device, rng, fp_dtypes, kwargs):
    p0, grads = _data(rng, (5, 23))
    ref_kwargs = dict(kwargs)
    ref_kwargs["decoupled"] = ref_kwargs.pop("decoupled_weight_decay", False)
    for dtype in fp_dtypes:
        p0c, gs = p0.astype(dtype), [g.astype(dtype) for g in grads]
        _check_steps(_run(Adam, kwargs, p0c, gs, device, dtype),
                     np_adam(p0c, gs, **ref_kwargs), dtype)


@pytest.mark.parametrize("kwargs", ADAMW_CASES, ids=str)
def test_adamw_matches_reference(device, rng, fp_dtypes, kwargs):
    p0, grads = _data(rng, (31,))
    ref_kwargs = {"weight_decay": 1e-2, **kwargs, "decoupled": True}
    for dtype in fp_dtypes:
        p0c, gs = p0.astype(dtype), [g.astype(dtype) for g in grads]
        _check_steps(_run(AdamW, kwargs, p0c, gs, device, dtype),
                     np_adam(p0c, gs, **ref_kwargs), dtype)


@pytest.mark.parametrize("kwargs", RMSPROP_CASES, ids=str)
def test_rmsprop_matches_reference(device, rng, fp_dtypes, kwargs):
    p0, grads = _data(rng, (6, 17))
    for dtype in fp_dtypes:
        p0c, gs = p0.astype(dtype), [g.astype(dtype) for g in grads]
        _check_steps(_run(RMSprop, kwargs, p0c, gs, device, dtype),
                     np_rmsprop(p0c, gs, **kwargs), dtype)
    with pytest.raises(ValueError, match="Invalid alpha value"):
        RMSprop([cltensor.zeros(2, device=device, requires_grad=True)], alpha=-0.1)


@pytest.mark.parametrize("shape", [(0,), (1,), (257,), (3, 0, 2), (2, 3, 5, 7), ()], ids=str)
def test_awkward_sizes(device, rng, shape):
    p0, grads = _data(rng, shape, steps=2)
    p0, grads = p0.astype(np.float32), [g.astype(np.float32) for g in grads]
    kw = {"lr": 0.1, "momentum": 0.9, "nesterov": True}
    _check_steps(_run(SGD, kw, p0, grads, device, np.float32), np_sgd(p0, grads, **kw), np.float32)
    _check_steps(_run(Adam, {"amsgrad": True}, p0, grads, device, np.float32),
                 np_adam(p0, grads, amsgrad=True), np.float32)


def test_changing_lr_between_steps(device, rng):
    """lr is a kernel argument, not baked into the build: a scheduler's changes take effect."""
    p0, grads = _data(rng, (40,))
    p0, grads = p0.astype(np.float32), [g.astype(np.float32) for g in grads]
    lrs = [0.1 * 0.5 ** t for t in range(STEPS)]
    for opt_cls, ref, kw in ((SGD, np_sgd, {"momentum": 0.9}), (Adam, np_adam, {})):
        p = _leaf(p0, device)
        opt = opt_cls([p], lr=0.1, **kw)
        sched = StepLR(opt, step_size=1, gamma=0.5)
        got = []
        for g in grads:
            p.grad = cltensor.from_numpy(g, device=device)
            opt.step()
            sched.step()
            got.append(p.numpy())
        _check_steps(got, ref(p0, grads, lr=lrs, **kw), np.float32)


def test_strided_parameters_and_gradients(device, rng):
    """Transposed, step-sliced and offset parameters, broadcast gradients: same result as
    contiguous copies, and the rest of the parameter's storage untouched."""
    base0 = rng.standard_normal((9, 14)).astype(np.float32)
    g_full = rng.standard_normal((14, 20)).astype(np.float32)
    for opt_cls, kw in ((SGD, {"lr": 0.1, "momentum": 0.9}), (Adam, {"lr": 0.01, "amsgrad": True})):
        base = cltensor.from_numpy(base0, device=device)
        p = base.t()[1:12:2, 2:]                                  # (6, 7), strides (2, 14)
        assert not p.is_contiguous() and p.offset != 0
        p.requires_grad_()
        q = _leaf(p.numpy(), device)
        gt = cltensor.from_numpy(g_full, device=device)[2:14:2, 3:17:2]   # strided view
        g_row = cltensor.from_numpy(g_full[0, :7].copy(), device=device).expand(6, 7)
        opt_p, opt_q = opt_cls([p], **kw), opt_cls([q], **kw)
        for g in (gt, g_row, gt):
            p.grad, q.grad = g, g.contiguous()
            opt_p.step()
            opt_q.step()
        np.testing.assert_array_equal(p.numpy(), q.numpy())
        expect = base0.copy()
        expect.T[1:12:2, 2:] = q.numpy()
        np.testing.assert_array_equal(base.numpy(), expect)


def test_multi_tensor_launches(device, rng, fp_dtypes):
    """SGD and Adam update contiguous parameters 8 per launch (sgd_multi, adam_multi), each
    parameter as the single-tensor reference does; a strided one and an empty one apart."""
    shapes = [(4, 3), (3,), (2, 2, 5), (1,), (0,), (9,), (2, 7), (5, 1), (6,), (3, 3), (8,), (2,)]
    n_multi = -(-(len(shapes) - 1) // 8)  # the empty parameter needs no launch
    for dtype in fp_dtypes:
        for opt_cls, kw, ref, name in (
                (SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True}, np_sgd, "sgd"),
                (Adam, {"lr": 0.05, "amsgrad": True}, np_adam, "adam"),
                (AdamW, {"lr": 0.05}, lambda p, g, **k: np_adam(p, g, decoupled=True,
                                                                weight_decay=1e-2, **k), "adam")):
            data = [_data(rng, s, steps=2) for s in shapes]
            data = [(p.astype(dtype), [g.astype(dtype) for g in gs]) for p, gs in data]
            ps = [_leaf(p, device, dtype) for p, _ in data]
            base = cltensor.from_numpy(rng.standard_normal((5, 4)).astype(dtype), device=device)
            strided = base.t()[:, 1:].requires_grad_()  # (4, 4) view, offset 1
            s0, s_grads = strided.numpy(), [rng.standard_normal((4, 4)).astype(dtype)
                                            for _ in range(2)]
            opt = opt_cls(ps + [strided], **kw)
            for step in range(2):
                for p, (_, gs) in zip(ps, data):
                    p.grad = cltensor.from_numpy(gs[step], device=device)
                strided.grad = cltensor.from_numpy(s_grads[step], device=device)
                cltensor.synchronize()
                with cltensor.profile() as prof:
                    opt.step()
                names = sorted(r["name"] for r in prof.records())
                assert names == sorted([f"{name}_multi"] * n_multi + [f"{name}_step"])
            for p, (p0, gs) in zip(ps, data):
                _check_steps([p.numpy()], ref(p0, gs, **kw)[-1:], dtype)
            _check_steps([strided.numpy()], ref(s0, s_grads, **kw)[-1:], dtype)


def test_param_groups_and_missing_grads(device, rng):
    a0, b0, c0 = (rng.standard_normal(n).astype(np.float32) for n in (5, 6, 7))
    ga, gb = rng.standard_normal(5).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    a, b, c = _leaf(a0, device), _leaf(b0, device), _leaf(c0, device)
    opt = SGD([{"params": [a, c]}, {"params": b, "lr": 0.5, "momentum": 0.9}], lr=0.1)
    assert opt.param_groups[0]["momentum"] == 0 and opt.param_groups[1]["lr"] == 0.5
    a.grad, b.grad = cltensor.from_numpy(ga, device=device), cltensor.from_numpy(gb, device=device)
    opt.step()
    assert_close(a.numpy(), np_sgd(a0, [ga], lr=0.1)[0])
    assert_close(b.numpy(), np_sgd(b0, [gb], lr=0.5, momentum=0.9)[0])
    np.testing.assert_array_equal(c.numpy(), c0)   # no gradient: untouched, no state
    assert c not in opt.state and "momentum_buffer" in opt.state[b]
    opt.add_param_group({"params": [_leaf(c0.copy(), device)], "lr": 0.01})
    assert opt.param_groups[2]["lr"] == 0.01 and opt.param_groups[2]["momentum"] == 0
    named = Adam([("w", a), ("b", b)])                 # named parameters, as torch 2.x takes
    assert named.param_groups[0]["param_names"] == ["w", "b"]
    assert named.param_groups[0]["params"][1] is b


def test_zero_grad_and_closure(device, rng):
    p = _leaf(rng.standard_normal(4).astype(np.float32), device)
    opt = SGD([p], lr=0.1)
    target = cltensor.from_numpy(rng.standard_normal(4).astype(np.float32), device=device)

    def closure():
        opt.zero_grad()
        loss = ((p - target) ** 2).sum()
        loss.backward()
        return loss

    with cltensor.no_grad():   # the closure still records: step turns grad mode on for it
        losses = [opt.step(closure).item() for _ in range(5)]
    assert losses == sorted(losses, reverse=True) and losses[-1] < losses[0]
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(p.grad.numpy(), np.zeros(4, np.float32))
    opt.zero_grad()
    assert p.grad is None


def test_parameter_of_a_module_works(device, rng):
    from cltensor.nn import Parameter
    w0, g = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4))
    w = Parameter(cltensor.from_numpy(w0, device=device))
    w.grad = cltensor.from_numpy(g.astype(np.float32), device=device)
    AdamW([w], lr=0.1).step()
    assert isinstance(w, Parameter)
    assert_close(w.numpy(), np_adam(w0, [g.astype(np.float32)], lr=0.1, weight_decay=1e-2,
                                    decoupled=True)[0], rtol=2e-5)


# ---- state_dict ----------------------------------------------------------------------------------

def _as_numpy_state(sd):
    return {"state": {k: {n: (v.numpy() if hasattr(v, "numpy") else v) for n, v in s.items()}
                      for k, s in sd["state"].items()},
            "param_groups": sd["param_groups"]}


@pytest.mark.parametrize("opt_cls,kw", [(SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
                                        (Adam, {"lr": 0.01, "amsgrad": True}),
                                        (AdamW, {"lr": 0.01}),
                                        (RMSprop, {"lr": 0.01, "momentum": 0.5, "centered": True})],
                         ids=["SGD", "Adam", "AdamW", "RMSprop"])
def test_state_dict_round_trip(device, rng, opt_cls, kw):
    """Resuming from state_dict (also converted to numpy) continues exactly as without a break."""
    shapes = ((3, 4), (5,))
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(4)]
    ps = [_leaf(rng.standard_normal(s).astype(np.float32), device) for s in shapes]
    opt = opt_cls(ps, **kw)

    def step(opt, params, gs):
        for p, g in zip(params, gs):
            p.grad = cltensor.from_numpy(g, device=device)
        opt.step()

    for gs in grads[:2]:
        step(opt, ps, gs)
    sd = opt.state_dict()
    assert sorted(sd["state"]) == [0, 1] and sd["param_groups"][0]["params"] == [0, 1]
    resumed = []
    for saved in (sd, _as_numpy_state(sd)):
        qs = [_leaf(p.numpy(), device) for p in ps]
        opt2 = opt_cls(qs, lr=123.0)
        opt2.load_state_dict(saved)
        assert opt2.param_groups[0]["lr"] == kw["lr"]
        for gs in grads[2:]:
            step(opt2, qs, gs)
        resumed.append([q.numpy() for q in qs])
    for gs in grads[2:]:
        step(opt, ps, gs)
    for run in resumed:
        for p, q in zip(ps, run):
            np.testing.assert_array_equal(q, p.numpy())


def test_load_state_dict_errors(device, rng):
    ps = [_leaf(rng.standard_normal(3).astype(np.float32), device) for _ in range(2)]
    opt = Adam(ps)
    for p in ps:
        p.grad = cltensor.from_numpy(np.ones(3, np.float32), device=device)
    opt.step()
    sd = _as_numpy_state(opt.state_dict())
    with pytest.raises(ValueError, match="group 0 has 2 parameters, the optimizer's has 1"):
        Adam([ps[0]]).load_state_dict(sd)
    two_groups = Adam([{"params": [ps[0]]}, {"params": [ps[1]]}])
    with pytest.raises(ValueError, match="1 parameter groups, the optimizer has 2"):
        two_groups.load_state_dict(sd)
    bad = {"state": {0: dict(sd["state"][0], exp_avg=np.zeros(4, np.float32))},
           "param_groups": sd["param_groups"]}
    fresh = Adam(ps, lr=0.5)
    with pytest.raises(ValueError, match=r"'exp_avg' has shape \(4,\), its parameter has "
                                         r"shape \(3,\)"):
        fresh.load_state_dict(bad)
    assert fresh.param_groups[0]["lr"] == 0.5 and not fresh.state   # nothing changed


# ---- bad input -----------------------------------------------------------------------------------

@pytest.mark.parametrize("make,err,match", [
    (lambda p: SGD([p], lr=-0.1), ValueError, "Invalid learning rate: -0.1"),
    (lambda p: SGD([p], lr=float("nan")), ValueError, "Invalid learning rate"),
    (lambda p: SGD([p], momentum=-1), ValueError, "Invalid momentum value"),
    (lambda p: SGD([p], weight_decay=-1), ValueError, "Invalid weight_decay value"),
    (lambda p: SGD([p], nesterov=True), ValueError, "Nesterov momentum requires a momentum"),
    (lambda p: SGD([p], momentum=0.9, dampening=0.1, nesterov=True), ValueError, "zero dampening"),
    (lambda p: SGD([{"params": [p], "lr": -1.0}], lr=0.1), ValueError, "Invalid learning rate"),
    (lambda p: Adam([p], lr=-1e-3), ValueError, "Invalid learning rate"),
    (lambda p: Adam([p], eps=-1), ValueError, "Invalid epsilon value"),
    (lambda p: Adam([p], betas=(1.0, 0.999)), ValueError, "beta parameter at index 0"),
    (lambda p: Adam([p], betas=(0.9, -0.1)), ValueError, "beta parameter at index 1"),
    (lambda p: AdamW([p], weight_decay=-0.1), ValueError, "Invalid weight_decay value"),
    (lambda p: SGD([], lr=0.1), ValueError, "empty parameter list"),
    (lambda p: SGD(p, lr=0.1), TypeError, "iterable of tensors or dicts"),
    (lambda p: SGD({p}, lr=0.1), TypeError, "iterable of tensors or dicts"),
    (lambda p: SGD([p, 3], lr=0.1), TypeError, "optimizer can only optimize tensors"),
    (lambda p: SGD([p * 2], lr=0.1), ValueError, "can't optimize a non-leaf tensor"),
    (lambda p: SGD([{"params": [p]}, {"params": [p]}], lr=0.1), ValueError,
     "more than one parameter group"),
    (lambda p: SGD([cltensor.zeros(3, dtype=cltensor.int64, device=p.device)]), TypeError,
     "floating point tensors"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_bad_arguments(device, make, err, match):
    p = cltensor.ones(3, device=device).requires_grad_()
    with pytest.raises(err, match=match):
        make(p)


def test_bad_gradient_changes_nothing(device, rng):
    a0, b0 = rng.standard_normal(4).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    a, b = _leaf(a0, device), _leaf(b0, device)
    opt = Adam([a, b])
    a.grad = cltensor.ones(4, device=device)
    for bad, err, match in [(cltensor.ones(4, device=device), RuntimeError,
                             r"gradient of shape \(4,\) for a parameter of shape \(5,\)"),
                            (cltensor.ones(5, dtype=cltensor.int64, device=device), RuntimeError,
                             "gradient dtype int64 differs"),
                            ("oops", TypeError, "not a tensor")]:
        b.grad = bad
        with pytest.raises(err, match=match):
            opt.step()
        np.testing.assert_array_equal(a.numpy(), a0)
        np.testing.assert_array_equal(b.numpy(), b0)
        assert not opt.state


def test_state_that_no_longer_fits_is_an_error(device, rng):
    p = _leaf(rng.standard_normal(6).astype(np.float32), device)
    opt = SGD([p], lr=0.1, momentum=0.9)
    p.grad = cltensor.ones(6, device=device)
    opt.step()
    opt.state[p]["momentum_buffer"] = cltensor.zeros(3, device=device)
    with pytest.raises(RuntimeError, match="'momentum_buffer'.*no longer fits"):
        opt.step()


def test_expanded_parameter_is_an_error(device):
    p = cltensor.ones(1, 3, device=device).expand(4, 3).requires_grad_()
    opt = SGD([p], lr=0.1)
    p.grad = cltensor.ones(4, 3, device=device)
    with pytest.raises(RuntimeError, match="expanded view"):
        opt.step()


def test_repr(device):
    opt = SGD([cltensor.ones(2, device=device).requires_grad_()], lr=0.1, momentum=0.9)
    assert repr(opt).startswith("SGD (\nParameter Group 0\n    dampening: 0\n    lr: 0.1\n")
    assert isinstance(opt, Optimizer)


# ---- property test -------------------------------------------------------------------------------

@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_sgd_any_view_property(device, data):
    """Any permuted, step-sliced view updates exactly like its contiguous copy and like numpy."""
    nd = data.draw(st.integers(1, 3))
    shape = data.draw(st.lists(st.integers(1, 6), min_size=nd, max_size=nd))
    steps = data.draw(st.lists(st.integers(1, 2), min_size=nd, max_size=nd))
    perm = data.draw(st.permutations(range(nd)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    host = rng.standard_normal([n * s for n, s in zip(shape, steps)]).astype(np.float32)
    base = cltensor.from_numpy(host, device=device)
    view = base[tuple(slice(None, None, s) for s in steps)].permute(perm).requires_grad_()
    p0 = view.numpy()
    grads = [rng.standard_normal(p0.shape).astype(np.float32) for _ in range(2)]
    opt = SGD([view], lr=0.1, momentum=0.9, weight_decay=0.01)
    for g in grads:
        view.grad = cltensor.from_numpy(g, device=device)
        opt.step()
    ref = np_sgd(p0, grads, lr=0.1, momentum=0.9, weight_decay=0.01)[-1]
    assert_close(view.numpy(), ref, rtol=2e-5, atol=1e-6)
    untouched = np.ones(host.shape, bool)
    untouched[tuple(slice(None, None, s) for s in steps)] = False
    np.testing.assert_array_equal(base.numpy()[untouched], host[untouched])


# ---- schedulers ----------------------------------------------------------------------------------

def _opt(device, lr=0.1):
    return SGD([cltensor.ones(2, device=device).requires_grad_()], lr=lr)


def _schedule(sched, n):
    lrs = []
    for _ in range(n):
        sched.optimizer.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    return lrs


def test_step_lr(device):
    sched = StepLR(_opt(device), step_size=3, gamma=0.5)
    assert sched.get_last_lr() == [0.1] and sched.last_epoch == 0
    lrs = _schedule(sched, 10)
    assert lrs == pytest.approx([0.1 * 0.5 ** (e // 3) for e in range(1, 11)], rel=1e-12)


@pytest.mark.parametrize("eta_min", [0.0, 0.01])
def test_cosine_annealing_recursive_equals_closed_form(device, eta_min):
    T = 7
    sched = CosineAnnealingLR(_opt(device), T_max=T, eta_min=eta_min)
    lrs = _schedule(sched, 3 * T)   # past T_max: the schedule rises again
    closed = [eta_min + (0.1 - eta_min) * (1 + math.cos(math.pi * e / T)) / 2
              for e in range(1, 3 * T + 1)]
    assert lrs == pytest.approx(closed, rel=1e-9, abs=1e-12)


def test_step_with_epoch_uses_closed_form(device):
    sched = CosineAnnealingLR(_opt(device), T_max=10)
    sched.optimizer.step()
    with pytest.warns(UserWarning, match="epoch parameter"):
        sched.step(4)
    assert sched.get_last_lr()[0] == pytest.approx(0.1 * (1 + math.cos(math.pi * 0.4)) / 2)


def test_scheduler_warnings_and_errors(device):
    opt = _opt(device)
    sched = StepLR(opt, step_size=2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()
    with pytest.warns(UserWarning, match="get_last_lr"):
        sched.get_lr()
    with pytest.raises(ValueError, match="step_size must be a positive integer"):
        StepLR(opt, step_size=0)
    with pytest.raises(ValueError, match="T_max must be a positive integer"):
        CosineAnnealingLR(opt, T_max=-1)
    with pytest.raises(TypeError, match="is not an Optimizer"):
        StepLR([1, 2], step_size=1)
    with pytest.raises(KeyError, match="initial_lr"):
        CosineAnnealingLR(_opt(device), T_max=5, last_epoch=3)
    with pytest.raises(NotImplementedError):
        LRScheduler(_opt(device))


def test_scheduler_state_dict_resumes(device):
    a = CosineAnnealingLR(_opt(device), T_max=6)
    first = _schedule(a, 4)
    b = CosineAnnealingLR(_opt(device), T_max=6)
    b.load_state_dict(a.state_dict())
    b.optimizer.param_groups[0]["lr"] = a.optimizer.param_groups[0]["lr"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _schedule(b, 5) == _schedule(a, 5)
    assert len(first) == 4


# ---- against torch -------------------------------------------------------------------------------

def _torch_run(torch, opt_name, kwargs, p0, grads):
    p = torch.nn.Parameter(torch.from_numpy(p0.copy()))
    opt = getattr(torch.optim, opt_name)([p], **kwargs)
    out = []
    for g in grads:
        p.grad = torch.from_numpy(g.copy())
        opt.step()
        out.append(p.detach().numpy().copy())
    return out


@pytest.mark.parametrize("opt_cls,kwargs", [(SGD, k) for k in SGD_CASES] +
                         [(Adam, k) for k in ADAM_CASES] + [(AdamW, k) for k in ADAMW_CASES] +
                         [(RMSprop, k) for k in RMSPROP_CASES],
                         ids=lambda x: x.__name__ if isinstance(x, type) else str(x))
def test_against_torch(device, rng, fp_dtypes, opt_cls, kwargs):
    torch = pytest.importorskip("torch")
    p0, grads = _data(rng, (11, 13), steps=5)
    for dtype in fp_dtypes:
        p0c, gs = p0.astype(dtype), [g.astype(dtype) for g in grads]
        want = _torch_run(torch, opt_cls.__name__, kwargs, p0c, gs)
        got = _run(opt_cls, kwargs, p0c, gs, device, dtype)
        rtol, atol = (2e-6, 1e-7) if dtype == np.float32 else (1e-13, 1e-15)
        for a, e in zip(got, want):
            assert_close(a, e, rtol=rtol, atol=atol)


@pytest.mark.parametrize("cls,kw", [("StepLR", {"step_size": 3, "gamma": 0.3}),
                                    ("CosineAnnealingLR", {"T_max": 5, "eta_min": 0.001}),
                                    ("CosineAnnealingLR", {"T_max": 1}),
                                    ("MultiStepLR", {"milestones": [7, 2, 7, 11], "gamma": 0.5}),
                                    ("ExponentialLR", {"gamma": 0.9}),
                                    ("LinearLR", {"start_factor": 0.25, "total_iters": 6}),
                                    ("LinearLR", {"start_factor": 1.0, "end_factor": 0.1}),
                                    ("OneCycleLR", {"max_lr": 0.5, "total_steps": 17}),
                                    ("OneCycleLR", {"max_lr": 0.5, "total_steps": 20,
                                                    "three_phase": True,
                                                    "anneal_strategy": "linear",
                                                    "cycle_momentum": False})])
def test_schedulers_against_torch(device, cls, kw):
    torch = pytest.importorskip("torch")
    import cltensor.optim.lr_scheduler as ours
    topt = torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1)
    tsched = getattr(torch.optim.lr_scheduler, cls)(topt, **kw)
    want = []
    for _ in range(17):
        topt.step()
        tsched.step()
        want.append(tsched.get_last_lr()[0])
    assert _schedule(getattr(ours, cls)(_opt(device), **kw), 17) == want


def _torch_and_ours(device, torch, opt_name, opt_kw, groups=1):
    tparams = [torch.nn.Parameter(torch.ones(2)) for _ in range(groups)]
    ours = [cltensor.ones(2, device=device).requires_grad_() for _ in range(groups)]
    topt = getattr(torch.optim, opt_name)([{"params": [p]} for p in tparams], **opt_kw)
    opt = getattr(cltensor.optim, opt_name)([{"params": [p]} for p in ours], **opt_kw)
    return topt, opt


def test_one_cycle_momentum_and_lambda_against_torch(device):
    torch = pytest.importorskip("torch")
    import cltensor.optim.lr_scheduler as ours
    for opt_name, opt_kw, key in (("SGD", {"lr": 0.1, "momentum": 0.9}, "momentum"),
                                  ("Adam", {"lr": 0.1}, "betas")):
        topt, opt = _torch_and_ours(device, torch, opt_name, opt_kw, groups=2)
        kw = dict(max_lr=[0.5, 0.2], epochs=3, steps_per_epoch=4, pct_start=0.4)
        tsched = torch.optim.lr_scheduler.OneCycleLR(topt, **kw)
        sched = ours.OneCycleLR(opt, **kw)
        for _ in range(12):
            for o, sc in ((topt, tsched), (opt, sched)):
                o.step()
                sc.step()
            assert sched.get_last_lr() == pytest.approx(tsched.get_last_lr(), rel=1e-12)
            for g, tg in zip(opt.param_groups, topt.param_groups):
                assert g[key] == pytest.approx(tg[key], rel=1e-12)
        with pytest.raises(ValueError, match="tried to step 13 times"):
            opt.step()
            sched.step()
    topt, opt = _torch_and_ours(device, torch, "SGD", {"lr": 0.1}, groups=2)
    fns = [lambda e: 0.9 ** e, lambda e: 1.0 / (e + 1)]
    tsched = torch.optim.lr_scheduler.LambdaLR(topt, fns)
    sched = ours.LambdaLR(opt, fns)
    for _ in range(6):
        topt.step(), tsched.step(), opt.step(), sched.step()
        assert sched.get_last_lr() == pytest.approx(tsched.get_last_lr(), rel=1e-12)
    assert "lr_lambdas" not in sched.state_dict()


@pytest.mark.parametrize("kw", [{}, {"mode": "max", "threshold_mode": "abs", "threshold": 0.5,
                                     "patience": 1, "cooldown": 2, "factor": 0.5,
                                     "min_lr": 0.02}])
def test_reduce_lr_on_plateau_against_torch(device, kw):
    torch = pytest.importorskip("torch")
    import cltensor.optim.lr_scheduler as ours
    topt, opt = _torch_and_ours(device, torch, "SGD", {"lr": 0.1})
    kw = dict({"patience": 2}, **kw)
    tsched = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kw)
    sched = ours.ReduceLROnPlateau(opt, **kw)
    metrics = [1.0, 0.9, 0.95, 0.97, 0.99, 0.8, 0.85, 0.9, 0.9, 0.9, 2.0, 2.1, 2.2, 2.2, 2.2,
               2.2, 2.2]
    for m in metrics:
        tsched.step(m)
        sched.step(cltensor.tensor([m], device=device) if m > 2 else m)
        assert opt.param_groups[0]["lr"] == pytest.approx(topt.param_groups[0]["lr"],
                                                          rel=1e-12)
    assert sched.get_last_lr() == [opt.param_groups[0]["lr"]]
    assert opt.param_groups[0]["lr"] < 0.1


def test_new_schedulers_closed_forms_and_errors(device):
    import cltensor.optim.lr_scheduler as ours
    for make in (lambda o: ours.MultiStepLR(o, [2, 5, 5], 0.5),
                 lambda o: ours.ExponentialLR(o, 0.8),
                 lambda o: ours.LinearLR(o, 0.2, 0.9, 4)):
        recursive = _schedule(make(_opt(device)), 8)
        sched = make(_opt(device))
        with pytest.warns(UserWarning, match="deprecated"):
            closed = []
            for epoch in range(1, 9):
                sched.optimizer.step()
                sched.step(epoch)
                closed.append(sched.get_last_lr()[0])
        assert closed == pytest.approx(recursive, rel=1e-12)
    for make, err, match in [
            (lambda o: ours.MultiStepLR(o, [0]), ValueError, "milestones must be a positive"),
            (lambda o: ours.LinearLR(o, start_factor=0), ValueError, "start_factor"),
            (lambda o: ours.LambdaLR(o, [abs, abs]), ValueError, "expected 1 lr_lambdas"),
            (lambda o: ours.LambdaLR(o, 3), TypeError, "callable"),
            (lambda o: ours.OneCycleLR(o, 0.1), ValueError, "total_steps, or epochs"),
            (lambda o: ours.OneCycleLR(o, 0.1, 10, anneal_strategy="exp"), ValueError,
             "anneal_strategy"),
            (lambda o: ours.OneCycleLR(o, 0.1, 10), ValueError, "momentum or beta1"),
            (lambda o: ours.ReduceLROnPlateau(o, factor=1.0), ValueError, "factor"),
            (lambda o: ours.ReduceLROnPlateau(o, mode="up"), ValueError, "mode")]:
        opt = _opt(device) if "momentum" not in match else cltensor.optim.SGD(
            [cltensor.ones(1, device=device).requires_grad_()], lr=0.1)
        if "momentum" in match:
            opt.defaults.pop("momentum", None)
        with pytest.raises(err, match=match):
            make(opt)


# ---- gradient clipping (cltensor.nn.utils) -------------------------------------------------------

def _with_grads(device, rng, shapes, scale):
    params = []
    for shape in shapes:
        p = cltensor.zeros(shape, device=device, requires_grad=True)
        p.grad = cltensor.from_numpy(scale * rng.standard_normal(shape).astype(np.float32),
                                     device=device)
        params.append(p)
    return params


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
def test_clip_grad_norm(device, rng, norm_type):
    params = _with_grads(device, rng, [(3, 4), (5,)], 3.0)
    skipped = cltensor.zeros(2, device=device, requires_grad=True)  # no .grad: left out
    before = [p.grad.numpy().astype(np.float64) for p in params]
    flat = np.concatenate([g.ravel() for g in before])
    want = (np.abs(flat).max() if norm_type == math.inf else
            (np.abs(flat) ** norm_type).sum() ** (1 / norm_type))
    total = cltensor.nn.utils.clip_grad_norm_(params + [skipped], 1.5, norm_type)
    assert total.shape == () and skipped.grad is None
    assert_close(total, want, rtol=1e-5)
    for p, g in zip(params, before):
        assert_close(p.grad, g * 1.5 / (want + 1e-6), rtol=1e-5, atol=1e-7)
    # already within max_norm: unchanged
    small = _with_grads(device, rng, [(4,)], 1e-3)
    g = small[0].grad.numpy().copy()
    cltensor.nn.utils.clip_grad_norm_(small[0], 10.0)
    np.testing.assert_array_equal(small[0].grad.numpy(), g)


def test_clip_grad_norm_nonfinite_and_bad_input(device, rng):
    (p,) = _with_grads(device, rng, [(4,)], 1.0)
    p.grad[1] = float("nan")
    with pytest.raises(RuntimeError, match="non-finite"):
        cltensor.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    with pytest.raises(TypeError, match="max_norm must be a real number"):
        cltensor.nn.utils.clip_grad_norm_([p], "1")
    with pytest.raises(TypeError, match="expected tensors"):
        cltensor.nn.utils.clip_grad_norm_([p, 3], 1.0)
    assert cltensor.nn.utils.clip_grad_norm_([], 1.0).item() == 0.0


def test_clip_grad_value(device, rng):
    params = _with_grads(device, rng, [(3, 4), (6,)], 2.0)
    before = [p.grad.numpy() for p in params]
    cltensor.nn.utils.clip_grad_value_(params, 0.5)
    for p, g in zip(params, before):
        np.testing.assert_array_equal(p.grad.numpy(), np.clip(g, -0.5, 0.5))
    assert cltensor.is_tensor(params[0]) and not cltensor.is_tensor(before[0])
