"""cltensor.nn.functional's embedding and embedding_bag: lookups and their gradients
(padding_idx, max_norm's in-place renorm, scale_grad_by_freq), every bag mode with offsets,
empty bags, bags of padding only, per-sample weights and 2-d input, against float64 numpy
references and torch, and bad input."""
import itertools

import numpy as np
import pytest

import cltensor
import cltensor.nn.functional as F
from cltensor.testing import assert_close, gradcheck, random_array
from test_nn_functional import T


def test_embedding(device, rng):
    w = random_array(rng, (6, 3))
    idx = np.array([[1, 5, 1], [0, 1, 2]])
    assert_close(F.embedding(T(idx, device), T(w, device)), w[idx])
    assert_close(F.embedding(T(idx.astype(np.int32), device), T(w, device)), w[idx])
    wt = T(w.astype(np.float64), device, True)
    g = random_array(rng, (2, 3, 3)).astype(np.float64)
    F.embedding(T(idx, device), wt, padding_idx=-5).backward(T(g, device))
    expected = np.zeros((6, 3))
    np.add.at(expected, idx.ravel(), g.reshape(-1, 3))
    expected[1] = 0
    assert_close(wt.grad, expected, rtol=1e-12)
    wt = T(rng.standard_normal((4, 2)), device, True)
    assert gradcheck(lambda t: F.embedding(T(np.array([3, 0, 3]), device), t), [wt])
    with pytest.raises(TypeError, match="int32 or int64"):
        F.embedding(T(idx.astype(np.float32), device), T(w, device))
    with pytest.raises(ValueError, match="padding_idx must be within"):
        F.embedding(T(idx, device), T(w, device), padding_idx=6)
    with pytest.raises(IndexError):
        F.embedding(T(np.array([6]), device), T(w, device))


def ref_renorm(w, idx, max_norm, p):
    """torch's embedding_renorm_ in float64: the picked rows of norm above max_norm scaled."""
    w = w.astype(np.float64).copy()
    for i in np.unique(idx):
        norm = np.linalg.norm(w[i], p)
        if norm > max_norm:
            w[i] *= max_norm / (norm + 1e-7)
    return w


def test_embedding_max_norm_and_scale_grad_by_freq(device, rng):
    """max_norm rescales the picked rows of weight in place (norms 1, 2, inf; a repeated index;
    rows below the bound and rows not picked untouched), then looks them up; with
    scale_grad_by_freq each row's gradient is divided by how often the input picks it."""
    w = (random_array(rng, (7, 3)) * 3).astype(np.float64)
    w[5] *= 0.01  # picked, but already within every bound below
    idx = np.array([[1, 5, 1], [0, 6, 1]])
    for p in (2.0, 1.0, float("inf")):
        wt = T(w, device)
        out = F.embedding(T(idx, device), wt, max_norm=1.5, norm_type=p)
        want = ref_renorm(w, idx, 1.5, p)
        assert_close(wt, want, rtol=1e-12)  # in place, rows 2, 3, 4 as they were
        assert_close(out, want[idx], rtol=1e-12)
    wt = T(w, device, True)
    g = random_array(rng, (2, 3, 3)).astype(np.float64)
    F.embedding(T(idx.astype(np.int32), device), wt, padding_idx=6,
                scale_grad_by_freq=True).backward(T(g, device))
    want = np.zeros_like(w)
    np.add.at(want, idx.ravel(), g.reshape(-1, 3))
    want /= np.maximum(np.bincount(idx.ravel(), minlength=7), 1)[:, None]
    want[6] = 0
    assert_close(wt.grad, want, rtol=1e-12)


def test_embedding_options_against_torch(device, rng):
    torch = pytest.importorskip("torch")
    w = (random_array(rng, (6, 4)) * 2).astype(np.float64)
    idx = np.array([3, 0, 3, 5, 3])
    g = rng.standard_normal((5, 4))
    ours, theirs = T(w, device, True), torch.from_numpy(w.copy()).requires_grad_()
    out = F.embedding(T(idx, device), ours, max_norm=1.0, scale_grad_by_freq=True)
    ref = torch.nn.functional.embedding(torch.from_numpy(idx), theirs, max_norm=1.0,
                                        scale_grad_by_freq=True)
    assert_close(ours, theirs.detach().numpy(), rtol=1e-12)
    assert_close(out, ref.detach().numpy(), rtol=1e-12)
    out.backward(T(g, device))
    ref.backward(torch.from_numpy(g))
    assert_close(ours.grad, theirs.grad.numpy(), rtol=1e-12)


