"""The vector paths of 16-bit tensors on CPUs (elementwise ew_vec16, pooling's rows form): the
kernels they launch, and their results against torch on the CPU in the same dtype, bit for bit
where torch rounds once, on sizes with tails and on strided inputs, outputs poisoned first."""
import numpy as np
import pytest
import torch

import cltensor as ct
import cltensor.nn.functional as F
from cltensor.ops import elementwise

HALF = ["float16", "bfloat16"]
POISON = float("nan")


def _kernels(fn):
    """fn()'s result and the names of the kernels it launched."""
    with ct.profile() as prof:
        out = fn()
    return out, [e[0] for e in prof.events]


def _same(mine, want):
    """mine equals torch's `want` bit for bit (NaN where it has NaN)."""
    assert str(mine.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    got, exp = mine.float().numpy(), want.float().numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(exp))
    ok = ~np.isnan(exp)
    np.testing.assert_array_equal(got[ok].view(np.uint32), exp[ok].view(np.uint32))


def _poison(shape, dtype, device):
    """Free NaN-filled buffers of the size of an op's output: the memory pool hands them to the
    next allocations of that size, so elements the op leaves unwritten stay NaN."""
    for t in [ct.full(tuple(shape), POISON, dtype=dtype, device=device) for _ in range(2)]:
        del t


@pytest.fixture
def vec16(device, monkeypatch):
    """ew_vec16 for launches of any size (its tails on small tensors)."""
    if not device.is_cpu:
        pytest.skip("ew_vec16 serves CPU devices")
    monkeypatch.setattr(elementwise, "VEC16_MIN", 0)


def test_float16_conversions_through_vectors_are_torchs(device, vec16, rng):
    halves = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    x = ct.from_numpy(halves, device=device)
    got, names = _kernels(lambda: x.float())
    assert "ew_vec16" in names
    _same(got, torch.from_numpy(halves).float())
    bits = rng.integers(0, 2**32, 100003, dtype=np.uint64).astype(np.uint32)
    edge = np.array([65504, 65519.996, 65520, 2.0 ** -14, 2.0 ** -24, 2.0 ** -25, 1e-45,
                     1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, -0.0], np.float32)
    floats = np.concatenate([bits.view(np.float32), edge])
    f = ct.from_numpy(floats, device=device)
    _same(f.half(), torch.from_numpy(floats).half())
    h, th = f.half(), torch.from_numpy(floats).half()
    _same(h.bfloat16(), th.bfloat16())  # half to bfloat16: both vector conversions
    _same(h.bfloat16().half(), th.bfloat16().half())


@pytest.mark.parametrize("n", [5, 16, 16 * 7 + 9])
def test_vector_ops_match_torch_with_tails(device, vec16, rng, n):
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    y = (rng.standard_normal(n) * 3).astype(np.float32)
    a, b = ct.from_numpy(x, device=device).half(), ct.from_numpy(y, device=device).half()
    ta, tb = torch.from_numpy(x).half(), torch.from_numpy(y).half()
    cases = {"add": (lambda p, q: p + q), "sub": (lambda p, q: p - q),
             "mul": (lambda p, q: p * q), "div": (lambda p, q: p / q),
             "scalars": (lambda p, q: p * 0.5 + 1), "rsub": (lambda p, q: 2 - p),
             "relu": (lambda p, q: p.relu()), "neg": (lambda p, q: -p),
             "square": (lambda p, q: p.square())}
    for name, fn in cases.items():
        out = ct.full((n,), POISON, dtype=ct.float16, device=device)
        got, names = _kernels(lambda: out.copy_(fn(a, b)))
        assert names.count("ew_vec16") == len(names), (name, names)
        _same(got, fn(ta, tb))
    mixed = a + ct.from_numpy(y, device=device)  # float16 with float32: a float32 result
    _same(mixed, ta.float() + torch.from_numpy(y))
    _same(a + b.bfloat16(), ta + tb.bfloat16())


