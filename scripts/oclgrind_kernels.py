"""Runs every kernel family once on tiny, awkward shapes, for a sanitizer (Oclgrind) to watch.

Each section prints `SECTION <name>` to stderr before it runs, so a sanitizer report that follows
can be traced to the ops that caused it, and checks its results against numpy in float64, so a
wrong answer fails too. tests/test_oclgrind.py runs this under Oclgrind; it also runs on any device:

    CLTENSOR_DEVICE=pthread python scripts/oclgrind_kernels.py [--style=cpu|gpu]
        [--opt-disable=file.cl,...] [--pool] [section ...]

A failing section prints a traceback and `FAILED <name>`, and the next one runs. On Oclgrind,
every tensor gets a buffer of its own (ExactBuffers), not one from the memory pool.
"""
import contextlib
import sys
import traceback

import numpy as np
import pyopencl as cl

import cltensor
import cltensor.nn.functional as F
from cltensor import program
from cltensor.conv import winograd
from cltensor.linalg import decompositions
from cltensor.ops import gemm as gemm_ops
from cltensor.ops import pool as pool_ops
from cltensor.testing import rel_error, to_numpy

RNG = np.random.default_rng(7)


def rand(*shape, dtype=np.float32):
    return RNG.uniform(-2, 2, size=shape).astype(dtype)


def assert_close(actual, expected, rtol=1e-5, check_dtype=True):
    """Shapes equal, integers exact, floats within a norm-relative tolerance."""
    a, e = to_numpy(actual), np.asarray(expected)
    assert a.shape == e.shape, f"shape {a.shape} != expected {e.shape}"
    if a.dtype.kind in "biu" and e.dtype.kind in "biu":
        assert np.array_equal(a, e), f"{a} != {e}"
    else:
        assert rel_error(a, e) <= rtol, f"relative error {rel_error(a, e):.3g} > {rtol}"


def dev(a):
    return cltensor.from_numpy(np.ascontiguousarray(a))


@contextlib.contextmanager
def setting(owner, name, value):
    """owner.name = value inside the block, its old value again after."""
    saved = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)


def strided_views(a):
    """(numpy view, device view) pairs: transposed, step-sliced, offset and expanded."""
    t = dev(a)
    yield a.T, t.T
    yield a[1::2, ::3], t[1::2, ::3]
    yield a[1:, 1:], t[1:, 1:]
    yield np.broadcast_to(a[:1], a.shape), t[:1].expand(*a.shape)


