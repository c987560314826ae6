"""cltensor.nn: Module mechanics, Parameter, containers, each layer module's wiring, default
initialization (cltensor.nn.init), state_dict round trips (also through .npz files and from
torch-style numpy dicts), device/dtype moves, reprs, and bad input."""
import copy
import io
import math
import re
import warnings
from collections import OrderedDict

import numpy as np
import pyopencl as cl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cltensor
import cltensor.nn.functional as F
import cltensor.optim
from cltensor import nn
from cltensor.nn import init
from cltensor.serialization import load, save
from cltensor.testing import assert_close


def _t(arr, device, dtype=None):
    return cltensor.from_numpy(np.asarray(arr), device=device, dtype=dtype)


class Net(nn.Module):
    """A small model with every kind of member: submodules, a Parameter, buffers."""

    def __init__(self, device=None):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(4, 6, device=device), nn.ReLU(),
                                      nn.BatchNorm1d(6, device=device))
        self.head = nn.Linear(6, 3, bias=False, device=device)
        self.scale = nn.Parameter(cltensor.ones(3, device=device))
        self.register_buffer("offset", cltensor.zeros(3, device=device))
        self.register_buffer("scratch", cltensor.zeros(2, device=device), persistent=False)
        self.plain = 7

    def forward(self, x):
        return self.head(self.features(x)) * self.scale + self.offset


NET_PARAMS = ["scale", "features.0.weight", "features.0.bias", "features.2.weight",
              "features.2.bias", "head.weight"]
NET_STATE = NET_PARAMS[:1] + ["offset"] + NET_PARAMS[1:3] + NET_PARAMS[3:5] + [
    "features.2.running_mean", "features.2.running_var", "features.2.num_batches_tracked",
    "head.weight"]


# ---- registration and traversal ------------------------------------------------------------------

def test_registration_and_traversal(device):
    net = Net(device)
    assert [n for n, _ in net.named_parameters()] == NET_PARAMS
    assert len(list(net.parameters())) == 6
    assert [n for n, _ in net.named_buffers()] == [
        "offset", "scratch", "features.2.running_mean", "features.2.running_var",
        "features.2.num_batches_tracked"]
    assert list(net.state_dict()) == NET_STATE            # non-persistent buffer left out
    assert [n for n, _ in net.named_children()] == ["features", "head"]
    assert [n for n, _ in net.named_modules()] == ["", "features", "features.0", "features.1",
                                                   "features.2", "head"]
    assert [n for n, _ in net.features.named_parameters(prefix="f", recurse=False)] == []
    assert [n for n, _ in net.named_parameters(recurse=False)] == ["scale"]
    assert net.get_submodule("features.2") is net.features[2]
    assert net.plain == 7 and "head" in dir(net) and "offset" in dir(net)
    assert isinstance(net.scale, nn.Parameter) and net.scale.requires_grad
    del net.offset
    assert "offset" not in net.state_dict()
    with pytest.raises(AttributeError, match="'Net' object has no attribute 'nope'"):
        net.nope  # noqa: B018 -- the lookup is what raises
    with pytest.raises(AttributeError, match="has no submodule `x`"):
        net.get_submodule("features.x")


def test_reassignment_moves_between_registries(device):
    m = nn.Module()
    m.a = nn.Parameter(cltensor.ones(2, device=device))
    m.a = None                                         # a parameter slot can be emptied
    assert "a" in m._parameters and m.a is None and list(m.parameters()) == []
    m.b = nn.Linear(2, 2, device=device)
    m.b = nn.Parameter(cltensor.ones(2, device=device))  # a module replaced by a parameter
    assert "b" not in m._modules and "b" in m._parameters
    m.register_buffer("c", None)
    m.c = cltensor.ones(1, device=device)
    assert [n for n, _ in m.named_buffers()] == ["c"]


