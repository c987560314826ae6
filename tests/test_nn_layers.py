"""cltensor.nn's layer modules: each one's wiring, defaults and initialization (Linear, Conv2d,
Embedding, EmbeddingBag, the activations, pooling, the norms, dropout, the losses, the shape
and padding modules) against numpy or torch; cltensor.nn.init's fills and gains; a model's
outputs and gradients against torch's from the same weights; no stray warnings. The Module
machinery is in test_nn_modules.py, whose helper _t these tests share."""
import math
import warnings

import numpy as np
import pyopencl as cl
import pytest

import cltensor
import cltensor.nn.functional as F
from cltensor import nn
from cltensor.nn import init
from cltensor.testing import assert_close
from test_nn_modules import _t


# ---- layers: wiring, defaults and initialization -------------------------------------------------

def test_linear(device, rng):
    lin = nn.Linear(5, 3, device=device)
    x = rng.standard_normal((2, 4, 5)).astype(np.float32)
    ref = x.astype(np.float64) @ lin.weight.numpy().T + lin.bias.numpy()
    assert_close(lin(_t(x, device)), ref, rtol=1e-5, atol=1e-5)
    nobias = nn.Linear(5, 3, bias=False, device=device)
    assert nobias.bias is None and list(nobias.state_dict()) == ["weight"]
    if device.has_fp64:
        assert nn.Linear(2, 2, dtype=cltensor.float64, device=device).weight.dtype == np.float64
    with pytest.raises(TypeError, match="floating dtype"):
        nn.Linear(2, 2, dtype=cltensor.int32, device=device)
    with pytest.raises(ValueError, match="out_features must be non-negative"):
        nn.Linear(2, -1)


def test_default_initialization_is_torchs(device):
    """kaiming_uniform_(a=sqrt(5)) weights and fan-in bias: U(+-1/sqrt(fan_in)), seeded."""
    for make, fan_in in ((lambda: nn.Linear(50, 400, device=device), 50),
                         (lambda: nn.Conv2d(6, 300, (3, 2), groups=2, device=device), 3 * 3 * 2)):
        cltensor.manual_seed(0)
        m = make()
        bound = 1 / math.sqrt(fan_in)
        for t in (m.weight.numpy(), m.bias.numpy()):
            assert t.min() >= -bound and t.max() <= bound
        w = m.weight.numpy()
        assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound
        cltensor.manual_seed(0)
        np.testing.assert_array_equal(make().weight.numpy(), w)


def test_embedding(device, rng):
    emb = nn.Embedding(10, 4, padding_idx=-1, device=device)
    assert emb.padding_idx == 9
    w = emb.weight.numpy()
    np.testing.assert_array_equal(w[9], np.zeros(4, np.float32))
    idx = np.array([[1, 9], [3, 3]])
    np.testing.assert_array_equal(emb(_t(idx, device)).numpy(), w[idx])
    pre = nn.Embedding.from_pretrained(_t(w, device))
    assert not pre.weight.requires_grad and pre.num_embeddings == 10
    with pytest.raises(ValueError, match="padding_idx 10 must be within"):
        nn.Embedding(10, 4, padding_idx=10)
    capped = nn.Embedding(10, 4, max_norm=0.5, norm_type=1.0, scale_grad_by_freq=True,
                          device=device)
    assert capped.max_norm == 0.5 and capped.scale_grad_by_freq
    out = capped(_t(np.array([2, 2, 7]), device))
    assert np.abs(capped.weight.numpy()[[2, 7]]).sum(1).max() <= 0.5 + 1e-6
    out.sum().backward()
    assert_close(capped.weight.grad.numpy()[[2, 7]], np.ones((2, 4)))  # 2 picked twice, / 2
    with pytest.raises(NotImplementedError, match="sparse"):
        nn.Embedding(10, 4, sparse=True)