def test_activation_gradients_in_float16(device, vec16, rng):
    x = (rng.standard_normal(37) * 3).astype(np.float32)
    a = ct.from_numpy(x, device=device).half().requires_grad_()
    ta = torch.from_numpy(x).half().requires_grad_()
    pairs = ((F.relu, torch.relu), (lambda t: F.leaky_relu(t, 0.1),
                                    lambda t: torch.nn.functional.leaky_relu(t, 0.1)),
             (ct.tanh, torch.tanh))
    for mine_fn, torch_fn in pairs:
        mine, want = mine_fn(a), torch_fn(ta)
        (mine * 3).sum().backward()
        (want * 3).sum().backward()
        np.testing.assert_allclose(mine.detach().float().numpy(), want.detach().float().numpy(),
                                   rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(a.grad.float().numpy(), ta.grad.float().numpy(),
                                   rtol=2e-3, atol=2e-3)
        a.grad = ta.grad = None


@pytest.mark.parametrize("name", HALF)
def test_large_contiguous_ops_take_the_fast_kernels(device, name):
    if not device.is_cpu:
        pytest.skip("ew_vec16 serves CPU devices")
    d = getattr(ct, name)
    x = ct.linspace(-4, 4, elementwise.VEC16_MIN + 3, device=device).to(d)
    got, names = _kernels(lambda: x.relu())
    assert names == (["ew_vec16"] if name == "float16" else ["ew_contig"])
    tx = torch.linspace(-4, 4, elementwise.VEC16_MIN + 3).to(getattr(torch, name))
    _same(got, torch.relu(torch.from_numpy(x.float().numpy()).to(tx.dtype)))
    strided = x[::3]
    _same(strided * 2, torch.from_numpy(x.float().numpy()).to(tx.dtype)[::3] * 2)


@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 2, 1), (3, 1, 1)])
def test_max_pool2d_vector_rows_in_16_bits(device, rng, monkeypatch, name, k, s, p):
    """The rows form with the geometry baked (pool.cl VECTOR_ROWS on CPUs) on 16-bit rows of 61
    (a scalar remainder), a NaN, ties, an unaligned start and a channels_last view."""
    from cltensor.ops import pool
    monkeypatch.setattr(pool, "BAKE_MIN_TAPS", 0)
    full = np.round(rng.standard_normal((2, 3, 10, 62)).astype(np.float32) * 4) / 4
    full[1, 2, 5, 31] = np.nan
    tfull = torch.from_numpy(full).to(getattr(torch, name))
    x = ct.from_numpy(full, device=device).to(getattr(ct, name))
    for mine, want in ((x[..., 1:], tfull[..., 1:]),
                       (x.contiguous(memory_format=ct.channels_last),
                        tfull.contiguous(memory_format=torch.channels_last))):
        ty, tidx = torch.nn.functional.max_pool2d(want, k, s, p, return_indices=True)
        _poison(ty.shape, mine.dtype, device)
        y, idx = F.max_pool2d(mine, k, s, p, return_indices=True)
        _same(y, ty)
        np.testing.assert_array_equal(idx.numpy(), tidx.numpy())
        _same(F.relu(F.max_pool2d(mine, k, s, p)), torch.relu(ty))



@pytest.mark.parametrize("name", ["float32", *HALF])
def test_batch_norm_vector_rows_match_torch(device, rng, name):
    """norm.cl's vector forms (CPUs): rows of 16 elements and tails (S = 7 * 7 = 49), in NCHW and
    on a sliced input (rows contiguous, channels strided) and a transposed one (rows strided:
    the element-by-element path), forward in training and eval, the input's gradient, and layer
    norm, whose rows are long (S = 49 * 3)."""
    full = (rng.standard_normal((5, 4, 7, 7)) * 2 + 1).astype(np.float32)
    tfull = torch.from_numpy(full).to(getattr(torch, name))
    x0 = ct.from_numpy(full, device=device).to(getattr(ct, name))
    ulps = 0 if name == "float32" else 1
    tol = 1e-5 if name == "float32" else 1e-2
    for x, tx in ((x0, tfull), (x0[:, 1:], tfull[:, 1:]),
                  (x0.transpose(2, 3), tfull.transpose(2, 3))):
        x = x.detach().requires_grad_()
        tx = tx.detach().requires_grad_()
        C = x.shape[1]
        bn, tbn = ct.nn.BatchNorm2d(C).to(device), torch.nn.BatchNorm2d(C)
        _poison(x.shape, x.dtype, device)
        y, ty = bn(x), tbn(tx)
        np.testing.assert_allclose(y.float().detach().numpy(), ty.float().detach().numpy(),
                                   rtol=tol, atol=tol * (1 + 2 * ulps))
        assert y.dtype is x.dtype
        g = (rng.standard_normal(tuple(x.shape))).astype(np.float32)
        y.backward(ct.from_numpy(g, device=device).to(x.dtype))
        ty.backward(torch.from_numpy(g).to(tx.dtype))
        np.testing.assert_allclose(x.grad.float().numpy(), tx.grad.float().numpy(),
                                   rtol=tol, atol=4 * tol)
        np.testing.assert_allclose(bn.running_var.numpy(), tbn.running_var.numpy(), rtol=1e-4)
        bn.eval()
        tbn.eval()
        np.testing.assert_allclose(bn(x).float().detach().numpy(),
                                   tbn(tx).float().detach().numpy(), rtol=tol, atol=tol)
        ln = F.layer_norm(x, x.shape[1:])
        tln = torch.nn.functional.layer_norm(tx, tx.shape[1:])
        np.testing.assert_allclose(ln.float().detach().numpy(), tln.float().detach().numpy(),
                                   rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["float32", *HALF])
