"""nn.Sequential's fused pairs beyond Conv2d + ReLU: a Linear or a MaxPool2d followed by a
ReLU runs as one op that clamps as it stores (F.linear's and F.max_pool2d's relu), with the
output and gradients of the pair run module by module, bit for bit, and fewer launches. And
Conv2d + ReLU's backward: the ReLU taken back and the bias gradient summed in one launch."""
import numpy as np
import pytest

import cltensor
import cltensor.nn.functional as F
from cltensor import nn
from cltensor.conv import plans
from cltensor.ops import norm
from cltensor.tensor import ClTensor
from cltensor.testing import rel_error
from test_conv import ref_conv

_EMPTY_ON = ClTensor.empty_on.__func__


@pytest.fixture
def poisoned(monkeypatch):
    """Every new floating tensor starts as NaN: an element no kernel writes shows."""
    def empty_on(cls, *args, **kwargs):
        t = _EMPTY_ON(cls, *args, **kwargs)
        return t.fill_(float("nan")) if t.dtype.kind == "f" and t.numel() else t
    monkeypatch.setattr(ClTensor, "empty_on", classmethod(empty_on))


def _step(net, x, g, fused):
    """Output, input gradient, parameter gradients and (forward, backward) launches of one
    step of net: through Sequential (fused) or module by module."""
    x = x.detach().requires_grad_()
    net.zero_grad(set_to_none=True)
    with cltensor.profile() as forward:
        y = net(x) if fused else _unfused(net, x)
    with cltensor.profile() as backward:
        y.backward(g)
    grads = [p.grad.numpy() for p in net.parameters()]
    return y.numpy(), x.grad.numpy(), grads, (len(forward.records()), len(backward.records()))


def _unfused(net, x):
    for m in net:
        x = m(x)
    return x


def _same_step(net, x, g):
    """Runs net fused and unfused; asserts equal bits; returns both steps."""
    _step(net, x, g, False)  # NOTE: kernels built and caches filled first
    fused, plain = _step(net, x, g, True), _step(net, x, g, False)
    for got, want in zip([fused[0], fused[1], *fused[2]], [plain[0], plain[1], *plain[2]]):
        np.testing.assert_array_equal(got, want)
    assert fused[3][1] <= plain[3][1], f"backward launches {fused[3][1]} > {plain[3][1]}"
    return fused, plain


def _t(a, device):
    return cltensor.from_numpy(a, device=device)


def _mlp(device, dtype):
    cltensor.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 6, bias=False),
                         nn.ReLU(inplace=True), nn.Linear(6, 3)).to(device=device, dtype=dtype)


def _mlp_reference(net, x, g):
    """Output and input gradient of _mlp in float64 numpy."""
    w = [m.weight.numpy().astype(np.float64) for m in net if isinstance(m, nn.Linear)]
    b0, b2 = (net[i].bias.numpy().astype(np.float64) for i in (0, 4))
    h1 = np.maximum(x @ w[0].T + b0, 0)
    h2 = np.maximum(h1 @ w[1].T, 0)
    y = h2 @ w[2].T + b2
    g2 = (g @ w[2]) * (h2 > 0)
    g1 = (g2 @ w[1]) * (h1 > 0)
    return y, g1 @ w[0]


@pytest.mark.parametrize("lead", [(1,), (4,), (2, 3)])
def test_sequential_fuses_linear_and_relu(device, rng, fp_dtypes, poisoned, lead):
    """Linear + ReLU pairs (with and without a bias, inplace or not) run as one GEMM each:
    the same bits as module by module, float64 reference, one launch fewer per pair at
    least; batch 1 included."""
    for dtype in fp_dtypes:
        net = _mlp(device, dtype)
        x = rng.standard_normal(lead + (5,))
        g = rng.standard_normal(lead + (3,))
        X, G = (_t(a.astype(dtype.type), device) for a in (x, g))
        fused, plain = _same_step(net, X, G)
        assert fused[3][0] <= plain[3][0] - 2, (fused[3], plain[3])
        y, gx = _mlp_reference(net, x.reshape(-1, 5), g.reshape(-1, 3))
        tol = 1e-5 if dtype == cltensor.float32 else 1e-12
        assert rel_error(fused[0].reshape(-1, 3), y) <= tol
        assert rel_error(fused[1].reshape(-1, 5), gx) <= tol


