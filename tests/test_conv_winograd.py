"""conv2d's backward specifics and Winograd in depth: the first layer skips its input gradient,
tight workspace and work-group limits chunk the algorithms; Winograd's padded tile rows, items
per work-item and vector width, its fp32 accuracy against direct convolution, its replayed
launches (and the buffers a replay refuses to name), the filter read in place and cached, and
its exact transform matrices. Against the float64 reference of test_conv.py."""
import sys

import numpy as np
import pytest

import cltensor
from cltensor import backends
from cltensor.conv import conv2d, implicit, winograd
from cltensor.conv.params import make_params
from cltensor.ops import gemm as gemm_ops
from cltensor.testing import random_array, rel_error
from test_conv import GENERAL_CASES, WINOGRAD_CASES, _check_case, _tensors, ref_conv


# ---- backward specifics -----------------------------------------------------------------------

def test_first_layer_skips_input_gradient(device, rng):
    x, w, _b, X, W, B = _tensors(device, rng, (2, 3, 8, 8), (4, 3, 3, 3))
    W.requires_grad_()
    for algo, data_kernels in (("im2col", {"col2im"}), ("implicit_gemm", {"conv_cpu", "cx_conv"})):
        W.grad = None
        out = conv2d(X, W, B, padding=1, algo=algo)
        with cltensor.profile() as prof:
            out.sum().backward()
        names = {r["name"] for r in prof.records()}
        assert not names & data_kernels, f"{algo} ran input-gradient kernels: {names}"
        gw = ref_conv(x, w, None, padding=1, grad=np.ones(out.shape))[2]
        assert rel_error(W.grad, gw) <= 1e-5


def test_workspace_chunks(device, rng, monkeypatch):
    """A tiny workspace budget runs im2col and Winograd image by image, and a tiny work-group
    limit splits implicit GEMM's launches: same results."""
    monkeypatch.setattr(backends, "conv_workspace_limit", 1)
    monkeypatch.setattr(implicit, "MAX_GROUPS", 2)
    for algo in ("im2col", "winograd", "implicit_gemm"):
        _check_case(device, rng, algo, ((3, 4, 6, 7), (5, 4, 3, 3), {"padding": 1}))
        _check_case(device, rng, algo, GENERAL_CASES[1])


def test_winograd_padded_tile_rows(device, rng, monkeypatch):
    """Transformed tiles in rows padded with zero tiles (as on GPUs, for the GEMM's tiles):
    forward and both gradients unchanged, whole batches and image by image."""
    monkeypatch.setitem(winograd.TILE_ALIGN, "cpu", 16)
    monkeypatch.setitem(winograd.TILE_ALIGN, "gpu", 16)
    for case in WINOGRAD_CASES[:3]:
        _check_case(device, rng, "winograd", case)
    monkeypatch.setattr(backends, "conv_workspace_limit", 1)
    _check_case(device, rng, "winograd", WINOGRAD_CASES[4])


@pytest.mark.parametrize("vec", [1, 4])
def test_winograd_items_per_work_item(device, rng, monkeypatch, vec):
    """Winograd's kernels with one tile or filter per work-item (GPUs) and with several per
    work-item (CPUs take the vector width): tiles and filters that do not fill the last
    work-item, padded tile rows, groups, both tile and kernel sizes, fp32 and float64. (The
    other tests run the device's own count.)"""
    monkeypatch.setattr(winograd, "items_per_work_item", lambda _device, _dtype: vec)
    _check_case(device, rng, "winograd", WINOGRAD_CASES[2])
    _check_case(device, rng, "winograd_4x4", WINOGRAD_CASES[6])
    if device.has_fp64:
        _check_case(device, rng, "winograd", WINOGRAD_CASES[0], dtype=np.float64)
    monkeypatch.setitem(winograd.TILE_ALIGN, "cpu", 16)
    monkeypatch.setitem(winograd.TILE_ALIGN, "gpu", 16)
    _check_case(device, rng, "winograd", WINOGRAD_CASES[1])


