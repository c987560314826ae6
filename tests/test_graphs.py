"""Graph capture and replay (cltensor.graphs): replays bit-identical to eager steps, refusals,
the graph's memory, and capture confined to its thread."""
import gc
import importlib.util
import os
import threading

import numpy as np
import pyopencl as cl
import pytest

import cltensor as ct
from cltensor import nn

STEPS = 4  # replays (and eager steps) compared after the warm-up


def _net(device):
    ct.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(4, 4, 3), nn.ReLU(), nn.Flatten(),
                         nn.Linear(16, 5)).to(device=device)


def _train(device, rng, make_opt, capture):
    """Losses and final parameters of 2 eager warm-up steps and STEPS more: eager, or replays
    of one captured step with new data copied into the static input each time."""
    model = _net(device)
    opt = make_opt(model.parameters())
    batches = [rng.standard_normal((2, 3, 8, 8)).astype(np.float32) for _ in range(2 + STEPS)]
    x = ct.empty((2, 3, 8, 8), device=device)
    target = ct.tensor([1, 3], device=device)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = nn.functional.cross_entropy(model(x), target)
        loss.backward()
        opt.step()
        return loss

    losses = []
    for i, batch in enumerate(batches):
        x.copy_(ct.from_numpy(batch, device=device))
        if capture and i == 2:
            g = ct.Graph()
            with ct.graph(g):
                static_loss = step()
        if capture and i >= 2:
            g.replay()
            losses.append(static_loss.item())
        else:
            loss = step()
            losses.append(loss.item())
    return losses, [p.numpy() for p in model.parameters()], opt


OPTIMIZERS = {
    "sgd": lambda ps: ct.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-3),
    "adam": lambda ps: ct.optim.Adam(ps, lr=1e-2),
    "adamw_amsgrad": lambda ps: ct.optim.AdamW(ps, lr=1e-2, amsgrad=True),
}


@pytest.mark.parametrize("opt", list(OPTIMIZERS))
def test_replay_is_bit_identical_to_eager_steps(device, opt):
    seed = 1234
    eager = _train(device, np.random.default_rng(seed), OPTIMIZERS[opt], capture=False)
    replayed = _train(device, np.random.default_rng(seed), OPTIMIZERS[opt], capture=True)
    assert replayed[0] == eager[0]
    assert len(set(eager[0])) == len(eager[0])  # the data changed every step
    for a, b in zip(replayed[1], eager[1]):
        np.testing.assert_array_equal(a, b)
    steps = [s.get("step") for s in replayed[2].state.values()]
    assert steps == [s.get("step") for s in eager[2].state.values()]


def test_adam_replays_follow_the_learning_rate(device, rng):
    """Adam's captured step reads lr again at every replay, as a scheduler changes it."""
    runs = []
    for capture in (False, True):
        w = ct.from_numpy(np.arange(4, dtype=np.float32), device=device).requires_grad_()
        opt = ct.optim.Adam([w], lr=0.1)
        w.grad = ct.ones(4, device=device)
        opt.step()
        g = ct.Graph()
        if capture:
            with ct.graph(g):
                opt.step()
        for lr in (0.5, 0.01):
            opt.param_groups[0]["lr"] = lr
            g.replay() if capture else opt.step()
        runs.append(w.detach().numpy())
    np.testing.assert_array_equal(runs[1], runs[0])


def test_nothing_runs_during_capture(device):
    x = ct.zeros(8, device=device)
    g = ct.Graph()
    with ct.graph(g):
        x.add_(1)
        device.enqueue(cl.enqueue_fill_buffer, x.storage.buf, np.float32(5), 0, 16)
        x.mul_(2)
    np.testing.assert_array_equal(x.numpy(), np.zeros(8))
    g.replay()
    np.testing.assert_array_equal(x.numpy(), [10] * 4 + [2] * 4)
    g.replay()
    np.testing.assert_array_equal(x.numpy(), [10] * 4 + [6] * 4)
    assert g.launches() == 2


