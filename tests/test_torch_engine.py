"""Importing cltensor.torch: torch's autograd engine with the "opencl" device after a CPU-only
backward (before the import), on each device, and the error on a torch without the Python
backend API. Each runs in a subprocess, so that torch starts fresh."""
import subprocess
import sys

import pytest

from conftest import subprocess_env

pytest.importorskip("torch", reason="cltensor.torch needs torch (pip install 'cltensor[torch]')")

# a CPU-only backward starts torch's engine before the opencl device exists; then a training
# step on the device must match the same step on CPU torch
CPU_BACKWARD_FIRST = """
import torch
a = torch.ones(3, requires_grad=True)
(a * 2).sum().backward()
import cltensor.torch  # noqa: F401
torch.manual_seed(0)
cpu = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                          torch.nn.Linear(12, 2))
dev = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                          torch.nn.Linear(12, 2))
dev.load_state_dict(cpu.state_dict())
dev.to("opencl")
x = torch.randn(2, 2, 4, 4)
opts = [torch.optim.AdamW(m.parameters(), lr=0.01) for m in (cpu, dev)]
for step in range(2):
    cpu(x).square().mean().backward()
    dev(x.to("opencl")).square().mean().backward()  # gradients accumulate over the steps
    opts[0].step()
    opts[1].step()
for p, q in zip(dev.parameters(), cpu.parameters()):
    assert p.device.type == "opencl", p.device
    torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6)
g, = torch.autograd.grad(dev(x.to("opencl")).sum(), dev[0].weight)
want, = torch.autograd.grad(cpu(x).sum(), cpu[0].weight)
torch.testing.assert_close(g.cpu(), want, rtol=1e-5, atol=1e-6)
print("ok")
"""


def test_backward_after_a_cpu_backward(device):
    env = subprocess_env(CLTENSOR_DEVICE=device.index)
    res = subprocess.run([sys.executable, "-W", "ignore", "-c", CPU_BACKWARD_FIRST], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]


# torch before 2.10 lacks the Python backend API: simulated by removing it before the import
OLD_TORCH = """
import torch
from torch.utils import backend_registration
del backend_registration._setup_privateuseone_for_python_backend
try:
    import cltensor.torch  # noqa: F401
except ImportError as e:
    print(e)
"""


def test_older_torch_gets_a_clear_import_error():
    res = subprocess.run([sys.executable, "-c", OLD_TORCH], env=subprocess_env(),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "needs torch 2.10 or later" in res.stdout and "found torch 2." in res.stdout, res.stdout
