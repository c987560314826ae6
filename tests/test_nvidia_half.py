"""16-bit products on the NVIDIA plug-in's wgmma kernel (cltensor/plugins/nvidia.py, HALF in
cl_kernels/nvidia_wgmma.cl, pack_half_slices in gemm_pack.cl).

On every device: the operand copy (pack_half_slices) against a numpy model of the wgmma
layout, the engine's rule that a plug-in sees 16-bit tensors only when it says it reads them,
and the mma.sync kernel's 16-bit form (HALF in nvidia_mma.cl) in emulation. On NVIDIA GPUs the
plug-in serves: float16 and bfloat16 products through mma.sync m16n8k16 and, on Hopper
(compute capability 9.0), wgmma, against float64 products of the same 16-bit values, with
outputs poisoned first.

Tolerance: the products of 16-bit values are exact in float32 and summed in float32, so the
norm-relative error against float64 (over |a| @ |b|, which no cancellation shrinks) is about
1e-6 with a float32 C; a 16-bit C adds its rounding (2^-9 relative for bfloat16, 2^-12 for
float16, at most).
"""
import numpy as np
import pytest

import cltensor
from cltensor import dtypes as dt
from cltensor.ops import gemm as gm
from cltensor.plugins import nvidia
from cltensor.testing import random_array
from test_nvidia_plugin import EMULATED_CONFIGS, _emulated, only_plugins, swizzled_slices

HALVES = ("float16", "bfloat16")
TOL = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 6e-3}  # norm-relative, by C's type


def to16(device, x, dtype):
    return cltensor.from_numpy(x, device=device).to(getattr(cltensor, dtype))


def bits16(t):
    """A 16-bit tensor's values as their bits (uint16)."""
    if t.dtype == cltensor.bfloat16:
        return dt.bf16_bits(t.numpy())
    return t.numpy().view(np.uint16)