def section_elementwise():
    for shape in [(1,), (7,), (13, 1), (5, 17)]:
        a, b = rand(*shape), rand(*shape)
        assert_close(dev(a) * dev(b) + 1.5, a.astype(np.float64) * b + 1.5)
        assert_close(cltensor.exp(dev(a)), np.exp(a.astype(np.float64)))
        assert_close(cltensor.where(dev(a) > 0, dev(a), dev(b)), np.where(a > 0, a, b))
    row = rand(1, 17)
    a = rand(5, 17)
    assert_close(dev(a) + dev(row), a + row)              # ew_rows-style broadcast
    for na, ta in strided_views(rand(7, 11)):
        assert_close(ta * 2 - ta.abs(), na * 2 - np.abs(na))
    ints = RNG.integers(1, 9, size=(3, 5)).astype(np.int32)
    assert_close(dev(ints) // 2, ints // 2)
    assert_close(dev(ints) ^ dev(ints.T.copy()).T, ints ^ ints)
    assert_close(cltensor.atan2(dev(a), dev(b)), np.arctan2(a, b))
    assert_close(cltensor.fmod(dev(ints), 4), np.fmod(ints, 4))
    a[0, 0], a[1, 1] = np.nan, np.inf
    assert_close(cltensor.nan_to_num(dev(a)), np.nan_to_num(a))
    out = dev(rand(7, 11))
    out[1::2, ::3].copy_(dev(rand(3, 4)))


def section_reduce():
    for shape, dim in [((1,), 0), ((13,), 0), ((5, 17), 1), ((17, 5), 0), ((3, 4, 5), 1)]:
        a = rand(*shape)
        assert_close(cltensor.sum(dev(a), dim), a.astype(np.float64).sum(dim))
        assert_close(cltensor.amax(dev(a), dim), a.max(dim))
        assert_close(cltensor.argmax(dev(a), dim), a.argmax(dim), check_dtype=False)
        assert_close(cltensor.var(dev(a), dim) if a.shape[dim] > 1 else cltensor.sum(dev(a)),
                     a.astype(np.float64).var(dim, ddof=1) if a.shape[dim] > 1 else a.sum())
    a = rand(1031)
    assert_close(cltensor.sum(dev(a)), a.astype(np.float64).sum())
    for na, ta in strided_views(rand(7, 11)):
        assert_close(cltensor.sum(ta, 1), na.astype(np.float64).sum(1))
        assert_close(cltensor.cumsum(ta, 1), np.cumsum(na.astype(np.float64), 1), rtol=1e-4)
    a = rand(3, 4, 5)
    assert_close(cltensor.sum(dev(a), (0, 2)), a.astype(np.float64).sum((0, 2)))
    assert_close(cltensor.prod(dev(a), 1), a.astype(np.float64).prod(1), rtol=1e-4)
    assert_close(cltensor.argmin(dev(a).transpose(0, 2), 1), a.transpose(2, 1, 0).argmin(1),
                 check_dtype=False)
    assert_close(cltensor.any(dev(a > 1.9), 2), (a > 1.9).any(2))
    a = rand(3, 131)
    assert_close(cltensor.cumsum(dev(a), 1), np.cumsum(a.astype(np.float64), 1), rtol=1e-4)
    for t, ref in ((dev(a), a), (dev(a).T, a.T)):  # cummax's scan across blocks
        assert_close(cltensor.cummax(t, -1).values, np.maximum.accumulate(ref, -1))
    assert_close(cltensor.logsumexp(dev(a), 1), np.log(np.exp(a.astype(np.float64)).sum(1)))
    for t, ref in ((dev(a), a), (dev(a).T, a.T)):  # logcumsumexp's (max, sum) carry
        assert_close(cltensor.logcumsumexp(t, -1),
                     np.logaddexp.accumulate(ref.astype(np.float64), -1), rtol=1e-4)


def section_indexing():
    a = rand(7, 5)
    idx = np.array([6, 0, 3, 3], dtype=np.int64)
    assert_close(cltensor.index_select(dev(a), 0, dev(idx)), a[idx])
    gidx = RNG.integers(0, 5, size=(7, 3)).astype(np.int64)
    assert_close(cltensor.gather(dev(a), 1, dev(gidx)), np.take_along_axis(a, gidx, 1))
    src = rand(7, 3)
    expect = np.zeros((7, 5))
    for i in range(7):
        for j in range(3):
            expect[i, gidx[i, j]] += src[i, j]
    assert_close(cltensor.scatter_add(dev(np.zeros((7, 5), np.float32)), 1, dev(gidx), dev(src)),
                 expect)
    mask = a > 0
    assert_close(cltensor.masked_fill(dev(a), dev(mask), 0.5), np.where(mask, 0.5, a))
    assert_close(cltensor.masked_select(dev(a), dev(mask)), a[mask])
    assert_close(cltensor.nonzero(dev(mask)), np.argwhere(mask), check_dtype=False)
    assert_close(cltensor.one_hot(dev(idx), 7), np.eye(7)[idx], check_dtype=False)
    assert_close(dev(a).T[dev(np.array([1, 4]))], a.T[[1, 4]])
    t = dev(a)
    t.T[1:, ::2] = dev(rand(4, 4))[:, :4]                # setitem through a view
    t.index_put_((dev(np.array([0, 0, 6])),), dev(np.ones((3, 5), np.float32)), accumulate=True)
    sidx, sval = np.array([[6, 0, 1, 2, 3]]), rand(1, 5)
    expect = a.copy()
    expect[sidx[0], np.arange(5)] = sval[0]
    assert_close(cltensor.scatter(dev(a), 0, dev(sidx), dev(sval)), expect)
    ridx = RNG.integers(0, 3, size=(40, 5)).astype(np.int64)  # segmented past 16 per lane
    rsrc = rand(40, 5)
    for red, fn in (("amax", np.maximum), ("prod", np.multiply)):
        expect = a[:3].astype(np.float64)
        fn.at(expect, (ridx, np.arange(5)), rsrc)
        assert_close(cltensor.scatter_reduce(dev(a[:3]), 0, dev(ridx), dev(rsrc), red), expect,
                     rtol=1e-4)
    expect = np.zeros((3, 5))
    np.add.at(expect, (ridx, np.arange(5)), rsrc)
    counts = np.zeros((3, 5))
    np.add.at(counts, (ridx, np.arange(5)), 1)
    assert_close(cltensor.scatter_reduce(dev(a[:3]), 0, dev(ridx), dev(rsrc), "mean",
                                         include_self=False),
                 np.where(counts > 0, expect / np.maximum(counts, 1), a[:3]))
    source = rand(40)
    expect = a.T.copy()
    expect[mask.T] = source[:mask.sum()]
    assert_close(cltensor.masked_scatter(dev(a).T, dev(mask).T, dev(source)), expect)


def section_gemm():
    shapes = [(1, 1, 1), (7, 5, 3), (17, 13, 19), (33, 31, 65)]
    try:
        for fam in gemm_ops.FAMILIES:
            gemm_ops.FORCE_FAMILY = fam
            for m, n, k in shapes:
                a, b = rand(m, k), rand(k, n)
                assert_close(dev(a) @ dev(b), a.astype(np.float64) @ b, rtol=1e-4)
            a, b = rand(9, 6), rand(7, 9)
            assert_close(dev(a).T @ dev(b).T, a.T.astype(np.float64) @ b.T, rtol=1e-4)
            a, b = rand(3, 5, 7), rand(3, 7, 4)
            assert_close(cltensor.bmm(dev(a), dev(b)), a.astype(np.float64) @ b, rtol=1e-4)
            a, b = rand(12, 19), rand(11, 23)
            na, nb = a[1:, ::2], b[1:, 3:]           # offset and step-sliced operands
            assert_close(dev(a)[1:, ::2] @ dev(b)[1:, 3:], na.astype(np.float64) @ nb, rtol=1e-4)
            a, b = rand(2, 1, 5, 6), rand(3, 6, 4)    # broadcast batch
            assert_close(cltensor.matmul(dev(a), dev(b)), a.astype(np.float64) @ b, rtol=1e-4)
        # xgemm reading operands in place past their last rows (ATAIL, BTAIL) and past K
        # (KTAIL): every such read must be skipped, which the exact buffers make visible
        gemm_ops.FORCE_FAMILY = "xgemm"
        entry = dict(gemm_ops.entry_for(cltensor.default_device(), np.float32), strict=True,
                     xgemm=[gemm_ops.XGEMM_FALLBACKS[1]])
        for m, n, k in [(76, 68, 40), (32, 64, 33)]:
            a, b = rand(m, k), rand(k, n)
            for ta, tb in [(False, False), (True, True)]:
                ca = dev(np.ascontiguousarray(a.T)).mT if ta else dev(a)
                cb = dev(np.ascontiguousarray(b.T)).mT if tb else dev(b)
                out = cltensor.empty(m, n)
                gemm_ops.gemm_into(ca, cb, out, entry=entry)
                assert_close(out, a.astype(np.float64) @ b, rtol=1e-4)
        # gemm_slabs over pack_panels' slabs, and reading B in place (its last, partial panel
        # must end at column N: no read past the buffer): tails in M, N, K and the blocks
        gemm_ops.FORCE_FAMILY = "packed"
        base = gemm_ops.entry_for(cltensor.default_device(), np.float32)
        for b_in_place in (0, 1):
            entry = dict(base, min_work=0, min_dim=0, packed=dict(
                base["packed"], KB=16, KC=32, BM=2, BN=2, SLAB_MIN_K=0, SLAB_MIN_MN=0,
                SLAB_B_IN_PLACE=b_in_place))
            a, b = rand(2, 37, 70), rand(2, 70, 41)
            out = cltensor.empty(2, 37, 41)
            gemm_ops.gemm_into(dev(a), dev(b), out, entry=entry)
            assert_close(out, a.astype(np.float64) @ b, rtol=1e-4)
    finally:
        gemm_ops.FORCE_FAMILY = None
    entry = dict(gemm_ops.entry_for(cltensor.default_device(), np.float32), rowdot_max_m=8)
    for m, n, k in [(1, 5, 3), (3, 17, 40), (8, 9, 33)]:   # gemm_rowdot: x @ W^T
        x, w = rand(m, k + 1), rand(n, k + 1)
        out = cltensor.empty(m, n)
        gemm_ops.gemm_into(dev(x)[:, 1:], dev(w)[:, 1:].mT, out, entry=entry)
        assert_close(out, x[:, 1:].astype(np.float64) @ w[:, 1:].T, rtol=1e-4)
    entry = dict(entry, rowdot_max_m=0, rowaxpy_max_m=8)
    for m, n, k in [(1, 16, 3), (3, 37, 70), (8, 33, 9)]:   # gemm_rowaxpy: g @ W
        g, w = rand(m, k), rand(k, n + 1)
        out = cltensor.empty(m, n)
        gemm_ops.gemm_into(dev(g), dev(w)[:, 1:], out, entry=entry)
        assert_close(out, g.astype(np.float64) @ w[:, 1:], rtol=1e-4)


def conv_ref(x, w, stride, padding):
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh, ow = (h + 2 * padding - kh) // stride + 1, (wd + 2 * padding - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out


@contextlib.contextmanager
def gemm_tiles(tiled):
    """GEMM's small products on gemm_tiled with the parameter set `tiled` inside the block."""
    entries = {}

    def entry_for(device, dtype, original=gemm_ops.entry_for):
        base = original(device, dtype)
        if id(base) not in entries:  # one entry per base entry: the GEMM memoizes on it
            entries[id(base)] = (base, dict(base, tiled=tiled))
        return entries[id(base)][1]
    with setting(gemm_ops, "entry_for", entry_for):
        yield


def section_conv():
    # NOTE: smaller tiles than GPUs get, to keep the simulated work down: gemm_tiled's 16 x 16
    # fallback tile (64 work-items; the gemm section checks the default 32 x 32 one) and
    # Winograd's tile rows padded to 32 rather than 128. Winograd's 16-36 batched products of
    # a few rows took 95% of this section's time under the checked runs, and in the GPU style
    # four in five of its tiles were padding (the four runs took 11.5 CPU-minutes, now 4.7)
    with gemm_tiles(gemm_ops.TILED_FALLBACKS[2]), \
            setting(winograd, "TILE_ALIGN", dict(winograd.TILE_ALIGN, gpu=32)):
        _conv_cases()


def _conv_cases():
    # NOTE: the Winograd transforms are generic loops over their matrices, slow to interpret
    # unoptimized (the checked runs): one F(2x2) case in both layouts (tiles past the output's
    # edge, negative offsets), one F(4x4) case (its 6x6 tiles) in one, since both variants
    # read views through the same code
    cases = [("im2col", 3, 1, 1), ("implicit_gemm", 3, 2, 1), ("winograd", 3, 1, 1),
             ("gemm_1x1", 1, 1, 0), ("im2col", 2, 1, 0), ("implicit_gemm", 5, 1, 2),
             ("winograd_4x4", 3, 1, 1)]
    for algo, k, stride, pad in cases:
        views = ("contiguous",) if algo == "winograd_4x4" else ("contiguous", "strided")
        for view in views:
            print(f"  conv2d {algo} k={k} stride={stride} padding={pad} {view}", file=sys.stderr)
            x, w = rand(2, 3, 5, 7), rand(4, 3, k, k)
            tx = dev(x).requires_grad_()
            tw = dev(w).requires_grad_()
            # a bias on implicit GEMM: the GPU weight gradient sums its gradient in a spare column
            b = rand(4) if algo == "implicit_gemm" else np.zeros(4, np.float32)
            tb = dev(b).requires_grad_() if algo == "implicit_gemm" else None
            tin = tx if view == "contiguous" else \
                tx.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
            y = cltensor.conv.conv2d(tin, tw, tb, stride=stride, padding=pad, algo=algo)
            assert_close(y, conv_ref(x, w, stride, pad) + b[:, None, None], rtol=1e-4)
            g = rand(*y.shape)
            y.backward(dev(g))
            assert np.isfinite(tx.grad.numpy()).all() and np.isfinite(tw.grad.numpy()).all()
            if tb is not None:
                assert_close(tb.grad, g.astype(np.float64).sum((0, 2, 3)))
    x, w = rand(1, 4, 6, 5), rand(6, 2, 3, 3)           # groups and dilation
    y = cltensor.conv.conv2d(dev(x), dev(w), padding=2, dilation=2, groups=2, algo="im2col")
    y2 = cltensor.conv.conv2d(dev(x), dev(w), padding=2, dilation=2, groups=2,
                              algo="implicit_gemm")
    assert_close(y2, y.numpy(), rtol=1e-4)
    _winograd_lanes()


def _winograd_lanes():
    """Winograd's kernels with VEC tiles or filters a work-item (CPUs' vector lanes): 6 tiles
    and 15 filters in runs of 4, the last runs partial; the output and both gradients against
    im2col's."""
    with setting(winograd, "items_per_work_item", lambda _device, _dtype: 4):
        x, w, g = rand(1, 3, 4, 5), rand(5, 3, 3, 3), rand(1, 5, 4, 5)
        results = []
        for algo in ("winograd", "im2col"):
            tx, tw = dev(x).requires_grad_(), dev(w).requires_grad_()
            y = cltensor.conv.conv2d(tx, tw, padding=1, algo=algo)
            y.backward(dev(g))
            results.append((y, tx.grad, tw.grad))
        for ours, ref in zip(*results):
            assert_close(ours, ref.numpy(), rtol=1e-4)


def section_pool():
    x = dev(rand(2, 3, 7, 5)).requires_grad_()
    xt = x.transpose(2, 3)                              # a non-contiguous input
    for y in [F.max_pool2d(x, 3, 2, 1), F.avg_pool2d(x, 2, ceil_mode=True),
              F.adaptive_avg_pool2d(x, (3, 2)), F.adaptive_max_pool2d(x, (3, 4)),
              F.max_pool2d(x, 2),
              F.avg_pool2d(xt, 3, 2, 1, count_include_pad=False), F.max_pool2d(xt, 2, dilation=2)]:
        y.backward(dev(rand(*y.shape)), retain_graph=True)  # xt is shared
    assert np.isfinite(x.grad.numpy()).all()
    wide = dev(rand(1, 2, 4, 21)).requires_grad_()  # rows of 21: the vector loop, baked
    strips = dev(rand(1, 2, 5, 41)).requires_grad_()  # rows of 41: pool_strips.cl's strips
    with setting(pool_ops, "BAKE_MIN_TAPS", 0):  # the window baked in (-D)
        for y in [F.max_pool2d(x, 3, 2, 1, ceil_mode=True), F.avg_pool2d(xt, 3, 1, 1),
                  F.max_pool2d(x, 2, relu=True), F.max_pool2d(wide, 3, 1, 1, relu=True),
                  F.max_pool2d(strips, 3, 1, 1), F.max_pool2d(strips, 3, 2, 1)]:
            y.backward(dev(rand(*y.shape)), retain_graph=True)
    assert np.isfinite(x.grad.numpy()).all()


def section_conv3d():
    """conv_depth.cl's gather and scatter of depth taps, forward, backward and transposed."""
    x = dev(rand(2, 3, 5, 4, 6)).requires_grad_()
    w = dev(rand(4, 3, 3, 2, 3)).requires_grad_()
    y = F.conv3d(x, w, stride=(2, 1, 1), padding=(1, 0, 1), dilation=(1, 2, 1))
    y.backward(dev(rand(*y.shape)))
    z = F.conv_transpose3d(x, dev(rand(3, 2, 2, 3, 3)), stride=2)
    z.backward(dev(rand(*z.shape)))
    assert np.isfinite(x.grad.numpy()).all() and np.isfinite(w.grad.numpy()).all()


def section_ctc():
    """ctc.cl: log-alpha, the loss and its gradient; an impossible alignment too."""
    lp = F.log_softmax(dev(rand(9, 3, 5)), dim=-1).detach().requires_grad_()
    targets = dev(np.array([[1, 2, 2], [3, 1, 0], [4, 4, 4]], np.int64))
    loss = F.ctc_loss(lp, targets, [9, 7, 3], [3, 2, 3], reduction="sum", zero_infinity=True)
    loss.backward()
    assert np.isfinite(lp.grad.numpy()).all()


def section_resample():
    x = dev(rand(2, 3, 5, 4)).requires_grad_()
    for y in [F.interpolate(x, scale_factor=2), F.interpolate(x, (3, 7), mode="nearest-exact"),
              F.interpolate(x.transpose(2, 3), scale_factor=(1.5, 0.5), mode="bilinear"),
              F.interpolate(x, (9, 1), mode="bilinear", align_corners=True),
              F.interpolate(x, scale_factor=(4, 0.6), mode="bicubic"),
              F.interpolate(x.transpose(2, 3), (2, 7), mode="bicubic", align_corners=True)]:
        y.backward(dev(rand(*y.shape)))
    assert np.isfinite(x.grad.numpy()).all()


def section_norm():
    x = dev(rand(3, 5, 3, 2)).requires_grad_()
    rm, rv = dev(np.zeros(5, np.float32)), dev(np.ones(5, np.float32))
    w = dev(rand(5)).requires_grad_()
    b = dev(rand(5)).requires_grad_()
    y = F.batch_norm(x, rm, rv, w, b, training=True)
    y.backward(dev(rand(*y.shape)))
    F.batch_norm(x.detach(), rm, rv, w.detach(), b.detach(), training=False)
    y = F.local_response_norm(x, 3)
    y.backward(dev(rand(*y.shape)))
    y = F.local_response_norm(x.transpose(2, 3), 4)
    y.backward(dev(rand(*y.shape)))
    x1 = dev(rand(7, 5)).requires_grad_()
    y = F.batch_norm(x1, rm, rv, w, b, training=True)   # BatchNorm1d's (N, C) layout
    y.backward(dev(rand(*y.shape)))
    assert np.isfinite(x.grad.numpy()).all()


def xent_ref(a, target, eps):
    """torch's mean cross entropy of logits a (N, C) with label smoothing eps, and its gradient."""
    a = a.astype(np.float64)
    logp = a - a.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    q = np.full(a.shape, eps / a.shape[1])
    q[np.arange(len(target)), target] += 1 - eps
    n = len(target)
    return -(q * logp).sum() / n, (np.exp(logp) - q) / n


def section_softmax():
    # (2, 131) and (1, 255): rows shorter than the GPU path's 256 lanes, so some lanes get no
    # element (PoCL 3.1 corrupted its heap there before softmax.cl dropped an early return)
    for shape, eps in [((1, 1), 0.0), ((3, 7), 0.1), ((2, 131), 0.0), ((1, 255), 0.2)]:
        a = rand(*shape)
        x = dev(a).requires_grad_()
        e = np.exp(a - a.max(1, keepdims=True))
        assert_close(F.softmax(x, 1), e / e.sum(1, keepdims=True))
        target = RNG.integers(0, shape[1], size=shape[0]).astype(np.int64)
        loss = F.cross_entropy(x, dev(target), label_smoothing=eps)
        loss.backward()
        expect_loss, expect_grad = xent_ref(a, target, eps)
        assert_close(loss, expect_loss)
        assert_close(x.grad, expect_grad)
        y = F.log_softmax(x, 1)
        g = rand(*shape)
        y.backward(dev(g))
        p = e / e.sum(1, keepdims=True)
        assert_close(x.grad, expect_grad + g - p * g.sum(1, keepdims=True), rtol=1e-4)
        assert_close(F.log_softmax(x.T.detach(), 0), np.log(p).T)
    x = dev(rand(2, 5, 3)).requires_grad_()
    F.cross_entropy(x, dev(RNG.integers(0, 5, size=(2, 3)).astype(np.int64))).backward()


def section_sort():
    from cltensor.ops import sort as sort_ops
    a = rand(3, 37)
    a[0, 5] = a[0, 9] = a[1, 3]  # ties: stable order
    a[2, 7] = np.nan             # NaN sorts last, as in torch
    for budget in (sort_ops.LOCAL_BYTES, 0):  # rows in local memory, then stage by stage
        with setting(sort_ops, "LOCAL_BYTES", budget):  # in global memory
            for t, ref in ((dev(a), a), (dev(a).T, a.T)):
                values, indices = cltensor.sort(t, dim=-1, descending=False, stable=True)
                order = np.argsort(ref, axis=-1, kind="stable")
                assert_close(indices, order)
                got, want = values.numpy(), np.take_along_axis(ref, order, -1)
                assert np.array_equal(np.isnan(got), np.isnan(want)), "NaN out of place"
                assert_close(np.nan_to_num(got), np.nan_to_num(want))
            ints = RNG.integers(-5, 5, size=(2, 70)).astype(np.int64)
            assert_close(cltensor.argsort(dev(ints), descending=True, stable=True),
                         np.argsort(-ints, axis=-1, kind="stable"))
            x = dev(rand(4, 9)).requires_grad_()
            top = cltensor.topk(x, 3, dim=1).values
            top.backward(dev(rand(4, 3)))
            assert np.isfinite(x.grad.numpy()).all()
    edges, values = np.sort(rand(2, 37), -1), rand(2, 5)
    want = np.stack([np.searchsorted(e, v, side="right") for e, v in zip(edges, values)])
    assert_close(cltensor.searchsorted(dev(edges), dev(values), right=True), want,
                 check_dtype=False)


def section_optim():
    for make in [lambda p: cltensor.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-3),
                 lambda p: cltensor.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
                 lambda p: cltensor.optim.Adam(p, lr=0.01, amsgrad=True),
                 lambda p: cltensor.optim.AdamW(p, lr=0.01)]:
        params = [cltensor.nn.Parameter(dev(rand(*s))) for s in [(1,), (7,), (5, 3)]]
        opt = make(params)
        for _ in range(2):
            for p in params:
                p.grad = dev(rand(*p.shape))
            opt.step()