def test_embedding_bag(device, rng):
    bag = nn.EmbeddingBag(10, 4, mode="sum", padding_idx=-1, device=device)
    assert bag.padding_idx == 9 and bag.weight.requires_grad
    w = bag.weight.numpy()
    np.testing.assert_array_equal(w[9], np.zeros(4, np.float32))
    idx, offsets = np.array([1, 9, 3, 3, 0]), np.array([0, 2])
    want = np.stack([w[1], w[3] * 2 + w[0]])
    assert_close(bag(_t(idx, device), _t(offsets, device)), want, rtol=1e-6)
    psw = rng.standard_normal(5).astype(np.float32)
    assert_close(bag(_t(idx, device), _t(offsets, device), _t(psw, device)),
                 np.stack([w[1] * psw[0], w[3] * (psw[2] + psw[3]) + w[0] * psw[4]]),
                 rtol=1e-5, atol=1e-6)
    pre = nn.EmbeddingBag.from_pretrained(_t(w, device), mode="max", include_last_offset=True)
    assert not pre.weight.requires_grad and pre.mode == "max"
    assert_close(pre(_t(idx, device), _t(np.array([0, 2, 5]), device)),
                 np.stack([w[[1, 9]].max(0), w[[3, 3, 0]].max(0)]))
    assert repr(pre) == "EmbeddingBag(10, 4, mode='max')"
    with pytest.raises(ValueError, match="mode must be one of"):
        nn.EmbeddingBag(10, 4, mode="min")
    capped = nn.EmbeddingBag(10, 4, max_norm=0.5, scale_grad_by_freq=True, mode="sum",
                             device=device)
    capped(_t(np.array([2, 2, 7]), device), _t(np.array([0, 1]), device)).sum().backward()
    assert np.linalg.norm(capped.weight.numpy()[[2, 7]], axis=1).max() <= 0.5 + 1e-6
    assert_close(capped.weight.grad.numpy()[[2, 7]], np.ones((2, 4)))
    with pytest.raises(NotImplementedError, match="sparse"):
        nn.EmbeddingBag(10, 4, sparse=True)


def test_activation_modules(device, rng):
    x = rng.standard_normal((3, 5)) * 2
    xt = _t(x, device, np.float32)
    e = np.exp(x - x.max(1, keepdims=True))
    cases = [(nn.ReLU(), np.maximum(x, 0)),
             (nn.LeakyReLU(0.2), np.where(x > 0, x, 0.2 * x)),
             (nn.ELU(0.5), np.where(x > 0, x, 0.5 * np.expm1(x))),
             (nn.Sigmoid(), 1 / (1 + np.exp(-x))), (nn.Tanh(), np.tanh(x)),
             (nn.Hardtanh(-0.5, 1.5), np.clip(x, -0.5, 1.5)),
             (nn.Softmax(dim=1), e / e.sum(1, keepdims=True)),
             (nn.LogSoftmax(dim=-1), np.log(e / e.sum(1, keepdims=True))),
             (nn.Identity(3, k=1), x), (nn.Flatten(0), x.ravel()),
             (nn.ReLU6(), np.clip(x, 0, 6)), (nn.SiLU(), x / (1 + np.exp(-x))),
             (nn.GELU(approximate="tanh"),
              0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
             (nn.Mish(), x * np.tanh(np.log1p(np.exp(x)))),
             (nn.Softplus(2.0, 3.0), np.where(2 * x > 3, x, np.log1p(np.exp(2 * x)) / 2)),
             (nn.Hardswish(), x * np.clip(x + 3, 0, 6) / 6),
             (nn.Hardsigmoid(), np.clip(x + 3, 0, 6) / 6),
             (nn.SELU(), 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x))),
             (nn.CELU(0.5), np.where(x > 0, x, 0.5 * np.expm1(x / 0.5))),
             (nn.LogSigmoid(), -np.log1p(np.exp(-x))), (nn.Softsign(), x / (1 + abs(x))),
             (nn.Tanhshrink(), x - np.tanh(x)),
             (nn.Softshrink(0.3), np.where(x > 0.3, x - 0.3, np.where(x < -0.3, x + 0.3, 0))),
             (nn.Hardshrink(0.3), np.where(abs(x) > 0.3, x, 0)),
             (nn.Threshold(0.1, -5.0), np.where(x > 0.1, x, -5.0))]
    for module, ref in cases:
        assert_close(module(xt), ref, rtol=1e-5, atol=1e-6)
    assert_close(nn.GLU()(xt[:, 1:]), x[:, 1:3] / (1 + np.exp(-x[:, 3:])), rtol=1e-5, atol=1e-6)
    inplace = _t(x, device, np.float32)
    assert nn.ReLU(inplace=True)(inplace) is inplace
    assert_close(inplace, np.maximum(x, 0), rtol=1e-6)
    with pytest.warns(UserWarning, match="Implicit dimension choice"):
        nn.Softmax()(xt)
    with pytest.raises(ValueError, match="max_val \\(0\\) must be greater than min_val"):
        nn.Hardtanh(1, 0)


