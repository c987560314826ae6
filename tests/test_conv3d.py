"""conv3d (cltensor/conv/volume.py): cltensor's functional and module forms, and aten's
convolution and convolution_backward with 3-d operands on the "opencl" device, values and
gradients against CPU torch in float64, with nothing run through the CPU fallback."""
import copy

import numpy as np
import pytest
import torch
from test_torch_device import ct, device_only, ocl  # noqa: F401

import cltensor
from cltensor.conv import common
from cltensor.conv import volume
from cltensor.conv.volume import gather, make_params, scatter
from cltensor.nn import functional as F

# (input shape, weight shape, bias, keyword arguments): kernel depth 1 and 3, odd sizes,
# strides larger than the kernel, dilation, groups, 'same' with an even kernel, padding
# larger than the kernel reach
CASES = [
    ((2, 4, 5, 6, 7), (6, 4, 3, 3, 3), True, dict(padding=1)),
    ((2, 4, 7, 6, 5), (6, 2, 3, 2, 3), False,
     dict(stride=(2, 1, 2), padding=(2, 0, 1), dilation=(2, 1, 1), groups=2)),
    ((1, 3, 4, 5, 5), (3, 1, 1, 3, 3), True, dict(groups=3, padding="same")),
    ((2, 2, 6, 4, 4), (4, 2, 2, 2, 2), True, dict(padding="same", dilation=2)),
    ((3, 2, 5, 3, 4), (5, 2, 1, 1, 1), True, dict(stride=(3, 2, 1))),
    ((1, 6, 9, 5, 3), (4, 3, 3, 1, 2), False,
     dict(stride=(4, 1, 1), padding=(3, 1, 0), groups=2, dilation=(1, 2, 1))),
    ((2, 2, 3, 3, 3), (2, 2, 3, 3, 3), True, dict(padding="valid")),
]
IDS = [f"case{i}" for i in range(len(CASES))]


def _dtype(device):
    return np.float64 if device.has_fp64 else np.float32


def _tol(dtype):
    return 1e-11 if dtype == np.float64 else 2e-5


def _rel(got, want):
    got = np.asarray(got, dtype=np.float64)
    want = want.detach().double().numpy() if isinstance(want, torch.Tensor) else want
    assert got.shape == want.shape, (got.shape, want.shape)
    return np.linalg.norm(got - want) / max(np.linalg.norm(want), 1.0)


