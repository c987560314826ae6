"""float16 and bfloat16 in place in the scan, sort, upsample, indexing, loss and optimizer
kernel families, against torch CPU in the same dtype (losses and optimizer steps against torch
in float64 on the same 16-bit values, where torch's own 16-bit arithmetic rounds every step),
and linear algebra's refusals: odd sizes, strided inputs, result buffers poisoned (all bits
set: NaN for floats, -1 for integers) before the kernels write them."""
import numpy as np
import pytest
import torch

import cltensor as ct
from cltensor.tensor import ClTensor

HALF = ["float16", "bfloat16"]


def _random(shape, name, device, rng, scale=3.0):
    """The same random values as a cltensor and a torch tensor of dtype `name`."""
    tt = torch.from_numpy(np.asarray(rng.standard_normal(shape) * scale, np.float32))
    tt = tt.to(getattr(torch, name))
    return ct.from_numpy(tt.float().numpy(), device=device).to(getattr(ct, name)), tt


def _strided(x, tx):
    """x and tx seen through a transposed, sliced view (not contiguous, offset)."""
    return x.transpose(0, 1)[1:], tx.transpose(0, 1)[1:]


def _same(mine, want, ulps=0):
    """mine equals torch's `want` (same dtype and shape) to `ulps` units of its epsilon."""
    assert str(mine.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    got, exp = mine.detach().float().numpy(), want.detach().float().numpy()
    assert got.shape == exp.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(exp))
    np.testing.assert_array_equal(got[np.isinf(exp)], exp[np.isinf(exp)])
    ok = np.isfinite(exp)
    if want.is_floating_point():
        tol = ulps * torch.finfo(want.dtype).eps * np.maximum(np.abs(exp[ok]), 1)
    else:
        tol = 0
    assert (np.abs(got[ok] - exp[ok]) <= tol).all(), (got, exp)


# ---- scan.cl -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("op", ["cumsum", "cumprod", "logcumsumexp"])
def test_scans_accumulate_in_float32(device, rng, poisoned_bytes, name, op):
    scale = 0.3 if op == "cumprod" else 3.0
    x, tx = _random((9, 37), name, device, rng, scale)
    x[2, 5] = tx[2, 5] = float("nan")
    for a, ta in ((x, tx), _strided(x, tx)):
        for dim in (0, 1):
            _same(getattr(ct, op)(a, dim), getattr(torch, op)(ta, dim), ulps=2)


@pytest.mark.parametrize("name", HALF)
def test_long_cumsum_is_not_rounded_per_step(device, name):
    """4100 ones: a 16-bit running sum would stop at 2048 (float16) or 256 (bfloat16); torch
    keeps the sum in float32 and rounds each output. 4100 elements also take several blocks."""
    d, t = getattr(ct, name), getattr(torch, name)
    got = ct.ones(4100, dtype=d, device=device).cumsum(0)
    _same(got, torch.ones(4100, dtype=t).cumsum(0))


@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_running_extremes(device, rng, poisoned_bytes, name, op):
    x, tx = _random((7, 300), name, device, rng)
    x[1, 3] = tx[1, 3] = float("nan")
    x[2] = x[2].round()
    tx[2] = tx[2].round()  # ties: the last occurrence
    for a, ta in ((x, tx), _strided(x, tx)):
        got, want = getattr(ct, op)(a, 1), getattr(torch, op)(ta, 1)
        _same(got.values, want.values)
        _same(got.indices, want.indices)


# ---- sort.cl -----------------------------------------------------------------------------------

def _with_nans_and_ties(name, device, rng, shape):
    x, tx = _random(shape, name, device, rng)
    tx = tx.round()  # many ties: stability shows
    tx[0, 1] = tx[2, 0] = float("nan")
    tx[1, 2] = float("inf")
    return ct.from_numpy(tx.float().numpy(), device=device).to(getattr(ct, name)), tx


@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("n", [13, 3000])  # in local memory; the global network
def test_sort_argsort_topk(device, rng, poisoned_bytes, name, n):
    x, tx = _with_nans_and_ties(name, device, rng, (3, n))
    for a, ta in ((x, tx), (x[:, 1:], tx[:, 1:])):
        for desc in (False, True):
            got = ct.sort(a, dim=1, descending=desc, stable=True)
            want = torch.sort(ta, dim=1, descending=desc, stable=True)
            _same(got.values, want.values)
            _same(got.indices, want.indices)
            _same(ct.argsort(a, dim=1, descending=desc, stable=True),
                  torch.argsort(ta, dim=1, descending=desc, stable=True))
        _same(ct.msort(a.t()), torch.msort(ta.t()))
        got, want = ct.topk(a, 5, 1), torch.topk(ta, 5, 1)
        _same(got.values, want.values)
        got, want = ct.topk(a, 4, 1, largest=False), torch.topk(ta, 4, 1, largest=False)
        _same(got.values, want.values)


