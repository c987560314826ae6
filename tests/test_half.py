"""float16 and bfloat16 tensors: dtype objects and promotion, creation, casts, numpy interop,
printing, save/load in torch's format, and the kernel families that store them in 16 bits
(elementwise, ranges, random), each against torch on the CPU in the same dtype."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import cltensor as ct
from cltensor import dtypes as dt

HALF = ["float16", "bfloat16"]
POISON = float("nan")


def _pair(name):
    return getattr(ct, name), getattr(torch, name)


def _torch(t):
    """A ClTensor as a torch CPU tensor of the same dtype (values exact: through float32)."""
    return torch.from_numpy(np.asarray(t.float().numpy())).to(getattr(torch, t.dtype.name))


def _random(shape, name, device, rng, scale=3.0):
    """The same random values as a cltensor and a torch tensor of dtype `name`."""
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    tt = torch.from_numpy(x).to(getattr(torch, name))
    return ct.from_numpy(tt.float().numpy(), device=device).to(getattr(ct, name)), tt


def _same(mine, want, ulps=0):
    """mine equals torch's `want` (same dtype), to `ulps` units in the last place."""
    assert str(mine.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    got, exp = mine.detach().float().numpy(), want.detach().float().numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(exp))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(exp))
    ok = np.isfinite(exp)
    tol = ulps * torch.finfo(want.dtype).eps * np.abs(exp[ok])
    assert (np.abs(got[ok] - exp[ok]) <= tol).all(), (got, exp)


# ---- dtype objects and promotion ---------------------------------------------------------------

@pytest.mark.parametrize("name", HALF)
def test_dtype_attributes_match_torch(name):
    d, t = _pair(name)
    assert (d.is_floating_point, d.is_signed, d.itemsize) == \
        (t.is_floating_point, t.is_signed, t.itemsize)
    assert repr(d) == str(t).replace("torch.", "cltensor.")
    assert ct.half is ct.float16
    fi, ti = ct.finfo(d), torch.finfo(t)
    assert (fi.bits, fi.eps, fi.max, fi.min, fi.tiny, fi.resolution) == \
        (ti.bits, ti.eps, ti.max, ti.min, ti.tiny, ti.resolution)
    assert d != np.uint16 and dt.as_dtype(name) is d


def test_promotion_matches_torch():
    names = ["bool", "uint8", "int8", "int16", "int32", "int64", "float32", "float64", *HALF]
    for a in names:
        for b in names:
            got = ct.promote_types(getattr(ct, a), getattr(ct, b))
            assert got.name == str(torch.promote_types(*_pair(a)[1:], *_pair(b)[1:]))[6:], (a, b)


@pytest.mark.parametrize("name", HALF)
def test_result_types_with_scalars_and_tensors(device, name):
    d, t = _pair(name)
    x, tx = ct.ones(2, dtype=d, device=device), torch.ones(2, dtype=t)
    scalar64 = ct.ones((), dtype=ct.float64, device=device)
    for other, tother in ((1.5, 1.5), (2, 2), (ct.ones(2, device=device), torch.ones(2)),
                          (scalar64, torch.ones((), dtype=torch.float64))):
        assert (x + other).dtype.name == str((tx + tother).dtype)[6:]
    assert x.is_floating_point() and (x > 0).dtype is ct.bool


# ---- creation, casts, numpy ----------------------------------------------------------------------

@pytest.mark.parametrize("name", HALF)
def test_casts_round_as_torch(device, name):
    d, t = _pair(name)
    vals = np.array([0.1, 1 / 3, -2.7182817, 65504, 65520, 1e5, 3e38, 1e-8, 6e-5, 1 + 2 ** -9,
                     1 + 3 * 2 ** -9, float("inf"), float("-inf"), float("nan"), -0.0], np.float32)
    x = ct.from_numpy(vals, device=device)
    _same(x.to(d), torch.from_numpy(vals).to(t))
    _same(x.double().to(d).float(), torch.from_numpy(vals).double().to(t).float())
    ints = ct.tensor([-3, 0, 7, 1000, 70000], device=device)
    _same(ints.to(d), torch.tensor([-3, 0, 7, 1000, 70000]).to(t))
    back = x.to(d).to(ct.int32).numpy()[:3]
    assert back.tolist() == torch.from_numpy(vals[:3]).to(t).int().tolist()
    assert (x.half() if name == "float16" else x.bfloat16()).dtype is d