def test_registration_errors(device):
    m = nn.Linear(2, 3, device=device)
    with pytest.raises(TypeError, match="cannot assign 'ClTensor' as parameter 'weight'"):
        m.weight = cltensor.ones(3, 2, device=device)
    with pytest.raises(KeyError, match="be empty or contain"):
        m.register_buffer("a.b", cltensor.ones(1, device=device))
    with pytest.raises(KeyError, match="attribute 'in_features' already exists"):
        m.register_buffer("in_features", cltensor.ones(1, device=device))
    with pytest.raises(TypeError, match="cannot assign 'list' object to buffer 'x'"):
        m.register_buffer("x", [1.0])
    with pytest.raises(TypeError, match="cannot assign 'ClTensor' object to parameter 'p'"):
        m.register_parameter("p", cltensor.ones(1, device=device))
    with pytest.raises(TypeError, match="int is not a Module subclass"):
        m.add_module("child", 3)
    seq = nn.Sequential(nn.ReLU())
    with pytest.raises(TypeError, match="cannot assign 'int' as child module '0'"):
        setattr(seq, "0", 5)

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(cltensor.ones(1, device=device))

    with pytest.raises(AttributeError, match="before Module.__init__\\(\\) call"):
        Early()
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        nn.Module()(1)


def test_deepcopy(device):
    net = Net(device)
    twin = copy.deepcopy(net)
    assert list(twin.state_dict()) == NET_STATE
    for (name, a), b in zip(net.state_dict().items(), twin.state_dict().values()):
        assert a.storage is not b.storage, name
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert isinstance(twin.head.weight, nn.Parameter) and twin.plain == 7
    with cltensor.no_grad():
        twin.features[2].running_mean.fill_(3)
    assert net.features[2].running_mean.numpy().max() == 0


def test_shared_parameters_are_listed_once(device):
    lin = nn.Linear(3, 3, device=device)
    tied = nn.Sequential(lin, nn.ReLU(), lin)
    assert len(list(tied.parameters())) == 2
    assert [n for n, _ in tied.named_modules()] == ["", "0", "1"]
    # state_dict lists a shared child under each of its names, as torch does
    assert list(tied.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_train_eval_apply_requires_grad(device):
    net = Net(device)
    assert net.training and net.features[2].training
    assert net.eval() is net and not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    with pytest.raises(ValueError, match="expected to be a bool"):
        net.train("yes")
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "ReLU", "BatchNorm1d", "Sequential", "Linear", "Net"]
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    out = net(cltensor.randn(5, 4, device=device))
    assert out.grad_fn is None and not out.requires_grad


def _fake_grads(module):
    for p in module.parameters():
        p.grad = cltensor.ones(p.shape, dtype=p.dtype, device=p.device)


def test_zero_grad(device):
    net = Net(device)
    _fake_grads(net)
    net.zero_grad(set_to_none=False)
    for p in net.parameters():
        np.testing.assert_array_equal(p.grad.numpy(), np.zeros(p.shape, np.float32))
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


# ---- Parameter -----------------------------------------------------------------------------------

def test_parameter_behaves_as_a_tensor(device, rng):
    x = rng.standard_normal((3, 3)).astype(np.float32)
    base = _t(x, device)
    p = nn.Parameter(base)
    assert isinstance(p, cltensor.Tensor) and p.is_leaf and p.requires_grad
    assert p.storage is base.storage                       # shares the data, as torch
    y = p * 2 + p.t()
    assert type(y) is cltensor.Tensor and y.grad_fn is not None
    assert type(p.data) is cltensor.Tensor and not p.data.requires_grad
    assert repr(p).startswith("Parameter containing:\ntensor(")
    with cltensor.no_grad():
        p.copy_(p.t())                                     # overlapping copy: a temporary
    np.testing.assert_array_equal(p.numpy(), x.T)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        p.add_(1)
    q = copy.deepcopy(p)
    assert isinstance(q, nn.Parameter) and q.storage is not p.storage
    np.testing.assert_array_equal(q.numpy(), p.numpy())
    assert not nn.Parameter(base, requires_grad=False).requires_grad
    p.data = _t(np.zeros((2,), np.float64), device)
    assert p.shape == (2,) and p.dtype == np.float64 and isinstance(p, nn.Parameter)
    with pytest.raises(TypeError, match="floating point"):
        nn.Parameter(cltensor.zeros(2, dtype=cltensor.int64, device=device))
    with pytest.raises(TypeError, match="expected a ClTensor, got list"):
        nn.Parameter([1.0])