def test_embedding_bag_max_norm_and_scale_grad_by_freq(device, rng):
    """max_norm as embedding's, over the bags' indices; scale_grad_by_freq divides each row's
    gradient by its count in the whole input (torch 2.13 on the CPU divides the largest index's
    by the count of the index before it: [2, 2, 4] gives row 4 half its gradient)."""
    w = (random_array(rng, (6, 3)) * 3).astype(np.float64)
    idx, starts = EMBEDDING_BAGS[0]
    for mode in F.EMBEDDING_BAG_MODES:
        wt = T(w, device)
        got = F.embedding_bag(T(idx, device), wt, T(starts, device), max_norm=2.0,
                              norm_type=1.0, mode=mode, padding_idx=4)
        fixed = ref_renorm(w, idx, 2.0, 1.0)
        assert_close(wt, fixed, rtol=1e-12)
        assert_close(got, ref_embedding_bag(fixed, idx, starts, mode, padding_idx=4),
                     rtol=1e-12)
    counts = np.maximum(np.bincount(idx, minlength=6), 1)[:, None]
    bags = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(idx))))
    g = rng.standard_normal((len(starts), 3))
    for mode in ("sum", "mean"):
        wt = T(w, device, True)
        F.embedding_bag(T(idx, device), wt, T(starts, device), mode=mode,
                        scale_grad_by_freq=True).backward(T(g, device))
        per = g[bags] / (np.bincount(bags, minlength=len(starts))[bags, None]
                         if mode == "mean" else 1)
        want = np.zeros_like(w)
        np.add.at(want, idx, per)
        assert_close(wt.grad, want / counts, rtol=1e-12)


def ref_embedding_bag(w, idx, starts, mode, psw=None, padding_idx=None):
    """F.embedding_bag in float64 over a flat idx with bag starts (the last bag to the end)."""
    ends = list(starts[1:]) + [len(idx)]
    out = np.zeros((len(starts), w.shape[1]))
    for b, (s, e) in enumerate(zip(starts, ends)):
        keep = [j for j in range(s, e) if idx[j] != padding_idx]
        if not keep:
            continue
        rows = w[idx[keep]].astype(np.float64)
        if psw is not None:
            rows = rows * psw[keep, None]
        out[b] = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode]
    return out


EMBEDDING_BAGS = [  # (indices, offsets): an empty bag, a repeated index, one bag
    (np.array([1, 2, 4, 5, 4, 3, 0, 4]), np.array([0, 2, 2, 3, 5])),  # [4]: padding only
    (np.array([3, 3, 1]), np.array([0])),
]


def test_embedding_bag(device, rng):
    """Every mode against a float64 reference: 1-d input with offsets (with and without the
    last offset, an empty bag, a bag of padding only), 2-d input, per-sample weights,
    padding_idx; gradients by finite differences, weights' and per-sample weights'."""
    w = random_array(rng, (6, 3)).astype(np.float64)
    for (idx, starts), mode, pad in itertools.product(EMBEDDING_BAGS, F.EMBEDDING_BAG_MODES,
                                                      (None, 4)):
        got = F.embedding_bag(T(idx, device), T(w, device), T(starts, device), mode=mode,
                              padding_idx=pad)
        want = ref_embedding_bag(w, idx, starts, mode, padding_idx=pad)
        assert_close(got, want, rtol=1e-12)
        last = T(np.append(starts, len(idx)).astype(np.int32), device)
        assert_close(F.embedding_bag(T(idx.astype(np.int32), device), T(w, device), last,
                                     mode=mode, include_last_offset=True, padding_idx=pad),
                     want, rtol=1e-12)
        f32 = F.embedding_bag(T(idx, device), T(w.astype(np.float32), device), T(starts, device),
                              mode=mode, padding_idx=pad)
        assert f32.dtype == cltensor.float32
        assert_close(f32, want, rtol=1e-6, atol=1e-6)
    idx2 = rng.integers(0, 6, (4, 3))
    for mode in F.EMBEDDING_BAG_MODES:
        assert_close(F.embedding_bag(T(idx2, device), T(w, device), mode=mode),
                     ref_embedding_bag(w, idx2.ravel(), [0, 3, 6, 9], mode), rtol=1e-12)
    idx, starts = EMBEDDING_BAGS[0]
    psw = rng.standard_normal(len(idx))
    assert_close(F.embedding_bag(T(idx, device), T(w, device), T(starts, device), mode="sum",
                                 per_sample_weights=T(psw, device), padding_idx=4),
                 ref_embedding_bag(w, idx, starts, "sum", psw, 4), rtol=1e-12)
    wt, pt = T(w, device, True), T(psw, device, True)
    fixed = T(idx, device), T(starts, device)
    assert gradcheck(lambda a, b: F.embedding_bag(*fixed[:1], a, fixed[1], mode="sum",
                                                   per_sample_weights=b, padding_idx=4),
                     [wt, pt])
    for mode in ("mean", "max"):
        assert gradcheck(lambda a, m=mode: F.embedding_bag(fixed[0], a, fixed[1], mode=m,
                                                            padding_idx=4), [wt])
    wt.grad = None
    F.embedding_bag(*fixed[:1], wt, fixed[1], mode="mean", padding_idx=4).sum().backward()
    assert not wt.grad.numpy()[4].any()  # the padding row gets no gradient