def test_16_bit_conversions_are_exact_for_every_pattern(device, rng):
    halves = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    got = ct.from_numpy(halves, device=device).float().numpy()
    want = halves.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(want)], want[~np.isnan(want)])
    assert (np.signbit(got) == np.signbit(want))[~np.isnan(want)].all()
    bits = rng.integers(0, 2**32, 200000, dtype=np.uint64).astype(np.uint32)
    edge = [65504, 65519.996, 65520, 2.0 ** -14, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 1e-45,
            1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 257.0, 2.0 ** 128 * 0]
    floats = np.concatenate([bits.view(np.float32), np.array(edge, np.float32)])
    x = ct.from_numpy(floats, device=device)
    for d, t in ((ct.float16, torch.float16), (ct.bfloat16, torch.bfloat16)):
        got = x.to(d).float().numpy()
        want = torch.from_numpy(floats).to(t).float().numpy()
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan)
        np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


@pytest.mark.parametrize("name", HALF)
def test_factories_store_16_bits(device, name):
    d, t = _pair(name)
    for mine, want in ((ct.zeros(3, dtype=d, device=device), torch.zeros(3, dtype=t)),
                       (ct.ones(2, 2, dtype=d, device=device), torch.ones(2, 2, dtype=t)),
                       (ct.full((3,), 0.1, dtype=d, device=device), torch.full((3,), 0.1, dtype=t)),
                       (ct.eye(3, dtype=d, device=device), torch.eye(3, dtype=t))):
        _same(mine, want)
        assert mine.storage.nbytes == 2 * mine.numel()
    # ranges: computed in float32 and rounded once (torch rounds each step in the dtype)
    for mine, want in ((ct.arange(0, 3, 0.3, dtype=d, device=device),
                        torch.arange(0, 3, 0.3, dtype=torch.float64)),
                       (ct.linspace(-1, 1, 7, dtype=d, device=device),
                        torch.linspace(-1, 1, 7, dtype=torch.float64))):
        assert mine.dtype is d
        np.testing.assert_allclose(mine.float().numpy(), want.numpy(), rtol=0,
                                   atol=float(ct.finfo(d).eps) * 2)
    assert ct.empty(5, dtype=d, device=device).element_size() == 2


@pytest.mark.parametrize("name", HALF)
def test_random_factories_stay_in_range(device, name):
    d, _ = _pair(name)
    u = ct.rand(20000, dtype=d, device=device).float().numpy()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.02
    n = ct.randn(20000, dtype=d, device=device).float().numpy()
    assert abs(n.std() - 1) < 0.05 and n.dtype == np.float32
    assert ct.randint(0, 5, (10,), dtype=d, device=device).dtype is d