# ---- containers ----------------------------------------------------------------------------------

def test_sequential(device, rng):
    layers = [nn.Linear(4, 5, device=device), nn.Tanh(), nn.Linear(5, 2, device=device)]
    seq = nn.Sequential(*layers)
    x = _t(rng.standard_normal((3, 4)), device, np.float32)
    np.testing.assert_array_equal(seq(x).numpy(), layers[2](layers[1](layers[0](x))).numpy())
    assert len(seq) == 3 and seq[-1] is layers[2] and list(seq) == layers
    assert isinstance(seq[1:], nn.Sequential) and list(seq[1:]) == layers[1:]
    named = nn.Sequential(OrderedDict([("fc", layers[0]), ("act", nn.ReLU())]))
    assert list(named.state_dict()) == ["fc.weight", "fc.bias"] and named.fc is layers[0]
    seq.append(nn.Sigmoid())
    seq.insert(0, nn.Identity())
    assert [type(m).__name__ for m in seq] == ["Identity", "Linear", "Tanh", "Linear", "Sigmoid"]
    del seq[0]
    assert [n for n, _ in seq.named_children()] == ["0", "1", "2", "3"]
    seq[1] = nn.ReLU()
    assert isinstance(seq[1], nn.ReLU)
    with pytest.raises(IndexError, match="index 7 is out of range"):
        seq[7]
    with pytest.raises(TypeError, match="int is not a Module subclass"):
        nn.Sequential(nn.ReLU(), 3)


def test_module_list_and_dict(device):
    blocks = nn.ModuleList([nn.Linear(2, 2, device=device) for _ in range(3)])
    owner = nn.Module()
    owner.blocks = blocks
    assert len(list(owner.parameters())) == 6
    assert list(owner.state_dict())[:2] == ["blocks.0.weight", "blocks.0.bias"]
    blocks += [nn.ReLU()]
    blocks.insert(1, nn.Tanh())
    assert [type(m).__name__ for m in blocks] == ["Linear", "Tanh", "Linear", "Linear", "ReLU"]
    del blocks[1:3]
    assert len(blocks) == 3 and isinstance(blocks[-1], nn.ReLU)
    assert isinstance(blocks[:2], nn.ModuleList)
    with pytest.raises(TypeError, match="iterable of modules"):
        blocks.extend(nn.ReLU())
    heads = nn.ModuleDict({"a": nn.Linear(2, 1, device=device), "b": nn.ReLU()})
    assert list(heads) == ["a", "b"] and "a" in heads and len(heads) == 2
    assert list(heads.state_dict()) == ["a.weight", "a.bias"]


@settings(max_examples=30, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["append", "insert", "del", "set"]),
                              st.integers(-6, 6)), max_size=12))
def test_module_list_matches_a_python_list(ops):
    """Any sequence of edits keeps ModuleList (and its contiguous child names) like a list."""
    ml, ref = nn.ModuleList(), []
    for op, i in ops:
        m = nn.Identity()
        if op == "append":
            ml.append(m)
            ref.append(m)
        elif op == "insert":
            ml.insert(i, m)
            ref.insert(i, m)
        elif not -len(ref) <= i < len(ref):
            with pytest.raises(IndexError, match=f"index {i} is out of range"):
                if op == "del":
                    del ml[i]
                else:
                    ml[i] = m
            continue
        elif op == "del":
            del ml[i]
            del ref[i]
        else:
            ml[i] = m
            ref[i] = m
        assert list(ml) == ref
        assert [n for n, _ in ml.named_children()] == [str(k) for k in range(len(ref))]


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


def _conv_relu_net(device):
    cltensor.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, device=device), nn.ReLU(),
                         nn.Conv2d(8, 6, 1, device=device), nn.ReLU(inplace=True),
                         nn.MaxPool2d(2), nn.Conv2d(6, 4, 3, padding=1, groups=2,
                                                    device=device), nn.ReLU())


