"""Several OpenCL devices as opencl:0, opencl:1, ...: tensors, operators, copies between them,
the device guard and the per-device module functions. Runs in a subprocess that sees two
OpenCL platforms (PoCL and Intel's CPU runtime, through an ICD folder holding both)."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import subprocess_env

pytest.importorskip("torch", reason="cltensor.torch needs torch (pip install 'cltensor[torch]')")

ICD_FILES = ("/etc/OpenCL/vendors/pocl.icd", "/tmp/intel-icd/intel.icd")
INTEL_LIBS = os.path.join(sys.prefix, "lib")

SCRIPT = textwrap.dedent("""
    import copy
    import io
    import os
    import numpy as np, torch
    import cltensor
    import cltensor.device
    import cltensor.torch as ct
    from cltensor.torch._backend import ordered_devices

    devs = ordered_devices()
    assert torch.opencl.device_count() == len(cltensor.device.all_devices()) == 2, devs
    assert devs[0] is cltensor.get_device(os.environ["CLTENSOR_DEVICE"])  # opencl:0
    assert devs[0].platform_name != devs[1].platform_name
    assert [torch.opencl.get_device_name(i) for i in range(2)] == [d.name for d in devs]

    x = torch.randn(4, 5, dtype=torch.float64)
    w = torch.randn(5, 3, dtype=torch.float64)
    a, b = x.to("opencl:0"), x.to("opencl:1")
    assert (a.device.index, b.device.index) == (0, 1)
    assert torch.equal(b.cpu(), x)
    y = (b @ w.to("opencl:1")).relu() + 1  # operators run on, and return to, device 1
    assert y.device == torch.device("opencl:1")
    np.testing.assert_allclose(y.cpu().numpy(), ((x @ w).relu() + 1).numpy(), rtol=1e-12)
    assert b.t()[1:].device.index == 1 and b.sum(0).device.index == 1  # views, reductions

    # copies between the devices, both ways, and copy_ across them
    assert b.to("opencl:0").device.index == 0 and torch.equal(b.to("opencl:0").cpu(), x)
    assert torch.equal(a.to("opencl:1").cpu(), x)
    dst = torch.zeros(4, 5, dtype=torch.float64, device="opencl:1")
    dst.copy_(a * 2)
    assert torch.equal(dst.cpu(), x * 2)

    # a CPU checkpoint loaded onto device 1
    saved = io.BytesIO()
    torch.save({"x": x}, saved)
    saved.seek(0)
    loaded = torch.load(saved, map_location="opencl:1")["x"]
    assert loaded.device.index == 1 and torch.equal(loaded.cpu(), x)

    # a model on device 1, inference
    torch.manual_seed(0)
    conv = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.ReLU(), torch.nn.Flatten())
    img = torch.randn(2, 2, 5, 5)
    want = conv(img)
    with torch.no_grad():
        got = conv.to("opencl:1")(img.to("opencl:1"))
    assert got.device.index == 1
    np.testing.assert_allclose(got.cpu().numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-5)

    # training on device 1: torch's autograd and optimizer steps match CPU torch
    cpu = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(27, 2))
    dev = copy.deepcopy(cpu).to("opencl:1")
    for model, inp in ((cpu, img), (dev, img.to("opencl:1"))):
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for _ in range(2):
            opt.zero_grad()
            model(inp).square().mean().backward()
            opt.step()
    for p, q in zip(dev.parameters(), cpu.parameters()):
        assert p.device.index == 1 and p.grad.device.index == 1
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)

    # the guard: factories without an index go to the current device
    with torch.opencl.device(1):
        assert torch.opencl.current_device() == 1
        assert torch.zeros(3, device="opencl").device.index == 1
        with torch.opencl.device("opencl:0"):
            assert torch.ones(2, device="opencl").device.index == 0
    assert torch.opencl.current_device() == 0
    torch.opencl.set_device(1)
    assert torch.empty(2, device="opencl").device.index == 1
    torch.opencl.set_device(0)

    # operands on two opencl devices: torch's error
    try:
        a + b
    except RuntimeError as e:
        assert "same device" in str(e), e
    else:
        raise AssertionError("opencl:0 + opencl:1 did not raise")

    # per-device memory statistics, synchronize, seeds, empty_cache
    torch.opencl.reset_peak_memory_stats(1)
    before = torch.opencl.memory_allocated(1)
    big = torch.zeros(100000, device="opencl:1")
    torch.opencl.synchronize(1)
    assert torch.opencl.memory_allocated(1) >= before + 400000
    assert torch.opencl.max_memory_allocated(1) >= torch.opencl.memory_allocated(1)
    del big
    torch.opencl.empty_cache()
    torch.opencl.manual_seed_all(3)
    r1 = torch.empty(50, device="opencl:1").normal_().cpu()
    torch.opencl.manual_seed(3)
    assert torch.equal(torch.empty(50, device="opencl:1").normal_().cpu(), r1)
    print("ok")
""")


def _two_platforms(tmp_path):
    missing = [f for f in ICD_FILES if not os.path.exists(f)]
    if missing:
        pytest.skip(f"needs both OpenCL ICD files; missing {missing}")
    for f in ICD_FILES:
        shutil.copy(f, tmp_path)
    libs = os.pathsep.join(filter(None, [INTEL_LIBS, os.environ.get("LD_LIBRARY_PATH")]))
    return subprocess_env(OCL_ICD_VENDORS=str(tmp_path), LD_LIBRARY_PATH=libs)


@pytest.mark.parametrize("first", ["Portable", "Intel"])  # CLTENSOR_DEVICE picks opencl:0
def test_two_devices(tmp_path, first):
    env = dict(_two_platforms(tmp_path), CLTENSOR_DEVICE=first)
    res = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]
