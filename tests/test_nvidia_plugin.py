"""The NVIDIA tensor-core plug-in (cltensor/plugins/nvidia.py, cl_kernels/nvidia_mma.cl and
nvidia_wgmma.cl).

Three parts: on every device it does not serve, allow_tf32 changes nothing (bit for bit, and no
plug-in kernel runs); on every device, the mma.sync kernel's tiling, copies, fragment layout,
split K and epilogue are checked in emulation (plain OpenCL in place of the PTX instructions),
and the wgmma kernel's operand copy (pack_tf32_slices) against a numpy model; on NVIDIA GPUs,
the tensor-core kernels themselves against float64, with every tuned parameter set (the wgmma
set on compute capability 9.0).

TF32 tolerance: the norm-relative error of a product is bounded by REL_TOL = 2e-3 (check_product
measures it against |a| @ |b|, which no cancellation shrinks). Measured on
the H200 and in emulation: 2.6e-4 with rounding to nearest (ROUND 1, 2, 3; cuBLAS with TF32 on:
2.6e-4 at 4096^3), 7e-4 with truncation (ROUND 0); IEEE fp32 is about 1e-7.
"""
import contextlib

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import cltensor
from cltensor import backends
from cltensor.ops import gemm as gm
from cltensor.plugins import nvidia
from cltensor.testing import random_array, rel_error

REL_TOL = 2e-3
# Small parameter sets for emulation (fast on PoCL): every BK and both copy paths.
EMULATED_CONFIGS = (
    dict(WM=32, WN=16, WARPS_M=2, WARPS_N=2, BK=16, STAGES=3, ASYNC=1, ROUND=2, GROUP_M=2,
         PREFETCH=1),
    dict(WM=32, WN=32, WARPS_M=2, WARPS_N=2, BK=8, STAGES=2, ASYNC=0, ROUND=1, GROUP_M=8,
         PREFETCH=0),
    dict(WM=16, WN=32, WARPS_M=2, WARPS_N=2, BK=32, STAGES=2, ASYNC=1, ROUND=3, GROUP_M=1,
         PREFETCH=0),
)


class Emulated(nvidia.NvidiaTensorCores):
    """The plug-in with plain OpenCL in place of PTX, serving every device."""
    name = "test_nvmma_emulated"
    vendors = ()
    probe_file = None
    emulate = True
    forced_splits = None

    def plans(self, p, configs=None):
        found = super().plans(p, configs)
        return [(q, self.forced_splits or s) for q, s in found]


@contextlib.contextmanager
def allow_tf32(value=True):
    saved = backends.allow_tf32
    backends.allow_tf32 = value
    try:
        yield
    finally:
        backends.allow_tf32 = saved


@contextlib.contextmanager
def only_plugins(*pls):
    """The GEMM engine asks these plug-ins alone (the built-in one is out of the way); the
    generation moves both ways, so no product replays launches decided under the others."""
    saved = list(gm.PROVIDERS)
    gm.PROVIDERS[:] = [lambda device: list(pls)]
    gm.generation += 1
    try:
        yield
    finally:
        gm.PROVIDERS[:] = saved
        gm.generation += 1


@pytest.fixture
def tf32():
    with allow_tf32():
        yield


def _served(device):
    pl = next(pl for pl in cltensor.plugins() if pl.name == "nvidia_tf32")
    return pl if pl.serves(device) else None


@pytest.fixture
def nvmma(device, tf32):
    """The real plug-in on an NVIDIA device that it serves; skips elsewhere."""
    pl = _served(device)
    if pl is None:
        pytest.skip(f"needs an NVIDIA GPU whose OpenCL compiler builds mma.sync (tf32); "
                    f"{device} is not one ({nvidia.NvidiaTensorCores().why_not(device)})")
    return pl


def _emulated(config, splits=None):
    pl = Emulated()
    pl.configs = (dict(config, rate=1.0, groups_per_cu=1),)
    pl.forced_splits = splits
    return pl


@pytest.fixture(params=range(len(EMULATED_CONFIGS)), ids=["bk16-prefetch", "bk8-sync", "bk32"])
def emulated(request, tf32):
    """The emulated plug-in with one of EMULATED_CONFIGS, the only plug-in asked."""
    pl = _emulated(EMULATED_CONFIGS[request.param])
    with only_plugins(pl):
        yield pl


# ---- operands ---------------------------------------------------------------------------------