def test_linear_relu_keeps_nan_and_double_backward(device, rng):
    """F.linear(relu=True) keeps NaN (as relu) and its gradient under create_graph is
    relu(linear)'s, differentiable again."""
    x = _t(rng.standard_normal((3, 4)).astype(np.float32), device)
    w = _t(rng.standard_normal((5, 4)).astype(np.float32), device)
    b = _t(np.array([np.nan, 0, 1, -1, 2], np.float32), device)
    np.testing.assert_array_equal(F.linear(x, w, b, relu=True).numpy(),
                                  F.relu(F.linear(x, w, b)).numpy())
    grads = []
    for relu in (True, False):
        X = x.detach().requires_grad_()
        y = F.linear(X, w, relu=True) if relu else F.relu(F.linear(X, w))
        (gx,) = cltensor.autograd.grad((y * y).sum(), X, create_graph=True)
        (ggx,) = cltensor.autograd.grad(gx.sum(), X)
        grads.append((gx.numpy(), ggx.numpy()))
    for got, want in zip(*grads):
        np.testing.assert_array_equal(got, want)


def _torch_pool_relu(x, g, kernel, kw):
    """relu(max_pool2d(x)) and its input gradient at g, by torch in float64."""
    import torch
    tx = torch.from_numpy(x).requires_grad_()
    y = torch.relu(torch.nn.functional.max_pool2d(tx, kernel, **kw))
    y.backward(torch.from_numpy(g))
    return y.detach().numpy(), tx.grad.numpy()


# NOTE: (3, stride 1, pad 1) on rows of 20 takes the rows form's vector loop on CPUs
POOLS = [(2, {}), (3, {"stride": 1, "padding": 1}), (3, {"stride": 2, "ceil_mode": True}),
         (2, {"dilation": 2, "padding": 1})]


@pytest.mark.parametrize("kernel, kw", POOLS)
@pytest.mark.parametrize("channels_last", [False, True])
def test_sequential_fuses_max_pool_and_relu(device, rng, fp_dtypes, poisoned, kernel, kw,
                                            channels_last):
    """MaxPool2d + ReLU runs as one pooling that clamps as it stores: the same bits as module by
    module (forward and backward), torch float64 reference, a launch fewer."""
    net = nn.Sequential(nn.MaxPool2d(kernel, **kw), nn.ReLU())
    for dtype in fp_dtypes:
        x = rng.standard_normal((2, 3, 9, 20)) - 0.3
        X = _t(x.astype(dtype.type), device)
        if channels_last:
            X = X.contiguous(memory_format=cltensor.channels_last)
        g = rng.standard_normal(_unfused(net, X).shape)
        fused, plain = _same_step(net, X, _t(g.astype(dtype.type), device))
        assert fused[3][0] <= plain[3][0] - 1, (fused[3], plain[3])
        y, gx = _torch_pool_relu(x.astype(dtype.type).astype(np.float64), g, kernel, kw)
        assert (y == 0).any() and (y > 0).any(), "the case needs both signs"
        tol = 1e-6 if dtype == cltensor.float32 else 1e-14
        assert rel_error(fused[0], y) <= tol and rel_error(fused[1], gx) <= tol


def test_max_pool_relu_gradient_masks_at_zero(device, rng):
    """F.max_pool2d(relu=True): windows whose maximum is <= 0 send no gradient, the others
    send it to their argmax; NaN kept; create_graph gives relu(max_pool2d)'s gradients."""
    x = rng.standard_normal((2, 2, 6, 6)).astype(np.float32)
    x[0, 0, :2, :2] = -1.0  # a window all negative
    x[1, 1, 2, 2] = np.nan
    grads = []
    for relu in (True, False):
        X = _t(x, device).requires_grad_()
        y = F.max_pool2d(X, 2, relu=True) if relu else F.relu(F.max_pool2d(X, 2))
        (gx,) = cltensor.autograd.grad((y * y).sum(), X, create_graph=True)
        (ggx,) = cltensor.autograd.grad(gx.sum(), X)
        grads.append((y.numpy(), gx.numpy(), ggx.numpy()))
    for got, want in zip(*grads):
        np.testing.assert_array_equal(got, want)
    assert grads[0][0][0, 0, 0, 0] == 0 and np.isnan(grads[0][0][1, 1, 1, 1])
    assert (grads[0][1][0, 0, :2, :2] == 0).all()


