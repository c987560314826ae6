"""F.grid_sample (aten's grid_sampler_2d and its backward) and nn.EmbeddingBag (_embedding_bag,
its forward-only form and backwards) on the "opencl" device (cltensor/torch/sampling_ops.py),
against CPU torch, with nothing run through the CPU fallback."""
import itertools

import pytest

# torch (skipping when it is missing or too old) and the fixtures making `device` opencl:0
from test_torch_device import ct, device_only, ocl, torch  # noqa: F401
from torch.nn import functional as F  # noqa: E402

pytestmark = pytest.mark.usefixtures("ocl", "device_only")
OCL = "opencl"
_aten = torch.ops.aten
TOL = {torch.float64: 1e-10, torch.float32: 2e-5}
MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")


@pytest.fixture(autouse=True)
def no_fallback(monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")


def _close(got, want, dtype, label=""):
    assert got.device.type == OCL and got.dtype == want.dtype and got.shape == want.shape, label
    torch.testing.assert_close(got.cpu(), want, rtol=TOL[dtype], atol=TOL[dtype], msg=label)


def _special(size, align):
    """Normalized coordinates exactly on pixel centres, on the edges (+-1) and between."""
    centres = [-1 + 2 * k / (size - 1) if align else -1 + (2 * k + 1) / size
               for k in range(size)] if size > 1 else [0.0]
    return [-1.0, 1.0, *centres, 0.5 * (centres[0] + centres[-1])]


def _grid(n, ho, wo, h, w, align, dtype, seed):
    """A random grid reaching outside [-1, 1] (border and reflection fold it back), with its
    first rows set to _special() coordinates; stored (N, 2, Ho, Wo) and permuted, as a
    network's output is (a non-contiguous grid)."""
    gen = torch.Generator().manual_seed(seed)
    g = torch.rand(n, ho, wo, 2, generator=gen, dtype=torch.float64) * 5.0 - 2.5
    xs, ys = _special(w, align), _special(h, align)
    for i, (x, y) in enumerate(itertools.product(xs, ys)):
        if i < ho * wo:
            g[0, i // wo, i % wo] = torch.tensor([x, y])
    return g.permute(0, 3, 1, 2).contiguous().permute(0, 2, 3, 1).to(dtype)


def _run(x, grid, mode, padding, align, needs=(True, True), go=None):
    """(output, input's gradient, grid's gradient) of F.grid_sample on x's device."""
    x, grid = x.detach().requires_grad_(needs[0]), grid.detach().requires_grad_(needs[1])
    out = F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=align)
    out.backward(go)
    return out.detach(), x.grad, grid.grad


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("mode,padding", list(itertools.product(MODES, PADDINGS)))
def test_grid_sample(mode, padding, dtype):
    """Every mode x padding x align_corners, the output and both gradients against CPU torch,
    on a channels-last input and a permuted grid."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 4, 5, generator=gen, dtype=dtype).to(memory_format=torch.channels_last)
    for align in (False, True):
        grid = _grid(2, 6, 7, 4, 5, align, dtype, seed=int(align))
        go = torch.randn(2, 3, 6, 7, generator=gen, dtype=dtype)
        want = _run(x, grid, mode, padding, align, go=go)
        got = _run(x.to(OCL), grid.to(OCL), mode, padding, align, go=go.to(OCL))
        for name, g, w in zip(("output", "grad_input", "grad_grid"), got, want):
            _close(g, w, dtype, f"{name} align_corners={align}")


@pytest.mark.parametrize("mode", MODES)
def test_grid_sample_one_gradient(mode):
    """Only the input or only the grid requiring grad (output_mask), and 1-pixel sides (the
    reflection of align_corners=True has no span there)."""
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(1, 2, 1, 3, generator=gen, dtype=torch.float64)
    grid = _grid(1, 3, 4, 1, 3, True, torch.float64, seed=3)
    go = torch.randn(1, 2, 3, 4, generator=gen, dtype=torch.float64)
    for needs, padding, align in itertools.product(((True, False), (False, True)), PADDINGS,
                                                   (False, True)):
        want = _run(x, grid, mode, padding, align, needs, go)
        got = _run(x.to(OCL), grid.to(OCL), mode, padding, align, needs, go.to(OCL))
        for g, w in zip(got, want):
            assert (g is None) == (w is None), (needs, padding, align)
            if w is not None:
                _close(g, w, torch.float64, f"{needs} {padding} {align}")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_grid_sample_16bit(dtype):
    """16-bit inputs computed in float32: CPU torch's float32 result of the same values,
    rounded to the dtype."""
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(1, 2, 5, 4, generator=gen).to(dtype)
    grid = _grid(1, 3, 5, 5, 4, False, torch.float32, seed=5).to(dtype)
    go = torch.randn(1, 2, 3, 5, generator=gen).to(dtype)
    tol = 1e-2 if dtype == torch.float16 else 5e-2
    for mode in MODES:
        want = _run(x.float(), grid.float(), mode, "reflection", False, go=go.float())
        got = _run(x.to(OCL), grid.to(OCL), mode, "reflection", False, go=go.to(OCL))
        for g, w in zip(got, want):
            assert g.dtype == dtype
            torch.testing.assert_close(g.cpu().float(), w.to(dtype).float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_non_finite_grid(align):
    """NaN and infinite grid values give CPU torch's outputs: NaN where a NaN weight meets the
    taps, and border and reflection padding clip NaN to the first pixel."""
    x = torch.randn(1, 2, 4, 5, generator=torch.Generator().manual_seed(13))
    nan, inf = float("nan"), float("inf")
    grid = torch.tensor([[[[nan, 0.2], [0.3, inf], [-inf, 0.1], [nan, nan]]]])
    for mode, padding in itertools.product(MODES, PADDINGS):
        want = F.grid_sample(x, grid, mode, padding, align_corners=align)
        got = F.grid_sample(x.to(OCL), grid.to(OCL), mode, padding, align_corners=align)
        torch.testing.assert_close(got.cpu(), want, equal_nan=True, msg=f"{mode} {padding}")


def test_grid_sampler_out_and_empty():
    """The out= form writes every element of a NaN-poisoned out; an empty grid gives an empty
    output."""
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(2, 3, 4, 4, generator=gen)
    grid = _grid(2, 3, 2, 4, 4, False, torch.float32, seed=7)
    want = _aten.grid_sampler_2d(x, grid, 2, 1, False)
    out = torch.full(want.shape, float("nan"), device=OCL)
    _aten.grid_sampler_2d.out(x.to(OCL), grid.to(OCL), 2, 1, False, out=out)
    _close(out, want, torch.float32)
    empty = F.grid_sample(x.to(OCL), grid[:, :0].to(OCL), align_corners=False)
    assert empty.shape == (2, 3, 0, 2) and empty.device.type == OCL


@pytest.mark.parametrize("mode", MODES)
def test_grid_sample_empty_backward(mode):
    """No output (an empty grid, no channels, no batch): zero gradients of the inputs' shapes."""
    for xs, gs in (((2, 3, 4, 4), (2, 0, 3, 2)), ((2, 0, 4, 4), (2, 2, 3, 2)),
                   ((0, 3, 4, 4), (0, 2, 3, 2))):
        x, grid = torch.randn(xs, dtype=torch.float64), torch.rand(gs, dtype=torch.float64)
        go = torch.zeros(*xs[:2], *gs[1:3], dtype=torch.float64)
        want = _run(x, grid, mode, "zeros", False, go=go)
        got = _run(x.to(OCL), grid.to(OCL), mode, "zeros", False, go=go.to(OCL))
        for g, w in zip(got, want):
            _close(g, w, torch.float64, f"{xs} {gs}")


def test_grid_sampler_backward_checks_grad_output():
    """A grad_output of the wrong shape raises (torch's newer check) instead of misreading."""
    x, grid = torch.randn(1, 2, 4, 4, device=OCL), torch.zeros(1, 2, 2, 2, device=OCL)
    with pytest.raises(ValueError, match="expected grad_output to have sizes"):
        _aten.grid_sampler_2d_backward(torch.zeros(1, 2, 3, 3, device=OCL), x, grid, 0, 0,
                                       False, [True, True])


F64 = {"dtype": torch.float64}


@pytest.mark.parametrize("args", [
    ((1, 2, 3, 4), (1, 2, 2, 3), {}, {}),  # the grid's last dim is not 2
    ((1, 2, 3, 4), (2, 2, 2, 2), {}, {}),  # batch sizes differ
    ((1, 2, 0, 4), (1, 2, 2, 2), {}, {}),  # an empty spatial dimension
    ((1, 2, 3, 4), (1, 2, 2, 2), {}, F64),  # dtypes differ
    ((1, 2, 3, 4), (1, 2, 2, 2), {"mode": "linear"}, {}),
    ((1, 2, 3, 4), (1, 2, 2, 2), {"padding_mode": "wrap"}, {}),
], ids=["grid-shape", "batch", "empty", "dtypes", "mode", "padding"])
def test_grid_sample_errors(args):
    """torch's errors for bad input (type and message), raised on the device as on the CPU."""
    xs, gs, kwargs, grid_dtype = args
    with pytest.raises((RuntimeError, ValueError)) as cpu:
        F.grid_sample(torch.zeros(xs), torch.zeros(gs, **grid_dtype), align_corners=False,
                      **kwargs)
    with pytest.raises(type(cpu.value)) as dev:
        F.grid_sample(torch.zeros(xs, device=OCL), torch.zeros(gs, device=OCL, **grid_dtype),
                      align_corners=False, **kwargs)
    assert str(cpu.value).split("\n")[0] in str(dev.value)


# ---- EmbeddingBag ------------------------------------------------------------------------------
INDICES = torch.tensor([1, 2, 4, 4, 0, 3, 5, 4])
OFFSETS = torch.tensor([0, 2, 2, 5])  # bag 1 is empty


@pytest.mark.parametrize("mode", [0, 1, 2], ids=["sum", "mean", "max"])
def test_embedding_bag_outputs(mode):
    """_embedding_bag's and _embedding_bag_forward_only's four outputs (output, offset2bag,
    bag_size, max_indices) as torch's CPU kernel gives them, for padding_idx,
    include_last_offset, per_sample_weights, int32 indices and both float dtypes."""
    gen = torch.Generator().manual_seed(8)
    for dtype, pad, last, psw, forward_only, int32 in itertools.product(
            (torch.float64, torch.float32), (-1, 4), (False, True), (False, True),
            (False, True), (False, True)):
        if psw and mode:
            continue
        w = torch.randn(6, 3, generator=gen, dtype=dtype)
        w[0] = w[4]  # bag 2 holds rows 4, 4, 0: max's ties go to the first (row 4)
        offsets = torch.cat([OFFSETS, torch.tensor([8])]) if last else OFFSETS
        idx = INDICES.int() if int32 else INDICES
        p = torch.rand(8, generator=gen, dtype=dtype) if psw else None
        op = _aten._embedding_bag_forward_only if forward_only else _aten._embedding_bag
        want = op(w, idx, offsets, False, mode, False, p, last, pad)
        got = op(w.to(OCL), idx.to(OCL), offsets.to(OCL), False, mode, False,
                 None if p is None else p.to(OCL), last, pad)
        label = f"{dtype} padding_idx={pad} last={last} psw={psw} {op}"
        for g, wt in zip(got, want):
            _close(g, wt, dtype, label)
    # include_last_offset with a last offset short of the input (the CPU keeps the indices
    # past it in the last bag); one long bag among empty ones (max's scattered form)
    w = torch.randn(6, 3, generator=gen, dtype=torch.float64)
    w[0] = w[4]
    for offsets, last, pad in (([0, 2, 5], True, -1), ([0, 1, 1, 1, 1], False, -1),
                               ([0, 1, 1, 1, 1], False, 4)):
        offsets = torch.tensor(offsets)
        want = _aten._embedding_bag(w, INDICES, offsets, False, mode, False, None, last, pad)
        got = _aten._embedding_bag(w.to(OCL), INDICES.to(OCL), offsets.to(OCL), False, mode,
                                   False, None, last, pad)
        for g, wt in zip(got, want):
            _close(g, wt, torch.float64, f"offsets {offsets.tolist()} padding_idx={pad}")


def _bag_module(mode, pad, freq, dtype, weight, device):
    e = torch.nn.EmbeddingBag(6, 3, mode=mode, padding_idx=pad, scale_grad_by_freq=freq,
                              dtype=dtype).to(device)
    with torch.no_grad():
        e.weight.copy_(weight)
    return e


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_module(mode):
    """nn.EmbeddingBag forward and backward (weight and per_sample_weights gradients) against
    CPU torch: offsets with an empty bag or a 2-d input, padding_idx, per_sample_weights;
    under no_grad (the forward-only op) too."""
    gen = torch.Generator().manual_seed(9)
    for dtype, pad, psw, two_d in itertools.product((torch.float64, torch.float32), (None, 4),
                                                    (False, True), (False, True)):
        if psw and mode != "sum":
            continue
        w = torch.randn(6, 3, generator=gen, dtype=dtype)
        want_e, got_e = (_bag_module(mode, pad, False, dtype, w, d) for d in ("cpu", OCL))
        idx, offsets = (INDICES.view(2, 4), None) if two_d else (INDICES, OFFSETS)
        p = torch.rand(idx.shape, generator=gen, dtype=dtype) if psw else None
        want_p = p.clone().requires_grad_() if psw else None
        got_p = p.to(OCL).requires_grad_() if psw else None
        want = want_e(idx, offsets, per_sample_weights=want_p)
        got = got_e(idx.to(OCL), None if offsets is None else offsets.to(OCL),
                    per_sample_weights=got_p)
        go = torch.randn(want.shape, generator=gen, dtype=dtype)
        want.backward(go)
        got.backward(go.to(OCL))
        label = f"{dtype} padding_idx={pad} psw={psw} 2-d={two_d}"
        _close(got.detach(), want.detach(), dtype, label)
        _close(got_e.weight.grad, want_e.weight.grad, dtype, label)
        if psw:
            _close(got_p.grad, want_p.grad, dtype, label)
        with torch.no_grad():
            _close(got_e(idx.to(OCL), None if offsets is None else offsets.to(OCL)),
                   want_e(idx, offsets), dtype, label)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_embedding_bag_16bit(dtype):
    """16-bit weights, computed in float32: CPU torch's values within the dtype's rounding."""
    gen = torch.Generator().manual_seed(12)
    tol = 2e-3 if dtype == torch.float16 else 2e-2
    for mode in ("sum", "mean", "max"):
        w = torch.randn(6, 3, generator=gen).to(dtype)
        want_e, got_e = (_bag_module(mode, None, False, dtype, w, d) for d in ("cpu", OCL))
        want, got = want_e(INDICES, OFFSETS), got_e(INDICES.to(OCL), OFFSETS.to(OCL))
        go = torch.randn(want.shape, generator=gen).to(dtype)
        want.backward(go)
        got.backward(go.to(OCL))
        for g, wt in ((got.detach(), want.detach()), (got_e.weight.grad, want_e.weight.grad)):
            assert g.dtype == dtype, mode
            torch.testing.assert_close(g.cpu().float(), wt.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_scale_grad_by_freq(mode):
    """Each weight row's gradient divided by its index's count in the batch, against float64
    sums computed here: torch's CPU kernel divides a row that sorts after a repeated index by
    that index's count (pytorch issue #190063), so CPU torch is no reference."""
    gen = torch.Generator().manual_seed(10)
    w = torch.randn(6, 3, generator=gen, dtype=torch.float64)
    e = _bag_module(mode, 3, True, torch.float64, w, OCL)
    go = torch.randn(4, 3, generator=gen, dtype=torch.float64)
    e(INDICES.to(OCL), OFFSETS.to(OCL)).backward(go.to(OCL))
    want = torch.zeros(6, 3, dtype=torch.float64)
    ends = OFFSETS.tolist()[1:] + [len(INDICES)]
    counts = torch.bincount(INDICES, minlength=6).double()
    for b, (start, end) in enumerate(zip(OFFSETS.tolist(), ends)):
        real = [int(i) for i in INDICES[start:end] if i != 3]
        for i in real:
            want[i] += go[b] / (len(real) if mode == "mean" else 1) / counts[i]
    _close(e.weight.grad, want, torch.float64)


def test_embedding_bag_dense_backward():
    """_embedding_bag_dense_backward (called directly: the backward above does its work
    itself) from CPU torch's forward outputs, and empty input."""
    gen = torch.Generator().manual_seed(11)
    w = torch.randn(6, 3, generator=gen, dtype=torch.float64)
    for mode, pad in itertools.product((0, 1, 2), (-1, 4)):
        _, o2b, sizes, maxi = _aten._embedding_bag(w, INDICES, OFFSETS, False, mode, False,
                                                   None, False, pad)
        o2b = torch.searchsorted(OFFSETS, torch.arange(8), right=True) - 1
        g = torch.randn(4, 3, generator=gen, dtype=torch.float64)
        args = (INDICES, o2b, sizes, maxi, 6, False, mode, None, pad)
        want = _aten._embedding_bag_dense_backward(g, *args)
        got = _aten._embedding_bag_dense_backward(g.to(OCL), *(
            a.to(OCL) if isinstance(a, torch.Tensor) else a for a in args))
        _close(got, want, torch.float64, f"mode={mode} padding_idx={pad}")
    empty = F.embedding_bag(torch.zeros(0, dtype=torch.long, device=OCL), w.to(OCL),
                            torch.tensor([0, 0], device=OCL), mode="max")
    _close(empty, torch.zeros(2, 3, dtype=torch.float64), torch.float64)


@pytest.mark.parametrize("case", [
    (torch.tensor([1, 6, -2, 9]), torch.tensor([0]), {}),  # index past the table
    (torch.tensor([1, -1]), torch.tensor([0]), {"mode": "mean"}),  # negative index
    (INDICES, torch.tensor([1, 2]), {}),  # offsets[0] != 0
    (INDICES, torch.tensor([0, 9]), {}),  # offsets past the input
    (INDICES, OFFSETS, {"mode": "mean", "per_sample_weights": torch.rand(8)}),
    (INDICES.float(), OFFSETS, {}),
], ids=["past", "negative", "first-offset", "last-offset", "psw-mean", "float-indices"])
def test_embedding_bag_errors(case):
    """torch's errors for bad input (type and the message's start), raised on the device."""
    idx, offsets, kwargs = case
    w = torch.randn(6, 3)
    with pytest.raises((RuntimeError, ValueError, IndexError)) as cpu:
        F.embedding_bag(idx, w, offsets, **kwargs)
    dev_kwargs = {k: v.to(OCL) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    with pytest.raises(type(cpu.value)) as dev:
        F.embedding_bag(idx.to(OCL), w.to(OCL), offsets.to(OCL), **dev_kwargs)
    head = str(cpu.value).split("\n")[0][:30]
    assert head in str(dev.value), (str(cpu.value), str(dev.value))