@pytest.mark.parametrize("name", HALF)
def test_order_statistics_and_unique(device, rng, poisoned_bytes, name):
    x, tx = _with_nans_and_ties(name, device, rng, (5, 11))
    y, ty = x[1:].abs(), tx[1:].abs()  # rows without NaN
    for got, want in ((ct.kthvalue(y, 3, 1), torch.kthvalue(ty, 3, 1)),
                      (ct.median(y, 1), torch.median(ty, 1)),
                      (ct.nanmedian(x, 1), torch.nanmedian(tx, 1))):
        _same(got.values, want.values)
    _same(ct.median(x, 1).values, torch.median(tx, 1).values)  # NaN rows give NaN
    _same(ct.median(y), torch.median(ty))
    got, want = ct.unique(y, return_counts=True), torch.unique(ty, return_counts=True)
    _same(got[0], want[0])
    _same(got[1], want[1])


@pytest.mark.parametrize("name", HALF)
def test_searchsorted_and_bucketize(device, rng, poisoned_bytes, name):
    s, ts = _random((4, 17), name, device, rng)
    s, ts = ct.sort(s, 1).values, torch.sort(ts, 1).values
    v, tv = _random((4, 6), name, device, rng)
    v[0, 0] = tv[0, 0] = float("nan")
    v[1, 1], tv[1, 1] = s[1, 3], ts[1, 3]  # exactly on an element: left and right differ
    for right in (False, True):
        _same(ct.searchsorted(s, v, right=right), torch.searchsorted(ts, tv, right=right))
        _same(ct.bucketize(v, s[0], right=right), torch.bucketize(tv, ts[0], right=right))


# ---- upsample.cl -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("mode,kw", [("nearest", {"scale_factor": 2}),
                                     ("nearest", {"size": (7, 4)}),
                                     ("bilinear", {"size": (7, 9), "align_corners": False}),
                                     ("bilinear", {"scale_factor": 1.7, "align_corners": True}),
                                     ("bicubic", {"size": (5, 8), "align_corners": False})])
def test_interpolate_forward_and_backward(device, rng, poisoned_bytes, name, mode, kw):
    x, tx = _random((2, 3, 5, 6), name, device, rng)
    x, tx = x[:, :, :, 1:].requires_grad_(), tx[:, :, :, 1:].requires_grad_()  # strided
    got = ct.nn.functional.interpolate(x, mode=mode, **kw)
    want = torch.nn.functional.interpolate(tx, mode=mode, **kw)
    _same(got, want, ulps=2)  # torch's bicubic rounds its 16-bit weights: up to 2 ulps off
    g, tg = _random(tuple(want.shape), name, device, rng)
    got.backward(g)
    want.backward(tg)
    _same(x.grad, tx.grad, ulps=2)


@pytest.mark.parametrize("name", HALF)
def test_local_response_norm_forward_and_backward(device, rng, poisoned_bytes, name):
    """norm.cl's LRN reads and writes 16-bit data, computing in float32: against torch's
    float32 LRN on the same 16-bit values, rounded once (torch's own 16-bit LRN rounds each
    step)."""
    x, tx = _random((2, 7, 3, 4), name, device, rng)
    x, tx = x[:, :, :, 1:].requires_grad_(), tx[:, :, :, 1:]  # strided
    t32 = tx.float().requires_grad_()
    got = ct.nn.functional.local_response_norm(x, 3, alpha=0.5, beta=0.75, k=1.5)
    want = torch.nn.functional.local_response_norm(t32, 3, alpha=0.5, beta=0.75, k=1.5)
    _same(got, want.to(tx.dtype), ulps=1)
    g, tg = _random(tuple(want.shape), name, device, rng)
    got.backward(g)
    want.backward(tg.float())
    _same(x.grad, t32.grad.to(tx.dtype), ulps=2)


# ---- indexing.cl: nonzero, scatter_add and the ops on it ---------------------------------------

