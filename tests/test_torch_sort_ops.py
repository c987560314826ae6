"""The opencl device's sorting, selection, scan and triangle kernels (cltensor/torch/sort_ops.py)
where the conformance table cannot reach: integer, bool and 16-bit dtypes, ties and NaN,
indices out of range, the two-result out= forms, and a classifier's top-5 evaluation with no
CPU fallback. Each result is compared with CPU torch."""
import re

import numpy as np
import pytest

from test_torch_device import ct, device_only, ocl, torch  # noqa: F401

pytestmark = pytest.mark.usefixtures("ocl", "device_only")
OCL = "opencl"
DTYPES = (torch.int64, torch.int32, torch.bool, torch.float16, torch.bfloat16)



def _on_device(args):
    return [a.to(OCL) if isinstance(a, torch.Tensor) else a for a in args]


def _flat(res):
    return list(res) if isinstance(res, (tuple, list)) else [res]


def _same(got, want, values_only=False):
    """Equal results (sorting, selecting and integer scans round nothing), else close ones (a
    float scan's rounding; NaN matching NaN); values_only skips the second result (indices)."""
    got, want = _flat(got), _flat(want)
    for g, w in zip(got[:1] if values_only else got, want[:1] if values_only else want,
                    strict=True):
        assert g.device.type == OCL
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        assert torch.equal(g.cpu(), w) or torch.allclose(g.cpu().double(), w.double(),
                                                         equal_nan=True), (g.cpu(), w)


def _check(fn, *args, values_only=False):
    """fn on CPU and on opencl copies of args: equal results, or the same error type."""
    try:
        want = fn(*args)
    except RuntimeError as e:
        # the message after the CPU kernel's quoted name ("topk_cpu" not implemented for ...)
        tail = str(e)[str(e).rfind('"') + 1:].strip()
        with pytest.raises(RuntimeError, match=re.escape(tail)):
            fn(*_on_device(args))
        return
    _same(fn(*_on_device(args)), want, values_only)


def _ties(dtype, shape=(4, 6), seed=0):
    """Values from a small range (many repeats), transposed so the data is not contiguous."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(-2, 3, shape[::-1], generator=gen).t()
    return x > 0 if dtype == torch.bool else x.to(dtype)


SELECTIONS = {
    "sort_stable": lambda x: torch.sort(x, dim=1, stable=True),
    "sort_stable_descending": lambda x: torch.sort(x, dim=0, descending=True, stable=True),
    "max_dim": lambda x: x.max(1),
    "min_dim_keepdim": lambda x: x.min(0, keepdim=True),
    "argmin": lambda x: (x.argmin(1), x.argmin()),
    "cumsum": lambda x: (x.cumsum(1), x.cumsum(0, dtype=torch.float64)),
    "cumprod": lambda x: x.cumprod(0),
    "flip_roll": lambda x: (x.flip(0, 1), x.roll(2, 1), x.roll(3)),
    "tril_triu": lambda x: (x.tril(1), x.triu(-1)),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", SELECTIONS)
def test_dtypes_and_ties(name, dtype):
    """Indices on ties as CPU torch's: stable sorts keep the order of equal values, max/min
    along a dim and argmin give the first occurrence. torch refuses argmin of bool: so here."""
    _check(SELECTIONS[name], _ties(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_unstable_sort_and_topk_values_on_ties(dtype):
    """torch leaves the order of tied values unspecified for the unstable sort and topk: values
    compared with CPU torch; the indices must point at those values, each position once."""
    x = _ties(dtype)
    _check(lambda t: t.sort(1, descending=True), x, values_only=True)
    _check(lambda t: t.topk(3, 1), x, values_only=True)
    _check(lambda t: t.topk(2, 0, largest=False), x, values_only=True)
    if dtype == torch.bool:
        return  # topk of bool raises (checked above, as on CPU)
    values, indices = x.to(OCL).topk(3, 1)
    assert torch.equal(x.gather(1, indices.cpu()), values.cpu())
    assert all(len(set(row)) == 3 for row in indices.cpu().tolist())


def test_topk_ties_give_first_positions():
    """cltensor's topk orders tied values by position (a choice torch leaves open)."""
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0, 3.0]])
    assert x.to(OCL).topk(2).indices.cpu().tolist() == [[1, 2]]


def test_nan_sorts_and_selects_as_torch():
    x = torch.tensor([[1.0, float("nan"), -2.0, float("nan")], [0.5, 0.25, -1.0, 3.0]])
    for fn in (lambda t: torch.sort(t, dim=1, stable=True),
               lambda t: torch.sort(t, dim=1, descending=True, stable=True),
               lambda t: t.max(1), lambda t: t.min(1), lambda t: t.argmin(1), lambda t: t.topk(2)):
        _check(fn, x)


