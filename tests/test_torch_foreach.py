"""The `_foreach_*` ops on "opencl" against CPU torch: lists of like tensors (one launch a tensor,
no per-tensor aten call) and lists that take the per-tensor fallback (strided, mixed dtypes,
integers), in place and not, with torch's errors; and torch.optim's foreach optimizers and
clip_grad_norm_ stepping as on the CPU."""
import numpy as np
import pytest

# torch (skipping when it is missing or too old) and the fixtures making `device` opencl:0
from test_torch_device import ct, device_only, ocl, torch  # noqa: F401

import cltensor
from cltensor.torch import _backend, fallback_ops

pytestmark = pytest.mark.usefixtures("ocl", "device_only")
OCL = "opencl"
SHAPES = [(3, 5), (7,), (), (2, 0)]
TOL = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}


def _lists(dtype, count, seed=0, positive=False):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for k in range(count):
        ts = [torch.randn(s, generator=gen, dtype=torch.float64) * 2 for s in SHAPES]
        out.append([(t.abs() + 0.5 if positive or k else t).to(dtype) for t in ts])
    return out


def _same(got, want, dtype, label=""):
    assert len(got) == len(want), label
    for g, w in zip(got, want):
        assert g.device.type == OCL and g.dtype == w.dtype and g.shape == w.shape, label
        np.testing.assert_allclose(g.cpu().double().numpy(), w.double().numpy(),
                                   rtol=TOL[dtype], atol=TOL[dtype], err_msg=label)


# (name, call on lists a, b, c): every registered form
CASES = {
    "add List alpha": lambda a, b, c: torch._foreach_add(a, b, alpha=-0.5),
    "sub List": lambda a, b, c: torch._foreach_sub(a, b),
    "mul Scalar": lambda a, b, c: torch._foreach_mul(a, 0.25),
    "div ScalarList": lambda a, b, c: torch._foreach_div(a, [2.0, -3, 0.5, 4.0]),
    "pow Scalar": lambda a, b, c: torch._foreach_pow(b, 1.5),
    "maximum List": lambda a, b, c: torch._foreach_maximum(a, b),
    "maximum Scalar": lambda a, b, c: torch._foreach_maximum(a, 0.1),
    "clamp_max ScalarList": lambda a, b, c: torch._foreach_clamp_max(a, [0.0, 1, -1, 2]),
    "mul Tensor": lambda a, b, c: torch._foreach_mul(a, b[0].sum()),
    "sqrt": lambda a, b, c: torch._foreach_sqrt(b),
    "neg": lambda a, b, c: torch._foreach_neg(a),
    "reciprocal": lambda a, b, c: torch._foreach_reciprocal(b),
    "addcmul Scalar": lambda a, b, c: torch._foreach_addcmul(a, b, c, value=-2),
    "addcdiv ScalarList": lambda a, b, c: torch._foreach_addcdiv(a, b, c, [1.0, 2, 3, 4]),
    "lerp Scalar": lambda a, b, c: torch._foreach_lerp(a, b, 0.7),
    "lerp List": lambda a, b, c: torch._foreach_lerp(a, b, [t / 4 for t in c]),
}
IN_PLACE = {
    "add_ List alpha": lambda a, b, c: torch._foreach_add_(a, b, alpha=3),
    "add_ Scalar": lambda a, b, c: torch._foreach_add_(a, 1.5),
    "mul_ Tensor": lambda a, b, c: torch._foreach_mul_(a, b[0].sum()),
    "div_ ScalarList": lambda a, b, c: torch._foreach_div_(a, [2.0, -3, 0.5, 4.0]),
    "maximum_ List": lambda a, b, c: torch._foreach_maximum_(a, b),
    "minimum_ Scalar": lambda a, b, c: torch._foreach_minimum_(a, 0.2),
    "sqrt_": lambda a, b, c: torch._foreach_sqrt_(b),
    "addcmul_ Scalar": lambda a, b, c: torch._foreach_addcmul_(a, b, c, value=0.3),
    "addcdiv_ ScalarList": lambda a, b, c: torch._foreach_addcdiv_(a, b, c, [1.0, -2, 3, 4]),
    "lerp_ Scalar": lambda a, b, c: torch._foreach_lerp_(a, b, 0.4),
    "lerp_ ScalarList": lambda a, b, c: torch._foreach_lerp_(a, b, [0.1, 0.5, 0.9, 2.0]),
    "zero_": lambda a, b, c: torch._foreach_zero_(a),
}


def _to(lists, dev):
    return [[t.to(dev) for t in ts] for ts in lists]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_foreach_forms_match_cpu(dtype):
    """Every form on lists of like tensors (a 0-d and an empty one among them) returns CPU
    torch's values; the in-place forms write into the very tensors given."""
    for name, fn in CASES.items():
        cpu = _lists(dtype, 3)
        _same(fn(*_to(cpu, OCL)), fn(*cpu), dtype, name)
    for name, fn in IN_PLACE.items():
        cpu = _lists(dtype, 3)
        dev = _to(cpu, OCL)
        before = [t for ts in dev for t in ts]
        fn(*dev)
        fn(*cpu)
        assert all(a is b for a, b in zip(before, [t for ts in dev for t in ts]))
        for got, want in zip(dev, cpu):
            _same(got, want, dtype, name)


