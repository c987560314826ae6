"""torch storage objects on the "opencl" device: torch has no allocator for a Python backend, so
allocating one raises a clear error instead of crashing the process (run in a subprocess, on
each device, so that a crash fails the test rather than the run)."""
import subprocess
import sys

import pytest

from conftest import subprocess_env

pytest.importorskip("torch", reason="cltensor.torch needs torch (pip install 'cltensor[torch]')")

SCRIPT = """
import torch
import cltensor.torch  # noqa: F401

def refused(make):
    try:
        make()
    except RuntimeError as e:
        assert "cannot be allocated on the opencl device" in str(e), e
    else:
        raise AssertionError("no error")

x = torch.arange(6.0, device="opencl")
refused(lambda: torch.UntypedStorage(8, device="opencl"))
refused(lambda: torch.UntypedStorage(0, device="opencl:0"))
refused(lambda: torch.UntypedStorage(8, device=0))  # an int names the current accelerator
refused(lambda: torch.TypedStorage(4, device="opencl"))
refused(lambda: x.untyped_storage().clone())
refused(lambda: x.storage().clone())
assert x.share_memory_() is x and x.is_shared()  # no POSIX memory for a device, as with CUDA
assert x.untyped_storage().is_shared() and x.storage().is_shared() and x[2:].is_shared()
net = torch.nn.Linear(2, 3).to("opencl").share_memory()  # what torch.multiprocessing users call
assert all(p.is_shared() for p in net.parameters())
host = torch.zeros(3)  # a CPU tensor is shared only once moved to shared memory
assert not host.is_shared() and host.share_memory_().is_shared()
assert torch.equal((x.clone() + 1).cpu(), torch.arange(1.0, 7.0))
cpu = torch.UntypedStorage(8)  # CPU storages are untouched
assert cpu.device.type == "cpu" and cpu.nbytes() == 8 and cpu.clone().nbytes() == 8
assert torch.FloatStorage(3).size() == 3
print("ok")
"""


def test_storage_on_the_device_raises_not_crashes(device):
    res = subprocess.run([sys.executable, "-W", "ignore", "-c", SCRIPT], capture_output=True,
                         text=True, timeout=300, env=subprocess_env(CLTENSOR_DEVICE=device.index))
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), \
        (res.returncode, res.stderr[-3000:])