def operand(rng, device, shape, kind):
    """A view of `shape` (last two dims: rows, cols) of a given kind, and its values: n
    contiguous, t transposed, r row offset (read in place when cols % 4 == 0), o column offset
    (misaligned: copied first), s step-sliced, b broadcast along the columns (stride 0), z
    that with a row stride of 4 (a 16-byte aligned broadcast)."""
    *batch, rows, cols = shape
    batch = tuple(batch)
    T = lambda x: cltensor.from_numpy(x, device=device)  # noqa: E731
    if kind == "n":
        x = random_array(rng, shape)
        return T(x), x
    if kind == "t":
        x = random_array(rng, batch + (cols, rows))
        return T(x).mT, np.swapaxes(x, -1, -2)
    if kind == "r":
        x = random_array(rng, batch + (rows + 1, cols))
        return T(x)[..., 1:, :], x[..., 1:, :]
    if kind == "o":
        x = random_array(rng, batch + (rows, cols + 1))
        return T(x)[..., 1:], x[..., 1:]
    if kind == "s":
        x = random_array(rng, batch + (rows, 2 * cols))
        return T(x)[..., ::2], x[..., ::2]
    width = {"b": 1, "z": 4}[kind]
    x = random_array(rng, batch + (rows, width))
    return T(x)[..., :1].expand(*shape), np.broadcast_to(x[..., :1], shape)


def problem(device, m, n, k, dtype=np.float32):
    """A Problem whose operands are placeholders of its dtype: what plan() and the plug-in's
    first checks read."""
    op = gm.Operand(cltensor.empty(1, dtype=dtype, device=device), [], 1, 1)
    return gm.Problem(device, np.dtype(dtype), m, n, k, (), *[op] * 4)


def poisoned(device, shape):
    return cltensor.full(shape, float("nan"), device=device)


def ran_kernel(fn):
    """fn's result and whether a tensor-core kernel (nvmma_*, nvwg_*) ran."""
    with cltensor.profile() as prof:
        out = fn()
    return out, any(r["name"].startswith(("nvmma", "nvwg")) for r in prof.records())


def check_product(device, rng, m, n, k, ka="n", kb="n", batch=()):
    """a @ b into a NaN-poisoned out, through the tensor-core kernel, against float64."""
    a, an = operand(rng, device, batch + (m, k), ka)
    b, bn = operand(rng, device, (k, n), kb)
    out, ran = ran_kernel(lambda: cltensor.gemm(a, b, out=poisoned(device, batch + (m, n))))
    assert ran, "the tensor-core kernel did not run"
    ref, scale = an.astype(np.float64) @ bn, np.abs(an.astype(np.float64)) @ np.abs(bn)
    # NOTE: relative to |a| @ |b|, the scale TF32's rounding error grows with: relative to
    # a @ b, it is unbounded when the sums cancel (broadcast operands, "zz": every output is
    # one short sum times a row's value; 21x36x5 measured 3e-3 there)
    err = float(np.linalg.norm((out.numpy() - ref).ravel()) / np.linalg.norm(scale.ravel()))
    assert err < REL_TOL, f"{batch} {m}x{n}x{k} {ka}{kb}: relative error {err:.2e}"


def check_epilogue(device, rng, batch=(), **kw):
    """out = relu(alpha a @ b + beta c + row_bias + col_bias), batched, into a poisoned out."""
    m, n, k = 37, 45, 29
    a = random_array(rng, batch + (m, k))
    b = random_array(rng, (k, n))
    c = random_array(rng, batch + (m, n))
    rb, cb = random_array(rng, (m,)), random_array(rng, (n,))
    T = lambda x: cltensor.from_numpy(x, device=device)  # noqa: E731
    args = dict(c=T(c), alpha=kw.get("alpha", 1), beta=kw.get("beta", 0),
                relu=kw.get("relu", False), row_bias=T(rb) if kw.get("row") else None,
                col_bias=T(cb) if kw.get("col") else None)
    out, ran = ran_kernel(lambda: cltensor.gemm(T(a), T(b), out=poisoned(device, batch + (m, n)),
                                                **args))
    assert ran
    want = args["alpha"] * (a.astype(np.float64) @ b) + args["beta"] * c
    want += (rb[:, None] if kw.get("row") else 0) + (cb if kw.get("col") else 0)
    want = np.maximum(want, 0) if args["relu"] else want
    assert rel_error(out, want) < REL_TOL