def test_pooling_and_lrn_modules(device, rng):
    x = rng.standard_normal((2, 4, 6, 6))
    xt = _t(x, device, np.float32)
    windows = x.reshape(2, 4, 3, 2, 3, 2)
    assert_close(nn.MaxPool2d(2)(xt), windows.max((3, 5)), rtol=1e-6)
    assert_close(nn.AvgPool2d(2)(xt), windows.mean((3, 5)), rtol=1e-5, atol=1e-6)
    assert_close(nn.AdaptiveAvgPool2d((1, 1))(xt), x.mean((2, 3), keepdims=True), rtol=1e-5,
                 atol=1e-6)
    assert nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True)(xt).shape == (2, 4, 4, 4)
    out, idx = nn.MaxPool2d(2, return_indices=True)(xt)
    assert idx.dtype == np.int64 and out.shape == idx.shape
    sq = np.pad(x ** 2, ((0, 0), (1, 1), (0, 0), (0, 0)))
    window_sum = sq[:, :-2] + sq[:, 1:-1] + sq[:, 2:]
    lrn = x / (2.0 + 1e-2 / 3 * window_sum) ** 0.75
    assert_close(nn.LocalResponseNorm(3, alpha=1e-2, beta=0.75, k=2.0)(xt), lrn, rtol=1e-5,
                 atol=1e-6)


def test_batch_norm_modules(device, rng):
    x = rng.standard_normal((8, 3, 4, 5)) * 3 + 1
    bn = nn.BatchNorm2d(3, device=device)
    y = bn(_t(x, device, np.float32))
    mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
    ref = (x - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5)
    assert_close(y, ref, rtol=1e-4, atol=1e-5)
    assert_close(bn.running_mean, 0.1 * mean, rtol=1e-5, atol=1e-6)
    assert_close(bn.running_var, 0.9 + 0.1 * x.var((0, 2, 3), ddof=1), rtol=1e-5)
    assert bn.num_batches_tracked.item() == 1 and bn.num_batches_tracked.dtype == np.int64
    bn.eval()
    rm, rv = bn.running_mean.numpy(), bn.running_var.numpy()
    assert_close(bn(_t(x, device, np.float32)),
                 (x - rm[:, None, None]) / np.sqrt(rv[:, None, None] + 1e-5), rtol=1e-4, atol=1e-5)
    assert bn.num_batches_tracked.item() == 1          # eval leaves the statistics alone
    cumulative = nn.BatchNorm1d(3, momentum=None, device=device)
    batches = [rng.standard_normal((6, 3)) + k for k in range(3)]
    for b in batches:
        cumulative(_t(b, device, np.float32))
    assert_close(cumulative.running_mean, np.mean([b.mean(0) for b in batches], 0), rtol=1e-5,
                 atol=1e-6)
    plain = nn.BatchNorm1d(3, affine=False, track_running_stats=False, device=device)
    assert list(plain.state_dict()) == [] and plain.weight is None
    plain.eval()                                       # no running stats: batch statistics
    z = rng.standard_normal((5, 3, 2))
    assert_close(plain(_t(z, device, np.float32)),
                 (z - z.mean((0, 2), keepdims=True)) / np.sqrt(z.var((0, 2), keepdims=True) + 1e-5),
                 rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="expected 4D input, got 3D input"):
        bn(_t(z, device, np.float32))
    with pytest.raises(ValueError, match="expected 3 channels in dim 1"):
        bn(cltensor.zeros(2, 4, 3, 3, device=device))
    bn.train()
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        bn(cltensor.ones(1, 3, 1, 1, device=device))
    assert bn.num_batches_tracked.item() == 1          # a rejected batch is not counted


