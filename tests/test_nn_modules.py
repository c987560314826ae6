"""cltensor.nn's Module machinery: registration and traversal, Parameter, the containers (and
Sequential running a Conv2d and its ReLU as one convolution), reprs, state_dict round trips
(also through .npz files and from torch-style numpy dicts), device/dtype moves, saving and
loading, hooks, and bad input. Each layer module's wiring, default initialization
(cltensor.nn.init) and a model against torch are in test_nn_layers.py."""
import copy
import io
import re
import weakref
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cltensor
import cltensor.nn.functional as F
import cltensor.optim
from cltensor import nn
from cltensor.serialization import load, save
from cltensor.testing import assert_close, rel_error


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


def test_parameters_follow_every_registry_change(device):
    """parameters() keeps its list between calls: every way of changing a module tree shows."""
    net = Net(device)

    def listed():
        assert list(net.parameters()) == [p for _, p in net.named_parameters()]
        return [id(p) for p in net.parameters()]

    before = listed()
    extra = nn.Parameter(cltensor.ones(2, device=device))
    net.features[0].extra = extra                              # a grandchild's new attribute
    assert id(extra) in listed() and len(listed()) == len(before) + 1
    del net.features[0].extra
    assert listed() == before
    net.features._modules["3"] = nn.Linear(3, 2, device=device)  # the dict itself
    assert len(listed()) == len(before) + 2
    net.features._modules.pop("3")
    assert listed() == before
    net.head._parameters["weight"] = extra
    assert id(extra) in listed()
    net.head._parameters.update(weight=None)
    assert len(listed()) == len(before) - 1
    net.head._parameters = OrderedDict(w2=extra)               # the registry replaced
    assert id(extra) in listed()
    net.head._parameters["w3"] = nn.Parameter(cltensor.ones(1, device=device))
    assert len(listed()) == len(before) + 1
    del net.head.w3
    net.features[0].register_parameter("bias", None)
    net.scale = None
    assert len(listed()) == len(before) - 2
    gone = weakref.ref(net.features[0].weight)
    net.features[0].weight = None                              # nothing keeps it alive
    assert gone() is None and len(listed()) == len(before) - 3
    twin = copy.deepcopy(net)                                  # a copy lists its own
    assert not set(id(p) for p in twin.parameters()) & set(listed())
    twin.features._modules.clear()
    assert len(list(twin.parameters())) == 1 and len(listed()) == len(before) - 3
    state = dict(vars(twin), _modules=dict(twin._modules),     # a pickle with plain dicts
                 _parameters=dict(twin._parameters))
    old = nn.Module.__new__(nn.Module)
    old.__setstate__(state)
    assert len(list(old.parameters())) == 1
    old._modules["more"] = nn.Linear(2, 2, device=device)
    assert len(list(old.parameters())) == 3


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


# ---- Sequential: a Conv2d and its ReLU as one convolution ----------------------------------------

def _conv_relu_net(device):
    cltensor.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, device=device), nn.ReLU(),
                         nn.Conv2d(8, 6, 1, device=device), nn.ReLU(inplace=True),
                         nn.MaxPool2d(2), nn.Conv2d(6, 4, 3, padding=1, groups=2,
                                                    device=device), nn.ReLU())


def _last_pair_saving(net, x, g):
    """The launches that fusing _conv_relu_net's last Conv2d and ReLU saves a step (one or
    more, by device: a GPU's implicit GEMM takes the ReLU's gradient in its own passes)."""
    with cltensor.no_grad():
        h = x
        for m in list(net)[:5]:
            h = m(h)
    tail = nn.Sequential(net[5], net[6])
    saving = _run_net(tail, h, g, False)[3] - _run_net(tail, h, g, True)[3]
    assert saving >= 1, saving
    return saving


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
    pair; but the biases' gradients, which the fused pair's backward sums in its own launch
    (relu_bias_grad) where the weight pass does not: to float32's rounding."""
    net = _conv_relu_net(device)
    x = _t(rng.standard_normal((2, 3, 8, 8)).astype(np.float32), device)
    g = _t(rng.standard_normal((2, 4, 4, 4)).astype(np.float32), device)
    _run_net(net, x, g, False)  # NOTE: per-weight caches (transformed filters) made first
    fused, plain = _run_net(net, x, g, True), _run_net(net, x, g, False)
    np.testing.assert_array_equal(fused[0], plain[0])
    np.testing.assert_array_equal(fused[1], plain[1])
    for (name, _), a, b in zip(net.named_parameters(), fused[2], plain[2]):
        if name.endswith("bias"):
            assert rel_error(a, b) <= 1e-6, name
        else:
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
    # the last pair alone
    assert fused[3] == plain[3] - _last_pair_saving(net, x, g), (fused[3], plain[3])


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
    # the last pair alone
    assert fused[3] == plain[3] - _last_pair_saving(net, x, g), (fused[3], plain[3])
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