def _reference(xs, ws, bias, kw, seed, transposed=False):
    """CPU torch float64 conv3d (conv_transpose3d if transposed): inputs, output gradient and
    output, the inputs' gradients computed."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(xs, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.randn(ws, generator=gen, dtype=torch.float64, requires_grad=True)
    outs = ws[1] * kw.get("groups", 1) if transposed else ws[0]
    b = torch.randn(outs, generator=gen, dtype=torch.float64, requires_grad=True) \
        if bias else None
    op = torch.nn.functional.conv_transpose3d if transposed else torch.nn.functional.conv3d
    y = op(x, w, b, **kw)
    g = torch.randn(y.shape, generator=gen, dtype=torch.float64)
    y.backward(g)
    return x, w, b, g, y


@pytest.fixture
def poisoned(monkeypatch):
    """Every buffer the convolution passes allocate starts NaN: each element must be written."""
    empty = common.empty
    monkeypatch.setattr(common, "empty", lambda *a, **k: empty(*a, **k).fill_(float("nan")))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_conv3d_and_its_gradients(device, case, poisoned):
    xs, ws, bias, kw = case
    x, w, b, g, y = _reference(xs, ws, bias, kw, seed=len(IDS) + CASES.index(case))
    dtype = _dtype(device)
    on = [None if t is None else
          cltensor.from_numpy(t.detach().numpy().astype(dtype), device=device).requires_grad_()
          for t in (x, w, b)]
    got = F.conv3d(*on, **kw)
    got.backward(cltensor.from_numpy(g.numpy().astype(dtype), device=device))
    tol = _tol(dtype)
    assert _rel(got.numpy(), y) <= tol
    for name, mine, ref in zip("xwb", on, (x, w, b)):
        if ref is not None:
            assert _rel(mine.grad.numpy(), ref.grad) <= tol, name


def test_conv3d_strided_views_and_unbatched(device, poisoned):
    """A permuted, sliced input and weight (the gather reads any strides), and a 4-d input."""
    dtype = _dtype(device)
    rng = np.random.default_rng(3)
    base = rng.standard_normal((2, 7, 4, 6, 4))  # (N, H, C, D, W): x is a permuted view of it
    wbase = rng.standard_normal((5, 3, 3, 2, 4))
    xt, wt = torch.tensor(base).permute(0, 2, 3, 1, 4)[:, 1:, ::2], torch.tensor(wbase)[..., ::2]
    want = torch.nn.functional.conv3d(xt, wt, padding=(1, 0, 1))
    X = cltensor.from_numpy(base.astype(dtype), device=device).permute(0, 2, 3, 1, 4)[:, 1:, ::2]
    W = cltensor.from_numpy(wbase.astype(dtype), device=device)[..., ::2]
    assert not X.is_contiguous() and not W.is_contiguous()
    assert _rel(F.conv3d(X, W, padding=(1, 0, 1)).numpy(), want) <= _tol(dtype)
    one, want = F.conv3d(X[1], W, stride=2), torch.nn.functional.conv3d(xt[1], wt, stride=2)
    assert one.shape == tuple(want.shape) and len(want.shape) == 4
    assert _rel(one.numpy(), want) <= _tol(dtype)


def test_conv3d_double_backward_and_empty_batch(device):
    """create_graph=True records the gradients (gather, conv2d and scatter are Functions): the
    gradient of |dL/dx|^2 against torch's; an empty batch gives empty results, zero weight
    gradients."""
    dtype = _dtype(device)
    gen = torch.Generator().manual_seed(8)
    xt = torch.randn(2, 3, 4, 5, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    wt = torch.randn(4, 3, 3, 2, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    kw = dict(padding=(1, 0, 1), stride=(2, 1, 1))
    gx, = torch.autograd.grad(torch.nn.functional.conv3d(xt, wt, **kw).square().sum(), xt,
                              create_graph=True)
    gx.square().sum().backward()
    X, W = (cltensor.from_numpy(t.detach().numpy().astype(dtype), device=device).requires_grad_()
            for t in (xt, wt))
    GX, = cltensor.autograd.grad(F.conv3d(X, W, **kw).square().sum(), X, create_graph=True)
    GX.square().sum().backward()
    tol = _tol(dtype)
    assert _rel(GX.detach().numpy(), gx) <= tol
    assert _rel(X.grad.numpy(), xt.grad) <= tol and _rel(W.grad.numpy(), wt.grad) <= tol
    E = cltensor.zeros(0, 3, 4, 5, 3, dtype=X.dtype, device=device).requires_grad_()
    W.grad = None
    y = F.conv3d(E, W, **kw)
    y.sum().backward()
    assert y.shape == (0, 4, 2, 4, 3) and E.grad.shape == E.shape
    assert not W.grad.numpy().any()


@pytest.mark.parametrize("rows", [True, False])
def test_gather_and_scatter_are_adjoint(device, poisoned, monkeypatch, rows):
    """<gather(x), c> == <x, scatter(c)>, and gather against a numpy reference; the kernels by
    rows (CPUs) and by elements (elsewhere), gcol a strided view."""
    monkeypatch.setattr(volume, "by_rows", lambda device: rows)
    dtype = _dtype(device)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 7, 2, 3)).astype(dtype)
    X, W = cltensor.from_numpy(x, device=device), cltensor.empty(4, 3, 3, 2, 2, device=device)
    p = make_params(X, W.to(X.dtype), None, (2, 1, 1), (2, 0, 0), (2, 1, 1), 1)
    cols = gather(X, p).numpy()
    padded = np.pad(x, ((0, 0), (0, 0), (2, 2), (0, 0), (0, 0)))
    want = np.stack([padded[:, :, od * 2 + kd * 2] for od in range(p.do) for kd in range(3)], 2)
    want = want.reshape(2, 3, p.do, 3, 2, 3).transpose(0, 2, 1, 3, 4, 5).reshape(cols.shape)
    np.testing.assert_array_equal(cols, want)
    wide = rng.standard_normal(cols.shape[:-1] + (2 * cols.shape[-1],)).astype(dtype)
    c = wide[..., ::2]
    back = scatter(cltensor.from_numpy(wide, device=device)[..., ::2], p).numpy()
    assert abs((cols * c).sum() - (x * back).sum()) <= 1e-4 * np.abs(cols * c).sum()


def test_launches_do_not_grow_with_depth(device):
    """One forward and backward launch as many kernels at depth 4 as at depth 12; the graph
    keeps the input and weight, not the Kd-fold columns."""
    counts = []
    for depth in (4, 12):
        x = cltensor.randn(2, 3, depth, 5, 5, device=device).requires_grad_()
        w = cltensor.randn(4, 3, 3, 3, 3, device=device).requires_grad_()
        y = F.conv3d(x, w, padding=1)
        assert [t.shape for t in y.grad_fn.ctx.saved_tensors] == [x.shape, w.shape]
        y.sum().backward()  # builds and plans first
        with cltensor.profile() as prof:
            F.conv3d(x, w, padding=1).sum().backward()
        counts.append(len(prof.events))
    assert counts[0] == counts[1], counts


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "circular"])
def test_nn_conv3d_matches_torch(device, padding_mode):
    dtype = _dtype(device)
    torch.manual_seed(5)
    ref = torch.nn.Conv3d(4, 6, (3, 2, 3), stride=(1, 2, 1), padding=(1, 1, 2), groups=2,
                          padding_mode=padding_mode).double()
    mine = cltensor.nn.Conv3d(4, 6, (3, 2, 3), stride=(1, 2, 1), padding=(1, 1, 2), groups=2,
                              padding_mode=padding_mode, device=device,
                              dtype=cltensor.float64 if dtype == np.float64 else None)
    assert mine.weight.shape == tuple(ref.weight.shape) and mine.kernel_size == (3, 2, 3)
    with cltensor.no_grad():
        for name in ("weight", "bias"):
            value = getattr(ref, name).detach().numpy().astype(dtype)
            getattr(mine, name).copy_(cltensor.from_numpy(value, device=device))
    x = torch.randn(2, 4, 5, 4, 6, dtype=torch.float64)
    want = ref(x)
    want.square().sum().backward()
    got = mine(cltensor.from_numpy(x.numpy().astype(dtype), device=device))
    got.square().sum().backward()
    tol = _tol(dtype)
    assert _rel(got.numpy(), want) <= tol
    assert _rel(mine.weight.grad.numpy(), ref.weight.grad) <= tol
    assert _rel(mine.bias.grad.numpy(), ref.bias.grad) <= tol
    assert repr(mine).startswith("Conv3d(4, 6, kernel_size=(3, 2, 3), stride=(1, 2, 1)")


@pytest.mark.parametrize("args, message", [
    (((2, 4, 3, 5, 5), (6, 3, 1, 3, 3), {}), r"input of shape \(2, 4, 3, 5, 5\) has 4 channels, "
                                             r"weight of shape \(6, 3, 1, 3, 3\) expects 3"),
    (((2, 4, 2, 5, 5), (6, 4, 3, 3, 3), {}), r"kernel size 3x3x3 \(dilated\) is larger than "
                                             r"the padded input 2x5x5"),
    (((2, 4, 2, 5, 5), (6, 4, 2, 3, 3), dict(dilation=(2, 1, 1), padding=(0, 1, 1))),
     r"kernel size 3x3x3 \(dilated\) is larger than the padded input 2x7x7"),
    (((2, 6, 3, 5, 5), (4, 2, 1, 3, 3), dict(groups=3)), r"groups=3 does not divide the weight's 4"),
    (((2, 5, 3, 5, 5), (6, 1, 1, 3, 3), dict(groups=2)), r"groups=2 does not divide the input's 5"),
    (((4, 3, 5), (6, 4, 1, 3, 3), {}), r"expected a 5-d input"),
    (((2, 4, 3, 5, 5), (6, 4, 3, 3), {}), r"expected a 5-d weight"),
    (((2, 4, 3, 5, 5), (6, 4, 1, 3, 3), dict(padding="same", stride=2)),
     r"padding='same' is not supported for strided"),
])
def test_conv3d_bad_input(device, args, message):
    xs, ws, kw = args
    x, w = cltensor.zeros(*xs, device=device), cltensor.zeros(*ws, device=device)
    with pytest.raises(ValueError, match="conv3d: " + message):
        F.conv3d(x, w, **kw)


# (input, weight, bias, conv_transpose3d's keyword arguments): output_padding at its largest,
# below the dilation rather than the stride (the input padded), groups, an unbatched input
CASES_T = [
    ((2, 4, 3, 5, 4), (4, 3, 3, 3, 3), True, dict(stride=2, padding=1, output_padding=1)),
    ((2, 4, 3, 5, 3), (4, 3, 2, 2, 3), True,
     dict(stride=(3, 3, 2), padding=(1, 1, 0), output_padding=(2, 2, 1), groups=2,
          dilation=(1, 1, 2))),
    ((1, 6, 2, 3, 4), (6, 1, 3, 3, 2), False,
     dict(stride=(1, 1, 2), groups=3, dilation=(2, 2, 3), output_padding=(1, 1, 2))),
    ((4, 3, 2, 3), (4, 2, 1, 2, 2), True, dict(stride=(1, 2, 1))),
]
IDS_T = [f"transposed{i}" for i in range(len(CASES_T))]


@pytest.mark.parametrize("case", CASES_T, ids=IDS_T)
def test_conv_transpose3d_and_its_gradients(device, case, poisoned):
    xs, ws, bias, kw = case
    x, w, b, g, y = _reference(xs, ws, bias, kw, seed=CASES_T.index(case), transposed=True)
    dtype = _dtype(device)
    on = [None if t is None else
          cltensor.from_numpy(t.detach().numpy().astype(dtype), device=device).requires_grad_()
          for t in (x, w, b)]
    got = F.conv_transpose3d(*on, **kw)
    got.backward(cltensor.from_numpy(g.numpy().astype(dtype), device=device))
    tol = _tol(dtype)
    assert _rel(got.numpy(), y) <= tol
    for name, mine, ref in zip("xwb", on, (x, w, b)):
        if ref is not None:
            assert _rel(mine.grad.numpy(), ref.grad) <= tol, name


def test_nn_conv_transpose3d_matches_torch(device):
    dtype = _dtype(device)
    torch.manual_seed(7)
    ref = torch.nn.ConvTranspose3d(4, 6, (2, 3, 3), stride=2, padding=(0, 1, 1), groups=2)
    ref = ref.double()
    mine = cltensor.nn.ConvTranspose3d(4, 6, (2, 3, 3), stride=2, padding=(0, 1, 1), groups=2,
                                       device=device,
                                       dtype=cltensor.float64 if dtype == np.float64 else None)
    with cltensor.no_grad():
        for name in ("weight", "bias"):
            value = getattr(ref, name).detach().numpy().astype(dtype)
            getattr(mine, name).copy_(cltensor.from_numpy(value, device=device))
    x = torch.randn(2, 4, 3, 4, 5, dtype=torch.float64)
    want = ref(x, output_size=(7, 8, 10))
    want.square().sum().backward()
    got = mine(cltensor.from_numpy(x.numpy().astype(dtype), device=device), output_size=(7, 8, 10))
    got.square().sum().backward()
    tol = _tol(dtype)
    assert _rel(got.numpy(), want) <= tol
    assert _rel(mine.weight.grad.numpy(), ref.weight.grad) <= tol
    assert _rel(mine.bias.grad.numpy(), ref.bias.grad) <= tol


def test_conv_transpose3d_bad_input(device):
    x = cltensor.zeros(2, 4, 3, 3, 3, device=device)
    with pytest.raises(ValueError, match=r"conv_transpose3d: input of shape \(2, 4, 3, 3, 3\) "
                                         r"has 4 channels, weight of shape \(3, 2, 2, 2, 2\) "
                                         r"expects 3"):
        F.conv_transpose3d(x, cltensor.zeros(3, 2, 2, 2, 2, device=device))
    with pytest.raises(ValueError, match=r"output_padding \(0, 2, 0\) must be smaller"):
        F.conv_transpose3d(x, cltensor.zeros(4, 1, 2, 2, 2, device=device), stride=2,
                           output_padding=(0, 2, 0))


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("fn", [F.conv3d, F.conv_transpose3d], ids=["conv3d", "transposed"])
def test_16bit_operands(device, name, fn):
    """float16 and bfloat16 operands, results and gradients (the scatter sums in float32)
    against CPU torch in float32 on the same rounded values."""
    dtype, tol = getattr(torch, name), {"float16": 2e-3, "bfloat16": 1.6e-2}[name]
    gen = torch.Generator().manual_seed(9)
    shapes = ((2, 4, 5, 6, 5), (4, 3, 3, 3, 3), (6,)) if fn is F.conv_transpose3d else \
        ((2, 4, 5, 6, 5), (6, 2, 3, 3, 3), (6,))
    values = [torch.randn(s, generator=gen).to(dtype) for s in shapes]
    refs = [v.float().requires_grad_() for v in values]
    kw = dict(padding=1, groups=2, stride=(2, 1, 1))
    want = getattr(torch.nn.functional, fn.__name__)(*refs, **kw)
    g = torch.randn(want.shape, generator=gen).to(dtype)
    want.backward(g.float())
    mine = [cltensor.from_numpy(v.float().numpy(), device=device).to(getattr(cltensor, name))
            .requires_grad_() for v in values]
    got = fn(*mine, **kw)
    got.backward(cltensor.from_numpy(g.float().numpy(), device=device).to(got.dtype))
    for a, b in [(got, want)] + [(m.grad, r.grad) for m, r in zip(mine, refs)]:
        assert a.dtype == getattr(cltensor, name)
        assert _rel(a.to(cltensor.float32).numpy(), b) <= tol


# ---- the "opencl" device ---------------------------------------------------------------------
OCL = "opencl"
TORCH_TOL = {torch.float64: 1e-10, torch.float32: 1e-5, torch.float16: 2e-3,
             torch.bfloat16: 1.6e-2}


def _close(got, want, dtype):
    assert got.device.type == OCL and got.dtype == want.dtype and got.shape == want.shape
    err = (got.detach().cpu().double() - want.detach().double()).norm().item()
    assert err <= TORCH_TOL[dtype] * max(want.norm().item(), 1.0), err


@pytest.mark.usefixtures("ocl", "device_only")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("case", CASES[:2] + CASES[5:6], ids=["case0", "case1", "case5"])
def test_torch_conv3d_on_the_device(device, case, dtype):
    if dtype == torch.float64 and not device.has_fp64:
        pytest.skip("the device has no float64")
    xs, ws, bias, kw = case
    _on_the_device(torch.nn.functional.conv3d, _reference(xs, ws, bias, kw, seed=1), kw, dtype)


def _on_the_device(fn, reference, kw, dtype):
    """fn (a torch conv function) and its gradients on "opencl" against CPU torch, 16-bit dtypes
    against float32 computed from the same rounded operands."""
    x, w, b, g, _ = reference
    ref = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    want_in = [None if t is None else t.detach().to(dtype).to(ref).requires_grad_()
               for t in (x, w, b)]
    got_in = [None if t is None else t.detach().to(dtype).to(OCL).requires_grad_()
              for t in (x, w, b)]
    want, got = fn(*want_in, **kw), fn(*got_in, **kw)
    want.backward(g.to(dtype).to(ref))
    got.backward(g.to(dtype).to(OCL))
    _close(got, want.to(dtype), dtype)
    for mine, theirs in zip(got_in, want_in):
        if theirs is not None:
            _close(mine.grad, theirs.grad.to(dtype), dtype)


@pytest.mark.usefixtures("ocl", "device_only")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16])
@pytest.mark.parametrize("case", CASES_T[:3], ids=IDS_T[:3])
def test_torch_conv_transpose3d_on_the_device(device, case, dtype):
    if dtype == torch.float64 and not device.has_fp64:
        pytest.skip("the device has no float64")
    xs, ws, bias, kw = case
    _on_the_device(torch.nn.functional.conv_transpose3d,
                   _reference(xs, ws, bias, kw, seed=1, transposed=True), kw, dtype)


@pytest.mark.usefixtures("ocl", "device_only")
@pytest.mark.parametrize("mask", [(True, False, True), (False, True, False), (True, True, False)])
def test_torch_convolution_backward_output_mask(device, mask):
    dtype = torch.float64 if device.has_fp64 else torch.float32
    gen = torch.Generator().manual_seed(2)
    x, w = (torch.randn(s, generator=gen, dtype=dtype) for s in ((2, 4, 5, 6, 3), (6, 2, 3, 3, 1)))
    args = ([6], [2, 1, 1], [1, 0, 1], [1, 2, 1], False, [0, 0, 0], 2, list(mask))
    shape = torch.ops.aten.convolution(x, w, None, *args[1:7]).shape
    g = torch.randn(shape, generator=gen, dtype=dtype)
    want = torch.ops.aten.convolution_backward(g, x, w, *args)
    got = torch.ops.aten.convolution_backward(g.to(OCL), x.to(OCL), w.to(OCL), *args)
    for need, mine, theirs in zip(mask, got, want):
        assert (mine is None) == (not need) == (theirs is None)
        if need:
            _close(mine, theirs, dtype)


@pytest.mark.usefixtures("ocl", "device_only")
def test_torch_nn_conv3d_training_step(device):
    """Two steps of SGD on a Conv3d network (the second with its plans made: ReLU's deferred
    gradient meets a 3-d convolution's backward): the same parameters as on the CPU."""
    dtype = torch.float64 if device.has_fp64 else torch.float32
    torch.manual_seed(6)
    net = torch.nn.Sequential(torch.nn.Conv3d(3, 4, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Conv3d(4, 2, (1, 3, 3), stride=(1, 2, 2), bias=False),
                              torch.nn.Flatten(), torch.nn.Linear(2 * 4 * 2 * 2, 3)).to(dtype)
    mine = copy.deepcopy(net).to(OCL)
    x, target = torch.randn(2, 3, 4, 5, 5, dtype=dtype), torch.randint(0, 3, (2,))
    for model, data, labels in ((net, x, target), (mine, x.to(OCL), target.to(OCL))):
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for _ in range(2):
            loss = torch.nn.functional.cross_entropy(model(data), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
    for a, b in zip(mine.parameters(), net.parameters()):
        _close(a, b, dtype)
