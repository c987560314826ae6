"""Memoized host plans: a repeated GEMM product or convolution pass replays the launches
decided for the first one (program.Replay, with scratch and outputs allocated again), and a
call that differs in anything that decides them (strides, offsets, dtypes, aliasing, flags,
plug-ins, the tuning entry) decides afresh; every result against numpy float64 into
NaN-poisoned outputs. Also: recording's bookkeeping (nesting, foreign blocks, scratch that
dies in a block), graph capture and threads over plans, and the host paths made leaner."""
import contextlib
import gc
import threading

import numpy as np
import pyopencl as cl
import pytest

import cltensor as ct
from cltensor import backends, program, tunedb
from cltensor.conv import common, conv2d, dispatch, plans
from cltensor.conv import function as conv_function
from cltensor.conv.params import make_params
from cltensor.device import Storage
from cltensor.ops import elementwise as ew
from cltensor.ops import norm
from cltensor.ops.gemm import engine, kit
from cltensor.testing import rel_error
from test_conv import ref_conv

TOL = 1e-5
TF32_TOL = 5e-3  # products rounded to TF32 (10-bit mantissas) where allow_tf32 reaches tensor cores


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


def check(got, want, tol=TOL):
    assert rel_error(got, want) < tol, rel_error(got, want)


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
    check(product(x, y, out), a @ b, TF32_TOL if change == "allow_tf32" else TOL)
    assert len(decided) == 2


@pytest.mark.parametrize("name", ["bfloat16", "float16"])
def test_16bit_products_keyed_by_their_own_entry(device, rng, decided, monkeypatch, name):
    """A 16-bit product's plan goes with the entry it was decided under, its storage type's
    (gemm_bfloat16 / gemm_float16), not float32's: a new entry of its own decides again."""
    dtype = getattr(ct, name)
    a, b = rng.standard_normal((8, 12)), rng.standard_normal((12, 8))
    x, y = put(device, a.astype(np.float32)).to(dtype), put(device, b.astype(np.float32)).to(dtype)
    want = x.float().numpy().astype(np.float64) @ y.float().numpy()
    out = ct.empty((8, 8), device=device)
    for _ in range(2):
        check(product(x, y, out), want)
    assert len(decided) == 1
    real = engine.choice.entry_for
    own = dict(real(device, dtype))  # another object for the 16-bit type alone
    monkeypatch.setattr(engine.choice, "entry_for",
                        lambda device, d: own if d == dtype else real(device, d))
    check(product(x, y, out), want)
    assert len(decided) == 2


def test_foreign_blocks_are_not_replayed(device):
    """A recorded block that enqueued a fill itself or wrote a tensor it did not allocate
    cannot be replayed."""
    t = ct.zeros(4, device=device)
    with program.record() as launches:
        device.enqueue(cl.enqueue_fill_buffer, t.storage.buf, np.float32(1), 0, 16)
    assert launches.foreign and program.Replay.make(launches, {"t": t.storage.buf}) is None
    with program.record() as launches:
        t.fill_(2.0)
    assert launches.foreign and program.Replay.make(launches, {"t": t.storage.buf}) is None


def test_replay_makes_scratch_and_outputs(device, rng):
    """Buffers a recorded block allocated are allocated again by each replay, those it
    returned among them (Replay.outputs)."""
    x = rng.standard_normal(5)
    t = put(device, x.astype(np.float32))
    with program.record() as launches:
        s = ct.empty(5, device=device)
        s.fill_(2.0)
        u = s * t
    replay = program.Replay.make(launches, {"t": t.storage.buf}, [u.storage])
    assert replay is not None and replay.scratch == (20, 20) and replay.outputs == (1,)
    y = rng.standard_normal(5)
    t2 = put(device, y.astype(np.float32))
    storage, = replay(device, {"t": t2.storage.buf}, keep=replay.outputs)
    assert storage.nbytes == u.storage.nbytes
    got = ct.ClTensor(storage, (5,), (1,), 0, ct.float32)
    check(got.numpy(), 2 * y)


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