def test_softmax_vector_rows_match_torch(device, rng, name):
    """softmax.cl's softmax_fwd_vec16 (CPUs): rows of 16-element steps and a tail (D = 16 * 5 +
    7), a growing max (sorted rows), -inf elements, a row of only -inf, NaN and +inf (NaN rows,
    as torch), large logits, and log_softmax; a transposed input takes the strided kernel."""
    x = (rng.standard_normal((7, 87)) * 5).astype(np.float32)
    x[1] = np.sort(x[1]) * 10
    x[2, ::3] = -np.inf
    x[3] = -np.inf
    x[4, 40] = np.nan
    x[5, 86] = np.inf
    x[6] += 1e4 if name != "float16" else 6e4
    t = torch.from_numpy(x).to(getattr(torch, name))
    a = ct.from_numpy(x, device=device).to(getattr(ct, name))
    ulp = {"float32": 4e-7, "float16": 1e-3, "bfloat16": 8e-3}[name]
    for log in (False, True):
        want = (torch.log_softmax if log else torch.softmax)(t.float(), 1).to(t.dtype)
        for mine, ref in ((a, want), (a.t().contiguous().t(), want)):
            _poison(mine.shape, mine.dtype, device)
            out = (F.log_softmax if log else F.softmax)(mine, 1)
            got, exp = out.float().numpy(), ref.float().numpy()
            np.testing.assert_array_equal(np.isnan(got), np.isnan(exp))
            ok = ~np.isnan(exp)
            np.testing.assert_allclose(got[ok], exp[ok], rtol=2 * ulp, atol=ulp)


@pytest.mark.parametrize("name", ["float32", *HALF])
def test_softmax_backward_vector_rows_match_torch(device, rng, name):
    """softmax_bwd_vec16 (CPUs) on rows of 16-element steps and a tail (D = 16 * 5 + 7), for
    softmax and log_softmax; a transposed gradient takes the strided kernel."""
    from cltensor.ops import softmax as softmax_ops
    x = (rng.standard_normal((7, 87)) * 3).astype(np.float32)
    g = rng.standard_normal((7, 87)).astype(np.float32)
    tol = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 2e-2}[name]
    for log in (False, True):
        tfn = torch.log_softmax if log else torch.softmax
        ty = tfn(torch.from_numpy(x).to(getattr(torch, name)), 1)
        tg = torch.from_numpy(g).to(ty.dtype)
        y = ct.from_numpy(ty.float().numpy(), device=device).to(getattr(ct, name))
        gy = ct.from_numpy(g, device=device).to(y.dtype)
        want = torch.ops.aten._softmax_backward_data(tg.float(), ty.float(), 1, torch.float32) \
            if not log else \
            torch.ops.aten._log_softmax_backward_data(tg.float(), ty.float(), 1, torch.float32)
        for grad in (gy, gy.t().contiguous().t()):
            _poison(y.shape, y.dtype, device)
            got = softmax_ops.softmax_backward(grad, y, 1, log=log)
            assert got.dtype is y.dtype
            np.testing.assert_allclose(got.float().numpy(), want.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["float32", *HALF])