def test_numpy_interop(device):
    h = np.array([1.5, -2.25, 65504], np.float16)
    x = ct.from_numpy(h, device=device)
    assert x.dtype is ct.float16 and x.numpy().dtype == np.float16
    np.testing.assert_array_equal(x.numpy(), h)
    b = ct.tensor([1.0, -2.5, 3.1], dtype=ct.bfloat16, device=device)
    if dt.bfloat16.bits_only:  # numpy has no bfloat16 here: a float32 copy
        assert b.numpy().dtype == np.float32
    else:  # ml_dtypes' bfloat16, both ways
        assert b.numpy().dtype == dt.bfloat16.dtype
        assert ct.from_numpy(b.numpy(), device=device).dtype is ct.bfloat16
    np.testing.assert_array_equal(b.numpy().astype(np.float32),
                                  torch.tensor([1.0, -2.5, 3.1]).bfloat16().float())
    bits = torch.tensor([1.0, -2.5, 3.1]).bfloat16().view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(dt.bf16_bits(b.numpy()), bits)
    c = ct.from_bfloat16_bits(bits, device=device)
    assert c.dtype is ct.bfloat16 and c.tolist() == b.tolist()
    with pytest.raises(TypeError, match="uint16"):
        ct.from_bfloat16_bits(bits.astype(np.int32), device=device)
    assert ct.from_numpy(bits, device=device).dtype is ct.int64  # bits are never bfloat16 unasked


@pytest.mark.parametrize("name", HALF)
def test_printing_names_the_dtype(device, name):
    d, t = _pair(name)
    x = ct.tensor([1.5, -2.0], dtype=d, device=device)
    assert repr(x).startswith("tensor([ 1.5, -2. ], dtype=cltensor." + name)


def test_save_load_in_torch_format(device, tmp_path):
    vals = [0.1, -1e4, float("inf"), 3.0]
    obj = {n: ct.tensor(vals, dtype=getattr(ct, n), device=device) for n in HALF}
    ct.save(obj, tmp_path / "h.pt")
    got = torch.load(tmp_path / "h.pt")
    for n in HALF:
        assert got[n].dtype == getattr(torch, n)
        assert got[n].tolist() == torch.tensor(vals).to(getattr(torch, n)).tolist()
    back = ct.load(tmp_path / "h.pt", map_location=device)
    for n in HALF:
        assert back[n].dtype is getattr(ct, n) and back[n].tolist() == obj[n].tolist()


# ---- elementwise kernels ---------------------------------------------------------------------------

UNARY = ["neg", "abs", "exp", "log", "sqrt", "tanh", "sigmoid", "sin", "floor", "relu", "erf",
         "reciprocal"]
BINARY = ["add", "sub", "mul", "div", "maximum", "pow"]


@pytest.mark.parametrize("name", HALF)
def test_unary_ops_match_torch(device, rng, name):
    x, tx = _random((5, 7), name, device, rng)
    for op in UNARY:
        arg, targ = (x.abs(), tx.abs()) if op in ("log", "sqrt") else (x, tx)
        out = ct.full((5, 7), POISON, dtype=x.dtype, device=device)
        got = getattr(ct, op)(arg, out=out) if op != "relu" else out.copy_(arg.relu())
        _same(got, getattr(torch, op)(targ), ulps=1)


@pytest.mark.parametrize("name", HALF)
def test_binary_ops_and_comparisons_match_torch(device, rng, name):
    a, ta = _random((4, 6), name, device, rng)
    b, tb = _random((6,), name, device, rng)
    for op in BINARY:
        lhs, tlhs = (a.abs(), ta.abs()) if op == "pow" else (a, ta)
        out = ct.full((4, 6), POISON, dtype=a.dtype, device=device)
        _same(getattr(ct, op)(lhs, b, out=out), getattr(torch, op)(tlhs, tb), ulps=1)
    _same(a * 0.5 + 2, ta * 0.5 + 2, ulps=1)
    assert ((a > b).numpy() == (ta > tb).numpy()).all()
    assert ((a == a.t().t()).numpy()).all()
    _same(ct.where(a > 0, a, b), torch.where(ta > 0, ta, tb))
    mixed = a + ct.ones(6, device=device)
    assert mixed.dtype is ct.float32
    np.testing.assert_array_equal(mixed.numpy(), (ta.float() + 1).numpy())