# ---- convolution passes (conv/plans.py) ---------------------------------------------------------

@pytest.fixture
def conv_decided(monkeypatch):
    """[pass kind] of the convolution passes decided from scratch (not replayed), plans emptied;
    every new tensor (decided or replayed) NaN-poisoned."""
    plans._plans.clear()
    calls = []
    new_forward, new_grads = conv_function._new_forward, conv_function._new_grads
    monkeypatch.setattr(conv_function, "_new_forward",
                        lambda *a: calls.append("forward") or new_forward(*a))
    monkeypatch.setattr(conv_function, "_new_grads",
                        lambda *a: calls.append("backward") or new_grads(*a))
    monkeypatch.setattr(program, "Storage", PoisonedStorage)
    empty = common.empty
    monkeypatch.setattr(common, "empty", lambda *a, **k: empty(*a, **k).fill_(float("nan")))
    return calls


class PoisonedStorage(Storage):
    """A replay's new buffer, filled with NaN (float32's and float64's) before use."""

    def __init__(self, device, nbytes):
        super().__init__(device, nbytes)
        ct.ClTensor(self, (nbytes // 4,), (1,), 0, ct.float32).fill_(float("nan"))


def conv_step(device, x, w, b, dtype=ct.float32, make=None, **kw):
    """(out, gx, gw, gb, gout) of a conv2d forward and backward of numpy x, w, b (gout fixed),
    the input tensor made from x by make(device, x) (default: a contiguous copy)."""
    X = make(device, x) if make else ct.from_numpy(x, device=device)
    X = X.to(dtype).detach().requires_grad_()
    W, B = (ct.from_numpy(a, device=device).to(dtype).requires_grad_() for a in (w, b))
    out = conv2d(X, W, B, **kw)
    g = np.cos(np.arange(out.numel())).reshape(out.shape)
    out.backward(ct.from_numpy(g, device=device).to(dtype))
    return out.numpy(), X.grad.numpy(), W.grad.numpy(), B.grad.numpy(), g


def at_offset(device, x):
    """x at element offset x[0].size of a larger tensor."""
    return ct.from_numpy(np.concatenate([x[:1], x]), device=device)[1:]


def transposed_hw(device, x):
    """x with its H and W dims swapped in memory."""
    return ct.from_numpy(np.ascontiguousarray(np.swapaxes(x, 2, 3)), device=device).transpose(2, 3)


def check_conv(device, rng, decided, expect, k=3, make=None, dtype=ct.float32, tol=TOL, **kw):
    """A conv2d step (k x k filter) against float64 (within tol), the passes decided afresh
    given by `expect`; the input tensor made by `make` (conv_step)."""
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, k, k)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    before = len(decided)
    out, gx, gw, gb, g = conv_step(device, x, w, b, dtype, make, **kw)
    ref_kw = {name: v for name, v in kw.items() if name not in ("algo", "relu")}
    if kw.get("relu"):  # the fused ReLU: the gradient through its computed output's zeros
        g = np.where(out > 0, g, 0)
    want, wgx, wgw = ref_conv(x, w, b, grad=g, **ref_kw)
    want = np.maximum(want, 0) if kw.get("relu") else want
    for got, ref in ((out, want), (gx, wgx), (gw, wgw), (gb, g.sum((0, 2, 3)))):
        check(got, ref, tol)
    assert decided[before:] == expect, decided[before:]


@pytest.mark.parametrize("algo, k, relu", [("im2col", 3, False), ("gemm_1x1", 1, False),
                                           ("im2col", 3, True), ("gemm_1x1", 1, True)])
def test_conv_passes_replay(device, rng, conv_decided, algo, k, relu):
    """A repeated forward and backward (with a fused ReLU, whose gradient the backward pass's
    plan includes) replays both passes, with new outputs each time."""
    kw = dict(padding=1) if k == 3 else {}
    for expect in (["forward", "backward"], [], []):
        check_conv(device, rng, conv_decided, expect, k, algo=algo, relu=relu, **kw)
    assert sum(v[1] is not None for v in plans._plans.values()) == 2


@pytest.mark.parametrize("algo, k", [("im2col", 3), ("gemm_1x1", 1)])
@pytest.mark.parametrize("relu", [False, True])
def test_conv_forward_into_given_outputs_replays(device, rng, algo, k, relu):
    """forward_into (the PyTorch device's deferred convolutions) replays its launches into
    each call's own output, poisoned first, against float64; a pass that bumps the given
    output's version (im2col's) is replayed too, and the replay bumps it as much."""
    plans._plans.clear()
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, k, k)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    kw = dict(padding=1) if k == 3 else {}
    X, W, B = (put(device, a) for a in (x, w, b))
    p = make_params(X, W, B, 1, kw.get("padding", 0), 1, 1)
    want = ref_conv(x, w, b, **kw)
    want = np.maximum(want, 0) if relu else want
    bumped = []
    for _ in range(3):
        out = ct.full(p.out_shape, float("nan"), device=device)
        before = out.storage.version
        assert conv_function.forward_into(algo, X, W, B, p, out, relu) is out
        bumped.append(out.storage.version - before)
        check(out.numpy(), want)
    (entry, plan, _), = plans._plans.values()
    assert plan is not None
    assert bumped[1] == bumped[2] == bumped[0] and (bumped[0] > 0) == (algo == "im2col"), bumped