def test_softmax_long_rows_match_torch(device, rng, name):
    """softmax_fwd_vec16's blocks of 1024 elements (D = 2 * 1024 + 3 * 16 + 5: two blocks, a
    short one of 3 vectors and a tail): a max that grows from block to block (a sorted row), a
    first block of only -inf, -inf in some lanes only, NaN and +inf in the second block, a row
    of only -inf, large logits; softmax and log_softmax against torch (float32, rounded
    once), also on the rows from their fourth element (unaligned, a tail of 2)."""
    D = 2 * 1024 + 3 * 16 + 5
    x = (rng.standard_normal((8, D)) * 5).astype(np.float32)
    x[1] = np.sort(x[1]) * 10
    x[2, :1024] = -np.inf
    x[3] = -np.inf
    x[4, 1100] = np.nan
    x[5, 1500] = np.inf
    x[6] += 1e4 if name != "float16" else 6e4
    x[7, ::16] = -np.inf
    x[7, 2049] = 30
    t = torch.from_numpy(x).to(getattr(torch, name))
    a = ct.from_numpy(x, device=device).to(getattr(ct, name))
    ulp = {"float32": 4e-7, "float16": 1e-3, "bfloat16": 8e-3}[name]
    for log in (False, True):
        for mine, ref in ((a, t), (a[:, 3:], t[:, 3:])):  # and rows starting unaligned
            want = (torch.log_softmax if log else torch.softmax)(ref.float(), 1).to(t.dtype)
            _poison(mine.shape, mine.dtype, device)
            got = (F.log_softmax if log else F.softmax)(mine, 1).float().numpy()
            exp = want.float().numpy()
            np.testing.assert_array_equal(np.isnan(got), np.isnan(exp))
            ok = ~np.isnan(exp)
            np.testing.assert_allclose(got[ok], exp[ok], rtol=2 * ulp, atol=ulp)