def test_embedding_bag_against_torch(device, rng):
    torch = pytest.importorskip("torch")
    w = random_array(rng, (7, 4)).astype(np.float64)
    idx, starts = np.array([6, 0, 2, 2, 5, 1, 3]), np.array([0, 3, 3, 6])
    g = rng.standard_normal((4, 4))
    for mode in F.EMBEDDING_BAG_MODES:
        psw = rng.standard_normal(len(idx)) if mode == "sum" else None
        wt, ptw = T(w, device, True), torch.from_numpy(w).requires_grad_()
        pt = T(psw, device, True) if psw is not None else None
        ptp = torch.from_numpy(psw).requires_grad_() if psw is not None else None
        ours = F.embedding_bag(T(idx, device), wt, T(starts, device), mode=mode,
                               per_sample_weights=pt, padding_idx=2)
        theirs = torch.nn.functional.embedding_bag(
            torch.from_numpy(idx), ptw, torch.from_numpy(starts), mode=mode,
            per_sample_weights=ptp, padding_idx=2)
        assert_close(ours, theirs.detach().numpy(), rtol=1e-12)
        ours.backward(T(g, device))
        theirs.backward(torch.from_numpy(g))
        assert_close(wt.grad, ptw.grad.numpy(), rtol=1e-12, atol=1e-14)
        if psw is not None:
            assert_close(pt.grad, ptp.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_embedding_bag_bad_input(device, rng):
    w = T(random_array(rng, (6, 3)), device)
    i1, off = T(np.array([1, 2, 3]), device), T(np.array([0, 2]), device)
    cases = [
        (ValueError, "mode must be one of", lambda: F.embedding_bag(i1, w, off, mode="min")),
        (ValueError, "offsets must be None for a 2-d input",
         lambda: F.embedding_bag(i1.reshape(1, 3), w, off)),
        (ValueError, "a 1-d input needs offsets", lambda: F.embedding_bag(i1, w)),
        (ValueError, "input must be 1-d .with offsets. or 2-d",
         lambda: F.embedding_bag(i1.reshape(1, 1, 3), w)),
        (ValueError, r"offsets\[0\] must be 0",
         lambda: F.embedding_bag(i1, w, T(np.array([1, 2]), device))),
        (ValueError, "offsets must be non-decreasing",
         lambda: F.embedding_bag(i1, w, T(np.array([0, 2, 1]), device))),
        (ValueError, "at most the input's length 3",
         lambda: F.embedding_bag(i1, w, T(np.array([0, 4]), device))),
        (ValueError, "the last offset must be the input's length 3",
         lambda: F.embedding_bag(i1, w, off, include_last_offset=True)),
        (ValueError, "offsets must be a 1-d int32/int64 tensor",
         lambda: F.embedding_bag(i1, w, T(np.array([0.0]), device))),
        (ValueError, "offsets hold no bag for an input of 3",
         lambda: F.embedding_bag(i1, w, T(np.zeros(0, np.int64), device))),
        (ValueError, "per_sample_weights needs mode='sum'",
         lambda: F.embedding_bag(i1, w, off, per_sample_weights=T(np.ones(3, np.float32),
                                                                   device))),
        (ValueError, "per_sample_weights must have the input's shape",
         lambda: F.embedding_bag(i1, w, off, mode="sum",
                                 per_sample_weights=T(np.ones(2, np.float32), device))),
        (TypeError, "per_sample_weights must have weight's dtype",
         lambda: F.embedding_bag(i1, w, off, mode="sum",
                                 per_sample_weights=T(np.ones(3), device))),
        (TypeError, "indices must be int32 or int64",
         lambda: F.embedding_bag(T(np.array([1.0]), device), w, off)),
        (ValueError, "padding_idx must be within", lambda: F.embedding_bag(i1, w, off,
                                                                           padding_idx=6)),
        (IndexError, "index 6 is out of bounds", lambda: F.embedding_bag(
            T(np.array([6]), device), w, T(np.array([0]), device))),
        (IndexError, "index -1 is out of bounds", lambda: F.embedding_bag(
            T(np.array([[-1]]), device), w)),
        (NotImplementedError, "sparse gradients", lambda: F.embedding_bag(i1, w, off,
                                                                          sparse=True)),
        (ValueError, "max_norm must be a non-negative number", lambda: F.embedding_bag(
            i1, w, off, max_norm=-1.0)),
        (ValueError, "mode 'max' cannot scale gradients by frequency", lambda: F.embedding_bag(
            i1, w, off, mode="max", scale_grad_by_freq=True)),
        (NotImplementedError, "sparse gradients", lambda: F.embedding(i1, w, sparse=True)),
        (ValueError, "max_norm must be a non-negative number", lambda: F.embedding(
            i1, w, max_norm="1")),
        (TypeError, "ord must be a real number", lambda: F.embedding(i1, w, max_norm=1.0,
                                                                     norm_type="fro")),
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()
    empty = F.embedding_bag(T(np.zeros(0, np.int64), device), w, T(np.zeros(0, np.int64),
                                                                    device))
    assert empty.shape == (0, 3)