def section_random():
    cltensor.manual_seed(3)
    for n in [1, 7, 131]:
        cltensor.rand(n)
        cltensor.randn(n)
        cltensor.randint(0, 5, (n,))
        cltensor.bernoulli(cltensor.rand(n))
    r = cltensor.randperm(13).numpy()
    assert sorted(r.tolist()) == list(range(13))
    F.dropout(dev(rand(3, 5)), 0.5, training=True)
    counts = cltensor.poisson(dev(np.array([0, 0.5, 9.9, 10, 300], np.float32)).t()).numpy()
    assert (counts >= 0).all() and counts[0] == 0


def section_fractional_pool():
    """fractional_pool.cl (the torch device's fractional_max_pool2d and 3d)."""
    x = rand(3, 2, 7, 9)
    samples = dev(RNG.uniform(0, 1, (3, 3)).astype(np.float32))
    y, idx = pool_ops.fractional_max_pool(dev(x), samples, (2, 3, 2), (1, 3, 4))
    flat = x.reshape(3, -1)
    assert_close(y.numpy().reshape(3, -1),
                 np.take_along_axis(flat, idx.numpy().reshape(3, -1), axis=1))


def section_ranges():
    assert_close(cltensor.arange(0, 7), np.arange(7), check_dtype=False)
    assert_close(cltensor.linspace(0, 1, 5), np.linspace(0, 1, 5))
    assert_close(cltensor.eye(3, 4), np.eye(3, 4))
    a = rand(5, 7)
    assert_close(cltensor.tril(dev(a), -1), np.tril(a, -1))
    assert_close(cltensor.triu(dev(a).T, 1), np.triu(a.T, 1))
    assert_close(cltensor.diag(dev(a)), np.diag(a))