def test_pairs_that_stay_unfused(device, rng):
    """A hooked Linear, a Linear subclass and a MaxPool2d returning indices run as written."""
    class Scaled(nn.Linear):
        def forward(self, input):
            return super().forward(input) * 2

    seen = []
    net = _mlp(device, cltensor.float32)
    net[0].register_forward_hook(lambda m, args, out: seen.append(out.numpy()))
    net[2] = Scaled(7, 6).to(device=device)
    x = _t(rng.standard_normal((4, 5)).astype(np.float32), device)
    g = _t(rng.standard_normal((4, 3)).astype(np.float32), device)
    fused, plain = _same_step(net, x, g)
    assert fused[3] == plain[3], (fused[3], plain[3])
    assert (seen[-1] < 0).any(), "the hook sees the Linear's output before the ReLU"
    pool = nn.Sequential(nn.MaxPool2d(2, return_indices=True), nn.ReLU())
    with pytest.raises((TypeError, AttributeError)):
        pool(_t(rng.standard_normal((1, 1, 4, 4)).astype(np.float32), device))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_linear_relu_on_16_bit_tensors(device, rng, dtype):
    """16-bit products run on float32 copies (matmul's widening): the fused pair takes that
    path too and gives the unfused pair's values, as autocast's linear layers need."""
    half = getattr(cltensor, dtype)
    lin = nn.Linear(7, 5).to(device)
    lin.weight.data = lin.weight.data.to(half)
    lin.bias.data = lin.bias.data.to(half)
    x = cltensor.from_numpy(rng.standard_normal((3, 7)).astype(np.float32), device=device).to(half)
    fused = nn.Sequential(lin, nn.ReLU())(x)
    unfused = F.relu(F.linear(x, lin.weight, lin.bias))
    assert fused.dtype is half
    np.testing.assert_array_equal(fused.float().numpy(), unfused.float().numpy())


@pytest.mark.parametrize("create_graph", [False, True])
def test_relu_gradient_at_nan_follows_torch(device, create_graph):
    """ReLU's gradient is zero where its output is <= 0 and passes through a NaN output, as
    torch's threshold_backward: plain F.relu (kernel and recorded forms) and Conv2d + ReLU fused
    by Sequential."""
    torch = pytest.importorskip("torch")
    x_np = np.array([[[[np.nan, -1.0], [0.0, 2.0]]]], np.float32)
    g_np = np.array([[[[3.0, 5.0], [7.0, 11.0]]]], np.float32)
    want = torch.tensor(x_np, requires_grad=True)
    torch.relu(want).backward(torch.tensor(g_np))
    x = cltensor.from_numpy(x_np, device=device).requires_grad_()
    y = F.relu(x)
    (gx,) = cltensor.autograd.grad(y, x, cltensor.from_numpy(g_np, device=device),
                                   create_graph=create_graph)
    np.testing.assert_array_equal(gx.numpy(), want.grad.numpy())

    conv = nn.Conv2d(1, 1, 1, bias=False).to(device=device)
    conv.weight.data.fill_(1.0)
    net = nn.Sequential(conv, nn.ReLU())
    x = cltensor.from_numpy(x_np, device=device).requires_grad_()
    (gx,) = cltensor.autograd.grad(net(x), x, cltensor.from_numpy(g_np, device=device),
                                   create_graph=create_graph)
    np.testing.assert_array_equal(gx.numpy(), want.grad.numpy())


RELU_BIAS_SHAPES = [(1, 3, 4, 4), (2, 5, 3, 7), (3, 4, 1, 1), (1, 2, 17, 19), (2, 3, 16, 16)]


def _relu_bias_operands(device, rng, shape, dtype, layout):
    """(g, y, G, Y): y with zeros, negatives and a NaN; G and Y in `layout` ("contiguous",
    "channels_last", "mixed": Y channels_last, or "strided": G every other column of a wider
    tensor)."""
    g = rng.standard_normal(shape).astype(dtype.type)
    y = rng.standard_normal(shape).astype(dtype.type)
    y.flat[::5] = 0
    y.flat[3 % y.size] = np.nan
    G, Y = _t(g, device), _t(y, device)
    if layout in ("channels_last", "mixed"):
        Y = Y.contiguous(memory_format=cltensor.channels_last)
    if layout == "channels_last":
        G = G.contiguous(memory_format=cltensor.channels_last)
    if layout == "strided":
        wide = np.repeat(g, 2, axis=3)
        G = _t(wide, device)[:, :, :, ::2]
    return g, y, G, Y


