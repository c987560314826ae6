"""Every kernel family under Oclgrind, the simulator that reports out-of-bounds accesses, data
races and reads of uninitialized memory (our stand-in for drivers we cannot run), and the
launchers' GPU paths on this machine's own devices.

scripts/oclgrind_kernels.py runs every section (elementwise, reduce, gemm, conv, ...) in one
process, taking the launchers' CPU or GPU code paths, in a subprocess that sees only the
Oclgrind device (a temporary ICD folder in OCL_ICD_VENDORS). Two runs per style:

    checked    every check (bounds, races, uninitialized memory, API) on unoptimized builds
    optimized  bounds, races and API on optimized builds, the code drivers run

and one test per (run, style, section) fails on any report Oclgrind writes in that section.
The four runs start together in the background and take about 2.5 minutes together on two idle
cores (docs/oclgrind.md has the figures). On by default (CI runs it);
CLTENSOR_OCLGRIND=0 or -m "not oclgrind" leaves the Oclgrind tests out.

Oclgrind 21.10's limits (docs/oclgrind.md has the reproductions):
  - its uninitialized-memory plugin lacks LLVM's `freeze` instruction, which the optimizer emits
    in nearly every kernel ("OCLGRIND FATAL ERROR (./src/plugins/Uninitialized.cpp:1805)
    Unsupported instruction: freeze", and the kernel does not run), so uninitialized-memory
    checks need -cl-opt-disable (OCLGRIND_BUILD_OPTIONS);
  - its interpreter lacks the intrinsic llvm.experimental.noalias.scope.decl, which LLVM 14's
    inliner emits where a function returning a struct by value is inlined into a loop (reduce.cl's
    st_load in reduce_merge, scan.cl's scan_carry): "Undefined external function" when the kernel
    is created, so the optimized run builds those two files with -cl-opt-disable;
  - a host write into a buffer shrinks the buffer's shadow to the write's size, and a released
    buffer's shadow passes to the next buffer that gets its index: with the memory pool, reads
    of data that kernels did write are reported as uninitialized, so the script gives every
    tensor a buffer of its own on Oclgrind (ExactBuffers).
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import subprocess_env

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "oclgrind_kernels.py"
ICD_LIBRARY = os.environ.get("OCLGRIND_ICD", "/usr/lib/oclgrind/liboclgrind-rt-icd.so")
SECTIONS = re.findall(r"^def section_(\w+)\(", SCRIPT.read_text(), re.MULTILINE)
STYLES = ("cpu", "gpu")
# Environment and script arguments of each run.
MODES = {
    "checked": ({"OCLGRIND_UNINITIALIZED": "1", "OCLGRIND_BUILD_OPTIONS": "-cl-opt-disable"}, []),
    "optimized": ({"OCLGRIND_UNINITIALIZED": "0"}, ["--opt-disable=reduce.cl,scan.cl"]),
}
RUN_TIMEOUT = 900  # seconds from a run's start (the four share the machine)

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

# Oclgrind's shadow bug (docs/oclgrind.md): a kernel writes all 64 floats of a buffer and another
# copies them, which is clean; but after a host write of the first 4 floats only, the copy's
# reads of the other 60 are reported as uninitialized. Prints the number of reports Oclgrind
# wrote after each variant, separated by a marker line.
SHADOW_BUG = r'''
import sys
import numpy as np, pyopencl as cl
ctx = cl.create_some_context(interactive=False); q = cl.CommandQueue(ctx)
prg = cl.Program(ctx, """
__kernel void fill(__global float* a) { a[get_global_id(0)] = get_global_id(0); }
__kernel void copy(__global float* b, __global const float* a) {
  b[get_global_id(0)] = a[get_global_id(0)];
}""").build()
for host_floats in (64, 4):
    a = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64 * 4)
    b = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64 * 4)
    cl.enqueue_copy(q, a, np.ones(host_floats, np.float32))
    prg.fill(q, (64,), None, a)
    prg.copy(q, (64,), None, b, a)
    out = np.empty(64, np.float32)
    cl.enqueue_copy(q, out, b)
    assert (out == np.arange(64)).all()
    print(f"HOST WRITE {host_floats}", file=sys.stderr, flush=True)
'''


def _selected():
    """On by default (CI runs it); CLTENSOR_OCLGRIND=0 or -m "not oclgrind" leaves it out."""
    return os.environ.get("CLTENSOR_OCLGRIND", "1") != "0"


@pytest.fixture(scope="module")
def oclgrind_env(tmp_path_factory):
    """mode -> environment for a subprocess that sees only Oclgrind, API checks on."""
    if not _selected():
        pytest.skip("Oclgrind run turned off (CLTENSOR_OCLGRIND=0)")
    if not Path(ICD_LIBRARY).exists():
        pytest.skip(f"Oclgrind is not installed ({ICD_LIBRARY} missing; scripts/setup.sh "
                    "installs it with apt)")
    icd = tmp_path_factory.mktemp("icd")
    (icd / "oclgrind.icd").write_text(ICD_LIBRARY + "\n")
    base = subprocess_env(OCL_ICD_VENDORS=str(icd), CLTENSOR_DEVICE="Oclgrind",
                CLTENSOR_TEST_DEVICES="Oclgrind", OCLGRIND_CHECK_API="1",
                OCLGRIND_DATA_RACES="1")
    base.pop("OCLGRIND_BUILD_OPTIONS", None)
    # NOTE: a cache folder per mode: pyopencl's binary cache keys builds by our options, not
    # by OCLGRIND_BUILD_OPTIONS, so the modes would share their binaries
    return {mode: dict(base, **extra, CLTENSOR_CACHE_DIR=str(tmp_path_factory.mktemp(mode)))
            for mode, (extra, _) in MODES.items()}


def oclgrind_reports(stderr):
    """Oclgrind's reports in a stderr text (blocks between blank lines), less pyopencl's probes."""
    blocks = re.split(r"\n\s*\n", stderr)
    found = [b.strip() for b in blocks if REPORT.search(b)]
    return [b for b in found if not any(p.search(b) for p in PYOPENCL_PROBES)]


def split_sections(stderr):
    """{section: its part of the script's stderr}; what precedes the first section under ''."""
    parts = re.split(r"^SECTION (\w+)\n", stderr, flags=re.MULTILINE)
    return {"": parts[0], **dict(zip(parts[1::2], parts[2::2]))}


def run_under_oclgrind(env, args, timeout=240):
    proc = subprocess.run([sys.executable, *args], check=False, env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    return proc, oclgrind_reports(proc.stderr)


class ScriptRun:
    """scripts/oclgrind_kernels.py over every section, started in the background."""

    def __init__(self, env, args, log):
        self.log = log
        with open(log, "w") as err:
            self.proc = subprocess.Popen([sys.executable, str(SCRIPT), *args], env=env, cwd=ROOT,
                                         stdout=subprocess.DEVNULL, stderr=err)
        self.stderr = self.sections = None

    def result(self):
        """Waits for the run; its stderr and the stderr's sections."""
        if self.stderr is None:
            try:
                self.proc.wait(RUN_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.stderr = Path(self.log).read_text(errors="replace")
            self.sections = split_sections(self.stderr)
        return self

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def script_runs(request, oclgrind_env, tmp_path_factory):
    """(mode, style) -> ScriptRun; every run the selected tests need starts at once."""
    wanted = {(item.callspec.params["mode"], item.callspec.params["style"])
              for item in request.session.items
              if item.originalname in ("test_kernels_clean_under_oclgrind",
                                       "test_script_run_finishes")}
    logs = tmp_path_factory.mktemp("runs")
    runs = {(mode, style): ScriptRun(oclgrind_env[mode], [f"--style={style}", *MODES[mode][1]],
                                     logs / f"{mode}-{style}.txt")
            for mode, style in sorted(wanted)}
    yield runs
    for run in runs.values():
        run.stop()


def test_report_parser_ignores_pyopencl_probes():
    probe = ("Oclgrind - OpenCL runtime error detected\n\tFunction: clCreateKernel\n"
             "\tError:    CL_INVALID_KERNEL_NAME\n\tKernel '_source' not found\n")
    real = "Invalid write of size 4 at global memory address 0x1000\n\tKernel: ew_contig\n"
    assert oclgrind_reports(f"{probe}\n\n{real}\n\nSECTION reduce\n") == [real.strip()]


def test_split_sections():
    text = "device: x\nSECTION reduce\nInvalid read\nSECTION gemm\nDONE\n"
    assert split_sections(text) == {"": "device: x\n", "reduce": "Invalid read\n",
                                    "gemm": "DONE\n"}


@pytest.mark.oclgrind
def test_canary_is_caught(oclgrind_env):
    proc, reports = run_under_oclgrind(oclgrind_env["checked"], ["-c", CANARY], timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    kinds = " ".join(r.splitlines()[0] for r in reports)
    assert "Invalid read" in kinds and "data race" in kinds, proc.stderr[-3000:]


@pytest.mark.oclgrind
def test_oclgrind_shadow_bug_needs_exact_buffers(oclgrind_env):
    """Oclgrind still reports reads of kernel-written data as uninitialized after a host write
    smaller than the buffer, which is why the script avoids the memory pool on Oclgrind. If this
    fails, a newer Oclgrind fixed it: ExactBuffers and its note in docs/oclgrind.md can go."""
    proc, _ = run_under_oclgrind(oclgrind_env["checked"], ["-c", SHADOW_BUG], timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    whole, partial = re.split(r"^HOST WRITE 64\n", proc.stderr, flags=re.MULTILINE)
    assert not oclgrind_reports(whole), whole[-3000:]
    assert len(oclgrind_reports(partial)) == 60, partial[-3000:]


@pytest.mark.oclgrind
@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("mode", MODES)
def test_script_run_finishes(script_runs, mode, style):
    """The run reached its end on Oclgrind with exact buffers, and said nothing before its first
    section."""
    run = script_runs[mode, style].result()
    head = run.sections[""]
    assert "(Oclgrind" in head and "exact buffers: True" in head, run.stderr[-3000:]
    assert not oclgrind_reports(head), head[-3000:]
    assert run.proc.returncode == 0 and "DONE" in run.stderr, run.stderr[-3000:]


@pytest.mark.oclgrind
@pytest.mark.parametrize("section", SECTIONS)
@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("mode", MODES)
def test_kernels_clean_under_oclgrind(script_runs, mode, style, section):
    """Oclgrind reports itself as a CPU and a GPU; each launcher's CPU path (no local memory)
    and GPU path (work-group tiles, local memory, barriers) run in turn."""
    run = script_runs[mode, style].result()
    text = run.sections.get(section)
    assert text is not None, f"section {section} never started:\n{run.stderr[-3000:]}"
    reports = oclgrind_reports(text)
    assert not reports, f"{len(reports)} Oclgrind report(s) in {section}:\n\n" + \
        "\n\n".join(reports[:5])
    assert f"FAILED {section}" not in text, text[-3000:]


def test_gpu_paths_on_device(device):
    """The softmax section's GPU paths (a work-group of up to 256 lanes per row, barriers,
    rows shorter than the lanes) on each device of this machine, checked against numpy. PoCL
    takes them only when forced, and PoCL 3.1 corrupted its heap on them (docs/oclgrind.md);
    a subprocess, so that a crash fails this test rather than ending pytest."""
    if "oclgrind" in device.name.lower():
        pytest.skip("test_kernels_clean_under_oclgrind runs these on Oclgrind")
    env = subprocess_env(CLTENSOR_DEVICE=device.index)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--style=gpu", "softmax"], check=False,
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "DONE" in proc.stderr, \
        f"exit status {proc.returncode}:\n{proc.stderr[-3000:]}"