@pytest.mark.parametrize("name", HALF)
def test_nonzero_and_argwhere(device, rng, poisoned_bytes, name):
    x, tx = _random((5, 9), name, device, rng)
    x, tx = (x * (x > 1)), (tx * (tx > 1))
    x[0, 0], tx[0, 0] = float("nan"), float("nan")  # NaN is nonzero
    x[1, 1], tx[1, 1] = -0.0, -0.0  # negative zero is zero
    for a, ta in ((x, tx), _strided(x, tx)):
        _same(ct.nonzero(a), torch.nonzero(ta))
        _same(ct.argwhere(a), torch.argwhere(ta))
        for got, want in zip(ct.nonzero(a, as_tuple=True), torch.nonzero(ta, as_tuple=True)):
            _same(got, want)
        _same(ct.count_nonzero(a, 1), torch.count_nonzero(ta, 1))


@pytest.mark.parametrize("name", HALF)
def test_scatter_add_and_scatter_reduce(device, rng, poisoned_bytes, name):
    x, tx = _random((4, 7), name, device, rng)
    s, ts = _random((4, 9), name, device, rng)
    s[2, 3] = ts[2, 3] = float("nan")
    i = rng.integers(0, 7, (4, 9))
    idx, tidx = ct.tensor(i, device=device), torch.from_numpy(i)
    _same(x.scatter_add(1, idx, s), tx.scatter_add(1, tidx, ts), ulps=2)
    _same(x.t().scatter_add(0, idx.t(), s.t()), tx.t().scatter_add(0, tidx.t(), ts.t()), ulps=2)
    for red in ("sum", "prod", "amax", "amin", "mean"):
        for include_self in (True, False):
            _same(x.scatter_reduce(1, idx, s, red, include_self=include_self),
                  tx.scatter_reduce(1, tidx, ts, red, include_self=include_self), ulps=2)


@pytest.mark.parametrize("name", HALF)
def test_long_scatter_sums_accumulate_in_float32(device, poisoned_bytes, name):
    """Thousands of additions into each element: torch sums them in float32 and rounds once
    (a 16-bit running sum of 0.25s would stop growing at 512 in bfloat16). Long 1-d lanes take
    the segmented path, a long scatter dim over a wide output the per-lane kernel."""
    d, t = getattr(ct, name), getattr(torch, name)
    for out, n in (((2,), 20000), ((40, 3), 20000)):
        idx = torch.arange(n).remainder(2).reshape(-1, *([1] * (len(out) - 1)))
        idx = idx.expand(n, *out[1:]).contiguous()
        src = torch.full(idx.shape, 0.25, dtype=t)
        ci = ct.tensor(idx.numpy(), device=device)
        cs = ct.full(tuple(idx.shape), 0.25, dtype=d, device=device)
        _same(ct.zeros(out, dtype=d, device=device).scatter_add(0, ci, cs),
              torch.zeros(out, dtype=t).scatter_add(0, idx, src))
        _same(ct.ones(out, dtype=d, device=device).scatter_reduce(0, ci, cs, "sum"),
              torch.ones(out, dtype=t).scatter_reduce(0, idx, src, "sum"))


@pytest.mark.parametrize("name", HALF)
def test_index_add_copy_fill_put(device, rng, poisoned_bytes, name):
    x, tx = _random((6, 5), name, device, rng)
    s, ts = _random((4, 5), name, device, rng)
    i = np.array([4, 0, 4, 2])
    idx, tidx = ct.tensor(i, device=device), torch.from_numpy(i)
    _same(x.index_add(0, idx, s, alpha=0.5), tx.index_add(0, tidx, ts, alpha=0.5), ulps=2)
    _same(x.t().index_add(1, idx, s.t()), tx.t().index_add(1, tidx, ts.t()), ulps=2)
    _same(x.index_copy(0, idx[1:], s[1:]), tx.index_copy(0, tidx[1:], ts[1:]))
    _same(x.index_fill(1, idx[:2], -1.5), tx.index_fill(1, tidx[:2], -1.5))
    _same(x.put(idx, s[0, :4], accumulate=True), tx.put(tidx, ts[0, :4], accumulate=True),
          ulps=2)
    _same(x.index_put((idx, idx.remainder(5)), s[:, 0], accumulate=True),
          tx.index_put((tidx, tidx.remainder(5)), ts[:, 0], accumulate=True), ulps=2)