REFUSED = {
    "item": (lambda x: x.sum().item(), "host"),
    "numpy": (lambda x: x.numpy(), "host"),
    "tolist": (lambda x: (x * 2).tolist(), "host"),
    "print": (lambda x: repr(x + 1), "host"),
    "bool": (lambda x: bool(x[0] > 0), "host"),
    "nonzero": (lambda x: ct.nonzero(x), "depends on the data"),
    "masked_select": (lambda x: ct.masked_select(x, x > 0), "depends on the data"),
    "unique": (lambda x: ct.unique(x), "host"),
    "tensor": (lambda x: x + ct.tensor([1.0, 2, 3, 4], device=x.device), "host data"),
    "from_numpy": (lambda x: ct.from_numpy(np.ones(4, np.float32), device=x.device), "host data"),
    "sampler": (lambda x: list(ct.utils.data.RandomSampler(range(4))), "draw on the host"),
}


@pytest.mark.parametrize("op", list(REFUSED))
def test_refused_ops_raise_and_end_the_capture(device, op):
    fn, words = REFUSED[op]
    x = ct.from_numpy(np.array([1, -2, 3, 0], np.float32), device=device)
    g = ct.Graph()
    with pytest.raises(ct.GraphCaptureError, match=words), ct.graph(g):
        fn(x)
    assert not ct.is_current_stream_capturing()
    np.testing.assert_array_equal((x + 1).numpy(), [2, -1, 4, 1])  # eager again
    with pytest.raises(ct.GraphCaptureError, match="capture it first"):
        g.replay()


def test_optimizer_refusals(device):
    w = ct.ones(3, device=device).requires_grad_()
    w.grad = ct.ones(3, device=device)
    for opt in (ct.optim.SGD([w], lr=0.1, momentum=0.9), ct.optim.Adam([w])):
        with pytest.raises(ct.GraphCaptureError, match="first step"), ct.graph(ct.Graph()):
            opt.step()
        assert not opt.state[w]  # no state made by the refused capture
    opt = ct.optim.RMSprop([w])
    opt.step()
    with pytest.raises(ct.GraphCaptureError, match="RMSprop.step"), ct.graph(ct.Graph()):
        opt.step()


def test_graph_misuse(device):
    g = ct.Graph()
    with ct.graph(g):
        with pytest.raises(ct.GraphCaptureError, match="do not nest"):
            ct.Graph().capture_begin()
    with pytest.raises(ct.GraphCaptureError, match="captured already"), ct.graph(g):
        pass
    assert ct.CUDAGraph is ct.Graph


def _allocated(device):
    return ct.memory_stats(device)["allocated"]


@pytest.fixture
def no_gc():
    """No collection of other tests' garbage while a test counts the device's bytes."""
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def test_graph_memory_is_kept_then_freed(device, no_gc):
    model = _net(device)
    x = ct.ones((1, 3, 8, 8), device=device)
    model(x).sum().backward()  # warm-up: gradients exist
    before = _allocated(device)
    g = ct.Graph()
    with ct.graph(g):
        out = model(x).sum()
        out.backward()
    del out
    held = _allocated(device) - before
    assert held > 4 * 3 * 8 * 8  # the intermediates stay the graph's
    filler = [ct.empty(1024, device=device) for _ in range(64)]  # other work: not its buffers
    kept = {id(buf) for buf, _, _ in g._buffers.values()}
    assert kept and not kept & {id(t.storage.buf) for t in filler}
    del filler
    g.replay()
    device.synchronize()
    del g
    assert _allocated(device) == before


def test_reset_frees_and_allows_a_new_capture(device, no_gc):
    x = ct.ones(16, device=device)
    before = _allocated(device)
    g = ct.Graph()
    with ct.graph(g):
        y = x * 3
    del y
    assert _allocated(device) > before
    g.reset()
    assert _allocated(device) == before
    with ct.graph(g):
        y = x + 1
    g.replay()
    np.testing.assert_array_equal(y.numpy(), np.full(16, 2))


