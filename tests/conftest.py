"""Every test that takes `device` runs once per OpenCL device present.

CLTENSOR_TEST_DEVICES selects devices: a comma-separated list of 'platform:device' indices or
name substrings (e.g. CLTENSOR_TEST_DEVICES=pthread or CLTENSOR_TEST_DEVICES=0:0,NVIDIA).
"""
import os
import subprocess
import sys
import zlib

import numpy as np
import pytest
from hypothesis import settings

import cltensor
from cltensor.device import all_devices

# Hypothesis: kernel builds make first examples slow, so no per-example deadline.
settings.register_profile("cltensor", deadline=None)
settings.load_profile("cltensor")


def _selected_devices():
    devs = all_devices()
    spec = os.environ.get("CLTENSOR_TEST_DEVICES")
    if spec:
        wanted = [s.strip().lower() for s in spec.split(",") if s.strip()]
        devs = [d for d in devs if any(w == d.index or w in d.name.lower() for w in wanted)]
    return devs


DEVICES = _selected_devices()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def subprocess_env(**extra):
    """os.environ for a Python subprocess, with the repository first on PYTHONPATH and the
    caller's entries kept (pyopencl or numpy may be reachable only through them)."""
    path = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path, **extra)


def torch_for_the_device():
    """torch, or a module-level skip where it is missing or older than cltensor.torch needs
    (2.10: Python-registered PrivateUse1 backends). Imports torch, not cltensor.torch."""
    torch = pytest.importorskip("torch",
                                reason="cltensor.torch needs torch (pip install 'cltensor[torch]')")
    from torch.utils import backend_registration
    if not hasattr(backend_registration, "_setup_privateuseone_for_python_backend"):
        pytest.skip(f"cltensor.torch needs torch 2.10 or later (found {torch.__version__})",
                    allow_module_level=True)
    return torch


def ran_in_fresh_process(request):
    """Where this process has imported cltensor.torch and torch has CUDA, run the calling test
    again in a fresh pytest process, assert that it passed and return True (the caller then
    returns): torch takes one accelerator per process, and after cltensor.torch registers
    opencl a CUDA backward trips torch's engine (docs/torch_device.md, Limits). Else False."""
    import torch
    if (os.environ.get("CLTENSOR_FRESH_PROCESS") or "cltensor.torch" not in sys.modules or
            not torch.cuda.is_available()):
        return False
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
           request.node.nodeid]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=900,
                         env=subprocess_env(CLTENSOR_FRESH_PROCESS="1"))
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    return True


def pytest_sessionstart(session):
    if not DEVICES:
        pytest.exit("no OpenCL device to test on (see `python -m cltensor`; install PoCL or "
                    "check CLTENSOR_TEST_DEVICES)", returncode=1)


@pytest.fixture(scope="session", params=DEVICES, ids=[f"{d.index}-{d.name.split()[0][:24]}" for d in DEVICES])
def device(request):
    return request.param


@pytest.fixture
def rng(request):
    """A numpy Generator seeded from the test's name, so failures reproduce."""
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)


@pytest.fixture(autouse=True)
def _fresh_winograd_plans():
    """Winograd, the GEMM engine and the convolution passes record their launches afresh in
    each test: tests patch module tunables (tiles' padding, the GEMM's parameter sets, the
    algorithms' thresholds) that the replays' keys leave out."""
    from cltensor.conv import plans, winograd
    from cltensor.ops.gemm import engine
    winograd.clear_plans()
    plans.clear()
    engine.clear_plans()


@pytest.fixture
def poisoned_bytes(monkeypatch):
    """Every new tensor's buffer filled with 0xff bytes (NaN for floats), so an element left
    unwritten shows."""
    import pyopencl as cl
    from cltensor.tensor import ClTensor
    empty_on = ClTensor.empty_on.__func__

    def poisoned_empty(cls, shape, dtype, device, *args, **kwargs):
        t = empty_on(cls, shape, dtype, device, *args, **kwargs)
        if t.storage.nbytes:
            cl.enqueue_fill_buffer(device.queue, t.storage.buf, np.uint8(0xFF), 0,
                                   t.storage.nbytes)
        return t
    monkeypatch.setattr(ClTensor, "empty_on", classmethod(poisoned_empty))


@pytest.fixture
def fp_dtypes(device):
    """The floating dtypes the device supports."""
    return [cltensor.float32] + ([cltensor.float64] if device.has_fp64 else [])
