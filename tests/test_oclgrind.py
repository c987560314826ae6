"""Every kernel family under Oclgrind, the simulator that reports out-of-bounds accesses, data
races and reads of uninitialized memory (our stand-in for drivers we cannot run).

Marked `oclgrind` and run only when selected, since it takes about four minutes on two cores:

    pytest -m oclgrind tests/test_oclgrind.py

Each test runs scripts/oclgrind_kernels.py (one section: elementwise, reduce, gemm, conv, ...,
taking the launchers' CPU or GPU code paths) in a subprocess that sees only the Oclgrind
device, through a temporary ICD folder in OCL_ICD_VENDORS, and fails on any report Oclgrind
writes to stderr.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "oclgrind_kernels.py"
ICD_LIBRARY = os.environ.get("OCLGRIND_ICD", "/usr/lib/oclgrind/liboclgrind-rt-icd.so")
SECTIONS = ["elementwise", "reduce", "indexing", "gemm", "conv", "pool", "norm", "softmax",
            "optim", "random", "ranges", "shape"]

pytestmark = pytest.mark.oclgrind

# The first line of each Oclgrind report that means a kernel (or an API call) is wrong.
REPORT = re.compile(r"^(Invalid (read|write)|.*data race|Uninitialized value|"
                    r"OCLGRIND FATAL ERROR|Oclgrind - OpenCL runtime error|Work-group divergence)",
                    re.MULTILINE)
# API "errors" that are pyopencl probing, not our calls: it asks every program for a kernel
# named '_source' and queries device attributes that Oclgrind does not know.
PYOPENCL_PROBES = [
    re.compile(r"Function: clCreateKernel\s+Error:\s+CL_INVALID_KERNEL_NAME\s+Kernel '_source'"),
    re.compile(r"Function: clGetDeviceInfo\s+Error:\s+CL_INVALID_VALUE\s+"
               r"For argument 'param_name'"),
]

# A canary: one out-of-bounds read and one write-write race, which the checks must catch.
CANARY = r'''
import numpy as np, pyopencl as cl
ctx = cl.create_some_context(interactive=False); q = cl.CommandQueue(ctx)
prg = cl.Program(ctx, """
__kernel void oob(__global float* a, __global const float* b) { a[0] = b[4]; }
__kernel void race(__global float* a) { a[0] = get_global_id(0); }""").build()
a = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 16)
mf = cl.mem_flags
b = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.ones(4, np.float32))
prg.oob(q, (1,), None, a, b); prg.race(q, (4,), (4,), a); q.finish()
'''


def _selected(config):
    """On by default (CI runs it); CLTENSOR_OCLGRIND=0 or -m "not oclgrind" leaves it out."""
    return os.environ.get("CLTENSOR_OCLGRIND", "1") != "0"


@pytest.fixture(scope="module")
def oclgrind_env(request, tmp_path_factory):
    """Environment for a subprocess that sees only Oclgrind, with every check on."""
    if not _selected(request.config):
        pytest.skip("Oclgrind run turned off (CLTENSOR_OCLGRIND=0)")
    if not Path(ICD_LIBRARY).exists():
        pytest.skip(f"Oclgrind is not installed ({ICD_LIBRARY} missing; scripts/setup.sh "
                    "installs it with apt)")
    icd = tmp_path_factory.mktemp("icd")
    (icd / "oclgrind.icd").write_text(ICD_LIBRARY + "\n")
    env = dict(os.environ, OCL_ICD_VENDORS=str(icd), CLTENSOR_DEVICE="Oclgrind",
               CLTENSOR_TEST_DEVICES="Oclgrind",
               CLTENSOR_CACHE_DIR=str(tmp_path_factory.mktemp("cache")),
               OCLGRIND_CHECK_API="1", OCLGRIND_DATA_RACES="1", OCLGRIND_UNINITIALIZED="1",
               # NOTE: Oclgrind 21.10's interpreter lacks intrinsics (noalias.scope.decl, freeze)
               # that the optimizer emits for `restrict` pointers; unoptimized builds avoid them.
               OCLGRIND_BUILD_OPTIONS="-cl-opt-disable",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return env


def oclgrind_reports(stderr):
    """Oclgrind's reports in a stderr text (blocks between blank lines), less pyopencl's probes."""
    blocks = re.split(r"\n\s*\n", stderr)
    found = [b.strip() for b in blocks if REPORT.search(b)]
    return [b for b in found if not any(p.search(b) for p in PYOPENCL_PROBES)]


def run_under_oclgrind(env, args, timeout=240):
    proc = subprocess.run([sys.executable, *args], check=False, env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    return proc, oclgrind_reports(proc.stderr)


def test_report_parser_ignores_pyopencl_probes():
    probe = ("Oclgrind - OpenCL runtime error detected\n\tFunction: clCreateKernel\n"
             "\tError:    CL_INVALID_KERNEL_NAME\n\tKernel '_source' not found\n")
    real = "Invalid write of size 4 at global memory address 0x1000\n\tKernel: ew_contig\n"
    assert oclgrind_reports(f"{probe}\n\n{real}\n\nSECTION reduce\n") == [real.strip()]


def test_canary_is_caught(oclgrind_env):
    proc, reports = run_under_oclgrind(oclgrind_env, ["-c", CANARY], timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    kinds = " ".join(r.splitlines()[0] for r in reports)
    assert "Invalid read" in kinds and "data race" in kinds, proc.stderr[-3000:]


@pytest.mark.parametrize("style", ["cpu", "gpu"])
@pytest.mark.parametrize("section", SECTIONS)
def test_kernels_clean_under_oclgrind(oclgrind_env, section, style):
    """Oclgrind reports itself as a CPU and a GPU; each launcher's CPU path (no local memory)
    and GPU path (work-group tiles, local memory, barriers) run in turn."""
    proc, reports = run_under_oclgrind(oclgrind_env, [str(SCRIPT), f"--style={style}", section],
                                       timeout=400)
    assert "device: cl:0:0 (Oclgrind" in proc.stderr, proc.stderr[-3000:]
    assert not reports, f"{len(reports)} Oclgrind report(s) in {section}:\n\n" + \
        "\n\n".join(reports[:5])
    assert proc.returncode == 0 and "DONE" in proc.stderr, proc.stderr[-3000:]