def test_conv_changed_layout_or_flag_decides_again(device, rng, conv_decided, monkeypatch):
    """Another input offset or stride, dtype, or flag is another plan."""
    for flag, value in (("allow_tf32", False), ("conv_precision", "accurate"), ("benchmark", False)):
        monkeypatch.setattr(backends, flag, value)  # NOTE: float32's tolerance until flipped
    both = ["forward", "backward"]
    kw = dict(padding=1, algo="im2col")
    check_conv(device, rng, conv_decided, both, **kw)
    check_conv(device, rng, conv_decided, [], **kw)
    check_conv(device, rng, conv_decided, both, make=at_offset, **kw)
    check_conv(device, rng, conv_decided, [], make=at_offset, **kw)
    check_conv(device, rng, conv_decided, both, make=transposed_hw, **kw)
    if device.has_fp64:
        check_conv(device, rng, conv_decided, both, dtype=ct.float64, **kw)
    for flag, value in (("conv_workspace_limit", backends.conv_workspace_limit // 2),
                        ("allow_tf32", not backends.allow_tf32),
                        ("conv_precision", "fast" if backends.conv_precision != "fast" else
                         "accurate")):
        monkeypatch.setattr(backends, flag, value)
        # NOTE: allow_tf32 on a device with tensor cores (the NVIDIA plug-in) rounds to TF32
        check_conv(device, rng, conv_decided, both, tol=TF32_TOL if backends.allow_tf32 else TOL,
                   **kw)
    monkeypatch.setattr(backends, "benchmark", True)  # never planned
    tol = TF32_TOL if backends.allow_tf32 else TOL
    check_conv(device, rng, conv_decided, both, tol=tol, **kw)
    check_conv(device, rng, conv_decided, both, tol=tol, **kw)


def small_net(device):
    ct.manual_seed(0)
    net = ct.nn.Sequential(ct.nn.Conv2d(3, 8, 3, padding=1), ct.nn.ReLU(), ct.nn.Conv2d(8, 4, 1),
                           ct.nn.Flatten(), ct.nn.Linear(4 * 36, 5))
    return net.to(device=device)


def net_step(net, x, g):
    net.zero_grad()
    net(x).backward(g)


@pytest.mark.parametrize("winograd", [False, True])
def test_capture_records_what_eager_enqueues(device, rng, monkeypatch, winograd):
    """With plans made, a graph captures the launches eager execution enqueues, in order, and
    its replay gives eager's gradients. Weight transforms (implicit GEMM's packed weights,
    Winograd's filters) are captured as conditional blocks, so the eager step makes them
    afresh too, and records them here: a pass's recording leaves them out (program.paused).
    GPUs choose those algorithms for this net; `winograd` makes every device choose Winograd
    for the 3x3 convolution's forward and input gradient."""
    if winograd:
        rule = dispatch.portable_rule
        monkeypatch.setattr(dispatch, "portable_rule", lambda p, device, pass_: "winograd"
                            if p.kh == 3 and pass_ != "backward_weight" else
                            rule(p, device, pass_))
    plans._plans.clear()
    net = small_net(device)
    x = put(device, rng.standard_normal((2, 3, 6, 6)).astype(np.float32))
    g = put(device, rng.standard_normal((2, 5)).astype(np.float32))
    for _ in range(2):
        net_step(net, x, g)
    assert any(v[1] is not None for v in plans._plans.values())
    common.clear_per_weight()
    with monkeypatch.context() as m, program.record() as eager:
        m.setattr(program, "paused", contextlib.nullcontext)
        net_step(net, x, g)
    want = [p.grad.numpy() for p in net.parameters()]
    graph = ct.Graph()
    with ct.graph(graph), program.record() as captured:
        net_step(net, x, g)
    assert [(k.function_name, gs, ls) for k, gs, ls, _ in captured] == \
        [(k.function_name, gs, ls) for k, gs, ls, _ in eager]
    graph.replay()
    for p, w in zip(net.parameters(), want):
        np.testing.assert_array_equal(p.grad.numpy(), w)


def test_replays_in_threads(device, rng):
    """Threads replaying one plan at once each get their own results."""
    plans._plans.clear()
    net = small_net(device)
    xs = [rng.standard_normal((2, 3, 6, 6)).astype(np.float32) for _ in range(4)]
    with ct.no_grad():
        want = [net(put(device, x)).numpy() for x in xs]
    barrier, outs = threading.Barrier(len(xs)), [None] * len(xs)

    def work(k):
        x = put(device, xs[k])
        barrier.wait(timeout=20)
        with ct.no_grad():
            outs[k] = [net(x).numpy() for _ in range(5)]
    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for got, w in zip(outs, want):
        assert got is not None, "a thread failed"
        for o in got:
            np.testing.assert_array_equal(o, w)


def test_scratch_dies_inside_a_recorded_block(device, rng):
    """A recorded block's scratch is let go where the block lets it go (chunked algorithms
    stay within their workspace while recorded), and the replay still gets each chunk right."""
    x = rng.standard_normal(4096)
    t, out = put(device, x.astype(np.float32)), ct.empty(4096, device=device)
    with program.record() as launches:
        before = device.allocated
        for k in range(4):  # four chunks through a scratch of their own each
            s = t[k * 1024:(k + 1) * 1024] * 2.0
            # NOTE: the launch alone: out= would mark the caller's tensor written (foreign)
            ew.launch_elementwise("OP_add", [s, 1.0], out[k * 1024:(k + 1) * 1024], ct.float32)
            del s
            assert device.allocated - before <= 2 * 4096, "a dead chunk's scratch is held"
    replay = program.Replay.make(launches, {"t": t.storage.buf, "out": out.storage.buf})
    assert replay is not None and replay.scratch == (4096,) * 4  # each chunk its own
    out.fill_(float("nan"))
    y = rng.standard_normal(4096)
    t2 = put(device, y.astype(np.float32))
    replay(device, {"t": t2.storage.buf, "out": out.storage.buf})
    check(out.numpy(), 2 * y + 1)


def test_backward_products_skip_matmul_dispatch(device, rng, monkeypatch):
    """A linear layer's backward products go straight to the GEMM engine (no matmul checks)
    outside grad mode; with create_graph they stay recorded ops, differentiable again."""
    from cltensor.autograd.functions import matmul as autograd_matmul
    lean = []
    monkeypatch.setattr(autograd_matmul, "gemm_into",
                        lambda *a: lean.append(1) or engine.gemm_into(*a))
    x, w, b = (rng.standard_normal(s) for s in ((3, 5), (4, 5), (4,)))
    g = rng.standard_normal((3, 4))
    X, W, B = (put(device, a.astype(np.float32)).requires_grad_() for a in (x, w, b))
    ct.nn.functional.linear(X, W, B).backward(put(device, g.astype(np.float32)))
    check(X.grad.numpy(), g @ w)
    check(W.grad.numpy(), g.T @ x)
    check(B.grad.numpy(), g.sum(0))
    assert len(lean) == 2
    gx, = ct.autograd.grad(ct.nn.functional.linear(X, W, B), X,
                           put(device, g.astype(np.float32)), create_graph=True)
    assert len(lean) == 2 and gx.requires_grad
    (gx * gx).sum().backward()  # d/dW of |g @ W|^2 = 2 g^T (g @ W)
    check(W.grad.numpy(), g.T @ x + 2 * g.T @ (g @ w))


@pytest.mark.parametrize("algo, k, stride, style", [
    ("winograd", 3, 1, None), ("winograd_4x4", 3, 1, None), ("implicit_gemm", 3, 1, None),
    ("implicit_gemm", 5, 2, None), ("implicit_gemm", 3, 1, "gpu"), ("implicit_gemm", 5, 2, "gpu"),
    ("s2d_winograd", 5, 2, None)])
def test_weight_transforms_replayed_for_the_current_weight(device, rng, conv_decided,
                                                           monkeypatch, algo, k, stride, style):
    """A pass that reads a per-weight transform (Winograd's filters, implicit GEMM's packed
    panels, on the CPU kernels and the GPU ones, s2d's folded weight and its filters) replays:
    each replay looks the transform up for its own weight, made again after an in-place
    update, so forward and backward follow the updated weight (new buffers NaN-poisoned,
    against float64)."""
    from cltensor.conv import implicit
    monkeypatch.setattr(implicit, "KERNEL_STYLE", style)
    x = rng.standard_normal((2, 4, 9, 8))
    w, b = rng.standard_normal((5, 4, k, k)), rng.standard_normal(5)
    X = put(device, x.astype(np.float32)).requires_grad_()
    W, B = (put(device, a.astype(np.float32)).requires_grad_() for a in (w, b))
    for step in range(4):
        X.grad = W.grad = B.grad = None
        before = len(conv_decided)
        out = conv2d(X, W, B, stride=stride, padding=1, algo=algo)
        g = np.cos(np.arange(out.numel())).reshape(out.shape)
        out.backward(put(device, g.astype(np.float32)))
        want, wgx, wgw = ref_conv(x, w + step, b, stride, 1, grad=g)
        for got, ref in ((out, want), (X.grad, wgx), (W.grad, wgw), (B.grad, g.sum((0, 2, 3)))):
            check(got.numpy(), ref, 1e-4)
        assert conv_decided[before:] == ([] if step else ["forward", "backward"])
        with ct.no_grad():
            W.add_(1.0)


@pytest.mark.parametrize("style", [None, "gpu"])
def test_training_with_replayed_transforms_is_bitwise_eager(device, rng, monkeypatch, style):
    """Four SGD steps of a small convnet (auto's algorithms, weight transforms among them,
    remade after every update) give the same losses and parameters bit for bit with replayed
    passes as with every pass decided afresh."""
    from cltensor.conv import implicit
    monkeypatch.setattr(implicit, "KERNEL_STYLE", style)
    nn = ct.nn
    x = rng.standard_normal((4, 3, 16, 16)).astype(np.float32)
    t = rng.integers(0, 10, 4)

    def train():
        plans._plans.clear()
        ct.manual_seed(0)
        model = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1),
            nn.ReLU(), nn.Conv2d(16, 16, 5, padding=2, stride=2), nn.ReLU(), nn.Conv2d(16, 16, 1),
            nn.Flatten(), nn.Linear(16 * 8 * 8, 10)).to(device=device)
        opt = ct.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        X, T = put(device, x), put(device, t)
        losses = []
        for _ in range(4):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(X), T)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.detach().numpy() for p in model.parameters()]

    replayed = train()
    assert any(v[1] is not None and v[1].derived for v in plans._plans.values())
    monkeypatch.setattr(plans, "run", lambda key, tensors, dtype, decide, extra=(),
                        replay=True, anchor=None: decide())
    decided = train()
    assert replayed[0] == decided[0]
    for a, b in zip(replayed[1], decided[1]):
        np.testing.assert_array_equal(a, b)