def section_linalg():
    la = cltensor.linalg
    for n in (5, 70):  # 70: more rows than a CPU-style group has work-items
        a = rand(2, n, n) + n * np.eye(n, dtype=np.float32)
        b = rand(2, n, 3)
        a64 = a.astype(np.float64)
        assert_close(la.solve(dev(a), dev(b)), np.linalg.solve(a64, b), rtol=1e-4)
        assert_close(la.solve(dev(a).mT, dev(b)), np.linalg.solve(a64.transpose(0, 2, 1), b),
                     rtol=1e-4)
        assert_close(la.slogdet(dev(a)).logabsdet, np.linalg.slogdet(a64)[1], rtol=1e-4)
        spd = a64 @ a64.transpose(0, 2, 1)
        lower = la.cholesky(dev(spd.astype(np.float32)))
        assert_close(lower, np.linalg.cholesky(spd), rtol=1e-4)
        assert_close(cltensor.cholesky_solve(dev(b), lower), np.linalg.solve(spd, b), rtol=1e-3)
        assert_close(la.solve_triangular(dev(a), dev(b), upper=True),
                     np.linalg.solve(np.triu(a64), b), rtol=1e-4)
    a = rand(2, 9, 5)
    q, r = la.qr(dev(a))
    assert_close(q @ r, a, rtol=1e-4)
    h, tau = decompositions.geqrf(dev(a))
    q2 = decompositions.householder_product(h, tau)
    assert_close(q2 @ cltensor.triu(h[:, :5]), a, rtol=1e-4)
    assert_close(la.svdvals(dev(a)), np.linalg.svd(a.astype(np.float64), compute_uv=False),
                 rtol=1e-4)
    sym = a.transpose(0, 2, 1) @ a
    assert_close(la.eigvalsh(dev(sym)), np.linalg.eigvalsh(sym.astype(np.float64)), rtol=1e-4)
    w, v = la.eigh(dev(sym))
    assert_close(v @ cltensor.diag_embed(w) @ v.mT, sym, rtol=1e-4)