@pytest.mark.parametrize("name", HALF)
def test_histc(device, rng, poisoned_bytes, name):
    x, tx = _random((200,), name, device, rng)  # counts stay exact in both dtypes
    _same(ct.histc(x, 7), torch.histc(tx, 7))
    _same(ct.histc(x, 5, min=-1, max=2.5), torch.histc(tx, 5, min=-1, max=2.5))


# ---- loss.cl -----------------------------------------------------------------------------------

@pytest.fixture
def allocated(monkeypatch):
    """The dtypes of the tensors allocated while the test runs."""
    seen, empty_on = [], ClTensor.empty_on.__func__

    def recording(cls, shape, dtype, device, *args, **kwargs):
        t = empty_on(cls, shape, dtype, device, *args, **kwargs)
        seen.append(t.dtype)
        return t
    monkeypatch.setattr(ClTensor, "empty_on", classmethod(recording))
    return seen


def _loss_cases(name, device, rng):
    """x, tx and (cltensor call, torch call) pairs of nll, mse and bce-with-logits losses, with
    class weights, ignore_index, elementwise weights, pos_weight and strided operands; the
    torch operands are float64 copies of the 16-bit values."""
    x, tx = _random((5, 7), name, device, rng)
    y, ty = _random((5, 7), name, device, rng, scale=1.0)
    w, tw = _random((7,), name, device, rng, scale=1.0)
    tx, ty, tw = tx.double(), ty.double(), tw.double()
    target = rng.integers(0, 7, 5)
    target[2] = 3
    c, tc = ct.tensor(target, device=device), torch.from_numpy(target)
    f, tf = ct.nn.functional, torch.nn.functional
    cases = []
    for red in ("none", "mean", "sum"):
        cases += [
            (lambda x, f=f, red=red: f.nll_loss(x, c, weight=w.abs(), ignore_index=3,
                                               reduction=red),
             lambda x, tf=tf, red=red: tf.nll_loss(x, tc, weight=tw.abs(), ignore_index=3,
                                                   reduction=red)),
            (lambda x, f=f, red=red: f.mse_loss(x.t(), y.t(), reduction=red),
             lambda x, tf=tf, red=red: tf.mse_loss(x.t(), ty.t(), reduction=red)),
            (lambda x, f=f, red=red: f.binary_cross_entropy_with_logits(
                x[:, 1:], (y[:, 1:] > 0).to(x.dtype), weight=y[:, 1:].abs(),
                pos_weight=w[1:].abs() + 0.5, reduction=red),
             lambda x, tf=tf, red=red: tf.binary_cross_entropy_with_logits(
                 x[:, 1:], (ty[:, 1:] > 0).to(x.dtype), weight=ty[:, 1:].abs(),
                 pos_weight=tw[1:].abs() + 0.5, reduction=red))]
    return x, tx, cases


@pytest.mark.parametrize("name", HALF)
def test_losses_read_16_bit_operands_in_place(device, rng, poisoned_bytes, allocated, name):
    """Values and gradients as torch's in float64 on the same 16-bit values, rounded once (torch's
    own 16-bit BCE rounds every step, up to 5 ulps off), and no float32 tensor made on the way:
    the kernels read and write the 16-bit operands themselves."""
    x, tx, cases = _loss_cases(name, device, rng)
    for mine, theirs in cases:
        a, ta = x.detach().requires_grad_(), tx.detach().requires_grad_()
        allocated.clear()
        got, want = mine(a), theirs(ta)
        assert ct.float32 not in allocated
        _same(got, want.to(getattr(torch, name)), ulps=2)
        g, tg = _random(tuple(want.shape), name, device, rng, scale=1.0)
        got.backward(g)
        want.backward(tg.double())
        _same(a.grad, ta.grad.to(getattr(torch, name)), ulps=2)


# ---- optim.cl ----------------------------------------------------------------------------------

EPS = dict(eps=1e-3)  # torch's default 1e-8 is 0 in float16: its own steps would divide by 0
OPTIMIZERS = {"SGD": dict(lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True),
              "Adam": dict(lr=0.01, amsgrad=True, **EPS),
              "AdamW": dict(lr=0.01, weight_decay=0.1, **EPS),
              "RMSprop": dict(lr=0.01, centered=True, momentum=0.5, **EPS),
              "Adagrad": dict(lr=0.1, **EPS), "Adadelta": dict(lr=1.0, **EPS),
              "Adamax": dict(lr=0.01, **EPS), "NAdam": dict(lr=0.01, **EPS),
              "RAdam": dict(lr=0.01, **EPS), "ASGD": dict(lr=0.01, t0=1), "Rprop": dict(lr=0.01)}