def test_transform_of_another_tensor_is_not_replayed(device, rng):
    """A recorded block that reads a weight transform of a tensor outside the pass's own cannot
    be replayed (its replay could not look the transform up)."""
    x, w = (put(device, rng.standard_normal(n).astype(np.float32)) for n in (8, 8))
    with program.record() as launches:
        packed = common.per_weight(w, ("test",), lambda w: w * 2.0)
        out = x + packed
    assert plans._Plan.make(launches, [x.storage.buf], [out], [x], [x.storage.version]) is None
    assert plans._Plan.make(launches, [x.storage.buf, w.storage.buf], [out], [x, w],
                            [x.storage.version, w.storage.version]) is not None


def test_late_role_on_a_dead_scratch_buffer(device, rng):
    """A buffer made during a block outside its recording (a weight transform, derive()) may be
    the buffer object a scratch that died earlier in the block had: launches before it joined
    use the scratch role, the later ones its own (Replay.make's since); the replay writes
    fresh scratch, not the caller's buffer."""
    x = put(device, rng.standard_normal(8).astype(np.float32))
    with program.record() as launches:
        s = x + 1.0
        y = s * 2.0
        buf = s.storage.buf  # NOTE: held, so the derived value below gets this very object
        del s
        late = Storage.__new__(Storage)
        late.device, late.nbytes, late.buf, late._version, late.counted = device, 32, buf, 0, False
        z = y + ct.ClTensor(late, (8,), (1,), 0, ct.float32)
    first = len(launches) - 1
    replay = program.Replay.make(launches, {"x": x.storage.buf, "d": buf}, [z.storage],
                                 since={"d": first})
    assert replay is not None and len(replay.scratch) == 3
    x2, d2 = (rng.standard_normal(8).astype(np.float32) for _ in range(2))
    X2, D2 = put(device, x2), put(device, d2)
    storage, = replay(device, {"x": X2.storage.buf, "d": D2.storage.buf}, keep=replay.outputs)
    check(ct.ClTensor(storage, (8,), (1,), 0, ct.float32).numpy(), 2 * (x2 + 1.0) + d2)
    np.testing.assert_array_equal(D2.numpy(), d2)


