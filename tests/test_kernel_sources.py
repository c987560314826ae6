"""The kernel files' shared definitions: cl_kernels/common.cl, spliced in by program.read_source."""
import re
import shutil

import numpy as np
import pytest

import cltensor as ct
from cltensor import program
from cltensor.ops import elementwise
from cltensor.ops.elementwise import shape_arg, view_arg

INCLUDE = '#include "common.cl"\n'
KERNEL_DIR = program.KERNEL_DIR  # the package's own, before a test points it elsewhere


def _kernel_files():
    return sorted(p for p in program.KERNEL_DIR.glob("*.cl") if p.name != "common.cl")


def test_shape_and_view_are_defined_once():
    """Only common.cl defines MAX_DIMS, Shape and View; every file that names them includes it."""
    for path in _kernel_files():
        text = path.read_text()
        assert not re.search(r"#define MAX_DIMS|\}\s*(Shape|View);", text), path.name
        if re.search(r"\b(Shape|View)\b", text.split("*/", 1)[-1]):
            assert INCLUDE in text or "gemm_common.cl" in text, path.name


def test_read_source_splices_common_with_max_dims_and_line_numbers():
    text = program._kernel_file("reduce.cl")
    spliced = program.read_source("reduce.cl")
    head, tail = text.split(INCLUDE)
    assert spliced.startswith(head) and spliced.endswith(tail)
    assert f"#define MAX_DIMS {program.MAX_DIMS}\n" in spliced
    assert program._kernel_file("common.cl") in spliced
    assert f"#line {head.count(chr(10)) + 2}\n" in spliced


@pytest.fixture
def kernel_dir(tmp_path, monkeypatch):
    """A kernel folder of its own (common.cl copied), with the sources' memos emptied around."""
    shutil.copy(program.KERNEL_DIR / "common.cl", tmp_path / "common.cl")
    monkeypatch.setattr(program, "KERNEL_DIR", tmp_path)
    program._sources.clear()
    program._joined.clear()
    yield tmp_path
    program._sources.clear()
    program._joined.clear()


def test_compiler_log_keeps_the_including_files_line(device, kernel_dir, capfd):
    """An error after the include is reported at its line in the including file (in the build
    log, or where PoCL prints its diagnostics, on the process's stderr)."""
    (kernel_dir / "bad_line.cl").write_text(
        "/* a kernel */\n" + INCLUDE + "\n__kernel void f(__global float* x) {\n"
        "  x[0] = not_declared;\n}\n")
    with pytest.raises(ct.KernelBuildError) as info:
        program.build_program(device, "bad_line.cl", {"TAG": 1})
    log = info.value.log + capfd.readouterr().err
    assert "not_declared" in log
    if "NVIDIA" in device.cl_device.platform.name:
        pytest.skip("NVIDIA's OpenCL compiler ignores #line")
    assert re.search(r":5:\d+:.*not_declared", log), log


def test_kernels_walk_views_through_common_definitions(device, kernel_dir, rng):
    """view_offset and strided_offset of common.cl on a permuted, offset view."""
    (kernel_dir / "walk.cl").write_text(
        INCLUDE + "__kernel void walk(const int nd, const Shape s, const View v,\n"
        "                   __global long* with_offset, __global long* strides_only) {\n"
        "  const long i = get_global_id(0);\n"
        "  with_offset[i] = view_offset(i, nd, s, v);\n"
        "  strides_only[i] = strided_offset(i, nd, s, v);\n}\n")
    base = ct.from_numpy(np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5), device=device)
    x = base[1:, :, 1:].permute(2, 0, 1)
    n = x.numel()
    got = [ct.from_numpy(np.full(n, -7, np.int64), device=device) for _ in range(2)]  # poisoned
    kernel = program.get_kernel(device, "walk.cl", "walk")
    program.launch(device, kernel, (n,), None, np.int32(x.ndim), shape_arg(x.shape),
                   view_arg(x.offset, x.stride()),
                   got[0].storage.buf, got[1].storage.buf)
    idx = np.indices(x.shape).reshape(x.ndim, -1)
    want = x.offset + sum(i * s for i, s in zip(idx, x.stride()))
    np.testing.assert_array_equal(got[0].numpy(), want)
    np.testing.assert_array_equal(got[1].numpy(), want - x.offset)


@pytest.mark.parametrize("cache", ["cltensor's binaries", "the driver's"])
def test_a_changed_header_is_not_served_from_the_cache(device, kernel_dir, cache, tmp_path,
                                                       monkeypatch):
    """The on-disk program caches key a build by the text of the headers prepended to its file
    (special.cl before elementwise.cl) too: two versions of special.cl, two builds, each with its
    own result (a stale binary would give the first version's)."""
    binaries = cache == "cltensor's binaries"
    if not binaries and not program.cl_characterize.has_src_build_cache(device.cl_device):
        pytest.skip("this driver keeps no build cache: its builds take cltensor's binary cache")
    root = tmp_path / "cache"
    monkeypatch.setenv("CLTENSOR_CACHE_DIR", str(root))
    if binaries:
        monkeypatch.setattr(program.cl_characterize, "has_src_build_cache", lambda dev: None)
    shutil.copy(KERNEL_DIR / "elementwise.cl", kernel_dir / "elementwise.cl")
    header = (KERNEL_DIR / "special.cl").read_text()
    x = ct.from_numpy(np.linspace(-2, 2, 5, dtype=np.float32), device=device)
    stored = []
    try:
        for value in (42, 7):
            (kernel_dir / "special.cl").write_text(header + f"#define i0e_ct(x) ((CT){value})\n")
            program._sources.clear()
            program._joined.clear()
            elementwise.clear_kernels()
            np.testing.assert_array_equal(ct.special.i0e(x).numpy(), np.full(5, value))
            stored.append(len(list(root.rglob("*.bin"))))
    finally:
        elementwise.clear_kernels()
    if binaries:  # both builds went through cltensor's binary cache, one file each
        assert stored[0] >= 1 and stored[1] == stored[0] + 1, stored
