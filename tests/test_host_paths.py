"""The host's fast paths and their fallbacks: a Replay enqueues straight to the queue on
Kernel objects of its own (setting only the buffers) unless launch() has more to do
(profiling, a launch cut into pieces); GEMM's tuning entry is looked up by cltensor's dtypes
without np.dtype; conv2d's usual operands are checked in one expression, others one check at
a time; Winograd's one-chunk weight gradient replays. Each path against a float64
reference, outputs poisoned first where they are new."""
import numpy as np
import pytest

import cltensor as ct
from cltensor import program, tunedb
from cltensor.conv import conv2d, params, winograd
from cltensor.device import Storage
from cltensor.ops.gemm import choice
from cltensor.testing import rel_error
from test_conv import ref_conv

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


def conv_operands(device, rng, dtype=np.float32):
    x, w, b = (rng.standard_normal(s).astype(dtype) for s in ((2, 3, 6, 5), (4, 3, 3, 3), (4,)))
    return (x, w, b), [ct.from_numpy(a, device=device) for a in (x, w, b)]


def test_conv_checks_usual_operands_at_once(device, rng, monkeypatch):
    """Tensors of one device, dims and dtype pass check_tensors' one-expression test, tuple
    and int arguments make_params' memo; the convolution matches the float64 reference."""
    calls = []
    usual = params._usual_tensors
    monkeypatch.setattr(params, "_usual_tensors", lambda *a: calls.append(usual(*a)) or calls[-1])
    arrays, (x, w, b) = conv_operands(device, rng)
    for stride, padding in ((1, 1), ((1, 2), (0, 1))):
        got = conv2d(x, w, b, stride=stride, padding=padding).numpy()
        want = ref_conv(*arrays, stride=stride, padding=padding)
        assert rel_error(got, want) < TOL
        assert params._plain(stride) and params._plain(padding)
    assert calls == [True, True]


@pytest.mark.parametrize("case", ["weight dtype", "bias not a tensor", "3-d weight",
                                  "int input", "bool stride"])
def test_conv_unusual_operands_take_the_checks(device, rng, monkeypatch, case):
    """Operands the fast test does not pass go through the checks one at a time, which name
    the problem; a bool in a stride is not taken for an int by the memo (nor accepted)."""
    calls = []
    usual = params._usual_tensors
    monkeypatch.setattr(params, "_usual_tensors", lambda *a: calls.append(usual(*a)) or calls[-1])
    arrays, (x, w, b) = conv_operands(device, rng)
    kw, fast = {}, [False]
    if case == "weight dtype":
        w, error = w.double(), "input is float32 but weight is float64"
    elif case == "bias not a tensor":
        b, error = arrays[2], "bias must be a tensor"
    elif case == "3-d weight":
        w, error = w[0], "expected a 4-d weight"
    elif case == "int input":
        x, w, b, error = x.int(), w.int(), b.int(), "expected a float32 or float64 input"
    else:  # usual tensors; the memo's type test sends the stride to _make_params' checks
        kw, fast, error = {"stride": (True, 1)}, [True], "stride must be an int or a pair"
        assert not params._plain(kw["stride"])
    with pytest.raises((TypeError, ValueError), match=error):
        conv2d(x, w, b, **kw)
    assert calls == fast


@pytest.mark.parametrize("chunked", [False, True])
def test_winograd_weight_grad_replays_one_chunk(device, rng, monkeypatch, chunked):
    """Winograd's weight gradient of one chunk of images replays its launches (scratch and
    result allocated again, NaN-poisoned here); one of several chunks (a workspace limit of
    one byte) decides every time. Each against the float64 reference."""
    winograd.clear_plans()
    monkeypatch.setattr(program, "Storage", PoisonedStorage)
    if chunked:
        monkeypatch.setattr(ct.backends, "conv_workspace_limit", 1)
    decided = []
    slow = winograd.Winograd._weight_grad
    monkeypatch.setattr(winograd.Winograd, "_weight_grad",
                        lambda self, *a: decided.append(1) or slow(self, *a))
    for _ in range(3):
        arrays, (x, w, _) = conv_operands(device, rng)
        g = rng.standard_normal((2, 4, 6, 5))
        p = params.make_params(x, w, None, 1, 1, 1, 1)
        gw = winograd.F2.weight_grad(x, ct.from_numpy(g.astype(np.float32), device=device), p)
        want = ref_conv(arrays[0], arrays[1], padding=1, grad=g)[2]
        assert rel_error(gw.numpy(), want) < 1e-5
    assert len(decided) == (3 if chunked else 1)