@pytest.mark.parametrize("form", ["device", "lanes"])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "mixed", "strided"])
def test_relu_bias_grad_in_one_launch(device, rng, fp_dtypes, poisoned_bytes, monkeypatch,
                                      form, layout):
    """norm.relu_bias_grad: the ReLU's backward written in g's layout, bit for bit relu_backward's
    (a NaN output passes g), and the bias gradient against float64, one launch for both (and
    the same bias gradient alone with masked_out=False); in the device's form and in the
    work-group form (256 lanes a channel: shapes longer and shorter than that); None only
    where the vector form does not apply."""
    if form == "lanes":
        monkeypatch.setitem(norm.TUNING, "cpu", dict(norm.TUNING["gpu"], fuse_max=None))
        monkeypatch.setitem(norm.TUNING, "gpu", dict(norm.TUNING["gpu"], fuse_max=None))
    vector = norm._tuning(device)["relu_bias"] == "vec16"
    for dtype in fp_dtypes:
        for shape in RELU_BIAS_SHAPES:
            g, y, G, Y = _relu_bias_operands(device, rng, shape, dtype, layout)
            with cltensor.profile() as prof:
                res = norm.relu_bias_grad(G, Y)
            if vector and (dtype == cltensor.float64 or
                           norm.layout_of(G) == cltensor.channels_last):
                assert res is None, f"{shape} {dtype}: the vector form took it"
                continue
            assert res is not None and len(prof.records()) == 1, (shape, dtype, layout)
            gm, gb = res
            assert norm.layout_of(gm) == norm.layout_of(G) and gm.is_contiguous(
                memory_format=norm.layout_of(G)), "the gradient takes g's dense layout"
            want = np.where(y <= 0, 0, g)
            want[np.isnan(y)] = g[np.isnan(y)]
            np.testing.assert_array_equal(gm.numpy(), want)
            ref = want.astype(np.float64).sum((0, 2, 3))
            tol = 1e-6 if dtype == cltensor.float32 else 1e-13
            assert rel_error(gb, ref) <= tol, f"{shape} {dtype} {layout}: bias gradient"
            with cltensor.profile() as prof:  # the bias gradient alone: the same sums
                alone = norm.relu_bias_grad(G, Y, masked_out=False)
            assert alone[0] is None and len(prof.records()) == 1
            np.testing.assert_array_equal(alone[1].numpy(), gb.numpy())


# unit roundoff of the 16-bit types: the bias gradient is summed in float32, rounded once
HALF_ROUNDOFF = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}


@pytest.mark.parametrize("form", ["device", "lanes"])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "strided"])
@pytest.mark.parametrize("half", sorted(HALF_ROUNDOFF))
def test_relu_bias_grad_on_16bit_data(device, rng, poisoned_bytes, monkeypatch, form, layout,
                                      half):
    """norm.relu_bias_grad on float16/bfloat16 tensors: one launch, the masked gradient equal
    to the 16-bit values' (a NaN output passes g), the bias gradient within one rounding of the
    float64 sum of those values; in the device's form and in the work-group form."""
    if form == "lanes":
        monkeypatch.setitem(norm.TUNING, "cpu", dict(norm.TUNING["gpu"], fuse_max=None))
        monkeypatch.setitem(norm.TUNING, "gpu", dict(norm.TUNING["gpu"], fuse_max=None))
    dtype = getattr(cltensor, half)
    vector = norm._tuning(device)["relu_bias"] == "vec16"
    for shape in RELU_BIAS_SHAPES + [(2, 3, 5, 33)]:
        g, y, G, Y = _relu_bias_operands(device, rng, shape, cltensor.float32, "contiguous")
        G, Y = G.to(dtype), Y.to(dtype)
        if layout == "channels_last":
            G, Y = (t.contiguous(memory_format=cltensor.channels_last) for t in (G, Y))
        if layout == "strided":
            wide = G.float().numpy().repeat(2, axis=3)
            G = _t(wide, device).to(dtype)[:, :, :, ::2]
        g, y = G.float().numpy(), Y.float().numpy()  # the 16-bit values
        with cltensor.profile() as prof:
            res = norm.relu_bias_grad(G, Y)
        if vector and norm.layout_of(G) == cltensor.channels_last:
            assert res is None, f"{shape}: the vector form took channels_last"
            continue
        assert res is not None and len(prof.records()) == 1, (shape, layout)
        gm, gb = res
        assert gm.dtype is dtype and gb.dtype is dtype and norm.layout_of(gm) == norm.layout_of(G)
        want = np.where(y <= 0, 0, g)
        want[np.isnan(y)] = g[np.isnan(y)]
        np.testing.assert_array_equal(gm.float().numpy(), want)
        ref = want.astype(np.float64).sum((0, 2, 3))
        bound = HALF_ROUNDOFF[half] * np.abs(ref) + 1e-6 * np.abs(want).sum((0, 2, 3))
        err = np.abs(gb.float().numpy() - ref)
        assert (err <= bound).all(), f"{shape} {layout}: bias gradient {err} > {bound}"