def test_capture_leaves_other_threads_alone(device):
    """Another thread's launches during a capture run at once and are not captured."""
    a = ct.ones(64, device=device)
    b = ct.full((64,), 2.0, device=device)
    started, other_done = threading.Event(), threading.Event()
    seen = {}

    def other():
        started.wait()
        seen["sum"] = (b * 5 + 1).numpy()  # reads the host: refused only in the capturing thread
        other_done.set()

    t = threading.Thread(target=other)
    t.start()
    g = ct.Graph()
    with ct.graph(g):
        started.set()
        assert other_done.wait(20)
        out = a + 1
    t.join()
    np.testing.assert_array_equal(seen["sum"], np.full(64, 11))
    assert g.launches() == 1
    g.replay()
    np.testing.assert_array_equal(out.numpy(), np.full(64, 2))


def test_split_launches_replay(device, rng, monkeypatch):
    """A launch cut in several by the work-group limit replays as the same pieces."""
    from cltensor import program
    from cltensor.ops import elementwise
    monkeypatch.setattr(program, "MAX_GROUPS", 2)
    monkeypatch.setattr(elementwise, "STRIDED_KERNEL", "ew_strided")
    a = rng.standard_normal((3, 1400)).astype(np.float32)
    t = ct.from_numpy(a, device=device)
    g = ct.Graph()
    with ct.graph(g):
        got = t[:, ::2].T * 2  # NOTE: not dense: a contiguous result of 700 rows of 3
    assert g.launches() > 1
    g.replay()
    np.testing.assert_array_equal(got.numpy(), a[:, ::2].T * 2)


def test_replay_inside_profile_records_its_launches(device):
    x = ct.ones(32, device=device)
    g = ct.Graph()
    with ct.graph(g):
        y = (x * 3).relu()
    with ct.profile() as prof:
        g.replay()
    assert len(prof.events) == g.launches() == 2
    assert all(r["end_ns"] >= r["start_ns"] for r in prof.records())
    np.testing.assert_array_equal(y.numpy(), np.full(32, 3))


def test_tensor_outliving_its_graph_stays_valid_and_counted(device, no_gc):
    x = ct.full((256,), 2.0, device=device)
    before = _allocated(device)
    g = ct.Graph()
    with ct.graph(g):
        y = x * 3
    g.replay()
    del g
    assert _allocated(device) == before + 256 * 4  # y's buffer, now counted with y
    np.testing.assert_array_equal(y.numpy(), np.full(256, 6))
    del y
    assert _allocated(device) == before


def _profiled(fn):
    """fn()'s launches [(name, global size)] and its result (the step's loss and gradients)."""
    with ct.profile() as prof:
        out = fn()
    return [e[:2] for e in prof.events], out


@pytest.fixture(params=["native", "gpu"])
def device_kind(request, device, monkeypatch):
    """The device as it is, or taken for a GPU (is_cpu False: the ops' GPU kernels, work sizes
    and algorithm rules run on it); the in-memory caches emptied around the latter, so that
    no choice made for one kind serves the other."""
    if request.param == "native":
        yield device
        return
    assert device.description is not None  # NOTE: memoized from the device's own kind first
    ct.clear_cache()
    monkeypatch.setattr(device, "is_cpu", False)
    yield device
    monkeypatch.undo()
    ct.clear_cache()