def section_shape():
    a, b = rand(3, 5), rand(2, 5)
    assert_close(cltensor.cat([dev(a), dev(b)], 0), np.concatenate([a, b]))
    c = rand(4, 5)
    assert_close(cltensor.cat([dev(a), dev(c)[1:], dev(a)], 1), np.concatenate([a, c[1:], a], 1))
    assert_close(cltensor.cat([dev(b), dev(a.T).T], 0), np.concatenate([b, a]))  # a copy each
    assert_close(cltensor.flip(dev(a).T, [0]), np.flip(a.T, 0))
    assert_close(cltensor.roll(dev(a), 2, 1), np.roll(a, 2, 1))
    assert_close(cltensor.pad(dev(a), (1, 2)), np.pad(a, ((0, 0), (1, 2))))


def section_small_ints():
    """uint8, int8 and int16 (1- and 2-byte elements) through the elementwise, reduce, scan,
    indexing, sort and cat kernels; values small enough that nothing wraps."""
    from cltensor.ops import sort as sort_ops
    for dtype in (np.uint8, np.int8, np.int16):
        a = RNG.integers(0, 60, size=(7, 11)).astype(dtype)
        b = RNG.integers(1, 2, size=(7, 11)).astype(dtype)
        assert dev(a).dtype == a.dtype, f"{a.dtype} stored as {dev(a).dtype}"
        for na, ta in strided_views(a):
            assert_close(ta + ta * 1, na + na)
        assert_close(cltensor.where(dev(a) > 30, dev(a), dev(b)), np.where(a > 30, a, b))
        assert_close(cltensor.sum(dev(a), 1), a.astype(np.int64).sum(1))
        assert_close(cltensor.amax(dev(a).T, 1), a.T.max(1))
        assert_close(cltensor.cumsum(dev(a), 1), np.cumsum(a.astype(np.int64), 1))
        idx = np.array([6, 0, 3, 3], dtype=np.int64)
        assert_close(cltensor.index_select(dev(a), 0, dev(idx)), a[idx])
        assert_close(dev(a)[dev(a > 30)], a[a > 30])
        assert_close(cltensor.cat([dev(a), dev(b)], 1), np.concatenate([a, b], 1))
        for budget in (sort_ops.LOCAL_BYTES, 0):
            with setting(sort_ops, "LOCAL_BYTES", budget):
                assert_close(cltensor.argsort(dev(a), stable=True), np.argsort(a, kind="stable"))