def test_conv_relu_backward_takes_bias_gradient_along(device, rng, fp_dtypes, poisoned_bytes,
                                                       monkeypatch):
    """A Conv2d + ReLU whose weight pass does not fold the bias gradient in (im2col) takes the
    ReLU back and sums the bias gradient in one launch: one launch fewer than relu_backward
    and a sum (but float64 on CPUs), the gradients of both against float64."""
    for dtype in fp_dtypes:
        x = rng.standard_normal((2, 3, 8, 9)).astype(dtype.type)
        w = rng.standard_normal((5, 3, 3, 3)).astype(dtype.type)
        b = rng.standard_normal(5).astype(dtype.type)
        runs = []
        for fused in (True, False):
            with monkeypatch.context() as patch:
                if not fused:
                    patch.setattr(norm, "relu_bias_grad", lambda g, y: None)
                plans.clear()  # NOTE: else a pass recorded in the other form is replayed
                X, W, B = (_t(a, device).requires_grad_() for a in (x, w, b))
                y = F.conv2d(X, W, B, padding=1, algo="im2col", relu=True)
                g = rng.standard_normal(y.shape).astype(dtype.type)
                with cltensor.profile() as prof:
                    y.backward(_t(g, device))
            runs.append((len(prof.records()), y.numpy(), g, X.grad, W.grad, B.grad))
        vector_f64 = norm._tuning(device)["relu_bias"] == "vec16" and dtype == cltensor.float64
        assert runs[0][0] == runs[1][0] - (0 if vector_f64 else 1), (runs[0][0], runs[1][0])
        tol = 1e-5 if dtype == cltensor.float32 else 1e-12
        for _, out, g, gx, gw, gb in runs:
            masked = np.where(out > 0, g, 0).astype(np.float64)
            assert rel_error(gb, masked.sum((0, 2, 3))) <= tol
            _, rgx, rgw = ref_conv(x.astype(np.float64), w.astype(np.float64),
                                   b.astype(np.float64), grad=masked, padding=1)
            assert rel_error(gx, rgx) <= tol and rel_error(gw, rgw) <= tol


@pytest.mark.parametrize("half", sorted(HALF_ROUNDOFF))
def test_conv_relu_backward_on_16bit_data_takes_bias_gradient_along(device, rng, half,
                                                                     monkeypatch):
    """The same on float16/bfloat16 tensors: one launch fewer, the input and weight gradients
    bit for bit those of relu_backward and a sum (the same masked gradient), the bias gradient
    within one rounding of theirs."""
    dtype = getattr(cltensor, half)
    x, w, b, g = (rng.standard_normal(s).astype(np.float32)
                  for s in ((2, 3, 8, 9), (5, 3, 3, 3), 5, (2, 5, 8, 9)))
    runs = []
    for fused in (True, False):
        with monkeypatch.context() as patch:
            if not fused:
                patch.setattr(norm, "relu_bias_grad", lambda g, y: None)
            plans.clear()
            X, W, B = (_t(a, device).to(dtype).requires_grad_() for a in (x, w, b))
            y = F.conv2d(X, W, B, padding=1, algo="im2col", relu=True)
            with cltensor.profile() as prof:
                y.backward(_t(g, device).to(dtype))
        runs.append((len(prof.records()), X.grad.float().numpy(), W.grad.float().numpy(),
                     B.grad.float().numpy()))
    (fused_n, *fused_grads), (plain_n, *plain_grads) = runs
    assert fused_n == plain_n - 1, (fused_n, plain_n)
    for a, b_ in zip(fused_grads[:2], plain_grads[:2]):
        np.testing.assert_array_equal(a, b_)
    gb, ref = fused_grads[2], plain_grads[2]
    assert (np.abs(gb - ref) <= 2 * HALF_ROUNDOFF[half] * np.abs(ref) + 1e-6).all()