@pytest.mark.parametrize("dtype", (torch.int64, torch.bool, torch.float16), ids=str)
def test_gather_scatter_dtypes(dtype):
    x, src = _ties(dtype, (4, 5)), _ties(dtype, (4, 5), seed=1)
    gen = torch.Generator().manual_seed(2)
    idx = torch.randint(0, 4, (3, 5), generator=gen)
    _check(lambda a, i: (a.gather(0, i), a.gather(1, i[:, :4])), x, idx)
    _check(lambda a, i, s: (a.scatter_add(0, i, s), a.scatter(0, i, 1, reduce="add")),
           x, idx, src)
    # torch takes int32 indices too
    _check(lambda a, i, s: (a.gather(0, i), a.scatter_add(0, i, s)), x, idx.int(), src)
    for reduce in ("sum", "prod", "mean", "amax", "amin"):  # mean of bool raises, as on CPU
        for include_self in (True, False):
            _check(lambda a, i, s: (a.scatter_reduce(0, i, s, reduce, include_self=include_self),
                                    a.clone().scatter_reduce_(1, i[:, :4], s, reduce,
                                                              include_self=include_self)),
                   x, idx, src)


def test_integer_mean_and_scan_dtypes():
    x = torch.tensor([[7, -3, 2], [1, 4, -6]])
    idx = torch.tensor([[0, 0, 1]])
    _check(lambda a, i: a.scatter_reduce(1, i.expand(2, 3), a, "mean", include_self=False), x, idx)
    _check(lambda a: (a.int().cumsum(1), (a > 0).cumsum(0), a.cumprod(1, dtype=torch.float32)), x)
    _check(lambda a: a.float().cumsum_(1, dtype=torch.float32), x)


OUT_OF_RANGE = {
    "gather": lambda x, i: x.gather(1, i),
    "scatter": lambda x, i: x.scatter(1, i, 1.0),
    "scatter_src": lambda x, i: x.scatter(1, i, x),
    "scatter_add": lambda x, i: x.scatter_add(1, i, x),
    "scatter_reduce": lambda x, i: x.scatter_reduce(1, i, x, "amax"),
}


@pytest.mark.parametrize("bad", (4, -1), ids=("past_end", "negative"))
@pytest.mark.parametrize("name", OUT_OF_RANGE)
def test_index_out_of_range_raises(name, bad):
    x, index = torch.randn(3, 4), torch.tensor([[0, bad], [1, 2], [3, 3]])
    with pytest.raises(RuntimeError, match="out of bounds"):
        OUT_OF_RANGE[name](x, index)
    with pytest.raises(RuntimeError, match="out of bounds"):
        OUT_OF_RANGE[name](x.to(OCL), index.to(OCL))


def test_in_place_scatter_out_of_range_leaves_self():
    x = torch.randn(3, 4).to(OCL)
    before = x.cpu()
    with pytest.raises(RuntimeError, match="out of bounds"):
        x.scatter_add_(0, torch.tensor([[0, 3]], device=OCL), torch.ones(1, 2, device=OCL))
    assert torch.equal(x.cpu(), before)


def _into(dtype):
    """An empty out= tensor of dtype on the operand's device."""
    return lambda x: torch.empty(0, dtype=dtype, device=x.device)


BAD_INPUT = {
    "flip_out_dtype": lambda x: torch.ops.aten.flip.out(x, [0], out=_into(torch.float64)(x)),
    "roll_out_dtype": lambda x: torch.ops.aten.roll.out(x, [1], [0], out=_into(torch.int32)(x)),
    "tril_out_dtype": lambda x: torch.tril(x, out=_into(torch.float64)(x)),
    "triu_out_dtype": lambda x: torch.triu(x, 1, out=_into(torch.int64)(x)),
    "gather_out_dtype": lambda x: torch.gather(x, 0, x.argmin(0, keepdim=True),
                                               out=_into(torch.float64)(x)),
    "scatter_reduce_out_dtype": lambda x: torch.scatter_reduce(
        x, 1, x.argmin(1, keepdim=True), x, "sum", out=_into(torch.float64)(x)),
    "argmin_out_dtype": lambda x: torch.argmin(x, 1, out=_into(torch.int32)(x)),
    "argmin_of_empty": lambda x: x[:0].argmin(),
    "max_of_empty_dim": lambda x: x[:0].max(0),
    "topk_k_too_large": lambda x: x.topk(5),
    "scatter_src_dtype": lambda x: x.scatter(1, x.argmin(1, keepdim=True), x.double()),
    "flip_repeated_dim": lambda x: x.flip(0, 0),
}