def test_dropout_module(device):
    drop = nn.Dropout(0.25)
    x = cltensor.ones(4000, device=device)
    y = drop(x).numpy()
    assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.75)}
    assert 0.2 < (y == 0).mean() < 0.3
    drop.eval()
    np.testing.assert_array_equal(drop(x).numpy(), np.ones(4000, np.float32))
    assert repr(drop) == "Dropout(p=0.25, inplace=False)"
    with pytest.raises(ValueError, match="between 0 and 1, but got 1.5"):
        nn.Dropout(1.5)


def test_loss_modules(device, rng):
    logits = rng.standard_normal((6, 4))
    target = rng.integers(0, 4, 6)
    lt, tt = _t(logits, device, np.float32), _t(target, device)
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    nll = -logp[np.arange(6), target]
    assert_close(nn.CrossEntropyLoss()(lt, tt), nll.mean(), rtol=1e-5)
    assert_close(nn.CrossEntropyLoss(reduction="sum")(lt, tt), nll.sum(), rtol=1e-5)
    assert_close(nn.NLLLoss(reduction="none")(_t(logp, device, np.float32), tt), nll, rtol=1e-5)
    y = rng.standard_normal((6, 4))
    assert_close(nn.MSELoss()(lt, _t(y, device, np.float32)), ((logits - y) ** 2).mean(), rtol=1e-5)
    p = rng.random((6, 4))
    bce = np.maximum(logits, 0) - logits * p + np.log1p(np.exp(-np.abs(logits)))
    assert_close(nn.BCEWithLogitsLoss()(lt, _t(p, device, np.float32)), bce.mean(), rtol=1e-5)
    with pytest.warns(UserWarning, match="size_average and reduce"):
        assert nn.MSELoss(size_average=False).reduction == "sum"
    with pytest.raises(ValueError, match="'avg' is not a valid value for reduction"):
        nn.MSELoss(reduction="avg")
    with pytest.raises(ValueError, match="batch_size \\(6\\) to match target"):
        nn.CrossEntropyLoss()(lt, _t(target[:5], device))


def test_conv2d_module(device, rng):
    if not hasattr(F, "conv2d"):
        pytest.skip("cltensor.nn.functional.conv2d is not wired yet")
    conv = nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2, device=device)
    x = rng.standard_normal((2, 4, 7, 7)).astype(np.float32)
    ref = _conv2d_reference(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), conv.weight.numpy(),
                            conv.bias.numpy(), 2, 2)
    assert_close(conv(_t(x, device)), ref, rtol=1e-4, atol=1e-5)
    for mode, np_mode in (("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")):
        padded = nn.Conv2d(4, 2, 3, padding=1, padding_mode=mode, device=device)
        ref = _conv2d_reference(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), mode=np_mode),
                                padded.weight.numpy(), padded.bias.numpy(), 1, 1)
        assert_close(padded(_t(x, device)), ref, rtol=1e-4, atol=1e-5)
    same = nn.Conv2d(4, 2, (3, 4), padding="same", bias=False, device=device)
    assert same(_t(x, device)).shape == (2, 2, 7, 7)


def _conv2d_reference(xp, w, b, stride, groups):
    n, _, h, wd = xp.shape
    o, cg, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg].astype(np.float64)
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch,
                                                         w[g * og:(g + 1) * og, :, i, j])
    return out + b[None, :, None, None]


def test_conv2d_arguments():
    conv = nn.Conv2d(3, 8, 5, stride=(2, 1), bias=False, padding_mode="reflect", padding=2)
    assert conv.weight.shape == (8, 3, 5, 5) and conv.bias is None
    assert conv._reversed_padding_repeated_twice == (2, 2, 2, 2)
    assert nn.Conv2d(2, 2, (3, 4), padding="same")._reversed_padding_repeated_twice == (1, 2, 1, 1)
    for kwargs, match in [({"groups": 2}, "divisible by groups"),
                          ({"padding": "full"}, "invalid padding string"),
                          ({"padding": "same", "stride": 2}, "not supported for strided"),
                          ({"padding_mode": "mirror"}, "padding_mode must be one of"),
                          ({"stride": 0}, "must be positive")]:
        with pytest.raises(ValueError, match=match):
            nn.Conv2d(3, 8, 3, **kwargs)
    with pytest.raises(TypeError, match="kernel_size must be an int or a pair"):
        nn.Conv2d(3, 8, (3, 3, 3))