# (m, n, k, layout of a, layout of b): 1, whole tiles, primes, tile edges, long K, in-place
# transposes, offsets (aligned and not), step slices, broadcasts
SHAPES = [
    (1, 1, 1, "n", "n"), (64, 64, 64, "n", "n"), (67, 37, 53, "n", "n"), (65, 33, 17, "t", "n"),
    (5, 7, 300, "n", "t"), (68, 44, 36, "t", "t"), (40, 28, 36, "r", "r"), (20, 24, 28, "o", "o"),
    (31, 29, 40, "s", "s"), (33, 40, 12, "b", "n"), (130, 3, 70, "n", "b"), (36, 20, 24, "z", "z"),
]
EPILOGUES = [dict(alpha=0.5), dict(beta=-2.0), dict(row=True, relu=True),
             dict(col=True, alpha=-1.5, beta=0.25, relu=True)]


# ---- off NVIDIA: nothing changes --------------------------------------------------------------

def _products(device, rng):
    """A few products through every entry point that reaches the GEMM engine."""
    a, b = random_array(rng, (70, 50)), random_array(rng, (50, 90))
    x, w = random_array(rng, (3, 70, 50)), random_array(rng, (40, 50))
    T = lambda v: cltensor.from_numpy(v, device=device)  # noqa: E731
    return [lambda: T(a) @ T(b), lambda: cltensor.matmul(T(x), T(w).mT),
            lambda: cltensor.gemm(T(a), T(b), c=T(a @ b), beta=0.5, relu=True)]


def test_allow_tf32_changes_nothing_where_the_plugin_does_not_serve(device, rng):
    if _served(device):
        pytest.skip(f"the plug-in serves {device}: see the tests below")
    for fn in _products(device, rng):
        with allow_tf32(False):
            want = fn().numpy()
        with allow_tf32(True):
            got, ran = ran_kernel(fn)
        assert not ran
        np.testing.assert_array_equal(got.numpy(), want)


def test_does_not_serve_other_devices(device):
    if "nvidia" in f"{device.cl_device.vendor} {device.platform_name}".lower():
        pytest.skip(f"{device} is an NVIDIA device")
    pl = nvidia.NvidiaTensorCores()
    assert not pl.serves(device) and "vendor" in pl.why_not(device)


def test_declines_without_allow_tf32_and_other_dtypes(device, tf32):
    pl = nvidia.NvidiaTensorCores()
    for dtype, k in ((np.float64, 8), (np.int32, 8), (np.int64, 8), (np.float32, 0)):
        assert pl.gemm(problem(device, 8, 8, k, dtype), 1, 0, False, None, None, False) is False
    backends.allow_tf32 = False
    assert pl.gemm(problem(device, 8, 8, 8), 1, 0, False, None, None, False) is False


def test_one_product_may_allow_tf32(device, rng):
    """gemm_into(tf32=True) lets the plug-in multiply in TF32 with allow_tf32 off, the same
    product without it stays on the portable path, and neither replays the other's launches
    (the tf32 permission is part of the plan's key)."""
    pl, taken = _emulated(EMULATED_CONFIGS[0]), []
    real = type(pl).gemm
    pl.gemm = lambda p, *a: taken.append(real(pl, p, *a)) or taken[-1]
    a, b = (cltensor.from_numpy(random_array(rng, s, np.float32), device=device)
            for s in ((24, 40), (40, 16)))
    want = a.numpy().astype(np.float64) @ b.numpy()
    with allow_tf32(False), only_plugins(pl):
        for tf32 in (True, False, True, False):
            taken.clear()
            with cltensor.profile() as prof:
                c = gm.gemm_into(a, b, cltensor.empty(24, 16, device=device), tf32=tf32)
            ran = {r["name"] for r in prof.records()}
            assert ("nvmma_gemm" in ran) == tf32, (tf32, ran)
            assert taken in (([True], []) if tf32 else ([False], [])), taken  # [] replayed
            assert rel_error(c.numpy(), want) < (2e-3 if tf32 else 1e-6)


def test_parameter_sets_are_valid():
    assert all(nvidia.config_valid(q) for q in nvidia.CONFIGS)
    assert all(nvidia.local_bytes(q) + nvidia.LOCAL_RESERVED <= 48 * 1024 for q in nvidia.CONFIGS)
    assert not nvidia.config_valid(dict(nvidia.CONFIGS[0], BK=24))
    assert nvidia.TUNED["tflops_4096"] and nvidia.TUNED["date"]