def _call(name, lists):
    """Registered overload `name` of a _foreach_ op on lists (a, b, c), with numbers where it
    takes them."""
    packet, _, overload = name.partition(".")
    op = getattr(getattr(torch.ops.aten, packet), overload or "default")
    base = packet.removeprefix("_foreach_").rstrip("_")
    a, b, c = lists
    numbers = [0.5, 1.5, -2.0, 3.0]
    if base in ("addcmul", "addcdiv"):
        return op(a, b, c, numbers) if overload == "ScalarList" else op(a, b, c, value=-0.75)
    if base == "lerp":
        last = {"List": [t / 4 for t in c], "Scalar": 0.3, "ScalarList": numbers}[overload]
        return op(a, b, last)
    second = {"List": b, "Scalar": 0.7, "ScalarList": numbers, "Tensor": b[0].sum()}
    return op(a, second[overload]) if overload else op(a)


def test_every_registered_form_matches_cpu():
    """Each registered _foreach_ overload, on lists of values in (0.1, 1.1) (every op's domain),
    in all four floating dtypes."""
    names = sorted(n for n in ct.registered_ops() if n.startswith("_foreach_"))
    assert len(names) > 100
    for dtype in TOL:
        for name in names:
            cpu = [[(t.abs() % 1 + 0.1).to(dtype) for t in ts] for ts in _lists(dtype, 3)]
            dev = _to(cpu, OCL)
            got, want = _call(name, dev), _call(name, cpu)
            if want is None:  # in place: compare the lists written
                got, want = dev[0], cpu[0]
            _same(got, want, dtype, f"{name} {dtype}")


def test_like_lists_launch_once_per_tensor_without_per_tensor_ops():
    """An optimizer-like update of like tensors: one kernel launch per tensor, and no
    per-tensor aten kernel runs (the fallback's path)."""
    a, b, c = _to(_lists(torch.float32, 3, positive=True), OCL)
    torch._foreach_addcdiv_(a, b, c, value=-0.1)  # builds the kernels
    with _backend.traced() as seen, cltensor.profile() as prof:
        torch._foreach_add_(a, b, alpha=-0.1)
        torch._foreach_lerp_(b, c, 0.9)
        torch._foreach_addcdiv_(a, b, c, value=-0.1)
    nonempty = sum(t.numel() > 0 for t in a)
    assert len(prof.events) == 3 * nonempty, [e[0] for e in prof.events]
    assert seen == {"_foreach_add_.List", "_foreach_lerp_.Scalar", "_foreach_addcdiv_.Scalar"}


def test_unlike_lists_take_the_per_tensor_path():
    """A strided tensor, mixed dtypes or integers: each tensor through its aten op, with CPU
    torch's values and promotion."""
    base = torch.randn(4, 6, generator=torch.Generator().manual_seed(1))
    a = [base.t(), torch.randn(3)]  # a transposed view
    b = [torch.randn(6, 4), torch.randn(3, dtype=torch.float64)]  # mixed dtypes
    want = torch._foreach_add(a, b, alpha=2)
    with _backend.traced() as seen:
        got = torch._foreach_add(_to([a], OCL)[0], _to([b], OCL)[0], alpha=2)
    assert "add.Tensor" in seen
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g.cpu().numpy(), w.numpy(), rtol=1e-6, atol=1e-6)
    ints = [torch.arange(5), torch.arange(3) * 7]
    dev = _to([ints], OCL)[0]
    torch._foreach_mul_(dev, 3)
    torch._foreach_mul_(ints, 3)
    assert all(torch.equal(g.cpu(), w) for g, w in zip(dev, ints))
    strided = _to([[base]], OCL)[0][0].t()
    torch._foreach_mul_([strided], 2.0)
    assert torch.equal(strided.cpu(), base.t() * 2)


def test_foreach_errors_name_the_problem():
    a = _to(_lists(torch.float32, 1), OCL)[0]
    with pytest.raises(RuntimeError, match="same number of tensors"):
        torch._foreach_add(a, a[:2])
    with pytest.raises(RuntimeError, match="at least one tensor"):
        torch._foreach_add_([], [])
    with pytest.raises(RuntimeError, match="scalar list"):
        torch._foreach_mul(a, [1.0])
    with pytest.raises(RuntimeError, match="add_.* (can't be cast|not possible)"):
        torch._foreach_add_([torch.arange(3, device=OCL)], 0.5)
    with pytest.raises(RuntimeError, match="broadcast|size of tensor"):
        torch._foreach_add(a[:1], a[1:2])
    with pytest.raises(RuntimeError, match="same device"):
        torch._foreach_add(a[:1], [torch.ones(3, 5)])


OPTIMIZERS = {
    "SGD": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01,
                                     foreach=True),
    "Adam": lambda p: torch.optim.Adam(p, lr=0.01, amsgrad=True, weight_decay=0.1, foreach=True),
    "AdamW": lambda p: torch.optim.AdamW(p, lr=0.01, foreach=True),
    "RMSprop": lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.5, centered=True,
                                             foreach=True),
    "Adagrad": lambda p: torch.optim.Adagrad(p, lr=0.1, foreach=True),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_foreach_optimizers_step_like_cpu(name, monkeypatch):
    """torch.optim's foreach implementation with gradient clipping: three steps of a small
    network match the CPU's, nothing falls back to the CPU."""
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    weights = []
    for dev in ("cpu", OCL):
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(),
                                  torch.nn.Linear(5, 2)).double().to(dev)
        opt = OPTIMIZERS[name](net.parameters())
        x = torch.randn(4, 6, generator=torch.Generator().manual_seed(3)).double().to(dev)
        for _ in range(3):
            opt.zero_grad()
            net(x).square().sum().backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 0.5, foreach=True)
            opt.step()
        weights.append([p.detach().cpu() for p in net.parameters()])
    for w_cpu, w_dev in zip(*weights):
        np.testing.assert_allclose(w_dev.numpy(), w_cpu.numpy(), rtol=1e-10, atol=1e-12)
    assert not [op for op in fallback_ops() if "foreach" in op]