def test_layer_norm_and_group_norm_modules(device, rng):
    ln = nn.LayerNorm((4, 5), eps=1e-3, device=device)
    assert ln.weight.shape == (4, 5) and ln.bias.shape == (4, 5)
    assert (ln.weight.numpy() == 1).all() and (ln.bias.numpy() == 0).all()
    assert repr(ln) == "LayerNorm((4, 5), eps=0.001, elementwise_affine=True, bias=True)"
    assert nn.LayerNorm(3, bias=False).bias is None
    assert nn.LayerNorm(3, elementwise_affine=False).weight is None
    gn = nn.GroupNorm(2, 4, device=device)
    assert sorted(gn.state_dict()) == ["bias", "weight"]
    assert repr(gn) == "GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)"
    assert nn.GroupNorm(2, 4, bias=False).bias is None
    x = _t(rng.standard_normal((3, 4, 4, 5)), device, np.float32)
    with cltensor.no_grad():
        ln.weight.fill_(2.0)
        gn.bias.fill_(0.5)
    assert_close(ln(x), 2 * F.layer_norm(x, (4, 5), eps=1e-3).numpy(), rtol=1e-6, atol=1e-6)
    assert_close(gn(x), F.group_norm(x, 2).numpy() + 0.5, rtol=1e-6, atol=1e-6)
    gn(x).sum().backward()
    assert_close(gn.bias.grad, np.full(4, 3 * 4 * 5.0))
    with pytest.raises(ValueError, match="must be divisible by num_groups"):
        nn.GroupNorm(3, 4)
    with pytest.raises(ValueError, match="num_groups=2"):
        gn(_t(np.zeros((2, 3, 4)), device, np.float32))


def test_feature_dropout_modules(device, rng):
    x = _t(np.ones((8, 16, 3, 3)), device, np.float32)
    drop = nn.Dropout2d(0.5)
    assert repr(drop) == "Dropout2d(p=0.5, inplace=False)"
    maps = drop(x).numpy().reshape(8 * 16, 9)
    assert ((maps == 0).all(1) | (maps == 2).all(1)).all() and (maps == 0).any()
    drop.eval()
    assert drop(x) is x
    assert nn.Dropout1d(0.2)(_t(np.ones((4, 5, 6)), device, np.float32)).shape == (4, 5, 6)
    assert nn.Dropout3d(0.2)(_t(np.ones((2, 3, 2, 2, 2)), device, np.float32)).shape == \
        (2, 3, 2, 2, 2)


