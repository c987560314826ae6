"""Memoized host plans: a repeated call replays the launches decided for the first one (GEMM
products through program.Replay, with scratch allocated again), and a call that differs in
anything that decides them (strides, offsets, dtypes, aliasing, flags, plug-ins, the tuning
entry) decides afresh; every result against numpy float64 into NaN-poisoned outputs."""
import numpy as np
import pyopencl as cl
import pytest

import cltensor as ct
from cltensor import backends, program, tunedb
from cltensor.ops.gemm import engine, kit
from cltensor.testing import rel_error

TOL = 1e-5


@pytest.fixture
def decided(monkeypatch):
    """The list of products that gemm_into decided from scratch (not replayed), plans emptied."""
    engine._plans.clear()
    calls = []
    decide = engine._gemm_into

    def counted(*args):
        calls.append(args[2].shape)
        return decide(*args)
    monkeypatch.setattr(engine, "_gemm_into", counted)
    return calls


def put(device, array):
    return ct.from_numpy(np.ascontiguousarray(array), device=device)


def product(a, b, out, **kw):
    """out (NaN-poisoned first) = a @ b through gemm_into; returns out as numpy."""
    out.fill_(float("nan"))
    engine.gemm_into(a, b, out, **kw)
    return out.numpy()


def check(got, want):
    assert rel_error(got, want) < TOL, rel_error(got, want)


def test_repeated_product_replays(device, rng, decided):
    """The second product of one layout replays the first's plan with its own buffers."""
    a, b = rng.standard_normal((2, 24, 40)), rng.standard_normal((2, 40, 20))
    for scale in (1.0, -2.0, 0.5):
        x, y = put(device, (a * scale).astype(np.float32)), put(device, b.astype(np.float32))
        out = ct.empty((2, 24, 20), device=device)
        check(product(x, y, out), (a * scale) @ b)
    assert len(decided) == 1 and len(engine._plans) == 1
    assert next(iter(engine._plans.values()))[1] is not None, "the product was not replayable"


def test_replay_allocates_scratch(device, rng, decided):
    """A product whose operands are packed (or copied) into scratch replays with fresh
    scratch: the recorded buffers are not reused after they die."""
    a, b = rng.standard_normal((37, 300)), rng.standard_normal((300, 45))
    for _ in range(3):
        x = put(device, a.T.astype(np.float32)).mT  # column-major A: not read in place
        y = put(device, b.T.astype(np.float32)).mT
        out = ct.empty((37, 45), device=device)
        check(product(x, y, out), a @ b)
    assert len(decided) == 1


def test_changed_layout_decides_again(device, rng, decided):
    """Strides, offsets, dtype and which tensors share a buffer each key a plan of their own."""
    a, b, c = (rng.standard_normal(s) for s in ((16, 24), (24, 16), (16, 16)))
    x, y = put(device, a.astype(np.float32)), put(device, b.astype(np.float32))
    out = ct.empty((16, 16), device=device)
    check(product(x, y, out), a @ b)
    check(product(x, put(device, b.T.astype(np.float32)).mT, out), a @ b)  # strides
    big = put(device, np.concatenate([np.zeros(5), b.ravel()]).astype(np.float32))
    check(product(x, big[5:].view(24, 16), out), a @ b)  # offset
    if device.has_fp64:
        out64 = ct.empty((16, 16), dtype=ct.float64, device=device)
        check(product(put(device, a), put(device, b), out64), a @ b)  # dtype
    cin = put(device, c.astype(np.float32))
    check(product(x, y, out, c_in=cin, beta=1.0), a @ b + c)
    out.copy_(cin)
    engine.gemm_into(x, y, out, c_in=out, beta=1.0)  # C read in place: one buffer, two roles
    check(out.numpy(), a @ b + c)
    assert len(decided) == 5 + device.has_fp64
    assert len(engine._plans) == len(decided)


@pytest.mark.parametrize("change", ["allow_tf32", "generation", "entry", "benchmark"])
def test_flags_and_entry_decide_again(device, rng, decided, monkeypatch, change):
    """A changed flag, plug-in generation or tuning entry is never served the old plan."""
    a, b = rng.standard_normal((8, 12)), rng.standard_normal((12, 8))
    x, y = put(device, a.astype(np.float32)), put(device, b.astype(np.float32))
    out = ct.empty((8, 8), device=device)
    check(product(x, y, out), a @ b)
    if change == "entry":
        tunedb.clear()  # the next lookup is a new entry object
    elif change == "generation":
        monkeypatch.setattr(kit, "generation", kit.generation + 1)
    else:
        monkeypatch.setattr(backends, change, not getattr(backends, change))
    check(product(x, y, out), a @ b)
    assert len(decided) == 2


def test_foreign_enqueue_is_not_replayed(device):
    """A recorded block that enqueued a fill itself cannot be replayed; scratch allocated in
    the block gets a scratch role."""
    t = ct.zeros(4, device=device)
    with program.record() as launches:
        device.enqueue(cl.enqueue_fill_buffer, t.storage.buf, np.float32(1), 0, 16)
    assert launches.foreign and program.Replay.make(launches, {"t": t.storage.buf}) is None
    with program.record() as launches:
        s = ct.empty(4, device=device)
        s.fill_(2.0)
        t.copy_(s)
    replay = program.Replay.make(launches, {"t": t.storage.buf})
    assert replay is not None and replay.scratch == (16,)
    t.zero_()
    replay(device, {"t": t.storage.buf})
    np.testing.assert_array_equal(t.numpy(), 2.0)


def test_sum_of_products_replays(device, rng, monkeypatch):
    """gemm_sum_into's plan: replayed for the same layout, decided again for another."""
    if not engine.sums_batches(device, ct.float32):
        pytest.skip(f"gemm_sum_into does not run on {device} (sums_batches)")
    engine._plans.clear()
    calls = []
    decide = engine._gemm_sum_into
    monkeypatch.setattr(engine, "_gemm_sum_into", lambda *a: calls.append(1) or decide(*a))
    a, b = rng.standard_normal((3, 10, 14)), rng.standard_normal((3, 14, 9))
    want = np.einsum("smk,skn->mn", a, b)
    for bt in (False, False, True):
        y = put(device, np.swapaxes(b, 1, 2).astype(np.float32)).mT if bt else \
            put(device, b.astype(np.float32))
        out = ct.empty((10, 9), device=device).fill_(float("nan"))
        engine.gemm_sum_into(put(device, a.astype(np.float32)), y, out)
        check(out.numpy(), want)
    assert len(calls) == 2