def half_slices_model(bits, width, bk):
    """pack_half_slices' output (32-bit words) for one batch of 16-bit bits (rows x K)."""
    rows, k = bits.shape
    kw = 2 * bk  # 16-bit values per row of a slice
    padded = np.zeros((-(-rows // width) * width, -(-k // kw) * kw), np.uint16)
    padded[:rows, :k] = bits
    return swizzled_slices(padded.view(np.uint32), width, bk)  # the lower k in the low half


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("rows,k,width,bk,layout,bshape,shared", [
    (70, 37, 64, 8, "k", (), False), (130, 64, 128, 16, "rows", (), False),
    (9, 101, 64, 32, "k", (3,), False), (65, 9, 64, 8, "rows", (2, 2), True),
    (5, 1, 64, 8, "k", (), False), (70, 48, 64, 8, "k", (), False),
    (66, 40, 64, 16, "k", (2,), False)])
def test_pack_half_slices(device, rng, monkeypatch, dtype, rows, k, width, bk, layout, bshape,
                          shared):
    """The wgmma kernel's 16-bit operand copy, on every device: pairs of K-consecutive values
    per word, the swizzled layout, zero padding past the rows and an odd K, batches (one copy
    when they share the operand) and strides, bit for bit (NaN and Inf included)."""
    nb = int(np.prod(bshape))
    x = rng.uniform(-4, 4, (1 if shared else nb, rows, k)).astype(np.float32)
    x.reshape(-1)[:4] = [np.inf, -np.inf, np.nan, -0.0]
    host = x if layout == "k" else np.ascontiguousarray(x.transpose(0, 2, 1))
    t = to16(device, host, dtype)
    bstrides = [0] * len(bshape) if shared else gm.dense_strides(bshape, rows * k)
    rs, ks = (k, 1) if layout == "k" else (1, rows)
    op = gm.Operand(t, bstrides, rs, ks)
    p = gm.Problem(device, np.dtype(np.float32), rows, rows, k, bshape, op, op, None, None)
    monkeypatch.setattr(gm, "scratch",
                        lambda p, n: cltensor.full((n,), float("nan"), device=device))
    dst, bs = nvidia._pack_slices(p, op, rows, rs, ks, width, bk, nvidia.half_type(p))
    bits = bits16(t)
    if layout != "k":
        bits = bits.transpose(0, 2, 1)
    want = np.concatenate([half_slices_model(np.ascontiguousarray(b), width, bk) for b in bits])
    assert bs == (want.size // nb if any(bstrides) else 0)
    np.testing.assert_array_equal(dst.numpy().view(np.uint32), want)


def test_half_type_and_words(device):
    def prob(a, b, k=7):
        ops = [gm.Operand(cltensor.empty(1, dtype=d, device=device), [], 1, 1) for d in (a, b)]
        return gm.Problem(device, np.dtype(np.float32), 2, 3, k, (), *ops, None, None)
    f16, bf16, f32 = cltensor.float16, cltensor.bfloat16, cltensor.float32
    assert nvidia.half_type(prob(f16, f16)) == 1 and nvidia.half_type(prob(bf16, bf16)) == 2
    assert nvidia.half_type(prob(f16, bf16)) == 0 and nvidia.half_type(prob(f32, f32)) == 0
    assert nvidia.words(prob(bf16, bf16, 7)).k == 4 and nvidia.words(prob(bf16, bf16, 8)).k == 4


class Recorder:
    """A plug-in that records the products it is asked about and declines them all."""
    reads_16bit = False

    def __init__(self):
        self.asked = []

    def gemm(self, p, *args):
        self.asked.append(p.a.t.dtype)
        return False


@pytest.mark.parametrize("reads", [False, True])
def test_plugins_see_16bit_products_only_when_they_read_them(device, rng, reads):
    rec = Recorder()
    rec.reads_16bit = reads
    saved = list(gm.PROVIDERS)
    gm.PROVIDERS[:] = [lambda d: [rec]]
    try:
        x = random_array(rng, (5, 6))
        for dtype in ("float32", "bfloat16", "float16"):
            a = (to16(device, x, dtype) if dtype != "float32" else
                 cltensor.from_numpy(x, device=device))
            out = cltensor.gemm(a, a.mT)
            an = a.float().numpy()
            np.testing.assert_allclose(out.float().numpy(), an @ an.T, rtol=1e-2, atol=1e-2)
    finally:
        gm.PROVIDERS[:] = saved
    want = [cltensor.float32] + ([cltensor.bfloat16, cltensor.float16] if reads else [])
    assert rec.asked == want


# ---- the tensor cores, and mma.sync's 16-bit form in emulation ---------------------------------

def _served(device):
    pl = next((pl for pl in cltensor.plugins() if pl.name == "nvidia_tf32"), None)
    return pl if pl is not None and pl.serves(device) else None


@pytest.fixture
def hopper(device, monkeypatch):
    """The real plug-in on a device with wgmma, its mma.sync sets out of the way (the plan
    gives products of few tiles to them); skips elsewhere."""
    pl = _served(device)
    if pl is None or not nvidia.is_sm90(device):
        pytest.skip(f"needs an NVIDIA GPU of compute capability 9.0 (wgmma); {device} is not")
    monkeypatch.setattr(pl, "configs", tuple(q for q in pl.configs if nvidia.is_wgmma(q)))
    gm.engine.clear_plans()  # NOTE: else a shape seen with other sets replays their launches
    yield pl
    gm.engine.clear_plans()


@pytest.fixture
def mma_sync(device, monkeypatch):
    """The real plug-in with its wgmma sets out of the way: 16-bit products on mma.sync."""
    pl = _served(device)
    if pl is None:
        pytest.skip(f"needs an NVIDIA GPU the plug-in serves; {device} is not one")
    monkeypatch.setattr(nvidia, "HALF_CONFIGS", ())
    gm.engine.clear_plans()
    yield pl
    gm.engine.clear_plans()


@pytest.fixture(params=range(len(EMULATED_CONFIGS)), ids=["bk16-prefetch", "bk8-sync", "bk32"])
def emulated(request):
    """The plug-in in plain OpenCL with one small mma.sync set, the only plug-in asked."""
    pl = _emulated(EMULATED_CONFIGS[request.param])
    with only_plugins(pl):
        yield pl


def operand16(rng, device, shape, kind, dtype):
    """A 16-bit view (n contiguous, t transposed, s step-sliced, o offset by one element,
    b broadcast) and its values."""
    if kind == "n":
        t = to16(device, random_array(rng, shape), dtype)
        return t, t.float().numpy().astype(np.float64)
    *batch, rows, cols = shape
    batch = tuple(batch)
    if kind == "t":
        t = to16(device, random_array(rng, batch + (cols, rows)), dtype).mT
    elif kind == "s":
        t = to16(device, random_array(rng, batch + (rows, 2 * cols)), dtype)[..., ::2]
    elif kind == "o":
        t = to16(device, random_array(rng, batch + (rows, cols + 1)), dtype)[..., 1:]
    else:  # b
        t = to16(device, random_array(rng, batch + (rows, 1)), dtype).expand(*shape)
    return t, t.float().numpy().astype(np.float64)


def check_half(device, rng, dtype, m, n, k, ka="n", kb="n", batch=(), out_dtype=None,
               kernel="nvwg_gemm", **kw):
    """out = relu?(alpha a @ b + beta c + biases) through `kernel`, into a poisoned out."""
    out_dtype = out_dtype or dtype
    a, an = operand16(rng, device, batch + (m, k), ka, dtype)
    b, bn = operand16(rng, device, (k, n), kb, dtype)
    out = cltensor.full(batch + (m, n), float("nan"), device=device,
                        dtype=getattr(cltensor, out_dtype))
    want, scale = an @ bn, np.abs(an) @ np.abs(bn)
    args = {}
    if kw.get("row"):
        rb, rbn = operand16(rng, device, (m,), "n", out_dtype)
        args["row_bias"], want = rb, want + rbn[:, None]
    if kw.get("beta"):
        c, cn = operand16(rng, device, batch + (m, n), "n", out_dtype)
        args.update(c_in=c, beta=kw["beta"])
        want, scale = want + kw["beta"] * cn, scale + abs(kw["beta"]) * np.abs(cn)
    if kw.get("relu"):
        args["relu"], want = True, np.maximum(want, 0)
    with cltensor.profile() as prof:  # NOTE: the engine itself: C may be float32
        gm.gemm_into(a, b.expand(batch + (k, n)), out, **args)
    names = {r["name"] for r in prof.records()}
    assert kernel in names, names
    got = out.float().numpy()
    err = float(np.linalg.norm((got - want).ravel()) / np.linalg.norm(scale.ravel()))
    assert err < TOL[out_dtype], f"{dtype} {batch} {m}x{n}x{k} {ka}{kb}: error {err:.2e}"


# 1, whole tiles, odd K (copied), transposed and step-sliced (copied), misaligned offsets,
# broadcasts, long K
SHAPES = [(1, 1, 1, "n", "n"), (64, 256, 16, "n", "n"), (67, 37, 53, "n", "t"),
          (65, 300, 17, "t", "n"), (5, 7, 302, "t", "t"), (31, 29, 40, "s", "s"),
          (20, 24, 28, "o", "n"), (33, 40, 12, "b", "n"), (513, 257, 1029, "n", "t")]
EMULATED_SHAPES = [(1, 1, 1, "n", "n"), (67, 37, 54, "n", "t"), (33, 29, 17, "t", "n"),
                   (20, 24, 28, "o", "s"), (33, 40, 12, "b", "n")]


@pytest.mark.parametrize("dtype", HALVES)
def test_mma_sync_16bit_emulated(device, rng, emulated, dtype):
    for m, n, k, ka, kb in EMULATED_SHAPES:
        check_half(device, rng, dtype, m, n, k, ka, kb, kernel="nvmma_gemm")
    check_half(device, rng, dtype, 21, 19, 30, batch=(2,), row=True, relu=True,
               kernel="nvmma_gemm")
    check_half(device, rng, dtype, 17, 23, 40, "t", "n", out_dtype="float32", beta=0.5,
               kernel="nvmma_gemm")


def test_mma_sync_16bit_emulated_split_k(device, rng, dtype="bfloat16"):
    with only_plugins(_emulated(EMULATED_CONFIGS[0], splits=3)):
        check_half(device, rng, dtype, 20, 12, 300, kernel="nvmma_gemm")
        check_half(device, rng, dtype, 9, 14, 101, "t", "n", batch=(2,), out_dtype="float32",
                   kernel="nvmma_gemm")


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("m,n,k,ka,kb", SHAPES)
def test_tensor_cores_16bit(device, rng, hopper, dtype, m, n, k, ka, kb):
    check_half(device, rng, dtype, m, n, k, ka, kb)


@pytest.mark.parametrize("dtype", HALVES)
def test_mma_sync_16bit(device, rng, mma_sync, dtype):
    for m, n, k, ka, kb in SHAPES:
        check_half(device, rng, dtype, m, n, k, ka, kb, kernel="nvmma_gemm")
    check_half(device, rng, dtype, 37, 45, 29, batch=(2, 3), row=True, relu=True,
               kernel="nvmma_gemm")
    check_half(device, rng, dtype, 128, 96, 16384, out_dtype="float32", kernel="nvmma_gemm")


@pytest.mark.parametrize("dtype", HALVES)
def test_tensor_cores_16bit_epilogue_batches_and_float32_out(device, rng, hopper, dtype):
    check_half(device, rng, dtype, 37, 45, 29, batch=(2, 3), row=True, relu=True)
    check_half(device, rng, dtype, 40, 70, 33, "t", "n", batch=(3,), beta=0.5)
    check_half(device, rng, dtype, 70, 90, 50, out_dtype="float32", beta=-2.0, row=True)


@pytest.mark.parametrize("dtype", HALVES)
def test_tensor_cores_16bit_split_k(device, rng, hopper, dtype):
    # NOTE: the plan reads the operands' type alone
    op = gm.Operand(cltensor.empty(1, dtype=getattr(cltensor, dtype), device=device), [], 1, 1)
    p = nvidia.words(gm.Problem(device, np.dtype(np.float32), 128, 96, 16384, (), op, op, None,
                                None))
    assert hopper.plans(p, nvidia.HALF_CONFIGS)[0][1] > 1  # few tiles: K is split
    check_half(device, rng, dtype, 128, 96, 16384)
    check_half(device, rng, dtype, 100, 40, 6000, "t", "n", batch=(2,), out_dtype="float32")


@pytest.mark.parametrize("index", range(len(nvidia.HALF_CONFIGS)))
def test_tensor_cores_16bit_every_set(device, rng, hopper, monkeypatch, index):
    """Each 16-bit wgmma set alone (the plan would give most shapes to one): partial tiles
    and slices, a long K (split where the plan splits it), both types."""
    monkeypatch.setattr(nvidia, "HALF_CONFIGS", (nvidia.HALF_CONFIGS[index],))
    gm.engine.clear_plans()
    for dtype in HALVES:
        check_half(device, rng, dtype, 200, 333, 90, "n", "t")
        check_half(device, rng, dtype, 70, 50, 4000, "t", "n", out_dtype="float32", row=True)


@pytest.mark.parametrize("dtype", HALVES)
def test_tensor_cores_16bit_large(device, rng, hopper, dtype):
    check_half(device, rng, dtype, 2048, 1536, 1024)
