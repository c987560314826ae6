"""The opencl device's running extremes, searches, counts, order statistics and uniques
(cltensor/torch/search_ops.py): integer, bool and 16-bit dtypes, ties and NaN, unsorted and
out-of-range inputs, the multi-result out= forms and the backwards, with no CPU fallback. Each
result is compared with CPU torch."""
import pytest

from test_torch_device import ct, device_only, ocl, torch  # noqa: F401
from test_torch_sort_ops import _check, _same, _ties  # noqa: F401

pytestmark = pytest.mark.usefixtures("ocl", "device_only")
OCL = "opencl"
DTYPES = (torch.int64, torch.int32, torch.bool, torch.float16, torch.bfloat16, torch.float32)
NAN = float("nan")


def _seq(x):
    """A sorted 1-d sequence with repeats of x's dtype and device, and a 2-d one of 2 rows."""
    s = torch.tensor([-2, -1, -1, 0, 1, 1, 2, 2]).to(x.dtype).to(x.device)
    return s, torch.stack([s, (s * 2).to(x.dtype)])


CALLS = {
    "cummax_cummin": lambda x: (*torch.cummax(x, 0), *torch.cummin(x, 1), *x.t().cummax(-1)),
    "logcumsumexp": lambda x: (torch.logcumsumexp(x, 1), x.logcumsumexp(0)),
    "median_mode": lambda x: (x.median(), x.t().median(), *x.mode(1), *x.mode(0, True)),
    "nanmedian": lambda x: (x.nanmedian(), *x.nanmedian(1)),
    "kthvalue_values": lambda x: (x.kthvalue(2, 1).values, x.kthvalue(4, 0, True).values),
    "median_values": lambda x: (x.median(1).values, x.nanmedian(0, True).values),
    "unique": lambda x: (*torch.unique(x, return_inverse=True, return_counts=True),
                         torch.unique(x, sorted=False), *torch.unique(x, dim=1, return_counts=True),
                         *torch.unique(x.t(), dim=0, return_inverse=True)),
    "unique_consecutive": lambda x: (
        *torch.unique_consecutive(x, return_inverse=True, return_counts=True),
        *torch.unique_consecutive(x, return_inverse=True, dim=0),
        *torch.unique_consecutive(x, return_counts=True, dim=1)),
    "count_nonzero": lambda x: (torch.count_nonzero(x), torch.count_nonzero(x, 1),
                                torch.count_nonzero(x, (0, 1)), torch.count_nonzero(x, [])),
    "searchsorted": lambda x: tuple(torch.searchsorted(s, v, **kw) for s, v in (
        (_seq(x)[0], x), (_seq(x)[1], x[:2])) for kw in (
            {}, {"right": True}, {"side": "right", "out_int32": True})),
    "searchsorted_scalar": lambda x: (torch.searchsorted(_seq(x)[0], 1),
                                      torch.searchsorted(_seq(x)[0], 0.5, right=True)),
    "bucketize": lambda x: (torch.bucketize(x, _seq(x)[0]),
                            torch.bucketize(x, _seq(x)[0], right=True, out_int32=True),
                            torch.bucketize(1, _seq(x)[0])),
    "histc": lambda x: (torch.histc(x, 5), torch.histc(x, 4, -1.5, 1.5)),
    "bincount": lambda x: (torch.bincount(x.flatten() + 2), torch.bincount(x[0] + 2, minlength=9),
                           torch.bincount(x[0] + 2, x[1].double())),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", CALLS)
def test_dtypes_and_ties(name, dtype):
    """Each dtype as CPU torch: the same results, or the same error where its CPU kernel takes
    no such dtype (bool for searches and medians, integers for histc and logcumsumexp)."""
    _check(CALLS[name], _ties(dtype))


@pytest.mark.parametrize("dtype", (torch.int64, torch.float32), ids=str)
def test_order_statistics_on_ties_point_at_their_values(dtype):
    """torch leaves the index of a tied k-th value or median open (its CPU kernel selects in
    place): the index must hold the value, which must be torch's."""
    x = _ties(dtype, (5, 7))
    for fn in (lambda t: t.kthvalue(3, 1), lambda t: t.median(0), lambda t: t.nanmedian(1),
               lambda t: t.kthvalue(1, 0, keepdim=True)):
        want = fn(x)
        got = fn(x.to(OCL))
        _same(got.values, want.values)
        d = 1 if got.values.dim() < x.dim() and got.values.shape[0] == x.shape[0] else 0
        idx = got.indices.cpu() if got.indices.dim() == x.dim() else got.indices.cpu().unsqueeze(d)
        assert torch.equal(x.gather(d, idx).reshape(got.values.shape), got.values.cpu())


def test_nan_as_torch():
    """NaN: the running maximum and minimum from its first one on (at the last NaN so far), the
    median of a row with NaN, nanmedian without them, unique's NaN each distinct, NaN values
    searched past every number."""
    x = torch.tensor([[1.0, NAN, 3.0, NAN, 0.5], [2.0, -1.0, 2.0, 0.0, 7.0], [NAN] * 5])
    _check(lambda t: (*t.cummax(1), *t.cummin(1), t.logcumsumexp(1)), x)
    _check(lambda t: (*t.median(1), t.nanmedian(1).values, t.median(), t.nanmedian(),
                      *t.mode(1)), x)
    # nanmedian's index in a row of NaN alone is torch's selection's accident: a position
    _check(lambda t: t.nanmedian(1).indices[:2], x)
    _check(lambda t: (*torch.unique(t, return_inverse=True, return_counts=True),
                      *torch.unique_consecutive(t, return_counts=True)), x)
    _check(lambda t: (t.kthvalue(2, 1).values, t.kthvalue(4, 1).values, torch.histc(t, 3, 0, 4)), x)
    seq = torch.tensor([-1.0, 0.0, 2.0, NAN])
    _check(lambda s, t: (torch.searchsorted(s, t), torch.searchsorted(s, t, right=True)), seq, x)


def test_unsorted_sequences_and_sorters_search_as_torch():
    """torch's binary search on unsorted data gives a defined (if meaningless) answer: the
    same midpoints here. sorter reads the sequence in its order, per row."""
    gen = torch.Generator().manual_seed(1)
    seq, vals = torch.randn(3, 9, generator=gen), torch.randn(3, 5, generator=gen)
    _check(lambda s, v: (torch.searchsorted(s, v), torch.searchsorted(s[0], v, right=True),
                         torch.searchsorted(s, v, sorter=s.argsort(1)),
                         torch.searchsorted(s[1], v, side="right", sorter=s[1].argsort())),
           seq, vals)
    _check(lambda s, v: torch.bucketize(v, s[0]), seq, vals)
    # an int sequence searched for floats compares in the promoted dtype
    _check(lambda s, v: torch.searchsorted((s * 4).long().sort().values, v * 4), seq, vals)


def _outs(*dtypes, device="cpu"):
    return tuple(torch.empty(0, dtype=d, device=device) for d in dtypes)


OUTS = {
    "cummax": (lambda x, out: torch.cummax(x, 1, out=out), (torch.float32, torch.long)),
    "cummin": (lambda x, out: torch.cummin(x, 0, out=out), (torch.float32, torch.long)),
    "kthvalue": (lambda x, out: torch.kthvalue(x, 2, 1, True, out=out), (torch.float32, torch.long)),
    "median": (lambda x, out: torch.median(x, 0, out=out), (torch.float32, torch.long)),
    "nanmedian": (lambda x, out: torch.nanmedian(x, 1, out=out), (torch.float32, torch.long)),
    "mode": (lambda x, out: torch.mode((x > 0).long(), 1, out=out), (torch.long, torch.long)),
    "_unique2": (lambda x, out: torch.ops.aten._unique2.out(
        (x > 0).long(), True, True, True, out0=out[0], out1=out[1], out2=out[2]),
        (torch.long, torch.long, torch.long)),
    "unique_consecutive": (lambda x, out: torch.ops.aten.unique_consecutive.out(
        (x > 0).long(), True, True, 1, out0=out[0], out1=out[1], out2=out[2]),
        (torch.long, torch.long, torch.long)),
}


@pytest.mark.parametrize("name", OUTS)
def test_multi_result_out_forms(name):
    """The results land in the tensors given (resized from empty), which are returned; a
    wrong index dtype raises, as on CPU."""
    fn, dtypes = OUTS[name]
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(3))
    want = fn(x, _outs(*dtypes))
    out = _outs(*dtypes, device=OCL)
    got = fn(x.to(OCL), out)
    assert all(g is o for g, o in zip(got, out))
    _same(tuple(got), tuple(want))
    if name not in ("_unique2", "unique_consecutive"):
        bad = (dtypes[0], torch.int32)
        with pytest.raises(RuntimeError):
            fn(x, _outs(*bad))
        with pytest.raises(RuntimeError):
            fn(x.to(OCL), _outs(*bad, device=OCL))