@pytest.mark.parametrize("name", ["float32", *HALF])
def test_softmax_rows_of_many_blocks_match_float64(device, rng, name):
    """softmax_row16's blocks beyond 64 of 1024 elements (D = 66659: 62 blocks of 1088 and a
    tail of 3), each block's exp(x - its max) kept in y and scaled once the row's max and sum
    are known: a max that grows from block to block, the max in the last block, a block of only
    -inf, against float64 within torch's tolerance for the dtype, outputs poisoned first."""
    D = 64 * 1024 + 16 * 70 + 3
    x = (rng.standard_normal((4, D)) * 4).astype(np.float32)
    x[1] = np.sort(x[1])
    x[2, -2] = 40
    x[3, 1088:2176] = -np.inf
    a = ct.from_numpy(x, device=device).to(getattr(ct, name))
    x64 = a.float().numpy().astype(np.float64)
    want = np.exp(x64 - x64.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    _poison(a.shape, a.dtype, device)
    got = F.softmax(a, 1).float().numpy()
    tol = {"float32": (1.3e-6, 1e-5), "float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5)}[name]
    np.testing.assert_allclose(got, want, rtol=tol[0], atol=tol[1])
    assert abs(got.astype(np.float64).sum(1) - 1).max() < 30 * tol[0]


@pytest.mark.parametrize("name", ["float32", *HALF])
def test_softmax_blocks_after_the_first_match_float64(device, rng, name):
    """softmax_row16's blocks after the first (16-bit rows: exp_block16_run, exp(x - the running
    max) with the block's max found in the same loop): a block whose max passes the running
    one by 7.5 (kept: exps up to e^7.5 stored) and one by 8.5 and by 11 (done again from
    their own max: e^11 would not fit float16 with a larger sum), -inf elements in later
    blocks (exactly 0, as masks need), a block of only -inf between finite ones, NaN in a
    later block (a NaN row), falling rows; D = 4 * 1024 + 3 * 16 + 5, outputs poisoned."""
    D = 4 * 1024 + 3 * 16 + 5
    x = (rng.standard_normal((6, D))).astype(np.float32)
    x[0, 1500], x[0, 2500], x[0, 3500] = x[0, :1024].max() + 7.5, 0, 0
    x[0, 2500] = x[0, 1500] + 8.5
    x[0, 3500] = x[0, 2500] + 11
    x[1, 1024::7] = -np.inf
    x[2, 1024:2048] = -np.inf
    x[2, 3000] = x[2, :1024].max() + 11
    x[3, 2100] = np.nan
    x[4] = -np.arange(D, dtype=np.float32) / 40
    x[5, 2048:] = -np.inf
    a = ct.from_numpy(x, device=device).to(getattr(ct, name))
    x64 = a.float().numpy().astype(np.float64)
    with np.errstate(invalid="ignore"):
        want = np.exp(x64 - x64.max(1, keepdims=True))
        want /= want.sum(1, keepdims=True)
    _poison(a.shape, a.dtype, device)
    got = F.softmax(a, 1).float().numpy()
    tol = {"float32": (1.3e-6, 1e-6), "float16": (1e-3, 1e-6), "bfloat16": (8e-3, 1e-6)}[name]
    assert np.isnan(got[3]).all()
    ok = np.ones(len(x), bool)
    ok[3] = False
    np.testing.assert_allclose(got[ok], want[ok], rtol=tol[0], atol=tol[1])
    assert (got[np.isneginf(x)] == 0).all()
    eps = torch.finfo(getattr(torch, name)).eps  # each output within an ulp
    assert abs(got[ok].astype(np.float64).sum(1) - 1).max() <= eps


@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("D", [5, 16, 17, 47])
def test_softmax_short_rows_match_float64(device, rng, name, D):
    """16-bit softmax rows shorter than a vector (D = 5: no vector step), of one vector, and of
    vectors and a tail, with -inf (exactly 0), a NaN row and a row of only -inf (NaN rows, as
    torch), against float64 within the dtype's tolerance, rows summing to 1, outputs
    poisoned; contiguous rows and a transposed view."""
    x = (rng.standard_normal((5, D)) * 3).astype(np.float32)
    x[1, ::2] = -np.inf
    x[2, D // 2] = np.nan
    x[3] = -np.inf
    a = ct.from_numpy(x, device=device).to(getattr(ct, name))
    x64 = a.float().numpy().astype(np.float64)
    with np.errstate(invalid="ignore"):
        want = np.exp(x64 - x64.max(1, keepdims=True))
        want /= want.sum(1, keepdims=True)
    tol = {"float16": 1e-3, "bfloat16": 8e-3}[name]
    for mine in (a, a.t().contiguous().t()):
        _poison(mine.shape, mine.dtype, device)
        got = F.softmax(mine, 1).float().numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        np.testing.assert_allclose(got[ok], want[ok], rtol=tol, atol=1e-6)
        assert (got[np.isneginf(x) & ok] == 0).all()
        fine = ~np.isnan(want).any(1)  # each output within an ulp: the sum within eps
        eps = torch.finfo(getattr(torch, name)).eps
        assert abs(got[fine].astype(np.float64).sum(1) - 1).max() <= eps


@pytest.mark.parametrize("name", ["float32", *HALF])
def test_softmax_many_rows_in_work_groups_match_float64(device, rng, name):
    """Launches of rows enough for work-groups of 64, with a NaN row and a row of only -inf (a
    NaN scale: PoCL's build for such groups crashed on a store of the scale's splat), forward
    and backward, against float64, outputs poisoned."""
    from cltensor.ops import softmax as softmax_ops
    rows = 64 * softmax_ops.CPU_GROUPS_PER_CU * device.cl_device.max_compute_units + 5
    x = (rng.standard_normal((rows, 37)) * 3).astype(np.float32)
    x[3, 5], x[4] = np.nan, -np.inf
    a = ct.from_numpy(x, device=device).to(getattr(ct, name))
    x64 = a.float().numpy().astype(np.float64)
    with np.errstate(invalid="ignore"):
        want = np.exp(x64 - x64.max(1, keepdims=True))
        want /= want.sum(1, keepdims=True)
    tol = {"float32": 1e-6, "float16": 1e-3, "bfloat16": 8e-3}[name]
    with ct.profile() as prof:
        _poison(a.shape, a.dtype, device)
        y = F.softmax(a, 1)
    if device.is_cpu:
        assert [r["local"] for r in prof.records() if r["name"].startswith("softmax")] == [(64,)]
    got = y.float().numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=tol, atol=1e-6)
    g = rng.standard_normal(x.shape).astype(np.float32)
    gy = ct.from_numpy(g, device=device).to(a.dtype)
    y64 = y.float().numpy().astype(np.float64)
    g64 = gy.float().numpy().astype(np.float64)
    want_gx = y64 * (g64 - (g64 * y64).sum(1, keepdims=True))
    _poison(a.shape, a.dtype, device)
    gx = softmax_ops.softmax_backward(gy, y, 1).float().numpy()
    fine = ~np.isnan(want).any(1)
    np.testing.assert_allclose(gx[fine], want_gx[fine], rtol=4 * tol, atol=4 * tol)


def test_softmax_few_long_rows_spread_over_work_groups(device, rng):
    """On CPUs a launch of few rows takes one row per work-group: PoCL runs a work-group on one
    thread, and 64 rows of 256K elements in one group ran on one core."""
    if not device.is_cpu:
        pytest.skip("the CPUs' work-group choice")
    x = (rng.standard_normal((8, 4096)) * 3).astype(np.float32)
    a = ct.from_numpy(x, device=device).to(ct.bfloat16)
    with ct.profile() as prof:
        y = F.softmax(a, 1)
    (rec,) = prof.records()
    assert (rec["name"], rec["global"], rec["local"]) == ("softmax_fwd_vec16", (8,), (1,))
    want = torch.softmax(torch.from_numpy(x).bfloat16().float(), 1)
    np.testing.assert_allclose(y.float().numpy(), want.numpy(), rtol=8e-3, atol=1e-6)


@pytest.mark.parametrize("name", ["float32", *HALF])
def test_batch_norm_long_rows_match_torch(device, rng, name):
    """norm.cl's vector forms on rows of S = 13 * 23 = 299 (bn_reduce_vec16: blocks of 64,
    vectors of 16 and a tail; bn_apply_vec16: 128 elements a work-item, the last 43), with
    statistics chunks that split rows (64 images of 2 channels), on a channel slice (rows
    contiguous, channels strided) and a transposed view (rows strided); forward in training,
    the gradients of input, weight and bias, and layer norm over long rows."""
    full = (rng.standard_normal((64, 3, 13, 23)) * 2 + 1).astype(np.float32)
    gfull = rng.standard_normal((64, 3, 13, 23)).astype(np.float32)
    tdt, cdt = getattr(torch, name), getattr(ct, name)
    tol = 1e-5 if name == "float32" else 2e-2
    x0, tx0 = ct.from_numpy(full, device=device).to(cdt), torch.from_numpy(full).to(tdt)
    for sl in ((slice(None), slice(1, None)), (slice(None), slice(None))):
        for t in (False, True):
            x, tx = x0[sl], tx0[sl]
            if t:
                x, tx = x.transpose(2, 3), tx.transpose(2, 3)
            x, tx = x.detach().requires_grad_(), tx.detach().requires_grad_()
            bn, tbn = ct.nn.BatchNorm2d(x.shape[1]).to(device), torch.nn.BatchNorm2d(x.shape[1])
            _poison(x.shape, x.dtype, device)
            y, ty = bn(x), tbn(tx)
            np.testing.assert_allclose(y.float().detach().numpy(), ty.float().detach().numpy(),
                                       rtol=tol, atol=tol)
            g = gfull[:, :x.shape[1]].transpose(0, 1, 3, 2) if t else gfull[:, :x.shape[1]]
            y.backward(ct.from_numpy(np.ascontiguousarray(g), device=device).to(cdt))
            ty.backward(torch.from_numpy(np.ascontiguousarray(g)).to(tdt))
            for mine, want in ((x.grad, tx.grad), (bn.weight.grad, tbn.weight.grad),
                               (bn.bias.grad, tbn.bias.grad)):
                np.testing.assert_allclose(mine.float().numpy(), want.float().numpy(),
                                           rtol=tol, atol=4 * tol)
            ln = F.layer_norm(x, x.shape[1:])
            tln = torch.nn.functional.layer_norm(tx, tx.shape[1:])
            np.testing.assert_allclose(ln.float().detach().numpy(),
                                       tln.float().detach().numpy(), rtol=tol, atol=tol)


def test_batch_norm_apply_takes_row_spans(device):
    """On CPUs bn_apply_vec16 gives a work-item 128 elements of a row: rows of 299 take 3."""
    if not device.is_cpu:
        pytest.skip("the CPUs' vector form")
    x = ct.ones((4, 2, 13, 23), device=device, dtype=ct.float16)
    with ct.profile() as prof:
        F.batch_norm(x, None, None, training=True)
    (apply,) = [r for r in prof.records() if r["name"] == "bn_apply_vec16"]
    assert apply["global"][0] == 4 and apply["local"][0] == 4


@pytest.mark.parametrize("name", ["float32", *HALF])
@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 2, 1), (3, 1, 1)])
def test_max_pool2d_rows_per_item_match_torch(device, rng, monkeypatch, name, k, s, p):
    """max_pool2d_fwd_rows with several output rows per work-item (on CPUs): rows that cross
    planes and images, a last work-item with fewer rows, row vectors of 16 and 8 outputs and a
    scalar rest (61 columns), a NaN and ties; values, argmax and relu against torch. (The
    strips, which take overlapping windows by default, are off.)"""
    from cltensor.ops import pool
    monkeypatch.setattr(pool, "BAKE_MIN_TAPS", 0)
    monkeypatch.setattr(pool, "STRIPS", False)
    full = np.round(rng.standard_normal((7, 19, 18, 61)).astype(np.float32) * 4) / 4
    full[3, 5, 7, 20] = np.nan
    want = torch.from_numpy(full).to(getattr(torch, name))
    x = ct.from_numpy(full, device=device).to(getattr(ct, name))
    ty, tidx = torch.nn.functional.max_pool2d(want, k, s, p, return_indices=True)
    _poison(ty.shape, x.dtype, device)
    with ct.profile() as prof:
        y, idx = F.max_pool2d(x, k, s, p, return_indices=True)
    _same(y, ty)
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())
    _same(F.relu(F.max_pool2d(x, k, s, p)), torch.relu(ty))
    if device.is_cpu:
        rows, width = int(np.prod(ty.shape[:3])), ty.shape[3]
        per = pool._rows_per_item(device, rows, width)
        (rec,) = [r for r in prof.records() if r["name"] == "max_pool2d_fwd_rows"]
        assert per > 1 and rec["global"] == ((-(-rows // per) + 7) // 8 * 8,)


@pytest.mark.parametrize("name", ["float32", *HALF])
@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 2, 1), (3, 1, 1)])
def test_max_pool2d_short_rows_match_torch(device, rng, monkeypatch, name, k, s, p):
    """Rows of 4 to 13 outputs (planes of 9, 13 and 14): the rows form's 4-wide vector step and
    a last 4-wide step that ends the row (rewriting outputs already stored), with a NaN and
    ties; values and argmax against torch."""
    from cltensor.ops import pool
    monkeypatch.setattr(pool, "BAKE_MIN_TAPS", 0)
    for size in (9, 13, 14):
        full = np.round(rng.standard_normal((3, 5, size, size)).astype(np.float32) * 4) / 4
        full[1, 2, 3, 4] = np.nan
        want = torch.from_numpy(full).to(getattr(torch, name))
        x = ct.from_numpy(full, device=device).to(getattr(ct, name))
        ty, tidx = torch.nn.functional.max_pool2d(want, k, s, p, return_indices=True)
        _poison(ty.shape, x.dtype, device)
        y, idx = F.max_pool2d(x, k, s, p, return_indices=True)
        _same(y, ty)
        np.testing.assert_array_equal(idx.numpy(), tidx.numpy())