@pytest.mark.parametrize("name", BAD_INPUT)
def test_bad_input_raises_as_cpu(name):
    """The error CPU torch raises, of the same type (not the fallback's NotImplementedError)."""
    x = torch.randn(3, 4)
    with pytest.raises(Exception) as want:
        BAD_INPUT[name](x)
    with pytest.raises(Exception) as got:
        BAD_INPUT[name](x.to(OCL))
    assert type(got.value) is want.type, (got.value, want.value)


def test_in_place_scatters_write_through_views():
    """In place into a strided view with an offset, src a view of the same tensor (apart from
    the written elements: torch reads an overlapping src after writing)."""
    gen = torch.Generator().manual_seed(5)
    base, idx = torch.randn(5, 8, generator=gen), torch.randint(0, 4, (3, 4), generator=gen)
    for fn in (lambda b, i: b[1:, ::2].scatter_(1, i.argsort(dim=1, stable=True), b[:4, 1::2]),
               lambda b, i: b[1:, ::2].scatter_(0, i, -2.0),
               lambda b, i: b[1:, ::2].scatter_(0, i, b[:3, 1::2], reduce="multiply"),
               lambda b, i: b[1:, ::2].scatter_add_(0, i, b[:3, 1::2]),
               lambda b, i: b.t()[1:5].scatter_reduce_(0, i, b.t()[5:8, :4], "amin",
                                                      include_self=False)):
        want, got = base.clone(), base.to(OCL)
        _same(fn(got, idx.to(OCL)), fn(want, idx))
        _same(got, want)


TWO_OUTS = {
    "sort": lambda x, out: torch.sort(x, 1, descending=True, out=out),
    "sort_stable": lambda x, out: torch.sort(x, dim=0, stable=True, out=out),
    "topk": lambda x, out: torch.topk(x, 2, 1, out=out),
    "max": lambda x, out: torch.max(x, 1, keepdim=True, out=out),
    "min": lambda x, out: torch.min(x, 0, out=out),
}


@pytest.mark.parametrize("name", TWO_OUTS)
def test_two_result_out_forms(name):
    """The results land in the given tensors (resized from empty, or of the right shape), which
    are returned; a wrong dtype for the indices raises, as on CPU."""
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(3))
    want = TWO_OUTS[name](x, (torch.empty(0), torch.empty(0, dtype=torch.long)))
    for size in (0, tuple(want[0].shape)):
        out = (torch.empty(size, device=OCL), torch.empty(size, dtype=torch.long, device=OCL))
        got = TWO_OUTS[name](x.to(OCL), out)
        assert got[0] is out[0] and got[1] is out[1]
        _same(tuple(got), tuple(want))
    bad = (torch.empty(0), torch.empty(0))
    with pytest.raises(RuntimeError):
        TWO_OUTS[name](x, bad)
    with pytest.raises(RuntimeError):
        TWO_OUTS[name](x.to(OCL), tuple(t.to(OCL) for t in bad))


def _top5_accuracy(model, images, labels):
    """Evaluation as torchvision's reference scripts compute it: top-1 and top-5 hits."""
    with torch.no_grad():
        logits = model(images)
        _, pred = logits.topk(5, 1, True, True)
        hits = pred.t().eq(labels.view(1, -1).expand_as(pred.t()))
        top1 = hits[:1].reshape(-1).float().sum(0) * (100.0 / labels.numel())
        top5 = hits[:5].reshape(-1).float().sum(0) * (100.0 / labels.numel())
    return top1, top5, logits.argmax(1), logits.max(1).values


def test_classifier_top5_evaluation_runs_on_device():
    gen = torch.Generator().manual_seed(4)
    model = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10))
    for p in model.parameters():
        p.data = torch.randn(p.shape, generator=gen) * 0.5
    images, labels = torch.randn(32, 12, generator=gen), torch.randint(0, 10, (32,), generator=gen)
    want = _top5_accuracy(model.eval(), images, labels)
    got = _top5_accuracy(model.to(OCL).eval(), images.to(OCL), labels.to(OCL))
    for g, w in zip(got, want, strict=True):
        assert g.device.type == OCL
        np.testing.assert_allclose(g.cpu().numpy(), w.numpy(), rtol=1e-5, atol=1e-5)
    assert 0 < want[1].item() < 100  # the check can tell a wrong top-5 from a right one