def _run_net(net, x, g, fused):
    """Output, input gradient, parameter gradients and kernel launches of one step of net:
    through Sequential (fused) or module by module (unfused)."""
    x = x.detach().requires_grad_()
    net.zero_grad(set_to_none=True)
    with cltensor.profile() as prof:
        if fused:
            y = net(x)
        else:
            y = x
            for m in net:
                y = m(y)
        y.backward(g)
    grads = [p.grad.numpy() for p in net.parameters()]
    return y.numpy(), x.grad.numpy(), grads, len(prof.records())


def test_sequential_fuses_conv2d_and_relu(device, rng):
    """A Conv2d followed by a ReLU in a Sequential runs as one convolution with the ReLU applied
    as it stores: the same output and gradients, bit for bit, a launch or more fewer per
    pair."""
    net = _conv_relu_net(device)
    x = _t(rng.standard_normal((2, 3, 8, 8)).astype(np.float32), device)
    g = _t(rng.standard_normal((2, 4, 4, 4)).astype(np.float32), device)
    _run_net(net, x, g, False)  # NOTE: per-weight caches (transformed filters) made first
    fused, plain = _run_net(net, x, g, True), _run_net(net, x, g, False)
    for got, want in zip(fused[:3], plain[:3]):
        for a, b in zip(got if isinstance(got, list) else [got],
                        want if isinstance(want, list) else [want]):
            np.testing.assert_array_equal(a, b)
    # NOTE: at least: an in-place ReLU that autograd records costs a clone and a copy too
    assert fused[3] <= plain[3] - 3, (fused[3], plain[3])
    assert (fused[0] >= 0).all() and (fused[0] == 0).any()


def test_sequential_does_not_fuse_modules_of_their_own(device, rng):
    """A ReLU subclass, or a Conv2d whose forward was replaced, runs as written."""
    class MyReLU(nn.ReLU):
        def forward(self, input):
            return F.relu(input) * 2

    net = _conv_relu_net(device)
    net[1] = MyReLU()
    net[2].forward = lambda input: F.conv2d(input, net[2].weight, net[2].bias)
    x = _t(rng.standard_normal((2, 3, 8, 8)).astype(np.float32), device)
    g = _t(rng.standard_normal((2, 4, 4, 4)).astype(np.float32), device)
    _run_net(net, x, g, False)
    fused, plain = _run_net(net, x, g, True), _run_net(net, x, g, False)
    np.testing.assert_array_equal(fused[0], plain[0])
    assert fused[3] == plain[3] - 1, (fused[3], plain[3])  # the last pair alone


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


# ---- reprs ---------------------------------------------------------------------------------------

def _repr_model(ns):
    return ns.Sequential(
        ns.Conv2d(1, 16, 3, padding=1), ns.Conv2d(4, 4, 3, padding="same", groups=2, bias=False,
                                                  padding_mode="reflect"),
        ns.BatchNorm2d(16), ns.ReLU(inplace=True), ns.MaxPool2d(2),
        ns.AvgPool2d(3, stride=2, padding=1), ns.AdaptiveAvgPool2d((2, 2)),
        ns.LocalResponseNorm(5), ns.Dropout(0.1), ns.Flatten(),
        ns.Sequential(ns.Linear(64, 10), ns.LeakyReLU(0.2), ns.ELU(), ns.Hardtanh(),
                      ns.Sigmoid(), ns.Tanh(), ns.Softmax(dim=1), ns.LogSoftmax(1)),
        ns.ModuleList([ns.Embedding(10, 3, padding_idx=0), ns.Identity(), ns.BatchNorm1d(3)]),
        ns.CrossEntropyLoss(), ns.NLLLoss(), ns.MSELoss(), ns.BCEWithLogitsLoss(),
        ns.Sequential(ns.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1,
                                         groups=2, bias=False),
                      ns.LayerNorm((4, 5), eps=1e-3), ns.GroupNorm(2, 6, affine=False),
                      ns.GELU(approximate="tanh"), ns.SiLU(inplace=True), ns.Mish(),
                      ns.Softplus(2.0, 10.0), ns.Hardswish(), ns.Hardsigmoid(), ns.ReLU6(),
                      ns.Upsample(scale_factor=2, mode="bilinear"), ns.Upsample(size=(3, 4)),
                      ns.Dropout2d(0.2), ns.Dropout1d(), ns.L1Loss(), ns.SmoothL1Loss(beta=0.5),
                      ns.HuberLoss(delta=2.0), ns.BCELoss(), ns.KLDivLoss(reduction="batchmean")),
        ns.Sequential(ns.PReLU(3), ns.ZeroPad2d(1), ns.ZeroPad1d(2), ns.ConstantPad1d((1, 2), 3.0),
                      ns.ReflectionPad2d((1, 0, 2, 1)), ns.ReplicationPad1d(2),
                      ns.CircularPad2d(1), ns.PixelShuffle(2), ns.PixelUnshuffle(3),
                      ns.ChannelShuffle(2), ns.Unflatten(1, (2, 5)), ns.AdaptiveMaxPool2d((2, 3))),
        ns.Sequential(ns.SELU(), ns.SELU(inplace=True), ns.CELU(), ns.CELU(0.5, inplace=True),
                      ns.LogSigmoid(), ns.Softsign(), ns.Tanhshrink(), ns.Softshrink(),
                      ns.Hardshrink(0.3), ns.GLU(), ns.GLU(1), ns.Threshold(0.1, 20),
                      ns.Threshold(0.1, 20.0, inplace=True)))