def test_capture_enqueues_what_eager_does(device_kind):
    """A captured step has the eager step's launches and results, bit for bit, with the GPU
    paths too (the device taken for a GPU: implicit GEMM's GPU kernels, which pack the weights
    once per weight version): the graph's hold on its buffers does not change autograd's
    choices (taking over a gradient's storage rather than copying it), nor a replay conv's
    use of its cached weight transforms."""
    model = _net(device_kind)
    x = ct.ones((1, 3, 8, 8), device=device_kind)

    def step():
        model.zero_grad(set_to_none=True)
        out = model(x).sum()
        out.backward()
        return out

    def results(out):
        return [out.numpy()] + [p.grad.numpy() for p in model.parameters()]

    step()
    eager, out = _profiled(step)
    expected = results(out)
    g = ct.Graph()
    with ct.graph(g):
        static = step()
    assert g.launches() == len(eager)
    assert _profiled(g.replay)[0] == eager
    for a, b in zip(results(static), expected):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("opt", list(OPTIMIZERS))
def test_captured_optimizer_step_launches_as_the_eager_one(device, opt):
    """A captured optimizer step batches its parameters' updates into multi-tensor launches as
    the eager step does (Adam's replay updates set the scalars of the batched launches)."""
    model = _net(device)
    opt = OPTIMIZERS[opt](model.parameters())
    x = ct.ones((2, 3, 8, 8), device=device)

    def step():
        opt.zero_grad(set_to_none=False)
        model(x).sum().backward()
        opt.step()

    step()
    eager = _profiled(step)[0]
    g = ct.Graph()
    with ct.graph(g):
        step()
    assert g.launches() == len(eager)
    assert _profiled(g.replay)[0] == eager
    assert any(name.endswith("_multi") for name, _ in eager)


def test_float16_adam_replays_are_bit_identical(device):
    """Adam's replays set their launches' scalars in the kernels' compute type (float32 for
    float16 parameters), as the eager step passes them: not rounded to float16 first."""
    runs = []
    for capture in (False, True):
        ct.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(
            device=device, dtype=ct.float16)
        opt = ct.optim.Adam(model.parameters(), lr=1e-2)
        x = ct.ones((2, 8), device=device, dtype=ct.float16)

        def step():
            opt.zero_grad(set_to_none=False)
            model(x).float().sum().backward()
            opt.step()

        for _ in range(2):
            step()
        if capture:
            g = ct.Graph()
            with ct.graph(g):
                step()
        for _ in range(3):
            g.replay() if capture else step()
        runs.append([p.numpy() for p in model.parameters()])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


def _conv_step(device, rng, algo, stride):
    """Weights and a step of two convolutions by `algo` (whose weight transforms conv caches
    per weight version), their gradients taken."""
    from cltensor.conv.function import conv2d
    ws = [ct.from_numpy(rng.standard_normal(s).astype(np.float32), device=device)
          for s in ((4, 3, 3, 3), (4, 4, 3, 3))]
    for w in ws:
        w.requires_grad_()
    x = ct.from_numpy(rng.standard_normal((1, 3, 8, 8)).astype(np.float32), device=device)

    def step():
        for w in ws:
            w.grad = None
        h = conv2d(x, ws[0], stride=stride, padding=1, algo=algo)
        h = nn.functional.max_pool2d(nn.functional.relu(h), 2)
        out = conv2d(h, ws[1], stride=stride, padding=1, algo=algo).sum()
        out.backward()
        return out

    return ws, step


@pytest.mark.parametrize("style, algo, stride", [("gpu", "implicit_gemm", 1),
                                                 (None, "winograd", 1),
                                                 (None, "s2d_winograd", 2)])