@pytest.mark.parametrize("name", HALF)
def test_strided_copies_and_fills(device, rng, name):
    x, tx = _random((6, 8), name, device, rng)
    _same(x.t().contiguous(), tx.t().contiguous())
    _same(x[1::2, ::3].clone(), tx[1::2, ::3].clone())
    y = x.clone()
    y[:, 2] = 7.3
    ty = tx.clone()
    ty[:, 2] = 7.3
    _same(y, ty)
    y.fill_(-0.1)
    _same(y, torch.full((6, 8), -0.1, dtype=ty.dtype))


# ---- reductions: float32 accumulators ----------------------------------------------------------

@pytest.mark.parametrize("name", HALF)
def test_reductions_match_torch(device, rng, name):
    x, tx = _random((6, 40), name, device, rng)
    for op in ("sum", "mean", "amax", "amin", "var", "std", "logsumexp", "prod"):
        for dim in (1, 0):
            want = getattr(tx, op)(dim)
            if op in ("logsumexp", "prod"):
                # NOTE: torch's 16-bit ones round intermediates to the dtype (prod each partial
                # product; logsumexp x - max and the log: 44 ulps off float64 near 0);
                # cltensor's run in float32 and round once, as torch's float32 ones rounded
                want = getattr(tx.float(), op)(dim).to(tx.dtype)
            _same(getattr(x, op)(dim), want, ulps=1)
    _same(x.norm(dim=1), tx.norm(dim=1), ulps=1)
    _same(x.sum(), tx.sum(), ulps=1)
    assert x.argmax(1).tolist() == tx.argmax(1).tolist()
    assert x.max(0)[1].tolist() == tx.max(0)[1].tolist()
    assert x.sum(1, dtype=ct.float32).dtype is ct.float32


@pytest.mark.parametrize("name", HALF)
def test_long_sums_accumulate_in_float32(device, name):
    d, t = _pair(name)
    x = ct.ones(4096, dtype=d, device=device)  # a 16-bit accumulator stops at 2048 or 256
    assert x.sum().item() == torch.ones(4096, dtype=t).sum().item() == 4096
    assert x.mean().item() == 1
    # the vector loads' special values (within their first 32 elements): subnormals (exact),
    # infinity, NaN, signed zero; float32 sums, so that no 16-bit overflow hides them
    tiny = float(torch.finfo(t).smallest_normal) / 4
    for vals in ([tiny] * 40, [1.0] * 5 + [float("inf")] + [2.0] * 34,
                 [1.0] * 7 + [float("nan")] + [1.0] * 32, [-0.0] * 40):
        got = ct.tensor(vals, dtype=d, device=device).sum(dtype=ct.float32).item()
        want = torch.tensor(vals, dtype=t).sum(dtype=torch.float32).item()
        assert (np.isnan(got) and np.isnan(want)) or (got == want and
                                                       np.signbit(got) == np.signbit(want)), vals


# ---- softmax, norms, GEMM and convolution ------------------------------------------------------

@pytest.mark.parametrize("name", HALF)
def test_softmax_and_cross_entropy_match_torch(device, rng, name):
    x, tx = _random((5, 9), name, device, rng)
    x.requires_grad_()
    tx.requires_grad_()
    eps = float(ct.finfo(x.dtype).eps)
    for dim in (1, 0):
        _same(ct.softmax(x, dim), torch.softmax(tx, dim), ulps=1)
        # (x - max) - log(sum): an ulp of the row's scale, not of a result near 0
        np.testing.assert_allclose(ct.log_softmax(x, dim).detach().float().numpy(),
                                   torch.log_softmax(tx, dim).detach().float().numpy(),
                                   rtol=eps, atol=2 * eps)
    y, ty = ct.log_softmax(x, 1), torch.log_softmax(tx, 1)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    assert x.grad.dtype is x.dtype
    want = tx.grad.float().numpy()  # both round the backward's steps: norm-relative
    np.testing.assert_allclose(x.grad.float().numpy(), want, rtol=0,
                               atol=2 * eps * np.abs(want).max())
    target = [1, 8, 0, 3, 3]
    loss = ct.nn.functional.cross_entropy(x, ct.tensor(target, device=device))
    _same(loss, torch.nn.functional.cross_entropy(tx, torch.tensor(target)), ulps=1)


