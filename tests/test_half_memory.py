"""float16 and bfloat16 storage keeps its scratch in 16 bits: the packed GEMM's panels of 16-bit
operands (gemm_packed and gemm_slabs, A's panel columns as vectors and lane by lane), im2col's
backward in slices of images with the weight gradient summed in float32, and gemm_1x1 over
those panels. Each path against float64 with torch's 16-bit tolerance, outputs and the pool
poisoned with NaN first; the tensors each makes are checked for float32 scratch, and its peak
memory against a bound computed from the shapes, which float32 scratch would exceed."""
import gc
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import cltensor as ct
from cltensor import backends
from cltensor.conv import im2col
from cltensor.ops import gemm as gm
from cltensor.ops.gemm import packed
from cltensor.tensor import ClTensor
from test_gemm_cpu import slab_entry, use_entry  # noqa: F401 (a fixture)

HALF = ["float16", "bfloat16"]
PANEL_PAD = 32  # no packed entry has a panel wider than this (MR or NR)
# torch.testing.assert_close's defaults for the 16-bit dtypes
TOLERANCE = {"float16": dict(rtol=1e-3, atol=1e-5), "bfloat16": dict(rtol=1.6e-2, atol=1e-5)}


def _pair(device, rng, shape, name):
    """The same random values (on the dtype's grid) as a cltensor and a float64 torch tensor."""
    x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(getattr(torch, name))
    return ct.from_numpy(x.float().numpy(), device=device).to(getattr(ct, name)), x.double()


def _check(mine, exact, name):
    """mine is `name`, fully written, and torch's tolerance from the float64 result rounded."""
    assert mine.dtype is getattr(ct, name)
    got = torch.from_numpy(mine.detach().float().numpy())
    assert not got.isnan().any(), "an element was not written"
    want = exact.detach().to(getattr(torch, name)).float()
    torch.testing.assert_close(got, want, **TOLERANCE[name])


def _poison_pool(device, *shapes):
    """Fill pooled buffers of these shapes (float32 and 16-bit sizes) with NaN and free them,
    so that scratch and outputs made next from the pool start as NaN."""
    held = [ct.full(s, float("nan"), dtype=d, device=device)
            for s in shapes for d in (ct.float32, ct.float16)]
    device.synchronize()
    del held


def _peak(device, fn):
    """(bytes fn allocates at its peak beyond what was live before, fn's result, the bytes of
    each float32 tensor it makes)."""
    made, empty_on = [], ClTensor.__dict__["empty_on"].__func__

    def recorded(cls, shape, dtype, *args, **kwargs):
        t = empty_on(cls, shape, dtype, *args, **kwargs)
        if t.dtype is ct.float32:
            made.append(t.numel() * 4)
        return t
    gc.collect()  # NOTE: earlier tests' tensors in reference cycles, freed at any moment
    device.synchronize()
    before = device.allocated
    device.reset_peak()
    ClTensor.empty_on = classmethod(recorded)
    try:
        out = fn()
    finally:
        ClTensor.empty_on = classmethod(empty_on)
    device.synchronize()
    return device.peak - before, out, made