def test_recordings_nest(device, rng):
    """An inner record() block's launches and allocations are the outer block's too."""
    t = put(device, rng.standard_normal(8).astype(np.float32))
    with program.record() as outer:
        a = t * 2.0
        with program.record() as inner:
            b = a + 1.0
        c = b * 3.0
    assert len(inner) == 1 and len(outer) == 3 and len(inner.fresh) == 1
    assert len(outer.fresh) == 3 and not outer.foreign and not inner.foreign
    replay = program.Replay.make(outer, {"t": t.storage.buf}, [c.storage])
    y = rng.standard_normal(8)
    storage, = replay(device, {"t": put(device, y.astype(np.float32)).storage.buf},
                      keep=replay.outputs)
    check(ct.ClTensor(storage, (8,), (1,), 0, ct.float32).numpy(), (2 * y + 1) * 3)


@pytest.mark.parametrize("relu", [False, True])
def test_bias_gradient_replayed_with_the_pass(device, rng, conv_decided, monkeypatch, relu):
    """The bias gradient's reduction is part of the replayed backward pass (bias_grad, or with
    a fused ReLU relu_bias_grad, is not called again), with the reduction's own placeholder
    buffer passed in its place."""
    calls = []
    module, name = (norm, "relu_bias_grad") if relu else (common, "bias_grad")
    made = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *g: calls.append(1) or made(*g))
    for expect in (["forward", "backward"], [], []):
        check_conv(device, rng, conv_decided, expect, 1, algo="gemm_1x1", relu=relu)
    assert len(calls) == 1