def test_shape_and_padding_modules_against_torch(device, rng):
    """PixelShuffle, PixelUnshuffle, ChannelShuffle, PReLU, the padding modules and Unflatten:
    outputs and input (and PReLU weight) gradients as torch's, in float64."""
    torch = pytest.importorskip("torch")
    dtype = np.float64 if device.has_fp64 else np.float32
    tol = {"rtol": 1e-12, "atol": 1e-12} if dtype == np.float64 else {"rtol": 1e-5, "atol": 1e-6}
    cases = [(lambda ns: ns.PixelShuffle(2), (2, 8, 3, 4)),
             (lambda ns: ns.PixelUnshuffle(2), (2, 3, 6, 4)),
             (lambda ns: ns.ChannelShuffle(3), (2, 6, 2, 3)),
             (lambda ns: ns.PReLU(6), (2, 6, 3, 2)), (lambda ns: ns.PReLU(), (5, 4)),
             (lambda ns: ns.ZeroPad2d((1, 2, 0, 3)), (2, 3, 4, 5)),
             (lambda ns: ns.ConstantPad1d(2, -1.5), (2, 3, 4)),
             (lambda ns: ns.ReflectionPad2d(2), (1, 2, 4, 5)),
             (lambda ns: ns.ReplicationPad1d((3, 1)), (2, 3, 4)),
             (lambda ns: ns.CircularPad2d((1, 2, 2, 1)), (1, 2, 4, 5)),
             (lambda ns: ns.Unflatten(-1, (2, -1)), (3, 4, 6))]
    for make, shape in cases:
        a = rng.standard_normal(shape).astype(dtype)
        ours, theirs = make(nn), make(torch.nn)
        if isinstance(ours, nn.PReLU):
            w = rng.uniform(-1, 1, ours.weight.shape).astype(dtype)
            ours.weight = nn.Parameter(_t(w, device))
            theirs.weight = torch.nn.Parameter(torch.tensor(w))
        x, t = _t(a, device).requires_grad_(), torch.tensor(a, requires_grad=True)
        y, ty = ours(x), theirs(t)
        assert_close(y, ty.detach().numpy(), **tol)
        g = rng.standard_normal(ty.shape).astype(dtype)
        y.backward(_t(g, device))
        ty.backward(torch.tensor(g))
        assert_close(x.grad, t.grad.numpy(), **tol)
        if isinstance(ours, nn.PReLU):
            assert_close(ours.weight.grad, theirs.weight.grad.numpy(), **tol)
    x = _t(np.zeros((2, 6, 4, 4)), device)
    for call, match in [(lambda: F.pixel_shuffle(x, 4), "not divisible by upscale_factor"),
                        (lambda: F.pixel_unshuffle(x, 3), "divisible by downscale_factor"),
                        (lambda: F.channel_shuffle(x, 4), "divisible by groups 4"),
                        (lambda: F.prelu(x, _t(np.ones(4), device)), "1 or 6"),
                        (lambda: nn.ZeroPad2d((1, 2)), "4-tuple"),
                        (lambda: x.unflatten(1, (4, 2)), "don't multiply up")]:
        with pytest.raises(ValueError, match=match):
            call()


# ---- init ----------------------------------------------------------------------------------------

def test_init_functions(device):
    w = cltensor.empty(200, 300, device=device)
    fan_in, fan_out = 300, 200
    cases = [
        (lambda: init.uniform_(w, -0.3, 0.2), (-0.3, 0.2), None),
        (lambda: init.normal_(w, 0.5, 2.0), None, (0.5, 2.0)),
        (lambda: init.xavier_uniform_(w, gain=2.0),
         (-2 * math.sqrt(6 / (fan_in + fan_out)), 2 * math.sqrt(6 / (fan_in + fan_out))), None),
        (lambda: init.xavier_normal_(w), None, (0, math.sqrt(2 / (fan_in + fan_out)))),
        (lambda: init.kaiming_uniform_(w, mode="fan_out", nonlinearity="relu"),
         (-math.sqrt(6 / fan_out), math.sqrt(6 / fan_out)), None),
        (lambda: init.kaiming_normal_(w, a=0.1), None,
         (0, math.sqrt(2 / (1 + 0.01)) / math.sqrt(fan_in))),
    ]
    for fill, bounds, moments in cases:
        assert fill() is w
        v = w.numpy().astype(np.float64)
        if bounds:
            lo, hi = bounds
            assert lo <= v.min() < lo + 0.01 * (hi - lo) and hi - 0.01 * (hi - lo) < v.max() < hi
            assert abs(v.mean() - (lo + hi) / 2) < 0.01 * (hi - lo)
        else:
            mean, std = moments
            assert abs(v.mean() - mean) < 0.02 * std and abs(v.std() / std - 1) < 0.02
    for fill, value in ((init.zeros_, 0.0), (init.ones_, 1.0),
                        (lambda t: init.constant_(t, 2.5), 2.5)):
        fill(w)
        assert np.all(w.numpy() == value)
    p = nn.Parameter(cltensor.empty(3, 4, device=device))
    init.kaiming_uniform_(p)                              # works on leaves requiring grad
    assert p.requires_grad and p.grad_fn is None
    g1, g2 = cltensor.Generator().manual_seed(3), cltensor.Generator().manual_seed(3)
    a = init.normal_(cltensor.empty(10, device=device), generator=g1).numpy()
    np.testing.assert_array_equal(init.normal_(cltensor.empty(10, device=device),
                                               generator=g2).numpy(), a)