@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("opt", sorted(OPTIMIZERS))
def test_optimizer_steps_in_place(device, rng, allocated, name, opt):
    """Three steps over a matrix, a strided view and a vector (the vector and the matrix go
    through the multi-tensor kernels where an optimizer has them): no float32 tensor made, the
    state in the parameter's dtype, and the values those of torch's steps in float64 from the
    same 16-bit values to a few ulps. (torch's own 16-bit steps round every operation: its
    float16 AdamW lands 2x farther from the float64 steps than these kernels, which round each
    stored value once; tests/test_half.py compares SGD, Adam and RMSprop with them.)"""
    d = getattr(ct, name)
    w0 = torch.from_numpy(rng.standard_normal((3, 7)).astype(np.float32)).to(getattr(torch, name))
    base = ct.from_numpy(w0.float().numpy(), device=device).to(d)
    mine = [base[:, 2:].clone().requires_grad_(), base.clone().requires_grad_(),
            base[0].clone().requires_grad_()]
    w0 = w0.double()
    theirs = [w0[:, 2:].clone().requires_grad_(), w0.clone().requires_grad_(),
              w0[0].clone().requires_grad_()]
    opt_mine = getattr(ct.optim, opt)(mine, **OPTIMIZERS[opt])
    opt_theirs = getattr(torch.optim, opt)(theirs, **OPTIMIZERS[opt])
    for _ in range(3):
        for p, tp in zip(mine, theirs):
            g, tg = _random(tuple(p.shape), name, device, rng, scale=1.0)
            p.grad, tp.grad = g, tg.double()
        allocated.clear()
        opt_mine.step()
        opt_theirs.step()
        assert ct.float32 not in allocated, opt
    for p, tp in zip(mine, theirs):
        assert p.dtype is d
        assert all(v.dtype is d for v in opt_mine.state[p].values()
                   if isinstance(v, ct.Tensor) and v.ndim)
        want = tp.detach().numpy()
        np.testing.assert_allclose(p.detach().float().numpy(), want, rtol=0,
                                   atol=8 * float(ct.finfo(d).eps) * np.abs(want).max())


# ---- linear algebra: refused where torch refuses it ---------------------------------------------

LINALG_REFUSED = {
    "linalg.solve": lambda m, a: m.linalg.solve(a, a), "linalg.inv": lambda m, a: m.linalg.inv(a),
    "linalg.det": lambda m, a: m.linalg.det(a), "linalg.slogdet": lambda m, a: m.linalg.slogdet(a),
    "logdet": lambda m, a: m.logdet(a), "linalg.cholesky": lambda m, a: m.linalg.cholesky(a),
    "linalg.lu_factor": lambda m, a: m.linalg.lu_factor(a),
    "linalg.solve_triangular": lambda m, a: m.linalg.solve_triangular(a, a, upper=True),
    "linalg.matrix_norm": lambda m, a: m.linalg.matrix_norm(a, 2),
    "linalg.cond": lambda m, a: m.linalg.cond(a), "linalg.qr": lambda m, a: m.linalg.qr(a),
    "linalg.eigh": lambda m, a: m.linalg.eigh(a), "linalg.svd": lambda m, a: m.linalg.svd(a),
    "linalg.svdvals": lambda m, a: m.linalg.svdvals(a), "linalg.pinv": lambda m, a: m.linalg.pinv(a),
    "linalg.matrix_rank": lambda m, a: m.linalg.matrix_rank(a),
    "linalg.lstsq": lambda m, a: m.linalg.lstsq(a, a),
    "triangular_solve": lambda m, a: m.triangular_solve(a, a)}


@pytest.mark.filterwarnings("ignore:torch.triangular_solve is deprecated")
@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("op", sorted(LINALG_REFUSED))
def test_linalg_refuses_16_bit_as_torch(device, rng, name, op):
    a, ta = _random((3, 3), name, device, rng)
    a, ta = a + 4 * ct.eye(3, dtype=a.dtype, device=device), ta + 4 * torch.eye(3, dtype=ta.dtype)
    with pytest.raises((RuntimeError, NotImplementedError)):
        LINALG_REFUSED[op](torch, ta)
    with pytest.raises(TypeError, match=f"^{op}: low precision dtypes are not supported, "
                                        f"A is {name}"):
        LINALG_REFUSED[op](ct, a)