@pytest.mark.parametrize("name", ["float32", *HALF])
@pytest.mark.parametrize("k,s", [(2, 2), (3, 2), (2, 1)])
def test_max_pool2d_whole_rows_of_vector_steps(device, rng, monkeypatch, name, k, s):
    """pool.cl's 16-bit rows without edges that steps of 16 outputs cover (max_row's first
    branch, e.g. 2x2 stride 2 of 64 columns), beside widths whose last step would pass the row
    (3x3 stride 2 of 65: the spans), float32 alongside, with an argmax, relu, a NaN, ties,
    -inf, rows from their second element and a transposed view (strided rows); 16-bit rows
    split into even and odd columns as bits (ROW_PAIRS); outputs poisoned."""
    from cltensor.ops import pool
    monkeypatch.setattr(pool, "BAKE_MIN_TAPS", 0)
    for W in (64, 65, 66):
        full = np.round(rng.standard_normal((2, 3, 5, W + 1)).astype(np.float32) * 4) / 4
        full[1, 2, 3, 31], full[0, 1, 2, 7:11] = np.nan, -np.inf
        want = torch.from_numpy(full).to(getattr(torch, name))
        x = ct.from_numpy(full, device=device).to(getattr(ct, name))
        for mine, ref in ((x[..., :W], want[..., :W]), (x[..., 1:], want[..., 1:]),
                          (x[..., :W].transpose(2, 3), want[..., :W].transpose(2, 3))):
            ty, tidx = torch.nn.functional.max_pool2d(ref, k, s, return_indices=True)
            _poison(ty.shape, mine.dtype, device)
            y, idx = F.max_pool2d(mine, k, s, return_indices=True)
            _same(y, ty)
            np.testing.assert_array_equal(idx.numpy(), tidx.numpy())
            _poison(ty.shape, mine.dtype, device)
            _same(F.max_pool2d(mine, k, s), ty)
            _same(F.relu(F.max_pool2d(mine, k, s)), torch.relu(ty))