def test_init_errors_and_gains():
    assert init.calculate_gain("relu") == math.sqrt(2)
    assert init.calculate_gain("tanh") == 5 / 3
    assert init.calculate_gain("conv2d") == 1 and init.calculate_gain("selu") == 0.75
    assert init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    with pytest.raises(ValueError, match="unsupported nonlinearity 'gelu'"):
        init.calculate_gain("gelu")
    with pytest.raises(ValueError, match="negative_slope 'x' is not a valid number"):
        init.calculate_gain("leaky_relu", "x")
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(cltensor.empty(5))
    with pytest.raises(ValueError, match="mode 'fan_avg' not supported"):
        init.kaiming_normal_(cltensor.empty(2, 2), mode="fan_avg")
    with pytest.warns(UserWarning, match="zero-element tensors is a no-op"):
        init.kaiming_uniform_(cltensor.empty(0, 3))


def test_gains_match_torch():
    torch = pytest.importorskip("torch")
    for name, param in (("linear", None), ("sigmoid", None), ("tanh", None), ("relu", None),
                        ("leaky_relu", None), ("leaky_relu", 0.3), ("selu", None)):
        assert init.calculate_gain(name, param) == torch.nn.init.calculate_gain(name, param)


# ---- against torch: a model's outputs and gradients from the same weights ------------------------

def _mixed_model(ns, conv):
    """Every layer module but Dropout (random) and Embedding; Conv2d when F has conv2d."""
    first = [ns.Conv2d(3, 4, 3, padding=1)] if conv else []
    c = 4 if conv else 3
    return ns.Sequential(*first, ns.BatchNorm2d(c), ns.ReLU(), ns.LocalResponseNorm(3),
                         ns.MaxPool2d(2), ns.AvgPool2d(2, stride=1, padding=1,
                                                       count_include_pad=False),
                         ns.AdaptiveAvgPool2d(2), ns.Flatten(), ns.Linear(4 * c, 8),
                         ns.BatchNorm1d(8), ns.LeakyReLU(0.1), ns.ELU(), ns.Linear(8, 8),
                         ns.Hardtanh(-2, 2), ns.Tanh(), ns.Linear(8, 5), ns.Sigmoid(),
                         ns.Linear(5, 4), ns.LogSoftmax(dim=1))


def test_model_matches_torch(device, rng):
    torch = pytest.importorskip("torch")
    conv = hasattr(F, "conv2d")
    theirs = _mixed_model(torch.nn, conv)
    ours = _mixed_model(nn, conv).to(device)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    x = rng.standard_normal((6, 3, 8, 8)).astype(np.float32)
    y = rng.integers(0, 4, 6)
    for train in (True, False):
        theirs.train(train)
        ours.train(train)
        theirs.zero_grad()
        ours.zero_grad()
        t_loss = torch.nn.NLLLoss()(theirs(torch.from_numpy(x)), torch.from_numpy(y))
        t_loss.backward()
        loss = nn.NLLLoss()(ours(_t(x, device)), _t(y, device))
        loss.backward()
        assert_close(loss, t_loss.item(), rtol=1e-4)
        grads = {n: p.grad.numpy() for n, p in theirs.named_parameters()}
        for name, p in ours.named_parameters():
            assert_close(p.grad, grads[name], rtol=1e-3, atol=1e-5)
        for name, v in theirs.state_dict().items():
            assert_close(ours.state_dict()[name], v.numpy(), rtol=1e-5, atol=1e-6)


def test_unrelated_warnings_are_not_raised(device):
    """Constructing and running the common layers warns about nothing. NOTE: an OpenCL
    compiler's build log (pyopencl's CompilerWarning: Intel's runtime writes one whenever this
    test builds the kernels first in its process) is the driver's, not the layers'."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", cl.CompilerWarning)
        m = nn.Sequential(nn.Linear(3, 3, device=device), nn.Softmax(dim=1))
        m(cltensor.randn(2, 3, device=device))
