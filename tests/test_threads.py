"""Threads (docs/threads.md): ops from several Python threads on one device give each thread
its own results, bit for bit as when run one after another; recording, profiling and the
random state are per thread or atomic; the device starts once."""
import contextlib
import copy
import gc
import pickle
import sys
import threading
import time

import numpy as np
import pyopencl
import pytest
import torch
from test_benchmark_scripts import script  # benchmarks/thread_soak.py runs the soak

import cltensor as ct
import cltensor.nn.functional as F
from cltensor import device as devmod
from cltensor import program
from cltensor.conv import conv2d, winograd
from cltensor.testing import rel_error

THREADS = 4
WAIT_S = 20  # the most a thread waits at a barrier for the others (a failed one never comes)


@contextlib.contextmanager
def fast_switching(interval=1e-6):
    """Threads switch every `interval` seconds (CPython's default is 5 ms), so races show."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def run_threads(fns):
    """fns[i]() in thread i, all released together; their results, or the first error raised
    (one other than a broken barrier, which only says that another thread failed)."""
    results, errors = [None] * len(fns), []
    barrier = threading.Barrier(len(fns))

    def body(i):
        try:
            barrier.wait()
            results[i] = fns[i]()
        except BaseException as e:  # noqa: BLE001 -- re-raised in the calling thread
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise min(errors, key=lambda e: isinstance(e, threading.BrokenBarrierError))
    return results


@pytest.fixture
def slow_enqueue(monkeypatch):
    """Every kernel enqueue first lets other threads run (time.sleep(0) drops the GIL): a
    thread switch between setting a kernel's arguments and enqueueing it, which shared Kernel
    objects must survive, then happens on every launch rather than on a few in 10,000."""
    enqueue = pyopencl._cl.enqueue_nd_range_kernel

    def yielding(*args):
        time.sleep(0)
        return enqueue(*args)

    monkeypatch.setattr(pyopencl._cl, "enqueue_nd_range_kernel", yielding)


def test_sums_in_threads_stay_their_own(device, slow_enqueue):
    """One elementwise kernel object launched from four threads, each on its own tensors."""
    def work(k):
        a = ct.full((257,), float(k), device=device)
        b = ct.full((257,), 100.0 * k, device=device)
        return sum(not np.all((a + b).numpy() == 101.0 * k) for _ in range(300))

    work(0)  # the device started and the kernel built: only the launches race
    with fast_switching():
        wrong = run_threads([lambda k=k: work(k) for k in range(THREADS)])
    assert wrong == [0] * THREADS


def test_rand_in_threads_matches_sequential(device, slow_enqueue):
    """Per-thread generators: each thread's draws equal the same generator's draws alone."""
    def draws(k):
        g = ct.Generator().manual_seed(k)
        return [ct.rand(1000, generator=g, device=device).numpy() for _ in range(40)]

    expected = [draws(k) for k in range(THREADS)]  # also starts the device and builds
    with fast_switching():
        got = run_threads([lambda k=k: draws(k) for k in range(THREADS)])
    for e, g in zip(expected, got):
        np.testing.assert_array_equal(np.stack(g), np.stack(e))


def test_generator_copies_with_a_lock_of_its_own(device):
    """A generator's lock does not stop deepcopy or pickle; the copy continues the stream."""
    g = ct.Generator().manual_seed(5)
    ct.rand(3, generator=g, device=device)
    for copied in (copy.deepcopy(g), pickle.loads(pickle.dumps(g))):
        np.testing.assert_array_equal(ct.rand(9, generator=copied, device=device).numpy(),
                                      ct.rand(9, generator=copy.copy(g), device=device).numpy())


def test_memory_counts_in_threads(device):
    """Tensors made and dropped in four threads (past the 1,024 allocations that fold the
    counts): memory_stats ends where it began, its peak counts each thread's held tensors.
    Cyclic garbage of earlier tests is collected first: freed during the test, its tensors
    would lower the count (seen on the H200 in a whole-suite run)."""
    gc.collect()
    before = ct.memory_stats(device)["allocated"]
    ct.reset_peak_memory_stats(device)

    def churn():
        held = [ct.empty(16, device=device) for _ in range(300)]
        for _ in range(600):
            held.append(ct.empty(16, device=device))
            del held[0]
        return len(held)

    with fast_switching():
        run_threads([churn] * THREADS)
    gc.collect()
    stats = ct.memory_stats(device)
    assert stats["allocated"] == before
    assert stats["peak"] >= before + 300 * 16 * 4


def test_device_starts_once_in_racing_threads(device, monkeypatch):
    """Threads whose first call is randn find the one default device (before: two Device
    objects for one OpenCL device, and 'expected all tensors on the same device')."""
    monkeypatch.setenv("CLTENSOR_DEVICE", device.index)

    def first_calls():
        x = ct.randn(8)
        return x, x + x

    for _ in range(3):
        monkeypatch.setattr(devmod, "_devices", None)
        monkeypatch.setattr(devmod, "_default", None)
        with fast_switching():
            outs = run_threads([first_calls] * THREADS)
        started = ct.get_device()
        assert all(x.device is started and y.device is started for x, y in outs)
        assert sum(d.index == device.index for d in devmod.all_devices()) == 1