def test_repr_tree():
    text = repr(_repr_model(nn))
    assert text.startswith("Sequential(\n  (0): Conv2d(1, 16, kernel_size=(3, 3), stride=(1, 1), "
                           "padding=(1, 1))\n")
    assert "  (10): Sequential(\n    (0): Linear(in_features=64, out_features=10, bias=True)\n" \
        in text
    assert "(2): BatchNorm2d(16, eps=1e-05, momentum=0.1, affine=True, bias=True, " \
        "track_running_stats=True)" in text
    assert repr(nn.Linear(2, 3)) == "Linear(in_features=2, out_features=3, bias=True)"


def test_repr_matches_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = repr(_repr_model(nn)), repr(_repr_model(torch.nn))
    if "bias=" not in repr(torch.nn.BatchNorm2d(1)):  # torch before the norms' bias argument
        ours = re.sub(r"((BatchNorm|LayerNorm|GroupNorm).*), bias=(True|False)", r"\1", ours)
    assert ours == theirs


# ---- state_dict ----------------------------------------------------------------------------------

def _numpy_params(module):
    return {k: v.numpy() for k, v in module.state_dict().items()}


def test_state_dict_round_trip(device, rng):
    a, b = Net(device), Net(device)
    x = _t(rng.standard_normal((5, 4)), device, np.float32)
    a(x)                                               # running stats move away from defaults
    sd = a.state_dict()
    assert all(not v.requires_grad and type(v) is cltensor.Tensor for v in sd.values())
    assert sd["head.weight"].storage is a.head.weight.storage
    assert isinstance(a.state_dict(keep_vars=True)["scale"], nn.Parameter)
    assert repr(b.load_state_dict(sd)) == "<All keys matched successfully>"
    for k, v in _numpy_params(a).items():
        np.testing.assert_array_equal(b.state_dict()[k].numpy(), v)
    a.eval()
    b.eval()
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())


def test_state_dict_through_npz_file(device, rng, tmp_path):
    a, b = Net(device), Net(device)
    a(_t(rng.standard_normal((5, 4)), device, np.float32))
    path = tmp_path / "model.npz"                      # the .npz suffix picks the numpy archive
    save(a.state_dict(), path)
    assert path.exists()
    with np.load(path) as raw:                         # a plain numpy archive
        assert list(raw.files) == NET_STATE
        assert raw["features.2.num_batches_tracked"].dtype == np.int64
    loaded = load(path, map_location=device)
    assert list(loaded) == NET_STATE and isinstance(loaded["offset"], cltensor.Tensor)
    b.load_state_dict(loaded)
    for k, v in _numpy_params(a).items():
        np.testing.assert_array_equal(b.state_dict()[k].numpy(), v)