SECTIONS = {name[len("section_"):]: fn for name, fn in globals().items()
            if name.startswith("section_")}


class ExactBuffers:
    """Stands in for a device's memory pool: each allocation is a new buffer of exactly the
    bytes asked for, held (never released, never reused) until the process ends.

    NOTE: Oclgrind 21.10 keeps a shadow per buffer for its uninitialized-memory check, and two
    of its bugs turn the pool's reuse of buffers into false reports (docs/oclgrind.md):
    a host write (clEnqueueWriteBuffer, clEnqueueFillBuffer) replaces the buffer's shadow by
    one of the write's size, so after from_numpy wrote n bytes into a larger pooled buffer,
    kernel writes past byte n are not recorded and later reads of them are "uninitialized";
    and a released buffer's shadow passes to the next buffer that gets its index. Exact,
    never-released buffers avoid both and make the bounds checks exact too: with the pool, a
    read past a tensor's end lands in the pool's slack and goes unreported.
    """

    def __init__(self, context):
        self.context = context
        self.held = []
        self.managed_bytes = 0  # what memory_stats reads from a pool

    def allocate(self, nbytes):
        buf = cl.Buffer(self.context, cl.mem_flags.READ_WRITE, nbytes)
        self.held.append(buf)
        self.managed_bytes += nbytes
        return buf