def test_parameter_sets_of_wgmma_are_checked():
    q = next(q for q in nvidia.CONFIGS if nvidia.is_wgmma(q))
    assert nvidia.tile_shape(q) == (64 * q["WGS_M"], q["BN"], 128 * q["WGS_M"] + 32 * q["PRODUCER"])
    assert nvidia.local_bytes(q) == q["STAGES"] * (q["BK"] * (64 * q["WGS_M"] + q["BN"]) * 4 + 16)
    for bad in (dict(BN=100), dict(WGS_M=3), dict(BK=24), dict(WG_WAIT=2),
                dict(STAGES=q["WG_WAIT"]), dict(PRODUCER=2)):
        assert not nvidia.config_valid(dict(q, **bad)), bad


def tf32_slices_model(x, width, bk):
    """pack_tf32_slices' output for one batch of x (rows x K), in numpy."""
    rows, k = x.shape
    rp, kp = -(-rows // width) * width, -(-k // bk) * bk
    bits = np.zeros((rp, kp), np.uint32)
    bits[:rows, :k] = x.view(np.uint32)
    finite = (bits & 0x7f800000) != 0x7f800000
    bits = np.where(finite, (bits + 0x1000) & 0xffffe000, bits).astype(np.uint32)
    return swizzled_slices(bits, width, bk).view(np.float32)


def swizzled_slices(words, width, bk):
    """Padded (rows, K) 32-bit words in the wgmma kernel's slices of width rows by bk words,
    16-byte chunk c of row r at chunk c ^ (r * bk / 32) % (bk / 4), flattened."""
    rp, kp = words.shape
    per_row = bk // 4
    chunks = words.reshape(rp // width, width, kp // bk, per_row, 4).transpose(0, 2, 1, 3, 4)
    out = np.empty_like(chunks)
    r = np.arange(width)
    for c in range(per_row):
        out[:, :, r, c ^ (r * bk // 32) % per_row] = chunks[:, :, r, c]
    return out.reshape(-1)


@pytest.mark.parametrize("rows,k,width,bk,layout,bshape,shared", [
    (70, 37, 64, 8, "k", (), False), (130, 64, 128, 16, "rows", (), False),
    (9, 100, 64, 32, "k", (3,), False), (65, 9, 64, 8, "rows", (2, 2), True)])
def test_pack_tf32_slices(device, rng, monkeypatch, rows, k, width, bk, layout, bshape, shared):
    """The wgmma kernel's operand copy, on every device: layout, swizzle, zero padding, batches
    (one copy when they share the operand), any strides, and rounding to TF32 (nearest, ties
    away from zero, Inf and NaN kept, the largest floats to Inf)."""
    nb = int(np.prod(bshape))
    x = rng.uniform(-4, 4, (1 if shared else nb, rows, k)).astype(np.float32)
    special = np.array([np.inf, -np.inf, np.nan, 3.4e38, -3.4e38, 1.0, 0.0], np.float32)
    tie = (np.array([0x3F801000, 0xBF803000, 0x3F800FFF], np.uint32)).view(np.float32)
    flat = x.reshape(-1)
    flat[:special.size + tie.size] = np.concatenate([special, tie])
    host = x if layout == "k" else np.ascontiguousarray(x.transpose(0, 2, 1))
    t = cltensor.from_numpy(host, device=device)
    bstrides = [0] * len(bshape) if shared else gm.dense_strides(bshape, rows * k)
    rs, ks = (k, 1) if layout == "k" else (1, rows)
    op = gm.Operand(t, bstrides, rs, ks)
    p = gm.Problem(device, np.dtype(np.float32), rows, rows, k, bshape, op, op, None, None)
    monkeypatch.setattr(gm, "scratch", lambda p, n: poisoned(device, (n,)))
    dst, bs = nvidia._pack_slices(p, op, rows, rs, ks, width, bk)
    got = dst.numpy().view(np.uint32)
    want = np.concatenate([tf32_slices_model(xb, width, bk) for xb in x]).view(np.uint32)
    assert bs == (want.size // nb if any(bstrides) else 0)
    np.testing.assert_array_equal(got, want)


def test_to_sm90a_uncomments_the_marked_instructions():
    ptx = (b"//\n.version 9.0\n.target sm_90, texmode_independent\n.address_size 64\n"
           b"\t//SM90A wgmma.fence.sync.aligned;\n\tmov.u32 %r1, 0; // sm_90\n\0")
    assert nvidia.to_sm90a(ptx) == (
        b"//\n.version 9.0\n.target sm_90a, texmode_independent\n.address_size 64\n"
        b"\twgmma.fence.sync.aligned;\n\tmov.u32 %r1, 0; // sm_90\n")


def test_sm90a_rebuild_adds_the_work_groups_per_compute_unit():
    ptx = (b".version 9.0\n.target sm_90\n.entry nvwg_gemm(\n.param .u32 a\n)\n"
           b".reqntid 160, 1, 1\n{\n\t//SM90A wgmma.fence.sync.aligned;\n}\n\0")
    assert nvidia.sm90a_rebuild(0) is nvidia.to_sm90a
    assert nvidia.sm90a_rebuild(2) is nvidia.sm90a_rebuild(2)  # the program cache keys on it
    assert nvidia.sm90a_rebuild(2)(ptx) == (
        b".version 9.0\n.target sm_90a\n.entry nvwg_gemm(\n.param .u32 a\n)\n"
        b".reqntid 160, 1, 1\n.minnctapersm 2\n{\n\twgmma.fence.sync.aligned;\n}\n")
    q = next(q for q in nvidia.CONFIGS if nvidia.is_wgmma(q))
    assert nvidia.config_valid(dict(q, BN=160, MIN_GROUPS=2))
    assert not nvidia.config_valid(dict(q, MIN_GROUPS=5))


def test_wgmma_sets_are_planned_on_hopper_alone(device):
    """Never in emulation (no plain-OpenCL wgmma), and on compute capability 9.0 only."""
    wgmma = tuple(q for q in nvidia.CONFIGS if nvidia.is_wgmma(q))
    pl = _emulated(EMULATED_CONFIGS[0])
    pl.configs += wgmma
    assert [q for q, _ in pl.plans(problem(device, 256, 256, 256))] == [pl.configs[0]]
    real = nvidia.NvidiaTensorCores()
    real.configs = wgmma
    assert bool(real.plans(problem(device, 256, 256, 256))) == nvidia.is_sm90(device)


def test_plan_splits_k_only_when_tiles_are_few(device):
    q = nvidia.CONFIGS[0]
    assert nvidia.plan(problem(device, 4096, 4096, 4096), q, 132) == 1
    assert nvidia.plan(problem(device, 128, 128, 8192), q, 132) > 1
    assert nvidia.plan(problem(device, 128, 128, 16), q, 132) == 1


# ---- emulation: the kernel's indexing on any device -------------------------------------------

@pytest.mark.parametrize("m,n,k,ka,kb", SHAPES)
def test_emulated_kernel(device, rng, emulated, m, n, k, ka, kb):
    check_product(device, rng, m, n, k, ka, kb)


@pytest.mark.parametrize("kw", EPILOGUES, ids=["alpha", "beta", "row-relu", "all"])
def test_emulated_epilogue(device, rng, emulated, kw):
    check_epilogue(device, rng, batch=(2, 3) if kw.get("row") else (), **kw)


@pytest.mark.parametrize("splits", [2, 3])
def test_emulated_split_k(device, rng, tf32, splits):
    with only_plugins(_emulated(EMULATED_CONFIGS[0], splits)):
        check_product(device, rng, 70, 36, 150, "n", "t")
        check_epilogue(device, rng, batch=(2,), beta=0.5, col=True, relu=True)


@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 80), n=st.integers(1, 80), k=st.integers(1, 80),
       ka=st.sampled_from("ntrosz"), kb=st.sampled_from("ntrosbz"),
       batch=st.sampled_from([(), (2,), (3, 1)]))
@example(m=21, n=36, k=5, ka="z", kb="z", batch=(2,))  # sums that cancel (see check_product)
def test_emulated_kernel_property(device, m, n, k, ka, kb, batch):
    rng = np.random.default_rng(m * 10007 + n * 101 + k)
    with allow_tf32(), only_plugins(_emulated(EMULATED_CONFIGS[0])):
        check_product(device, rng, m, n, k, ka, kb, batch)


# ---- NVIDIA: the tensor cores -----------------------------------------------------------------

@pytest.fixture(params=range(len(nvidia.CONFIGS)), ids=lambda i: f"config{i}")
def each_config(request, device, nvmma, monkeypatch):
    """The real plug-in forced to one tuned parameter set."""
    q = nvidia.CONFIGS[request.param]
    if nvidia.is_wgmma(q) and not nvidia.is_sm90(device):
        pytest.skip(f"wgmma needs compute capability 9.0; {device} does not have it")
    monkeypatch.setattr(nvmma, "configs", (q,))
    gm.engine.clear_plans()  # NOTE: else a shape seen with another set replays that set
    yield nvmma
    gm.engine.clear_plans()


@pytest.mark.parametrize("m,n,k,ka,kb", SHAPES + [(300, 260, 2000, "n", "t"),
                                                   (513, 257, 129, "t", "n")])
def test_tensor_cores(device, rng, each_config, m, n, k, ka, kb):
    check_product(device, rng, m, n, k, ka, kb)


@pytest.mark.parametrize("kw", EPILOGUES, ids=["alpha", "beta", "row-relu", "all"])
def test_tensor_cores_epilogue(device, rng, nvmma, kw):
    check_epilogue(device, rng, batch=(2, 3), **kw)


@pytest.mark.parametrize("ka,kb", [("n", "n"), ("t", "b"), ("r", "t")])
def test_tensor_cores_batched(device, rng, nvmma, ka, kb):
    check_product(device, rng, 45, 70, 33, ka, kb, batch=(3, 2))


def test_tensor_cores_split_k(device, rng, nvmma):
    assert nvmma.plans(problem(device, 128, 96, 8192))[0][1] > 1  # few tiles: K is split
    check_product(device, rng, 128, 96, 8192, "n", "n")
    check_product(device, rng, 100, 40, 3000, "t", "n", batch=(2,))


def test_tensor_cores_large(device, rng, nvmma):
    check_product(device, rng, 2048, 1536, 1024, "n", "n")
    check_product(device, rng, 1024, 2048, 3000, "t", "t")


def test_without_allow_tf32_the_portable_path_runs_unchanged(device, nvmma):
    with allow_tf32(False):
        got = []
        for fn in _products(device, np.random.default_rng(7)):
            out, ran = ran_kernel(fn)
            assert not ran
            got.append(out.numpy())
        with only_plugins():  # the engine as without any plug-in
            want = [fn().numpy() for fn in _products(device, np.random.default_rng(7))]
    for x, y in zip(got, want):
        np.testing.assert_array_equal(x, y)


# ---- convolution on tensor cores (algorithm "tf32_gemm") --------------------------------------

TF32_CONV_CASES = [((2, 5, 9, 8), (7, 5, 3, 3), {"padding": 1}),
                   ((2, 6, 5, 7), (4, 6, 1, 1), {}),
                   ((1, 4, 11, 10), (6, 2, 3, 3), {"stride": 2, "groups": 2})]


@pytest.fixture
def emulated_registered(device):
    """The emulated plug-in registered like any other (conv dispatch and GEMM both ask it)."""
    pl = _emulated(EMULATED_CONFIGS[0])
    cltensor.register_plugin(pl)
    try:
        yield pl
    finally:
        cltensor.unregister_plugin(pl.name)


def relu_reference(x, w, b, g, kw, out):
    """(out, gx, gw) in float64 of conv2d(..., relu=relu) with output gradient g, relu when
    `out` (the computed output, whose zeros mask the gradient as ReLU's do) is given."""
    from test_conv import ref_conv
    ref, gx, gw = ref_conv(x, w, b, grad=g.astype(np.float64), **kw)
    if out is None:
        return ref, gx, gw
    _, gx, gw = ref_conv(x, w, b, grad=np.where(out.numpy() > 0, g, 0.0), **kw)
    return np.maximum(ref, 0), gx, gw


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("case", TF32_CONV_CASES)
def test_tf32_convolution_emulated(device, rng, emulated_registered, case, relu):
    """With allow_tf32, tf32_gemm's products run the plug-in's kernel, forward (with the fused
    ReLU or not) and gradients within TF32's bound of float64; auto keeps the portable
    algorithms (measured faster)."""
    xshape, wshape, kw = case
    x, w = random_array(rng, xshape), random_array(rng, wshape)
    b, g = random_array(rng, wshape[:1]), None
    X, W, B = (cltensor.from_numpy(a, device=device).requires_grad_() for a in (x, w, b))
    with allow_tf32():
        rows = cltensor.conv_algorithms(X, W, B, **kw)
        assert all(r["eligible"] for r in rows if r["algo"] == "tf32_gemm")
        assert not any(r["chosen"] for r in rows if r["algo"] == "tf32_gemm")
        with cltensor.profile() as prof:
            out = cltensor.nn.functional.conv2d(X, W, B, algo="tf32_gemm", relu=relu, **kw)
            g = random_array(rng, out.shape)
            out.backward(cltensor.from_numpy(g, device=device))
        assert "nvmma_gemm" in {r["name"] for r in prof.records()}
    ref, gx, gw = relu_reference(x, w, b, g, kw, out if relu else None)
    for name, got, want in (("out", out, ref), ("gx", X.grad, gx), ("gw", W.grad, gw)):
        assert rel_error(got, want) <= REL_TOL, f"{case} {name}"


def test_tf32_convolution_needs_allow_tf32(device, emulated_registered):
    x = cltensor.zeros(1, 3, 6, 6, device=device)
    w = cltensor.zeros(4, 3, 3, 3, device=device)
    rows = cltensor.conv_algorithms(x, w, padding=1)
    chosen = {r["algo"] for r in rows if r["chosen"]}
    assert "tf32_gemm" not in chosen
    tf32_rows = [r for r in rows if r["algo"] == "tf32_gemm"]
    assert tf32_rows and not any(r["eligible"] for r in tf32_rows)
    with pytest.raises(ValueError, match="allow_tf32 is False"):
        cltensor.nn.functional.conv2d(x, w, padding=1, algo="tf32_gemm")


# ---- implicit-GEMM convolution on tensor cores (algorithm "tf32_implicit") --------------------

_MMA_BASE = dict(KWG=16, VWM=4, VWN=4, STRM=1, STRN=1, PADA=8, PADB=8, NBUF=2,
                 rate={"cx_conv": 1.0, "cx_wgrad": 1.0})
# Small sets for emulation: warps side by side along N, and stacked along M
EMULATED_CONV_CONFIGS = (dict(_MMA_BASE, MWG=32, NWG=32, MDIMC=8, NDIMC=8, MMA_WARPS_N=2),
                         dict(_MMA_BASE, MWG=32, NWG=32, MDIMC=8, NDIMC=8, MMA_WARPS_N=1))
TF32_IMPLICIT_CASES = TF32_CONV_CASES + [((2, 3, 12, 12), (33, 3, 5, 5), {"padding": 2}),
                                         ((3, 8, 7, 7), (20, 8, 3, 3), {"padding": (1, 0),
                                                                        "dilation": 2})]


def check_tf32_implicit(device, rng, case, relu=False):
    """conv2d with algo="tf32_implicit" (and the fused ReLU with relu), forward and gradients,
    against float64: within TF32's bound, and above fp32's error (the tensor-core multiply
    ran, not the fp32 one)."""
    xshape, wshape, kw = case
    x, w = random_array(rng, xshape), random_array(rng, wshape)
    b = random_array(rng, wshape[:1])
    X, W, B = (cltensor.from_numpy(a, device=device).requires_grad_() for a in (x, w, b))
    with allow_tf32(), cltensor.profile() as prof:
        out = cltensor.nn.functional.conv2d(X, W, B, algo="tf32_implicit", relu=relu, **kw)
        g = random_array(rng, out.shape)
        out.backward(cltensor.from_numpy(g, device=device))
    assert {"cx_conv", "cx_wgrad"} <= {r["name"] for r in prof.records()}
    ref, gx, gw = relu_reference(x, w, b, g, kw, out if relu else None)
    for name, got, want in (("out", out, ref), ("gx", X.grad, gx), ("gw", W.grad, gw)):
        err = rel_error(got, want)
        assert 1e-5 < err <= REL_TOL, f"{case} {name}: {err:.2e}"
    # the bias gradient: on tensor cores with the weight gradient, or an fp32 reduction
    gb = np.where(out.numpy() > 0, g, 0.0) if relu else g.astype(np.float64)
    err = rel_error(B.grad, gb.sum((0, 2, 3)))
    assert err <= REL_TOL, f"{case} gb: {err:.2e}"


@pytest.mark.parametrize("config", range(len(EMULATED_CONV_CONFIGS)))
@pytest.mark.parametrize("case", TF32_IMPLICIT_CASES)
def test_tf32_implicit_emulated(device, rng, emulated_registered, config, case):
    emulated_registered.conv_configs = (EMULATED_CONV_CONFIGS[config],)
    check_tf32_implicit(device, rng, case, relu=config == 0)


@pytest.mark.parametrize("config", range(len(nvidia.CONV_CONFIGS)))
@pytest.mark.parametrize("case", TF32_IMPLICIT_CASES)
def test_tf32_implicit_on_tensor_cores(device, rng, nvmma, monkeypatch, config, case):
    monkeypatch.setattr(nvmma, "conv_configs", (nvidia.CONV_CONFIGS[config],))
    check_tf32_implicit(device, rng, case, relu=config == 0)


def test_tf32_implicit_needs_allow_tf32(device, emulated_registered):
    x = cltensor.zeros(1, 3, 6, 6, device=device)
    w = cltensor.zeros(4, 3, 3, 3, device=device)
    with pytest.raises(ValueError, match="allow_tf32 is False"):
        cltensor.nn.functional.conv2d(x, w, padding=1, algo="tf32_implicit")


def test_tf32_implicit_preferred_where_the_rules_pick_implicit_gemm(device, monkeypatch,
                                                                     emulated_registered):
    """With allow_tf32, auto takes tf32_implicit in the passes where the portable rules take
    implicit GEMM (measured faster there on the H200), and keeps the others' choices."""
    from cltensor.conv import dispatch
    from cltensor.conv.params import ConvParams
    picks = {"forward": "implicit_gemm", "backward_data": "im2col",
             "backward_weight": "winograd_4x4"}
    monkeypatch.setattr(dispatch, "portable_rule", lambda p, device, pass_: picks[pass_])
    p = ConvParams(2, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, np.dtype(np.float32))
    with allow_tf32():
        assert [dispatch.rule(p, device, s) for s in dispatch.PASSES] == [
            "tf32_implicit", "im2col", "winograd_4x4"]
    assert [dispatch.rule(p, device, s) for s in dispatch.PASSES] == list(picks.values())


def test_tf32_workspace_is_estimated_for_the_device(device, monkeypatch, emulated_registered):
    """conv_algorithms' workspace for the plug-in's algorithms is the portable estimate for the
    device asked about (implicit GEMM's weight-gradient splits depend on its compute units)."""
    from cltensor.conv import dispatch, im2col, implicit
    from cltensor.conv.params import ConvParams
    asked = []
    for mod in (implicit, im2col):
        real = mod.workspace_bytes
        monkeypatch.setattr(mod, "workspace_bytes", lambda p, backward=False, device=None, real=real:
                            asked.append(device) or real(p, backward, device))
    p = ConvParams(2, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, np.dtype(np.float32))
    with allow_tf32():
        for name in ("tf32_implicit", "tf32_gemm"):
            assert dispatch.workspace_bytes(name, p, "backward_weight", device) > 0
    assert asked == [device, device]


def test_winograd_replays_follow_allow_tf32_and_the_plugins(device, rng):
    """Winograd's replayed launches (conv/winograd.py _plan_key) follow allow_tf32 and the set
    of plug-ins: its product runs on the plug-in's kernel once both let it, and on the portable
    GEMM again once either does not, each state replayed from its second call on."""
    from cltensor.conv import winograd
    from test_conv import ref_conv
    x, w = random_array(rng, (2, 8, 9, 9)), random_array(rng, (16, 8, 3, 3))
    X, W = (cltensor.from_numpy(a, device=device) for a in (x, w))
    want = ref_conv(x, w, padding=1)

    def runs_on_the_plugin():
        with cltensor.profile() as prof:
            out = cltensor.nn.functional.conv2d(X, W, padding=1, algo="winograd")
        names = {r["name"] for r in prof.records()}
        on_plugin = "nvmma_gemm" in names
        assert rel_error(out, want) <= (2e-3 if on_plugin else winograd.WINOGRAD_RTOL), names
        return on_plugin

    winograd.clear_plans()
    pl = _emulated(EMULATED_CONFIGS[0])
    builtin = _served(device) is not None  # the NVIDIA plug-in itself, on NVIDIA devices
    states = [(False, False), (True, False), (False, True), (True, True), (False, True),
              (True, False)]  # (allow_tf32, registered)
    try:
        for tf32, registered in states:
            if registered and pl.name not in {p.name for p in cltensor.plugins()}:
                cltensor.register_plugin(pl)
            elif not registered and pl.name in {p.name for p in cltensor.plugins()}:
                cltensor.unregister_plugin(pl.name)
            with allow_tf32(tf32):
                on = tf32 and (registered or builtin)
                assert [runs_on_the_plugin() for _ in range(2)] == [on] * 2
    finally:
        if pl.name in {p.name for p in cltensor.plugins()}:
            cltensor.unregister_plugin(pl.name)