@pytest.mark.parametrize("name", HALF)
def test_batch_and_layer_norm_match_torch(device, rng, name):
    x, tx = _random((4, 3, 5, 5), name, device, rng)
    x.requires_grad_()
    tx.requires_grad_()
    bn, tbn = ct.nn.BatchNorm2d(3).to(device), torch.nn.BatchNorm2d(3)  # float32 parameters
    _same(bn(x), tbn(tx), ulps=1)
    np.testing.assert_allclose(bn.running_var.numpy(), tbn.running_var.numpy(), rtol=1e-5)
    bn(x).float().square().sum().backward()
    tbn(tx).float().square().sum().backward()
    assert x.grad.dtype is x.dtype and bn.weight.grad.dtype is ct.float32
    np.testing.assert_allclose(bn.weight.grad.numpy(), tbn.weight.grad.numpy(), rtol=1e-2)
    bn.eval()
    tbn.eval()
    _same(bn(x), tbn(tx), ulps=1)
    _same(ct.nn.functional.layer_norm(x, (5, 5)), torch.nn.functional.layer_norm(tx, (5, 5)),
          ulps=1)
    low = ct.nn.BatchNorm2d(3).to(device).to(x.dtype)  # 16-bit parameters and statistics too
    assert low(x).dtype is x.dtype and low.running_mean.dtype is x.dtype


@pytest.mark.parametrize("name", HALF)
def test_matmul_and_conv_on_float32_copies_match_torch(device, rng, name):
    a, ta = _random((2, 5, 7), name, device, rng)
    b, tb = _random((7, 4), name, device, rng)
    _same(a @ b, ta @ tb, ulps=1)
    out = ct.full((5, 4), POISON, dtype=a.dtype, device=device)
    _same(ct.mm(a[0], b, out=out), ta[0] @ tb, ulps=1)
    _same(ct.nn.functional.linear(a, b.t(), b[0]), torch.nn.functional.linear(ta, tb.t(), tb[0]),
          ulps=1)
    x, tx = _random((2, 3, 6, 6), name, device, rng, scale=1.0)
    w, tw = _random((4, 3, 3, 3), name, device, rng, scale=1.0)
    w.requires_grad_()
    tw.requires_grad_()
    y, ty = ct.nn.functional.conv2d(x, w, padding=1), torch.nn.functional.conv2d(tx, tw, padding=1)
    _same(y, ty, ulps=1)
    y.float().sum().backward()
    ty.float().sum().backward()
    assert w.grad.dtype is w.dtype
    np.testing.assert_allclose(w.grad.float().numpy(), tw.grad.float().numpy(), rtol=1e-2,
                               atol=1e-2)


@pytest.mark.parametrize("name", HALF)
def test_joins_and_pooling_match_torch(device, rng, name):
    x, tx = _random((2, 3, 6, 6), name, device, rng)
    _same(ct.cat([x, x[:1]], 0), torch.cat([tx, tx[:1]], 0))
    _same(ct.stack([x[0], x[1]], 1), torch.stack([tx[0], tx[1]], 1))
    idx = ct.tensor([2, 0], device=device)
    _same(x.index_select(1, idx), tx.index_select(1, torch.tensor([2, 0])))
    x.requires_grad_()
    tx.requires_grad_()
    tf = torch.nn.functional
    for got, want in ((ct.nn.functional.max_pool2d(x, 2), tf.max_pool2d(tx, 2)),
                      (ct.nn.functional.avg_pool2d(x, 3, 2, 1), tf.avg_pool2d(tx, 3, 2, 1)),
                      (ct.nn.functional.adaptive_avg_pool2d(x, 1), tf.adaptive_avg_pool2d(tx, 1))):
        _same(got, want, ulps=1)
        got.float().sum().backward()
        want.float().sum().backward()
        assert x.grad.dtype is x.dtype
        np.testing.assert_allclose(x.grad.float().numpy(), tx.grad.float().numpy(), rtol=1e-2)