def _build_unoptimized(filenames):
    """Kernel files in `filenames` build with -cl-opt-disable, the others as usual.

    NOTE: wraps program._build, as program.py takes no per-file build options; Oclgrind's own
    OCLGRIND_BUILD_OPTIONS applies to every build.
    """
    build = program._build

    def _build(device, filename, src, options):
        if filename in filenames:
            options = tuple(options) + ("-cl-opt-disable",)
        return build(device, filename, src, options)

    program._build = _build


def main(args):
    """Runs the named sections (all by default); --style=cpu|gpu makes the launchers take their
    CPU or their GPU code paths (work-group tiles, local memory, barriers) on any device;
    --opt-disable=a.cl,b.cl builds those kernel files unoptimized; --pool keeps the memory pool
    on Oclgrind (for comparison: false reports then come and go with the allocation history).
    Returns the exit status."""
    device = cltensor.default_device()
    styles = [a.split("=", 1)[1] for a in args if a.startswith("--style=")]
    names = [a for a in args if not a.startswith("--")]
    if styles:
        device.is_cpu, device.is_gpu = styles[-1] == "cpu", styles[-1] == "gpu"
    unoptimized = {f for a in args if a.startswith("--opt-disable=")
                   for f in a.split("=", 1)[1].split(",")}
    if unoptimized:
        _build_unoptimized(unoptimized)
    exact = "oclgrind" in device.name.lower() and "--pool" not in args
    if exact:
        device._pool = ExactBuffers(device.context)
    print(f"device: {device} (cpu paths: {device.is_cpu}, exact buffers: {exact})",
          file=sys.stderr)
    failed = []
    for name in names or SECTIONS:
        print(f"SECTION {name}", file=sys.stderr, flush=True)
        try:
            SECTIONS[name]()
            cltensor.synchronize()
        except Exception:  # the next sections still run; the exit status says it failed
            traceback.print_exc()
            print(f"FAILED {name}", file=sys.stderr, flush=True)
            failed.append(name)
    print("DONE", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