@pytest.mark.parametrize("name", HALF)
def test_max_pool2d_vector_rows_keep_every_16_bit_pattern(device, rng, monkeypatch, name):
    """The rows form's 16-bit loads, stores and even/odd splits (pool.cl ROW_LOAD, ROW_STORE,
    ROW_PAIRS; float16 through __fp16 vectors on PoCL and Intel's runtime) and the edge taps'
    LD on all 65536 bit patterns, subnormals, infinities and NaNs included: 1x1 windows give
    them back, 1x2 windows of stride 2 the larger of each pair, padded 3x3 windows their
    largest (torch's, bit for bit; NaN where it has NaN)."""
    from cltensor.ops import pool
    monkeypatch.setattr(pool, "BAKE_MIN_TAPS", 0)
    bits = rng.permutation(65536).astype(np.uint16).reshape(1, 2, 32, 1024)
    tdt = getattr(torch, name)
    t = torch.from_numpy(bits.view(np.int16)).view(tdt)
    x = ct.from_numpy(t.float().numpy(), device=device).to(getattr(ct, name))
    for k, s, p in ((1, 1, 0), ((1, 2), (1, 2), 0), (3, 1, 1), (3, 2, 1)):
        want = torch.nn.functional.max_pool2d(t, k, s, p)
        _poison(want.shape, x.dtype, device)
        _same(F.max_pool2d(x, k, s, p), want)