def test_benchmark_script_end_to_end(device, tmp_path):
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "half.py"
    spec = importlib.util.spec_from_file_location("half_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "half.json"
    assert bench.main(["--mib", "1", "--reps", "1", "--batch", "2", "--device", device.index,
                       "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert [r["op"] for r in res["ops"]] == list(bench.OPS)
    assert all(r["float16_ms"] > 0 and r["bfloat16_speedup"] > 0 for r in res["ops"])
    assert all(r["float16_cpu_ms"] >= 0 and r["bfloat16_cpu_speedup"] >= 0 for r in res["ops"])
    assert res["peak_mib"]["bf16"] <= res["peak_mib"]["fp32"]
    assert bench.main(["--mib", "1", "--reps", "1", "--ops", "relu", "copy", "--no-memory",
                       "--device", device.index, "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert [r["op"] for r in res["ops"]] == ["copy (clone)", "relu"] and res["peak_mib"] == {}


@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("opt", ["SGD", "Adam", "RMSprop"])
def test_optimizer_steps_on_16_bit_parameters(device, rng, name, opt):
    d, t = _pair(name)
    kw = {"SGD": dict(lr=0.1, momentum=0.9, weight_decay=0.01), "Adam": dict(lr=0.01),
          "RMSprop": dict(lr=0.01)}[opt]
    w0 = rng.standard_normal(50).astype(np.float32)
    p = ct.from_numpy(w0, device=device).to(d).requires_grad_()
    tp = torch.from_numpy(w0).to(t).requires_grad_()
    mine, theirs = getattr(ct.optim, opt)([p], **kw), getattr(torch.optim, opt)([tp], **kw)
    for _ in range(3):
        # NOTE: |g| >= 0.1: torch's float16 Adam and RMSprop turn a gradient under about 0.01
        # into an infinite step (g * g underflows in float16, and eps 1e-8 rounds to 0); this
        # library computes the step in float32 and stays finite
        g = (rng.choice([-1, 1], 50) * rng.uniform(0.1, 2, 50)).astype(np.float32)
        p.grad = ct.from_numpy(g, device=device).to(d)
        tp.grad = torch.from_numpy(g).to(t)
        mine.step()
        theirs.step()
    assert p.dtype is d and all(v.dtype is d for v in mine.state[p].values()
                                if isinstance(v, ct.Tensor) and v.ndim)
    want = tp.detach().float().numpy()  # torch rounds every operation to the dtype
    np.testing.assert_allclose(p.detach().float().numpy(), want, rtol=0,
                               atol=8 * float(ct.finfo(d).eps) * np.abs(want).max())


@pytest.mark.parametrize("name", HALF)
def test_losses_outside_autocast_match_torch(device, rng, name):
    x, tx = _random((4, 5), name, device, rng)
    y, ty = _random((4, 5), name, device, rng)
    x.requires_grad_()
    tx.requires_grad_()
    f, tf = ct.nn.functional, torch.nn.functional
    target = [0, 4, 2, 1]
    for got, want in ((f.mse_loss(x, y), tf.mse_loss(tx, ty)),
                      (f.nll_loss(x, ct.tensor(target, device=device)),
                       tf.nll_loss(tx, torch.tensor(target))),
                      (f.binary_cross_entropy_with_logits(x, (y > 0).to(x.dtype)),
                       tf.binary_cross_entropy_with_logits(tx, (ty > 0).to(tx.dtype)))):
        _same(got, want, ulps=2)
        got.backward()
        want.backward()
        assert x.grad.dtype is x.dtype
        np.testing.assert_allclose(x.grad.float().numpy(), tx.grad.float().numpy(),
                                   atol=2 * float(ct.finfo(x.dtype).eps))
        x.grad = tx.grad = None