def test_capture_enqueues_what_eager_does_on_every_path(device, rng, monkeypatch, style, algo,
                                                        stride):
    """With the GPU kernels forced (implicit GEMM's cx_conv, the xgemm GEMM family), Winograd
    or s2d (Winograd's filter transform of the folded weight), a replay enqueues the eager
    step's launches and gives its results bit for bit: the weight transforms cached per weight
    version are made again only where eager code would make them (a weight written since),
    into the buffers the graph reads, and so are the transforms of those. (Eager code's
    replayed passes make a transform before the pass's launches, the graph within them: the
    same launches, in another order.)"""
    from cltensor.conv import implicit
    from cltensor.ops.gemm import choice
    monkeypatch.setattr(implicit, "KERNEL_STYLE", style)
    monkeypatch.setattr(choice, "FORCE_FAMILY", "xgemm" if style == "gpu" else None)
    ws, step = _conv_step(device, rng, algo, stride)

    def results(out):
        return [out.numpy()] + [w.grad.numpy() for w in ws]

    def written():  # ws[1] written twice in place: the same values, a new version
        with ct.no_grad():
            ws[1].mul_(-1)
            ws[1].mul_(-1)

    step()
    written()
    miss, out = _profiled(step)
    eager_miss = results(out)
    hit, out = _profiled(step)
    eager_hit = results(out)
    assert len(miss) > len(hit)  # the transforms of ws[1] made again
    g = ct.Graph()
    with ct.graph(g):
        static = step()
    assert g.launches() == len(hit)
    for want, expected, before in ((hit, eager_hit, None), (miss, eager_miss, written),
                                   (hit, eager_hit, None)):
        if before:
            before()
        assert g.launches() == len(want)
        assert sorted(_profiled(g.replay)[0]) == sorted(want)
        for a, b in zip(results(static), expected):
            np.testing.assert_array_equal(a, b)


def test_digits_example_trains_the_same_with_graphs(device):
    """examples/digits.py --graphs (Adam, a cosine schedule, replays between eager steps of
    the last partial batch and eval passes) gives the eager run's losses exactly."""
    pytest.importorskip("sklearn", reason="the digits data ships with scikit-learn")
    spec = importlib.util.spec_from_file_location(
        "digits", os.path.join(os.path.dirname(__file__), "..", "examples", "digits.py"))
    digits = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(digits)
    runs = [digits.train(epochs=2, batch_size=128, device=device, log=lambda _: None,
                         graphs=graphs)[1] for graphs in (False, True)]
    for eager, replayed in zip(*runs):
        for key in ("train_loss", "test_loss", "test_accuracy"):
            assert replayed[key] == eager[key]


def test_replays_bump_the_versions_of_what_they_write(device):
    w = ct.zeros(8, device=device)
    v = w.storage.version
    w.add_(1)
    eager = w.storage.version - v
    g = ct.Graph()
    with ct.graph(g):
        w.add_(1)
    v = w.storage.version
    g.replay()
    g.replay()
    assert eager > 0 and w.storage.version == v + 2 * eager


@pytest.mark.parametrize("algo", ["winograd", "implicit_gemm"])
def test_weight_transforms_follow_weights_changed_outside_the_graph(device, rng, algo):
    """Cached weight transforms are made inside the graph on every replay, so a replay sees
    weights written by eager ops after the capture, and eager convs see replays' writes."""
    from cltensor.conv.function import conv2d
    x = ct.from_numpy(rng.standard_normal((1, 4, 6, 6)).astype(np.float32), device=device)
    w = ct.from_numpy(rng.standard_normal((4, 4, 3, 3)).astype(np.float32), device=device)
    conv2d(x, w, padding=1, algo=algo)  # warm-up: the transform cached
    g = ct.Graph()
    with ct.graph(g):
        y = conv2d(x, w, padding=1, algo=algo)
        w.mul_(2)
    w.mul_(3)  # eager, after the capture
    g.replay()
    np.testing.assert_array_equal(y.numpy(), conv2d(x, w / 2, padding=1, algo=algo).numpy())
    g.replay()  # w doubled by the replay: an eager conv must see it
    np.testing.assert_array_equal(conv2d(x, w, padding=1, algo=algo).numpy(),
                                  conv2d(x, w.clone(), padding=1, algo=algo).numpy())


