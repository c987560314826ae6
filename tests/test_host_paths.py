"""The host's fast paths and their fallbacks: a Replay enqueues straight to the queue on
Kernel objects of its own (setting only the buffers) unless launch() has more to do
(profiling, a launch cut into pieces), and GEMM's tuning entry is looked up by cltensor's
dtypes without np.dtype; each path against a float64 reference, outputs poisoned first."""
import numpy as np
import pytest

import cltensor as ct
from cltensor import program, tunedb
from cltensor.device import Storage
from cltensor.ops.gemm import choice
from cltensor.testing import rel_error

TOL = 1e-5


def recorded_product(device, rng, shape=(7,)):
    """A Replay of a product of (*shape, 33) by (*shape[:-1], 33, 5) into a new tensor; its
    roles are the indexes 0 (x), 1 (y)."""
    a, b = rng.standard_normal((*shape, 33)), rng.standard_normal((*shape[:-1], 33, 5))
    x, y = (ct.from_numpy(v.astype(np.float32), device=device) for v in (a, b))
    with program.record() as launches:
        out = x @ y
    replay = program.Replay.make(launches, {0: x.storage.buf, 1: y.storage.buf}, [out.storage])
    assert replay is not None and None not in replay.outputs, "the product was not replayable"
    return replay


def replay_into(device, rng, replay, shape=(7,)):
    """Replay with fresh operands (a list of buffers, the roles its indexes); returns (its
    output, the float64 product)."""
    a, b = rng.standard_normal((*shape, 33)), rng.standard_normal((*shape[:-1], 33, 5))
    x, y = (ct.from_numpy(v.astype(np.float32), device=device) for v in (a, b))
    storage, = replay(device, [x.storage.buf, y.storage.buf], keep=replay.outputs)
    want = a @ b
    got = ct.ClTensor(storage, want.shape, ct.empty(want.shape, device=device).strides, 0, ct.float32)
    return got.numpy(), want


class PoisonedStorage(Storage):
    """A replay's new buffer, filled with NaN before use (an allocation that enqueues)."""

    def __init__(self, device, nbytes):
        super().__init__(device, nbytes)
        ct.ClTensor(self, (nbytes // 4,), (1,), 0, ct.float32).fill_(float("nan"))


@pytest.fixture
def paths(monkeypatch):
    """{"direct": replays that went straight to the queue, "launch": launches through
    program.launch}, counted; the replays' new buffers NaN-poisoned."""
    monkeypatch.setattr(program, "Storage", PoisonedStorage)
    counts = {"direct": 0, "launch": 0}
    direct, launch = program.Replay._direct, program.launch

    def counted_direct(self, *args):
        counts["direct"] += 1
        return direct(self, *args)

    def counted_launch(*args):
        counts["launch"] += 1
        return launch(*args)
    monkeypatch.setattr(program.Replay, "_direct", counted_direct)
    monkeypatch.setattr(program, "launch", counted_launch)
    return counts


def test_replay_goes_straight_to_the_queue(device, rng, paths):
    """A plain replay enqueues on its own Kernels, none through launch(), and computes the
    product of its new buffers each time."""
    replay = recorded_product(device, rng)
    for _ in range(3):
        got, want = replay_into(device, rng, replay)
        assert rel_error(got, want) < TOL
    assert paths == {"direct": 3, "launch": 0}
    assert replay.lifetimes.direct and len(replay.own) == len(replay.launches)


def test_replay_under_the_profiler_launches(device, rng, paths):
    """Inside cltensor.profile() a replay goes through launch() (which records each launch),
    and computes the same product."""
    replay = recorded_product(device, rng)
    with ct.profile() as prof:
        got, want = replay_into(device, rng, replay)
    assert rel_error(got, want) < TOL
    assert paths["direct"] == 0 and paths["launch"] == len(replay.launches)
    names = [k.function_name for k, *_ in replay.launches]
    assert [e[0] for e in prof.events][-len(names):] == names  # after the poisoning fill


def test_replay_of_a_cut_launch_launches(device, rng, paths, monkeypatch):
    """A replay with a launch that launch_pieces cuts (more work-groups than MAX_GROUPS along
    its outer dim) goes through launch(), every piece enqueued."""
    monkeypatch.setattr(program, "MAX_GROUPS", 2)
    replay = recorded_product(device, rng, (3, 2))
    assert not replay.lifetimes.direct, "no launch of the product was cut"
    for _ in range(2):
        got, want = replay_into(device, rng, replay, (3, 2))
        assert rel_error(got, want) < TOL
    assert paths["direct"] == 0 and paths["launch"] == 2 * len(replay.launches)


@pytest.mark.parametrize("form", ["cltensor", "numpy dtype", "numpy type", "name"])
def test_gemm_entry_by_any_dtype_form(device, form, monkeypatch):
    """entry_for gives every form of a dtype its kernel's entry: cltensor's dtypes (and numpy
    dtypes, equal to them) from its table, the other forms (numpy's float16 type among them)
    through np.dtype."""
    calls = []
    slow = choice._entry_kernel
    monkeypatch.setattr(choice, "_entry_kernel", lambda d: calls.append(d) or slow(d))
    cases = {ct.float32: "gemm_float32", ct.int32: "gemm_float32", ct.float64: "gemm_float64",
             ct.int64: "gemm_float64", ct.float16: "gemm_float16", ct.bfloat16: "gemm_bfloat16"}
    for dtype, kernel in cases.items():
        given = {"cltensor": dtype, "numpy dtype": dtype.dtype, "numpy type": dtype.dtype.type,
                 "name": dtype.dtype.name}[form]
        if dtype == ct.bfloat16 and form != "cltensor":
            continue  # numpy's forms of bfloat16 need ml_dtypes (else they are uint16)
        entry = choice.entry_for(device, given)
        assert entry is tunedb.current("gemm", kernel, device), (form, dtype)
    assert (calls == []) == (form in ("cltensor", "numpy dtype")), calls