_LONG = torch.int64
SINGLE_OUTS = {
    "logcumsumexp": (lambda x, o: torch.logcumsumexp(x, 1, out=o), torch.float32),
    "searchsorted": (lambda x, o: torch.searchsorted(x[0].sort().values, x, out=o), _LONG),
    "searchsorted_scalar": (lambda x, o: torch.searchsorted(x[0].sort().values, 0.1, out=o),
                            _LONG),
    "bucketize": (lambda x, o: torch.bucketize(x, x[0].sort().values, right=True, out=o), _LONG),
    "bucketize_scalar": (lambda x, o: torch.ops.aten.bucketize.Scalar_out(
        0.2, x[0].sort().values, out=o), _LONG),
    "histc": (lambda x, o: torch.histc(x, 6, out=o), torch.float32),
    "count_nonzero": (lambda x, o: torch.ops.aten.count_nonzero.dim_IntList_out(x, [0], out=o),
                      _LONG),
}


@pytest.mark.parametrize("name", SINGLE_OUTS)
def test_out_forms(name):
    """out= of the result's dtype is filled; the wrong dtype raises as on CPU."""
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(4))
    fn, dtype = SINGLE_OUTS[name]
    want = fn(x, torch.empty(0, dtype=dtype))
    out = torch.empty(0, dtype=dtype, device=OCL)
    assert fn(x.to(OCL), out) is out
    _same(out, want)
    other = torch.float64 if dtype != torch.float64 else torch.float32
    with pytest.raises(Exception) as cpu:
        fn(x, torch.empty(0, dtype=other))
    with pytest.raises(type(cpu.value)):
        fn(x.to(OCL), torch.empty(0, dtype=other, device=OCL))