def _panels(rows, k, batches=1):
    """Elements of one operand's packed panels, at most."""
    return -(-rows // PANEL_PAD) * PANEL_PAD * k * batches


GEMM_CASES = {  # name: (packed params replaced, slabs)
    "vector-columns": ({}, False),
    "lane-columns": ({"MR": 6, "NR": 16, "VW": 8}, False),
    "slabs": ({}, True),
}


@pytest.mark.parametrize("case", list(GEMM_CASES))
@pytest.mark.parametrize("name", HALF)
def test_packed_panels_16bit(device, rng, use_entry, name, case):  # noqa: F811
    """A and B both packed (every second column of each: neither, nor its transpose, read in
    place), into 16-bit panels, or for slabs into float panels of at most half the slabs at a
    time: the product against float64; no float32 tensor but those and the slabs' partial
    sums, and the call's peak within 16-bit panels of all of K (float panels of all of K
    take twice that)."""
    over, slabs = GEMM_CASES[case]
    base = slab_entry(device, "float32", **over) if slabs else gm.entry_for(device,
                                                                            np.dtype("float32"))
    entry = dict(base, packed=dict(base["packed"], **({} if slabs else over)))
    use_entry(entry)
    m, k, n = 40, 300, 72
    (a, ta), (b, tb) = _pair(device, rng, (m, 2 * k), name), _pair(device, rng, (k, 2 * n), name)
    a, ta, b, tb = a[:, ::2], ta[:, ::2], b[:, ::2], tb[:, ::2]
    _poison_pool(device, (m, n))
    out = ct.full((m, n), float("nan"), dtype=getattr(ct, name), device=device)
    used, _, made = _peak(device, lambda: gm.gemm(a, b, out=out))
    _check(out, ta @ tb, name)
    part = 4 * -(-m // PANEL_PAD) * PANEL_PAD * -(-n // PANEL_PAD) * PANEL_PAD if slabs else 0
    if slabs:
        run = entry["packed"]["KC"] * (k // entry["packed"]["KC"] // 2)
        assert sum(made) <= part + 4 * 2 * (_panels(m, run) + _panels(n, run)), made
    else:
        assert not made, made
    assert used <= 2 * (_panels(m, k) + _panels(n, k)) + part, used


@pytest.fixture
def cpu_paths(device):
    """The convolutions' scratch checked below is that of the CPU GEMM families (16-bit
    panels); GPUs run xgemm and the plug-ins, whose float32 copies are their own (docs/half.md,
    "Which kernels read 16-bit data in place")."""
    family = gm.entry_for(device, np.dtype("float32"))["family"]
    if family != "packed":
        pytest.skip(f"{device} runs GEMM family {family!r}, not the CPU families' 16-bit panels")


def _conv_step(device, rng, name, xshape, wshape, padding, groups=1, algo="auto"):
    """One conv2d forward and backward (input, weight and bias gradients) against float64;
    returns the bytes it allocated at its peak, its outputs' bytes and the bytes of each
    float32 tensor it made."""
    (x, tx), (w, tw) = _pair(device, rng, xshape, name), _pair(device, rng, wshape, name)
    (b, tb) = _pair(device, rng, (wshape[0],), name)
    (g, tg) = _pair(device, rng, (xshape[0], wshape[0]) + tuple(
        s + 2 * padding - ks + 1 for s, ks in zip(xshape[2:], wshape[2:])), name)
    for t in (x, w, b):
        t.requires_grad_(True)
    _poison_pool(device, xshape, wshape, g.shape)

    def step():
        y = ct.conv.conv2d(x, w, b, padding=padding, groups=groups, algo=algo)
        y.backward(g)
        return y
    used, y, made = _peak(device, step)
    dx, dw, db = (t.requires_grad_(True) for t in (tx, tw, tb))
    ty = TF.conv2d(dx, dw, db, padding=padding, groups=groups)
    ty.backward(tg)
    for mine, exact in ((y, ty), (x.grad, dx.grad), (w.grad, dw.grad), (b.grad, db.grad)):
        _check(mine, exact, name)
    outputs = sum(t.numel() * t.element_size() for t in (y, x.grad, w.grad, b.grad))
    return used, outputs, made


@pytest.mark.parametrize("groups", [1, 3])
@pytest.mark.parametrize("name", HALF)
def test_im2col_backward_in_slices(device, rng, monkeypatch, cpu_paths, name, groups):
    """A 3x3 convolution whose backward walks 5 images in slices of 2, 2 and 1, its input
    gradient's float32 columns made for half the channels (or groups) at a time: results
    against float64; float32 tensors only the weight gradient's sum and those columns, each
    within the 16-bit columns' bytes of a slice; the step's peak within its outputs and the
    forward's 16-bit column buffer (whole-chunk gout copies, columns and float panels did
    not fit)."""
    monkeypatch.setattr(im2col, "SLICE_MIN_BYTES", 1)
    n, c, co, h, w = 5, 6, 9, 20, 24
    used, outputs, made = _conv_step(device, rng, name, (n, c, h, w), (co, c // groups, 3, 3),
                                     1, groups, "im2col")
    kg = c // groups * 9
    assert max(made) <= c * 9 * 2 * h * w * 2 and sorted(made)[0] == co * kg * 4, made
    columns = c * 9 * n * -(-h * w // im2col.ROW_ALIGN) * im2col.ROW_ALIGN * 2
    assert used <= outputs + columns + 2 * _panels(co, kg), (used, outputs, columns)


@pytest.mark.parametrize("name", HALF)
def test_im2col_weight_gradient_summed_in_float32(device, rng, monkeypatch, name):
    """A weight gradient summed over 8 chunks of one image (a small workspace budget) is
    rounded once: within torch's tolerance of float64, where rounding after each chunk drifts
    further."""
    monkeypatch.setattr(backends, "conv_workspace_limit", 1)
    _conv_step(device, rng, name, (8, 3, 12, 12), (4, 3, 3, 3), 1)


@pytest.mark.parametrize("name", HALF)
def test_gemm_1x1_16bit(device, rng, cpu_paths, name):
    """A 1x1 convolution (its products over 16-bit panels; bfloat16's weight gradient summed
    over the images in one kernel, as float16's, not over copies): results against float64,
    no float32 tensor made, and the step's peak within its outputs and 16-bit panels of gout
    and x for every image."""
    n, c, co, h, w = 4, 16, 24, 16, 16
    used, outputs, made = _conv_step(device, rng, name, (n, c, h, w), (co, c, 1, 1), 0,
                                     algo="gemm_1x1")
    assert not made, made
    assert used <= outputs + 2 * (_panels(co, h * w, n) + _panels(c, h * w, n)), (used, outputs)


def test_float16_a_read_in_place(device, rng, use_entry):  # noqa: F811
    """float16 A with rows contiguous along K, from K = FLOAT16_A_IN_PLACE_MIN_K on, is read
    where it is, 16 columns converted at a time (K not a multiple of 16, M not of the
    tile): the product against float64, and the call's peak within B's 16-bit panels."""
    use_entry(gm.entry_for(device, np.dtype("float32")))
    m, k, n = 61, packed.FLOAT16_A_IN_PLACE_MIN_K + 13, 8
    (a, ta), (b, tb) = _pair(device, rng, (m, k), "float16"), _pair(device, rng, (k, n), "float16")
    _poison_pool(device, (m, n))
    out = ct.full((m, n), float("nan"), dtype=ct.float16, device=device)
    used, _, made = _peak(device, lambda: gm.gemm(a, b, out=out))
    _check(out, ta @ tb, "float16")
    assert not made and used <= 2 * _panels(n, k), (used, made)