def test_load_state_dict_from_numpy_converts_dtypes(device, rng):
    net = Net(device)
    sd = {k: rng.standard_normal(v.shape) for k, v in net.state_dict().items()}  # float64
    sd["features.2.num_batches_tracked"] = np.array(5)
    net.load_state_dict(sd)
    got = net.state_dict()
    assert got["scale"].dtype == np.float32
    assert_close(got["head.weight"], sd["head.weight"].astype(np.float32))
    assert got["features.2.num_batches_tracked"].item() == 5


def test_load_state_dict_errors_change_nothing(device, rng):
    net = Net(device)
    before = _numpy_params(net)
    good = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in before.items()}
    cases = [
        ({**good, "head.weight": np.zeros((4, 6), np.float32)},
         (r"size mismatch for head.weight: copying a param with shape \(4, 6\) from checkpoint, "
          r"the shape in current model is \(3, 6\)")),
        ({k: v for k, v in good.items() if k != "offset"},
         r'Missing key\(s\) in state_dict: "offset"'),
        ({**good, "features.3.weight": np.ones(2)},
         r'Unexpected key\(s\) in state_dict: "features.3.weight"'),
        ({**good, "scale": "abc"}, 'copying the parameter named "scale".*dtype <U3'),
    ]
    for sd, match in cases:
        with pytest.raises(RuntimeError, match="Error\\(s\\) in loading state_dict for Net:"):
            net.load_state_dict(sd)
        with pytest.raises(RuntimeError, match=match):
            net.load_state_dict(sd)
        for k, v in _numpy_params(net).items():
            np.testing.assert_array_equal(v, before[k])
    with pytest.raises(TypeError, match="expected a dict"):
        net.load_state_dict([1, 2])
    partial = {"head.weight": good["head.weight"], "extra": np.ones(1)}
    result = net.load_state_dict(partial, strict=False)
    assert result.unexpected_keys == ["extra"] and "scale" in result.missing_keys
    np.testing.assert_array_equal(net.head.weight.numpy(), good["head.weight"])


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_load_state_dict_is_all_or_nothing(device, data):
    """Random mixes of good, missing, extra and mis-shaped entries: a load either takes every
    given value or raises and leaves every parameter and buffer as it was."""
    net = Net(device)
    before = _numpy_params(net)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    sd = {}
    for k, v in before.items():
        fate = data.draw(st.sampled_from(["good", "good", "missing", "bad_shape"]), label=k)
        if fate == "good":
            sd[k] = rng.standard_normal(v.shape).astype(v.dtype)
        elif fate == "bad_shape":
            sd[k] = np.zeros(v.shape + (2,), v.dtype)
    if data.draw(st.booleans(), label="extra"):
        sd["extra.weight"] = np.ones(3)
    strict = data.draw(st.booleans(), label="strict")
    bad = any(v.shape != before[k].shape for k, v in sd.items() if k in before) or (
        strict and set(sd) != set(before))
    if bad:
        with pytest.raises(RuntimeError, match="Error\\(s\\) in loading state_dict"):
            net.load_state_dict(sd, strict=strict)
        expect = before
    else:
        net.load_state_dict(sd, strict=strict)
        expect = {k: sd.get(k, v) for k, v in before.items()}
    for k, v in _numpy_params(net).items():
        np.testing.assert_array_equal(v, expect[k])


# ---- moves ---------------------------------------------------------------------------------------

def test_to_dtype_keeps_parameter_objects(device):
    if not device.has_fp64:
        pytest.skip(f"{device} has no float64")
    net = Net(device)
    _fake_grads(net)
    params = list(net.parameters())
    values = [p.numpy() for p in params]
    opt = cltensor.optim.SGD(net.parameters(), lr=0.1)
    assert net.to(cltensor.float64) is net
    assert [id(p) for p in net.parameters()] == [id(p) for p in params]
    assert all(p.dtype == np.float64 and p.grad.dtype == np.float64 for p in params)
    assert all(isinstance(p, nn.Parameter) and p.is_leaf for p in params)
    for p, v in zip(params, values):
        np.testing.assert_array_equal(p.numpy(), v.astype(np.float64))
    assert net.features[2].running_var.dtype == np.float64
    assert net.features[2].num_batches_tracked.dtype == np.int64   # integers keep their dtype
    opt.step()                                          # the optimizer still sees them
    net.float()
    assert net.head.weight.dtype == np.float32 and net.to(device) is net
    with pytest.raises(TypeError, match="only accepts floating point dtypes"):
        net.to(cltensor.int32)


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