def test_out_on_another_device_raises():
    x = torch.randn(3, 4).to(OCL)
    cpu = lambda dtype=torch.float32: torch.empty(0, dtype=dtype)
    for fn in (lambda: torch.histc(x, out=cpu()), lambda: torch.logcumsumexp(x, 0, out=cpu()),
               lambda: torch.searchsorted(x[0], x, out=cpu(torch.long)),
               lambda: torch.bucketize(x, x[0], out=cpu(torch.long)),
               lambda: torch.cummax(x, 0, out=(cpu(), cpu(torch.long))),
               lambda: torch.kthvalue(x, 1, 0, out=(cpu(), cpu(torch.long)))):
        with pytest.raises(RuntimeError, match="(same|expected) device"):
            fn()


BAD_INPUT = {
    "logcumsumexp_int": lambda x: torch.logcumsumexp(x.long(), 0),
    "searchsorted_bool": lambda x: torch.searchsorted(x[0] > 0, x > 0),
    "searchsorted_sorter_range": lambda x: torch.searchsorted(
        x[0], x, sorter=torch.arange(5, device=x.device) + 1),
    "searchsorted_sorter_dtype": lambda x: torch.searchsorted(
        x[0], x, sorter=torch.arange(5, device=x.device).int()),
    "searchsorted_rows": lambda x: torch.searchsorted(x[:2], x),
    "searchsorted_side": lambda x: torch.searchsorted(x[0], x, right=True, side="left"),
    "bucketize_2d": lambda x: torch.bucketize(x, x),
    "histc_int": lambda x: torch.histc(x.long()),
    "histc_range": lambda x: torch.histc(x, 4, 2, 1),
    "histc_bins": lambda x: torch.histc(x, 0),
    "bincount_negative": lambda x: torch.bincount(x[0].long()),
    "bincount_2d": lambda x: torch.bincount(x.long().abs()),
    "bincount_float": lambda x: torch.bincount(x[0]),
    "bincount_weights": lambda x: torch.bincount(x[0].long().abs(), x[1, :3]),
    "bincount_minlength": lambda x: torch.bincount(x[0].long().abs(), minlength=-1),
    "kthvalue_k": lambda x: x.kthvalue(6, 1),
    "kthvalue_bool": lambda x: (x > 0).kthvalue(1),
    "median_bool": lambda x: (x > 0).median(),
    "median_empty_dim": lambda x: x[:, :0].median(1),
    "mode_empty_dim": lambda x: x[:0].mode(0),
    "unique_dim_range": lambda x: torch.unique(x, dim=2),
    "unique_empty_slices": lambda x: torch.unique(x[:, :0], dim=0),
    "unique_consecutive_dim": lambda x: torch.unique_consecutive(x, dim=-3),
    "count_nonzero_dim": lambda x: torch.count_nonzero(x, 3),
}