@pytest.mark.parametrize("name", HALF)
def test_sums_of_16_bit_runs_match_float64(device, rng, name):
    """reduce.cl's 16-bit runs (on PoCL summed in double lanes: WIDE_SUM): rows
    of 3 * 1024 + 21 (steps of 32 and 16 and a scalar tail), rows of 7 (no vector), the rows
    from their second element (unaligned), a bias gradient's runs over (N, C, L), an infinity
    and a NaN in two rows, and a cancellation (v, ones, -v) exact in float32 outputs; float32
    sums against float64's, 16-bit ones against float64's rounded once."""
    D = 3 * 1024 + 21
    big = {"float16": 32768.0, "bfloat16": 2.0**27}[name]
    x = rng.standard_normal((5, D)).astype(np.float32) * 4
    x[1, 100], x[2, 3000] = np.inf, np.nan
    x[3] = 1
    x[3, 5], x[3, D - 9] = big, -big
    a = ct.from_numpy(x, device=device).to(getattr(ct, name))
    x64 = a.float().numpy().astype(np.float64)
    for view, ref in ((a, x64), (a[:, 1:], x64[:, 1:]), (a[:, :7], x64[:, :7])):
        want = ref.sum(1)
        got = view.sum(1, dtype=ct.float32).numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
        ok = np.isfinite(want)
        np.testing.assert_allclose(got[ok], want[ok], rtol=1.2e-7, atol=0)
        half = view.sum(1).float().numpy()
        rounded = torch.from_numpy(want).to(getattr(torch, name)).float().numpy()
        np.testing.assert_array_equal(half[ok], rounded[ok])
    assert a.sum(1, dtype=ct.float32)[3].item() == D - 2
    g = rng.standard_normal((6, 3, 101)).astype(np.float32)
    t = ct.from_numpy(g, device=device).to(getattr(ct, name))
    want = t.float().numpy().astype(np.float64).sum((0, 2))
    np.testing.assert_allclose(t.sum((0, 2), dtype=ct.float32).numpy(), want, rtol=1.2e-7)
