"""Checkpoints between the "opencl" device and plain CPU torch, bit for bit both ways, and bad
input: torch's own errors, and errors raised inside cltensor naming the aten operator."""
import subprocess
import sys

import pytest

# torch (skipping when it is missing or too old) and the fixture making `device` opencl:0
from test_torch_device import ct, ocl, torch  # noqa: F401
from torch import nn  # noqa: E402

from conftest import subprocess_env  # noqa: E402

pytestmark = pytest.mark.usefixtures("ocl")
OCL = "opencl"

# run by plain CPU torch (no cltensor): compares every tensor of two checkpoints bit for bit
COMPARE = """
import sys, torch
from torch.utils._pytree import tree_flatten
a, b = (tree_flatten(torch.load(p, map_location="cpu"))[0] for p in sys.argv[1:3])
assert len(a) == len(b) > 0
for x, y in zip(a, b):
    if isinstance(x, torch.Tensor):
        assert x.device.type == "cpu" and x.dtype == y.dtype and x.shape == y.shape, (x, y)
        assert torch.equal(x.view(-1).view(torch.uint8) if x.dtype == torch.bool else x, y)
    else:
        assert x == y, (x, y)
print("same")
"""
# run by plain CPU torch: a checkpoint of several dtypes and a strided view
MAKE = """
import sys, torch
g = torch.Generator().manual_seed(3)
w = torch.randn(5, 4, generator=g)
torch.save({"w": w, "wt": w.t(), "d": torch.randn(3, generator=g, dtype=torch.float64),
            "i": torch.randint(-9, 9, (4,), generator=g), "i32": torch.arange(3, dtype=torch.int32),
            "b": torch.rand(4, generator=g) > 0.5, "step": torch.tensor(7.0)}, sys.argv[1])
"""


def _plain_torch(code, *args):
    res = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                         text=True, timeout=300, env=subprocess_env())
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def _trained(dev):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(),
                          nn.Linear(27, 4)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randn(2, 2, 5, 5, generator=torch.Generator().manual_seed(1)).to(dev)
    model(x).square().mean().backward()
    opt.step()
    return model, opt


def test_opencl_checkpoint_loads_on_cpu_bit_for_bit(tmp_path):
    model, opt = _trained(OCL)
    state = {"model": model.state_dict(), "opt": opt.state_dict(),
             "view": model[0].weight.detach()[:, 1].transpose(0, 1)}
    torch.save(state, tmp_path / "dev.pt")
    # the device's values, read back one by one, as the reference
    torch.save(torch.utils._pytree.tree_map(
        lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, state), tmp_path / "host.pt")
    assert _plain_torch(COMPARE, tmp_path / "dev.pt", tmp_path / "host.pt").strip() == "same"


def test_cpu_checkpoint_loads_on_opencl_bit_for_bit(tmp_path):
    path = tmp_path / "cpu.pt"
    _plain_torch(MAKE, path)
    want = torch.load(path, map_location="cpu")
    got = torch.load(path, map_location=OCL)
    assert set(got) == set(want)
    for key, t in got.items():
        assert t.device.type == OCL and t.dtype == want[key].dtype and t.shape == want[key].shape
        assert torch.equal(t.cpu(), want[key]), key
    assert got["wt"].stride() == want["wt"].stride()  # a view stays a view of its storage


def test_state_dict_round_trip_through_opencl(tmp_path):
    """A CPU model's state loaded into the same model on opencl, saved, and loaded into a CPU
    model again: every parameter, buffer and optimizer state bit for bit."""
    cpu_model, cpu_opt = _trained("cpu")
    dev_model, dev_opt = _trained(OCL)
    dev_model.load_state_dict(cpu_model.state_dict())
    dev_opt.load_state_dict(cpu_opt.state_dict())
    torch.save({"model": dev_model.state_dict(), "opt": dev_opt.state_dict()}, tmp_path / "d.pt")
    torch.save({"model": cpu_model.state_dict(), "opt": cpu_opt.state_dict()}, tmp_path / "c.pt")
    assert _plain_torch(COMPARE, tmp_path / "d.pt", tmp_path / "c.pt").strip() == "same"


@pytest.mark.parametrize("fn", [torch.mm, torch.bmm, torch.addmm], ids=["mm", "bmm", "addmm"])
def test_bad_input_gets_torchs_error(fn, monkeypatch):
    """Mixed dtypes (torch's Meta kernels let them through; CPU torch refuses), opencl with CPU
    operands, sizes that do not fit: RuntimeErrors as CPU torch raises."""
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    a, b = (torch.randn(2, 3, 4), torch.randn(2, 4, 5)) if fn is torch.bmm else \
        (torch.randn(3, 4), torch.randn(4, 5))
    args = (torch.zeros(3, 5), a, b) if fn is torch.addmm else (a, b)
    to = lambda xs: [x.to(OCL) for x in xs]
    with pytest.raises(RuntimeError):
        fn(*args[:-1], args[-1].double())  # as CPU torch does
    with pytest.raises(RuntimeError, match="same dtype|expected scalar type"):
        fn(*to(args[:-1]), args[-1].double().to(OCL))
    with pytest.raises(RuntimeError, match="same device"):
        fn(*to(args[:-1]), args[-1])
    with pytest.raises(RuntimeError):
        fn(*to(args[:-1]), args[-1].transpose(-1, -2).to(OCL))


def test_error_inside_cltensor_names_the_operator(monkeypatch):
    """An index out of range passes torch's Meta checks (they cannot see values) and fails in
    cltensor's kernel; the exception names the aten operator it came from."""
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    table = torch.randn(5, 3).to(OCL)
    with pytest.raises(IndexError) as info:
        torch.index_select(table, 0, torch.tensor([1, 7]).to(OCL))
    assert "aten::index_select" in str(info.value)
    with pytest.raises(IndexError, match="aten::index_select"):
        nn.functional.embedding(torch.tensor([[0, 9]]).to(OCL), table)