def test_size_one_dims_are_not_summed(device, rng):
    """A gradient summed back over a broadcast dim of size 1 (a batch of one row's bias) is a
    view, with no reduction launched; the bias gradient is right."""
    x, w, b = (rng.standard_normal(s) for s in ((1, 5), (4, 5), (4,)))
    g = rng.standard_normal((1, 4))
    X, W, B = (put(device, a.astype(np.float32)).requires_grad_() for a in (x, w, b))
    out = ct.nn.functional.linear(X, W, B)
    with program.record() as launches:
        out.backward(put(device, g.astype(np.float32)))
    assert not [k for k, *_ in launches if k.function_name.startswith("reduce")]
    check(B.grad.numpy(), g.sum(0))
    check(W.grad.numpy(), g.T @ x)


def test_replayed_steps_hold_no_more_memory(device, rng):
    """Replayed training steps keep no scratch: the memory held after each step is the same,
    and a replayed step's peak is at most the step that decided its plans."""
    plans._plans.clear()
    net = small_net(device)
    x = put(device, rng.standard_normal((2, 3, 6, 6)).astype(np.float32))
    g = put(device, rng.standard_normal((2, 5)).astype(np.float32))
    held = []
    for _ in range(4):
        gc.collect()  # NOTE: earlier tests' tensors in reference cycles, freed at any moment
        device.synchronize()
        device.reset_peak()
        net_step(net, x, g)
        device.synchronize()
        held.append((device.allocated, device.peak))
    assert len({a for a, _ in held}) == 1, held
    assert all(p <= held[0][1] for _, p in held[1:]), held