def test_random_ops_draw_afresh_at_each_replay(device):
    """Random ops in a graph take fresh counters of their generator at every replay: the
    numbers eager calls in the replays' place would draw, and the generator's state after."""
    x = ct.ones(1000, device=device)
    gen = ct.Generator()

    def f():
        return (nn.functional.dropout(x, 0.5, training=True) + ct.rand(1000, device=device) +
                ct.randn(3, generator=gen, device=device).sum() +
                ct.randperm(5, device=device)[:1].to(ct.float32))

    runs = []
    for capture in (False, True):
        ct.manual_seed(7)
        gen.manual_seed(8)
        if capture:
            g = ct.Graph()
            with ct.graph(g):
                y = f()
            outs = [g.replay() or y.numpy() for _ in range(3)]
        else:
            outs = [f().numpy() for _ in range(3)]
        runs.append((outs, ct.random.get_rng_state(), gen.get_state()))
    (eager, *states), (replayed, *replayed_states) = runs
    for a, b in zip(eager, replayed):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(eager[0], eager[1])
    for a, b in zip(states, replayed_states):
        np.testing.assert_array_equal(a, b)


def test_capture_reuses_the_buffers_of_its_dead_tensors(device, no_gc):
    """A buffer whose tensor died during the capture serves a later one of the capture (the
    replay keeps the order), not another graph's nor eager work."""
    x = ct.full((4096,), 1.5, device=device)
    before = _allocated(device)
    g = ct.Graph()
    with ct.graph(g):
        y = x
        for _ in range(10):
            y = y * 2
    assert _allocated(device) - before <= 3 * 4096 * 4
    g.replay()
    g.replay()
    np.testing.assert_array_equal(y.numpy(), np.full(4096, 1.5 * 2**10))
    other = ct.Graph()
    with ct.graph(other):
        z = y + 1
        del y  # g's buffer stays g's
        w = z * 3
    assert not {id(b) for b, _, _ in other._buffers.values()} & set(g._buffers)
    g.replay()
    other.replay()
    np.testing.assert_array_equal(w.numpy(), np.full(4096, (1.5 * 2**10 + 1) * 3))


def test_backward_graph_shares_the_forward_graphs_pool(device, rng, no_gc):
    """pool=forward.pool(): the backward capture reuses the buffers of the saved activations it
    frees; replayed in capture order, the pair matches eager steps bit for bit."""
    batches = [rng.standard_normal((2, 4, 8, 8)).astype(np.float32) for _ in range(3)]
    runs = []
    for capture in (False, True):
        ct.manual_seed(0)
        model = nn.Sequential(*[m for _ in range(4) for m in (nn.Conv2d(4, 4, 3, padding=1),
                                                              nn.ReLU())]).to(device=device)
        x = ct.empty((2, 4, 8, 8), device=device)
        model(x).sum().backward()  # warm-up
        model.zero_grad(set_to_none=True)
        if capture:
            fresh = []  # buffers each backward capture allocated anew: without, with sharing
            for share in (False, True):
                model.zero_grad(set_to_none=True)
                fwd, bwd = ct.Graph(), ct.Graph()
                with ct.graph(fwd):
                    out = model(x).relu().sum()
                with ct.graph(bwd, pool=fwd.pool() if share else None):
                    out.backward()
                fresh.append(len(bwd._buffers))
            assert fresh[1] < fresh[0]
        grads = []
        for batch in batches:
            x.copy_(ct.from_numpy(batch, device=device))
            if capture:
                fwd.replay()
                bwd.replay()
            else:
                model.zero_grad(set_to_none=True)
                model(x).relu().sum().backward()
            grads.append([p.grad.numpy() for p in model.parameters()])
        runs.append(grads)
    for eager, replayed in zip(*runs):
        for a, b in zip(eager, replayed):
            np.testing.assert_array_equal(a, b)


def test_pool_must_be_another_captured_graph(device):
    for pool in (ct.Graph(), "pool"):
        with pytest.raises(ct.GraphCaptureError, match="captured graph's pool"):
            ct.Graph().capture_begin(pool=pool)
    assert not ct.is_current_stream_capturing()