def test_winograd_vector_width_follows_the_device(device):
    """One filter per lane of the device's preferred vector on CPUs, one per work-item else."""
    for dtype, pref in ((np.float32, "preferred_vector_width_float"),
                        (np.float64, "preferred_vector_width_double")):
        if dtype == np.float64 and not device.has_fp64:
            continue  # such a device reports a width of 0 for it
        vec = winograd.items_per_work_item(device, dtype)
        if device.is_cpu:
            width = min(getattr(device.cl_device, pref), 16)
            assert vec <= width < 2 * vec and vec & (vec - 1) == 0, (dtype, vec, width)
        else:
            assert vec == 1


# fp32 error of a Winograd variant over direct (im2col) fp32's on the same data, at most (its
# measured ratio with some room: the larger tiles' transforms add and scale more terms)
WINOGRAD_ERROR_RATIO = {("winograd", 3): 4, ("winograd_4x4", 3): 16, ("winograd", 5): 16,
                        ("winograd_4x4", 5): 40}


@pytest.mark.parametrize("algo, k", sorted(WINOGRAD_ERROR_RATIO))
def test_winograd_accuracy(device, rng, algo, k):
    """Each variant in fp32, output and both gradients: within WINOGRAD_RTOL of float64, and
    within WINOGRAD_ERROR_RATIO of direct (im2col) fp32 on the same data."""
    x, w, b, X, W, B = _tensors(device, rng, (4, 64, 12, 12), (48, 64, k, k))
    g = random_array(rng, (4, 48, 12, 12))
    want = ref_conv(x, w, b, padding=k // 2, grad=g.astype(np.float64))
    errors = {}
    for name in (algo, "im2col"):
        Xg, Wg = X.detach().requires_grad_(), W.detach().requires_grad_()
        out = conv2d(Xg, Wg, B, padding=k // 2, algo=name)
        out.backward(cltensor.from_numpy(g, device=device))
        errors[name] = [rel_error(t, r) for t, r in zip((out, Xg.grad, Wg.grad), want)]
    ratio = WINOGRAD_ERROR_RATIO[(algo, k)]
    for name, wino, direct in zip(("out", "gx", "gw"), errors[algo], errors["im2col"]):
        assert wino <= winograd.WINOGRAD_RTOL, name
        assert wino <= ratio * direct + 1e-7, f"{name}: {algo} {wino:.1e} vs direct {direct:.1e}"


def _winograd_pass(device, rng, algo, case, relu, keep):
    """A forward and backward of `case` by `algo` on fresh random data, checked against the
    reference; the tensors are appended to `keep` (alive: the pool cannot hand their buffers
    to the next call, so a replay that wrote into the recorded buffers would show)."""
    xshape, wshape, kwargs = case
    x, w, b, X, W, B = _tensors(device, rng, xshape, wshape)
    X.requires_grad_()
    out = conv2d(X, W, B, algo=algo, relu=relu, **kwargs)
    g = random_array(rng, out.shape)
    out.backward(cltensor.from_numpy(g, device=device))
    ref = ref_conv(x, w, b, **kwargs)
    mask = ref > 0 if relu else np.ones(ref.shape, bool)
    gx = ref_conv(x, w, b, grad=np.where(mask, g, 0).astype(np.float64), **kwargs)[1]
    keep.append((out, X, np.where(mask, ref, 0) if relu else ref, gx))
    for out_, X_, ref_, gx_ in keep:  # earlier outputs unchanged by later replays
        assert rel_error(out_, ref_) <= winograd.WINOGRAD_RTOL, (algo, case, relu)
        assert rel_error(X_.grad, gx_) <= winograd.WINOGRAD_RTOL, (algo, case, relu)


def test_winograd_replays_its_launches(device, rng, monkeypatch):
    """A one-chunk Winograd run (forward, input gradient) records its launches; the next run
    with the same key replays them on the new call's tensors, without deciding anything again
    (_chunk not called), with and without bias and fused ReLU. Another input offset and another
    workspace budget are other keys, and runs in several chunks are never recorded."""
    winograd.clear_plans()
    chunk = winograd.Winograd._chunk
    keep = []
    for algo, case, relu in (("winograd", WINOGRAD_CASES[0], False),
                             ("winograd_4x4", WINOGRAD_CASES[5], True),
                             ("winograd", WINOGRAD_CASES[1], True)):
        _winograd_pass(device, rng, algo, case, relu, keep)
        plans = dict(winograd._plans)
        assert len(plans) >= 2 and all(plans.values()), plans  # forward and input gradient
        monkeypatch.setattr(winograd.Winograd, "_chunk", None)  # replays only
        _winograd_pass(device, rng, algo, case, relu, keep)
        _winograd_pass(device, rng, algo, case, relu, keep)
        monkeypatch.setattr(winograd.Winograd, "_chunk", chunk)
        assert winograd._plans == plans
    # no bias (the output transform reads M in the bias's place), then with fused ReLU
    (xs, ws, kw), before = WINOGRAD_CASES[0], len(winograd._plans)
    x, w, _, X, W, _ = _tensors(device, rng, xs, ws, bias=False)
    for relu in (False, False, True, True, False):
        want = ref_conv(x, w, **kw)
        got = conv2d(X, W, algo="winograd", relu=relu, **kw)
        assert rel_error(got, np.maximum(want, 0) if relu else want) <= \
            winograd.WINOGRAD_RTOL, relu
    assert len(winograd._plans) == before + 2
    before += 1
    # the input at another offset: a view into a larger tensor
    big = random_array(rng, (xs[0] + 1,) + xs[1:])
    view = cltensor.from_numpy(big, device=device)[1:]
    for _ in range(2):
        got = conv2d(view, W, algo="winograd", **kw)
        assert rel_error(got, ref_conv(big[1:], w, **kw)) <= winograd.WINOGRAD_RTOL
    assert len(winograd._plans) == before + 2
    # the output at another offset (run() writes any view it is given); NaN around it
    p = make_params(X, W, None, 1, kw["padding"], 1, 1)
    want = ref_conv(x, w, **kw)
    for _ in range(2):
        whole = cltensor.from_numpy(np.full((p.n + 1,) + p.out_shape[1:], np.nan, np.float32),
                                    device=device)
        winograd.F2.forward(X, W, None, p, whole[1:])
        assert rel_error(whole[1:], want) <= winograd.WINOGRAD_RTOL
        assert np.isnan(whole[0].numpy()).all()
    assert len(winograd._plans) == before + 3
    # chunked runs (three launches an image) and benchmark mode: not recorded nor replayed
    for flag, value in (("conv_workspace_limit", 1), ("benchmark", True)):
        monkeypatch.setattr(backends, flag, value)
        for _ in range(2):
            with cltensor.profile() as prof:
                got = conv2d(X, W, algo="winograd", **kw)
            assert rel_error(got, ref_conv(x, w, **kw)) <= winograd.WINOGRAD_RTOL
            assert len(prof.records()) == 3 * (xs[0] if flag == "conv_workspace_limit" else 1)
        assert len(winograd._plans) == before + 3
        monkeypatch.setattr(winograd.Winograd, "_chunk", None)  # the plan of this key
        with pytest.raises(TypeError):  # NOTE: below conv2d's own replay of the whole pass
            winograd.F2.forward(X, W, None, p, cltensor.empty(p.out_shape, device=device))
        monkeypatch.setattr(winograd.Winograd, "_chunk", chunk)
        monkeypatch.undo()


def test_replay_refuses_buffers_it_cannot_name(device, rng, monkeypatch):
    """Replay.make returns None where a launch reads a buffer outside its roles (scratch of its
    own) or one buffer would play two roles; Winograd then remembers that its key has no plan
    and does not record it again."""
    a, b, c = (cltensor.zeros(4, device=device) for _ in range(3))
    kernel = object()
    launches = [(kernel, (4,), None, (a.storage.buf, np.int32(1), b.storage.buf))]
    assert cltensor.program.Replay.make(launches, {"a": a.storage.buf}) is None
    assert cltensor.program.Replay.make(launches, {"a": a.storage.buf, "b": a.storage.buf}) \
        is None
    made = cltensor.program.Replay.make(launches, {"a": a.storage.buf, "b": b.storage.buf,
                                                  "c": c.storage.buf})
    (_, _, _, template, slots), = made.launches
    assert template == [None, np.int32(1), None] and slots == ((0, "a"), (2, "b"))
    winograd.clear_plans()
    records = []
    real_record = cltensor.program.record

    def counted():  # NOTE: the GEMM engine records its own products too; counted apart
        records.append(sys._getframe(1).f_globals["__name__"])
        return real_record()
    monkeypatch.setattr(cltensor.program, "record", counted)
    monkeypatch.setattr(cltensor.program.Replay, "make", classmethod(lambda cls, *a: None))
    xs, ws, kw = WINOGRAD_CASES[0]
    x, w, b_, X, W, B = _tensors(device, rng, xs, ws)
    for _ in range(3):
        assert rel_error(conv2d(X, W, B, algo="winograd", **kw), ref_conv(x, w, b_, **kw)) <= \
            winograd.WINOGRAD_RTOL
    assert records.count(winograd.__name__) == 1 and list(winograd._plans.values()) == [None]


@pytest.mark.parametrize("family", ["xgemm", "packed"])
def test_winograd_reads_the_filter_in_place(device, rng, monkeypatch, family):
    """With the filter transform cached, a forward pass runs three kernels (input transform,
    one product, output transform) although the input channels are no multiple of any GEMM
    tile: U is laid out as the GEMM family reads it in place (xgemm: the outputs contiguous,
    gemm_packed: the inputs); and forward and gradients with groups against the reference."""
    monkeypatch.setattr(gemm_ops, "FORCE_FAMILY", family)
    if family == "xgemm":  # its tiles read the transformed tiles in place, as on GPUs
        monkeypatch.setitem(winograd.TILE_ALIGN, "cpu", winograd.TILE_ALIGN["gpu"])
    else:  # gemm_packed as CPUs' entries set it: A (K contiguous) and wide B where they are
        entry = gemm_ops.entry_for(device, np.float32)
        packed = dict(entry["packed"], A_IN_PLACE=1, B_IN_PLACE_MIN_N=128)
        monkeypatch.setattr(gemm_ops, "entry_for", lambda _d, _t: dict(entry, packed=packed))
    # 240 tiles: gemm_packed reads B (the transformed tiles) in place; 12 outputs: xgemm
    # reads A's rows in whole vectors
    x, w, b, X, W, B = _tensors(device, rng, (2, 6, 24, 20), (12, 6, 3, 3))
    conv2d(X, W, B, padding=1, algo="winograd")
    with cltensor.profile() as prof:
        out = conv2d(X, W, B, padding=1, algo="winograd")
    names = [r["name"] for r in prof.records()]
    assert len(names) == 3, names
    assert rel_error(out, ref_conv(x, w, b, padding=1)) <= winograd.WINOGRAD_RTOL
    _check_case(device, rng, "winograd", WINOGRAD_CASES[1])


@pytest.mark.parametrize("m, r", [(2, 3), (4, 3), (2, 5), (4, 5)])
def test_winograd_matrices_are_exact(m, r):
    """A^T [(G g) * (B^T d)] is the correlation of d and g, exactly (in rationals)."""
    from fractions import Fraction
    at, g_mat, bt = winograd.matrices(m, r)
    a = m + r - 1
    assert (len(at), len(at[0]), len(g_mat), len(g_mat[0]), len(bt)) == (m, a, a, r, a)
    rng = np.random.default_rng(m * 10 + r)
    for _ in range(3):
        d = [Fraction(int(v), 7) for v in rng.integers(-50, 50, a)]
        g = [Fraction(int(v), 3) for v in rng.integers(-50, 50, r)]
        gg = [sum(row[k] * g[k] for k in range(r)) for row in g_mat]
        bd = [sum(row[k] * d[k] for k in range(a)) for row in bt]
        y = [sum(at[i][j] * gg[j] * bd[j] for j in range(a)) for i in range(m)]
        assert y == [sum(d[i + k] * g[k] for k in range(r)) for i in range(m)]


def test_winograd_filter_cache(device, rng):
    x, w, b, X, W, B = _tensors(device, rng, (1, 3, 6, 6), (4, 3, 3, 3))
    conv2d(X, W, B, padding=1, algo="winograd")
    with cltensor.profile() as prof:
        conv2d(X, W, B, padding=1, algo="winograd")
    assert "filter_transform" not in {r["name"] for r in prof.records()}
    with cltensor.no_grad():
        W.mul_(2)  # an in-place update bumps the storage version
    out = conv2d(X, W, B, padding=1, algo="winograd")
    assert rel_error(out, ref_conv(x, 2 * w, b, padding=1)) <= 1e-5