def _with_and_without_masks(monkeypatch, run):
    """[run() with the ReLU masks taken in the passes' kernels, run() with them not
    (function._masks_relu off)], each on fresh plans."""
    from cltensor.conv import function
    out = []
    for fused in (True, False):
        with monkeypatch.context() as patch:
            if not fused:
                patch.setattr(function, "_masks_relu", lambda *a: False)
            plans.clear()
            out.append(run())
    return out


def _channel_slice(g, device):
    """g on the device as channels 2 .. 2 + C of a tensor with 5 more (NaN: read, they show)."""
    wide = np.full((g.shape[0], g.shape[1] + 5) + g.shape[2:], np.nan, g.dtype)
    wide[:, 2:2 + g.shape[1]] = g
    return _t(wide, device)[:, 2:2 + g.shape[1]]


# (input shape, weight shape, conv2d keywords): stride 1 and 2 (an upsampled gather in the
# input gradient), a plain 1x1 product, groups, a channels_last input, and output gradients
# that are channel slices of a wider tensor's (an inception module's concatenation: their
# image stride is not the ReLU output's); K = 32 taps leave the weight gradient's tiles no
# spare column for the bias, which then takes a launch of its own either way (relu_bias_grad's
# sums alone, or with the masked gradient)
MASK_CASES = [((2, 3, 9, 8), (5, 3, 3, 3), {"padding": 1}),
              ((2, 32, 6, 5), (6, 32, 1, 1), {"bias_alone": True}),
              ((2, 4, 9, 9), (6, 4, 3, 3), {"stride": 2, "padding": 1}),
              ((1, 8, 5, 6), (7, 8, 1, 1), {}),
              ((2, 4, 7, 7), (6, 2, 5, 5), {"padding": 2, "groups": 2}),
              ((2, 3, 6, 7), (4, 3, 3, 3), {"padding": 1, "channels_last": True}),
              ((3, 8, 5, 6), (7, 8, 1, 1), {"sliced": True}),
              ((2, 4, 9, 9), (6, 4, 3, 3), {"stride": 2, "padding": 1, "sliced": True}),
              ((2, 4, 7, 7), (6, 2, 5, 5), {"padding": 2, "groups": 2, "sliced": True})]


@pytest.mark.parametrize("case", MASK_CASES)
def test_gpu_implicit_gemm_takes_relu_back_as_it_reads(device, rng, fp_dtypes, poisoned_bytes,
                                                       monkeypatch, case):
    """The GPU implicit-GEMM kernels (cx_conv's input gradient, cx_wgrad) of a Conv2d + ReLU
    take the output gradient back through the ReLU as they read it: one launch fewer than
    relu_backward first, the gradients (a NaN-free ReLU output with zeros) against float64."""
    from cltensor.conv import implicit
    monkeypatch.setattr(implicit, "KERNEL_STYLE", "gpu")
    xshape, wshape, kw = case
    kw = dict(kw)
    channels_last = kw.pop("channels_last", False)
    sliced = kw.pop("sliced", False)
    bias_alone = kw.pop("bias_alone", False)
    for dtype in fp_dtypes:
        x, w, b = (rng.standard_normal(s).astype(dtype.type) for s in (xshape, wshape, wshape[:1]))

        def run():
            X, W, B = (_t(a, device).requires_grad_() for a in (x, w, b))
            Xin = X.contiguous(memory_format=cltensor.channels_last) if channels_last else X
            y = F.conv2d(Xin, W, B, algo="implicit_gemm", relu=True, **kw)
            g = rng.standard_normal(y.shape).astype(dtype.type)
            G = _t(g, device)  # in the output's layout, as the next layer's gradient
            G = G.contiguous(memory_format=cltensor.channels_last) if channels_last else G
            if sliced:
                G = _channel_slice(g, device)
                assert G.strides[0] != y.strides[0]
            with cltensor.profile() as prof:
                y.backward(G)
            names = [r["name"] for r in prof.records()]
            return names, y, G, g, X.grad, W.grad, B.grad
        runs = _with_and_without_masks(monkeypatch, run)
        _, y, G = runs[1][:3]  # the unmasked run's output and output gradient
        # the bias alone: one launch fewer where relu_bias_grad's one-launch form applies
        fewer = 1 if not bias_alone or norm.relu_bias_grad(G, y, masked_out=False) else 0
        assert len(runs[0][0]) == len(runs[1][0]) - fewer, (runs[0][0], runs[1][0])
        assert "cx_wgrad" in runs[0][0]
        tol = 1e-5 if dtype == cltensor.float32 else 1e-12
        for _, out, _, g, gx, gw, gb in runs:
            masked = np.where(out.numpy() > 0, g, 0).astype(np.float64)
            assert rel_error(gb, masked.sum((0, 2, 3))) <= tol
            _, rgx, rgw = ref_conv(x.astype(np.float64), w.astype(np.float64),
                                   b.astype(np.float64), grad=masked, **kw)
            assert rel_error(gx, rgx) <= tol, (case, dtype, "gx")
            assert rel_error(gw, rgw) <= tol, (case, dtype, "gw")