def test_record_in_two_threads_keeps_each_threads_launches(device):
    """record() in two threads at once: each list holds only its own thread's launches."""
    both_inside = threading.Barrier(2, timeout=WAIT_S)

    def work(k):
        x = ct.full((16,), float(k), device=device)
        with program.record() as launches:
            both_inside.wait()
            y = x * 3 if k else x.sum()
            both_inside.wait()
        return [kernel.function_name for kernel, *_ in launches], y

    (names0, _), (names1, y1) = run_threads([lambda: work(0), lambda: work(1)])
    assert names1 == ["ew_contig"]
    assert names0 and "ew_contig" not in names0
    np.testing.assert_array_equal(y1.numpy(), np.full(16, 3.0, np.float32))


def test_first_winograd_conv_in_two_threads(device, rng, slow_enqueue):
    """Two threads' first Winograd convolution of one shape both record their launches for
    replay (before: 'program.record: already recording'); each gets its own result."""
    xs = [rng.standard_normal((2, 3, 8, 8)) for _ in range(2)]
    ws = [rng.standard_normal((4, 3, 3, 3)) for _ in range(2)]

    def work(k):
        x, w = (ct.from_numpy(a.astype(np.float32), device=device) for a in (xs[k], ws[k]))
        return conv2d(x, w, None, algo="winograd", padding=1).numpy()

    with fast_switching():
        outs = run_threads([lambda: work(0), lambda: work(1)])
    for x, w, out in zip(xs, ws, outs):
        ref = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1)
        assert rel_error(out, ref.numpy()) <= winograd.WINOGRAD_RTOL


def test_profile_in_one_thread_leaves_another_threads_chain(device):
    """One thread profiles while another adds 1 twenty times: the chain ends at 20 and the
    profile holds only the profiling thread's launches."""
    inside = threading.Barrier(2, timeout=WAIT_S)

    def profiled():
        x = ct.ones(1000, device=device)
        with ct.profile() as prof:
            inside.wait()
            s = x.sum()
            inside.wait()
        return prof.records(), s.item()

    def chain():
        y = ct.zeros(100_000, device=device)
        inside.wait()
        for _ in range(20):
            y = y + 1
        inside.wait()
        return y.numpy()

    with fast_switching():
        (records, total), y = run_threads([profiled, chain])
    assert total == 1000.0
    assert np.all(y == 20)
    assert records and all(r["name"] != "ew_contig" for r in records)


def _mixed_work(device, k, r):
    """One round of thread k's mixed work: elementwise, GEMM, conv, random (own generator),
    a profiled reduction. Returns host arrays and the profiled kernels' names."""
    g = ct.Generator().manual_seed(1000 * k + r)
    x = ct.rand(6, 10, generator=g, device=device)
    w = ct.randn(10, 7, generator=g, device=device)
    y = ((x * 2 - 1).relu() + k) @ w
    img = ct.randn(1, 2, 6, 6, generator=g, device=device)
    c = F.conv2d(img, ct.randn(3, 2, 3, 3, generator=g, device=device), padding=1)
    with ct.profile() as prof:
        s = y.sum() + c.sum()
    return y.numpy(), c.numpy(), s.numpy(), [e[0] for e in prof.events]


def test_mixed_work_in_threads_is_bit_identical_to_sequential(device, slow_enqueue):
    rounds = 100
    expected = [[_mixed_work(device, k, r) for r in range(rounds)] for k in range(THREADS)]
    with fast_switching():
        got = run_threads([lambda k=k: [_mixed_work(device, k, r) for r in range(rounds)]
                           for k in range(THREADS)])
    for k in range(THREADS):
        for r in range(rounds):
            *arrays, names = got[k][r]
            assert names == expected[k][r][-1]
            for e, o in zip(expected[k][r], arrays):
                np.testing.assert_array_equal(o, e, err_msg=f"thread {k} round {r}")


def _check_soak(device, steps):
    pytest.importorskip("sklearn", reason="the digits data ships with scikit-learn")
    fig = script("thread_soak").soak(device, steps)
    assert fig["threaded_losses"] == fig["sequential_losses"]
    assert fig["params_equal"]
    assert fig["late_allocated_max"] <= fig["early_allocated_max"], fig
    assert fig["held_after_threaded"] == fig["held_after_sequential"], fig
    return fig


def test_two_threads_train_digits_as_sequential(device):
    _check_soak(device, 100)


@pytest.mark.soak
def test_soak_two_threads_train_digits_2000_steps(device, request):
    if "soak" not in (request.config.option.markexpr or ""):
        pytest.skip("the 2,000-step soak runs with -m soak")
    fig = _check_soak(device, 2000)
    print({k: v for k, v in fig.items() if not k.endswith("_losses")})