@pytest.mark.parametrize("name", BAD_INPUT)
def test_bad_input_raises_as_cpu(name):
    """The error CPU torch raises, of the same type (not the fallback's NotImplementedError)."""
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(5)) * 3
    with pytest.raises(Exception) as want:
        BAD_INPUT[name](x)
    with pytest.raises(Exception) as got:
        BAD_INPUT[name](x.to(OCL))
    assert type(got.value) is want.type, (got.value, want.value)
    if want.type is NotImplementedError:  # a dtype refused: torch's words, not the fallback's
        assert str(want.value) in str(got.value), (got.value, want.value)


def test_zero_dim_and_empty_inputs():
    x = torch.tensor(2.5)
    _check(lambda t: (*t.cummax(0), t.logcumsumexp(0), *t.kthvalue(1), t.median(), *t.mode(),
                      *torch.unique(t, return_inverse=True, return_counts=True),
                      torch.count_nonzero(t)), x)
    e = torch.empty(0, 3)
    _check(lambda t: (*t.cummin(0), t.logcumsumexp(1), t.median(), t.nanmedian(),
                      *torch.unique(t, return_inverse=True, return_counts=True),
                      torch.histc(t, 3, 0, 1), torch.count_nonzero(t, 0)), e)
    _check(lambda t: (torch.bincount(t), torch.bincount(t, minlength=4)),
           torch.empty(0, dtype=torch.long))


def test_aten_helpers_and_legacy_forms():
    """The aten overloads torch's Python functions reach only indirectly: cummax's helper
    (writing into given tensors), the legacy _unique and unique_dim_consecutive."""
    x = _ties(torch.float32, (4, 6))
    aten = torch.ops.aten

    def helpers(t):
        outs = [torch.empty(t.shape, dtype=d, device=t.device)
                for d in (t.dtype, torch.int64, t.dtype, torch.int64)]
        aten._cummax_helper(t, outs[0], outs[1], 1)
        aten._cummin_helper(t, outs[2], outs[3], 0)
        return outs
    _check(helpers, x)
    _check(lambda t: (*aten._unique(t, True, True), *aten._unique(t),
                      *aten.unique_dim_consecutive(t, 1, True, True)), x)


BACKWARDS = {
    "cummax": lambda x: torch.cummax(x, 1).values * torch.cummin(x, 0).values,
    "logcumsumexp": lambda x: torch.logcumsumexp(x, 1),
    "kthvalue": lambda x: x.kthvalue(2, 0).values,
    "median": lambda x: (x.median(1).values, x.median(), x.nanmedian(0, True).values),
}


@pytest.mark.parametrize("name", BACKWARDS)
def test_backward_runs_on_device(name):
    """torch.autograd's gradient, every op of it on the device (the fixture forbids fallback)."""
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(4, 5, generator=gen, dtype=torch.float64)
    grads = []
    for leaf in (x.clone().requires_grad_(), x.to(OCL).requires_grad_()):
        outs = BACKWARDS[name](leaf)
        outs = outs if isinstance(outs, tuple) else (outs,)
        weights = [torch.randn(o.shape, generator=torch.Generator().manual_seed(7),
                               dtype=o.dtype).to(o.device) for o in outs]
        grads.append(torch.autograd.grad(outs, leaf, weights)[0])
    _same(grads[1], grads[0])