@pytest.mark.parametrize("case", [((2, 3, 9, 8), (5, 3, 3, 3), {"padding": 1}),
                                  ((2, 4, 7, 7), (6, 2, 5, 5), {"padding": 2, "groups": 2}),
                                  ((3, 4, 6, 5), (6, 4, 3, 3), {"padding": 1, "sliced": True})])
def test_im2col_takes_relu_back_in_its_layout_copy(device, rng, fp_dtypes, poisoned_bytes,
                                                   monkeypatch, case):
    """im2col's backward takes the output gradient of a Conv2d + ReLU (no bias: its gradient
    would need the masked gradient itself) back through the ReLU as it copies it to its
    (C, N*H*W) layout: one launch fewer than relu_backward first, the gradients against
    float64, also for a gradient that is a channel slice of a wider tensor's."""
    xshape, wshape, kw = case
    kw = dict(kw)
    sliced = kw.pop("sliced", False)
    for dtype in fp_dtypes:
        x, w = (rng.standard_normal(s).astype(dtype.type) for s in (xshape, wshape))

        def run():
            X, W = (_t(a, device).requires_grad_() for a in (x, w))
            y = F.conv2d(X, W, None, algo="im2col", relu=True, **kw)
            g = rng.standard_normal(y.shape).astype(dtype.type)
            G = _channel_slice(g, device) if sliced else _t(g, device)
            with cltensor.profile() as prof:
                y.backward(G)
            return [r["name"] for r in prof.records()], y.numpy(), g, X.grad, W.grad
        runs = _with_and_without_masks(monkeypatch, run)
        assert len(runs[0][0]) == len(runs[1][0]) - 1, (runs[0][0], runs[1][0])
        tol = 1e-5 if dtype == cltensor.float32 else 1e-12
        for _, out, g, gx, gw in runs:
            masked = np.where(out > 0, g, 0).astype(np.float64)
            _, rgx, rgw = ref_conv(x.astype(np.float64), w.astype(np.float64), None,
                                   grad=masked, **kw)
            assert rel_error(gx, rgx) <= tol, (case, dtype, "gx")
            assert rel_error(gw, rgw) <= tol, (case, dtype, "gw")


def test_im2col_reads_one_image_gradient_in_place(device, rng, fp_dtypes, poisoned_bytes):
    """At batch 1 the output gradient's (C, N*H*W) layout is its own: im2col's backward makes
    no copy of it (no elementwise launch), and the gradients match float64."""
    for dtype in fp_dtypes:
        x, w, g = (rng.standard_normal(s).astype(dtype.type)
                   for s in ((1, 3, 7, 6), (4, 3, 3, 3), (1, 4, 7, 6)))
        plans.clear()
        X, W = (_t(a, device).requires_grad_() for a in (x, w))
        y = F.conv2d(X, W, None, algo="im2col", padding=1)
        with cltensor.profile() as prof:
            y.backward(_t(g, device))
        names = [r["name"] for r in prof.records()]
        assert not [n for n in names if n.startswith("ew_")], names
        tol = 1e-5 if dtype == cltensor.float32 else 1e-12
        _, rgx, rgw = ref_conv(x.astype(np.float64), w.astype(np.float64), None,
                               grad=g.astype(np.float64), padding=1)
        assert rel_error(X.grad, rgx) <= tol
        assert rel_error(W.grad, rgw) <= tol