def test_plugin_implicit_gemm_passes_replay(device, rng, conv_decided, monkeypatch,
                                            relu=True):
    """The NVIDIA plug-in's implicit GEMM (emulated, or the real one on a device it serves,
    which then owns the algorithm's name) declares its passes replayable: a repeated step
    replays both passes (TF32 products, within TF32's bound of float64), and a new set of its
    parameter sets (replay_anchor) decides them again."""
    from test_nvidia_plugin import (EMULATED_CONFIGS, EMULATED_CONV_CONFIGS, _emulated, _served,
                                    allow_tf32)
    pl = _emulated(EMULATED_CONFIGS[0])
    real = _served(device)
    ct.register_plugin(pl)
    try:
        with allow_tf32():
            for expect in (["forward", "backward"], [], []):
                check_conv(device, rng, conv_decided, expect, padding=1, algo="tf32_implicit",
                           relu=relu, tol=TF32_TOL)
            if real is None:
                pl.conv_configs = (EMULATED_CONV_CONFIGS[-1],)
            else:  # the same sets in a new tuple (tuple() of a tuple is that tuple): the
                # anchor is compared by identity
                sets = real.conv_configs
                monkeypatch.setattr(real, "conv_configs", tuple(list(sets)))
                assert real.conv_configs is not sets
            check_conv(device, rng, conv_decided, ["forward", "backward"], padding=1,
                       algo="tf32_implicit", relu=relu, tol=TF32_TOL)
    finally:
        ct.unregister_plugin(pl.name)