# ---- saving and loading --------------------------------------------------------------------------

def test_save_load_dtypes_keys_and_file_objects(device, rng, tmp_path):
    arrays = OrderedDict([("file", rng.standard_normal((2, 3)).astype(np.float32)),
                          ("allow_pickle", np.arange(4, dtype=np.int32)),
                          ("a/b.c", np.array(7, dtype=np.int64)), ("mask", np.array([True, False])),
                          ("empty", np.zeros((0, 2), np.float32))])
    if device.has_fp64:
        arrays["f64"] = rng.standard_normal(3)
    tensors = {k: _t(v, device) for k, v in arrays.items()}
    tensors["number"] = 3.5
    buf = io.BytesIO()
    save(tensors, buf)
    buf.seek(0)
    back = load(buf, device=device)
    assert list(back) == list(arrays) + ["number"]
    for k, v in arrays.items():
        assert back[k].dtype == v.dtype and back[k].shape == v.shape
        np.testing.assert_array_equal(back[k].numpy(), v)
    assert back["number"] == 3.5 and type(back["number"]) is float  # numbers stay numbers
    half = tmp_path / "half.npz"
    np.savez(half, w=np.ones(3, np.float16))
    assert load(half)["w"].dtype == cltensor.float16  # kept, not widened


def test_save_load_errors(device, tmp_path):
    with pytest.raises(TypeError, match=r"save: the object\['opt'\]\[0\] is a object; only"):
        save({"opt": [object()]}, tmp_path / "x.npz")
    with pytest.raises(TypeError, match="is a complex"):
        save({1: 2j}, tmp_path / "x.npz")
    assert not (tmp_path / "x.npz").exists()
    with pytest.raises(FileNotFoundError, match="no such file"):
        load(tmp_path / "missing.npz")
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not an archive at all")
    with pytest.raises(ValueError, match="is not a numpy .npz archive"):
        load(garbage)
    single = tmp_path / "single.npy"
    np.save(single, np.ones(2))
    with pytest.raises(ValueError, match="holds a single array"):
        load(single)
    odd = tmp_path / "odd.npz"
    np.savez(odd, u=np.ones(2, np.complex64))
    with pytest.raises(TypeError, match="entry 'u' has dtype complex64"):
        load(odd)


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


# ---- hooks ------------------------------------------------------------------------------------

def test_sequential_does_not_fuse_modules_with_hooks(device, rng):
    """A forward hook on a Conv2d sees its output before the ReLU, and one on the ReLU sees the
    ReLU's: a hooked pair runs unfused, with the same results as module by module."""
    net = _conv_relu_net(device)
    x = _t(rng.standard_normal((2, 3, 8, 8)).astype(np.float32), device)
    g = _t(rng.standard_normal((2, 4, 4, 4)).astype(np.float32), device)
    _run_net(net, x, g, False)
    unhooked = _run_net(net, x, g, True)[3]
    seen = {}
    h0 = net[0].register_forward_hook(lambda m, args, out: seen.__setitem__("conv", out.numpy()))
    h3 = net[3].register_forward_hook(lambda m, args, out: seen.__setitem__("relu", out.numpy()))
    plain = _run_net(net, x, g, False)
    plain_seen = dict(seen)
    fused = _run_net(net, x, g, True)
    np.testing.assert_array_equal(fused[0], plain[0])
    assert (seen["conv"] < 0).any() and (seen["relu"] >= 0).all()
    for k in ("conv", "relu"):
        np.testing.assert_array_equal(seen[k], plain_seen[k])
    assert fused[3] == plain[3] - 1, (fused[3], plain[3])  # the last pair alone
    h0.remove(), h3.remove()  # fused again once the hooks are gone
    assert _run_net(net, x, g, True)[3] == unhooked


