"""The host's fast paths and their fallbacks: a Replay enqueues straight to the queue on
Kernel objects of its own (setting only the buffers) unless launch() has more to do
(profiling, a launch cut into pieces); each path against a float64 reference, outputs
poisoned first."""
import numpy as np
import pytest

import cltensor as ct
from cltensor import program
from cltensor.device import Storage
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