def test_forward_hooks(device, rng):
    lin = nn.Linear(3, 2, device=device)
    x = _t(rng.standard_normal((4, 3)).astype(np.float32), device)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: calls.append("pre") or (args[0] * 2,))
    h2 = lin.register_forward_hook(lambda m, args, out: calls.append("post") or out + 1)
    h3 = lin.register_forward_hook(lambda m, args, out: calls.append("first"), prepend=True)
    w, b = lin.weight.numpy(), lin.bias.numpy()
    assert_close(lin(x), (x.numpy() * 2) @ w.T + b + 1)
    assert calls == ["pre", "first", "post"]
    for h in (h1, h2, h3):
        h.remove()
    h2.remove()  # removing twice is harmless
    assert_close(lin(x), x.numpy() @ w.T + b)
    assert calls == ["pre", "first", "post"]
    # with_kwargs: the hooks get (and may replace) the keyword arguments
    conv = nn.Conv2d(2, 2, 1, device=device)

    with conv.register_forward_pre_hook(lambda m, args, kwargs: ((args[0] * 0,), kwargs),
                                        with_kwargs=True):
        y = conv(_t(rng.standard_normal((1, 2, 3, 3)).astype(np.float32), device))
        assert_close(y, np.broadcast_to(conv.bias.numpy()[None, :, None, None], (1, 2, 3, 3)))
    got = []
    with lin.register_forward_hook(lambda m, args, kwargs, out: got.append(sorted(kwargs)),
                                   with_kwargs=True):
        lin(x)
    assert got == [[]]


def test_forward_hook_always_call_and_errors(device):
    class Fails(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    m, calls = Fails(), []
    m.register_forward_hook(lambda mod, args, out: calls.append(("always", out)),
                            always_call=True)
    m.register_forward_hook(lambda mod, args, out: calls.append(("plain", out)))
    with pytest.raises(ValueError, match="boom"):
        m(1)
    assert calls == [("always", None)]
    with pytest.raises(TypeError, match="expected a callable"):
        m.register_forward_hook(3)
    lin = nn.Linear(2, 2, device=device)
    lin.register_forward_pre_hook(lambda mod, args, kwargs: 5, with_kwargs=True)
    with pytest.raises(RuntimeError, match=r"tuple of \(new_args, new_kwargs\)"):
        lin(cltensor.zeros(1, 2, device=device))


def test_full_backward_hooks(device, rng):
    """grad_output is the gradient of the module's output, grad_input of its positional inputs
    (None where none is needed); the hooks' results replace them."""
    lin = nn.Linear(3, 2, device=device)
    xa = rng.standard_normal((4, 3)).astype(np.float32)
    ga = rng.standard_normal((4, 2)).astype(np.float32)
    w = lin.weight.numpy()
    seen = []

    def hook(m, grad_input, grad_output):
        seen.append((m, [None if g is None else g.numpy() for g in grad_input],
                     [g.numpy() for g in grad_output]))
        return None if grad_input[0] is None else (grad_input[0] * 3,)

    handle = lin.register_full_backward_hook(hook)
    x = _t(xa, device).requires_grad_()
    lin(x).backward(_t(ga, device))
    ((m, gin, gout),) = seen
    assert m is lin
    assert_close(gout[0], ga)
    assert_close(gin[0], ga @ w)
    assert_close(x.grad, 3 * ga @ w)  # replaced
    assert_close(lin.weight.grad, ga.T @ xa)  # the parameters' gradients are untouched
    # an input that needs no gradient: the hook still runs, with grad_input (None,)
    seen.clear()
    lin(_t(xa, device)).backward(_t(ga, device))
    assert seen[0][1] == [None] and len(seen[0][2]) == 1
    handle.remove()
    # a pre-hook replaces grad_output: every gradient downstream follows
    lin.zero_grad()
    with lin.register_full_backward_pre_hook(lambda m, grad_output: (grad_output[0] * 0.5,)):
        x = _t(xa, device).requires_grad_()
        lin(x).backward(_t(ga, device))
    assert_close(x.grad, 0.5 * ga @ w)
    assert_close(lin.weight.grad, 0.5 * ga.T @ xa)
    with lin.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0])):
        with pytest.raises(RuntimeError, match="returned 2 values for grad_input, expected 1"):
            lin(_t(xa, device).requires_grad_()).sum().backward()


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
