"""Defaults for devices the tuning database does not name, and the database's key matching.

DEVICES describes five devices by what they report: the two CPU runtimes this project is
tested on and three GPUs with their real limits. Each kernel family's choice for each one must
fit its limits; the kernels are built and run on the real device of the test with the
described device's kind, work-group limit and local memory standing in for its own.
"""
import dataclasses
import json

import numpy as np
import pyopencl as cl
import pytest

import cltensor
from cltensor import caches, program, tune
from cltensor.device import Description
from cltensor.ops import gemm as gm

KIB = 1024
DEVICES = {
    "pocl": Description("pthread-skylake-avx512-AMD EPYC", "Portable Computing Language",
                        "AuthenticAMD", "3.1+debian", "cpu", 2, 1024 * KIB, 4096,
                        (4096, 4096, 4096), 16, 16, True),
    "intel-cpu": Description("AMD EPYC", "Intel(R) OpenCL", "Intel(R) Corporation",
                             "2026.22.10.0.01_160000", "cpu", 2, 256 * KIB, 8192,
                             (8192, 8192, 8192), 16, 16, True),
    "nvidia-h200": Description("NVIDIA H200", "NVIDIA CUDA", "NVIDIA Corporation", "570.124.06",
                               "gpu", 132, 48 * KIB, 1024, (1024, 1024, 64), 1, 32, True),
    "amd-gpu": Description("gfx1100", "AMD Accelerated Parallel Processing",
                           "Advanced Micro Devices, Inc.", "3614.0 (HSA1.1,LC)", "gpu", 48,
                           64 * KIB, 256, (1024, 1024, 1024), 1, 64, True),
    "intel-gpu": Description("Intel(R) Arc(TM) A770 Graphics", "Intel(R) OpenCL Graphics",
                             "Intel(R) Corporation", "24.35.30872", "gpu", 512, 64 * KIB, 512,
                             (512, 512, 512), 1, 32, False),
}
NAMES = list(DEVICES)


def dtypes_of(desc):
    return ["float32", "float64"] if desc.fp64 else ["float32"]


@pytest.mark.parametrize("name", NAMES)
def test_gemm_family_follows_the_device_kind(name):
    desc = DEVICES[name]
    for kernel in ("gemm_float32", "gemm_float64"):
        entry = tune.database_entry("gemm", kernel, desc)
        assert entry["family"] == ("packed" if desc.is_cpu else "xgemm"), (name, kernel)
        assert entry["small"] == ("direct" if desc.is_cpu else "tiled"), (name, kernel)


@pytest.mark.parametrize("name", NAMES)
def test_gemm_parameters_fit_the_device(name):
    desc = DEVICES[name]
    for kernel, itemsize in (("gemm_float32", 4), ("gemm_float64", 8)):
        entry = tune.database_entry("gemm", kernel, desc)
        if desc.is_cpu:
            packed = entry["packed"]
            assert packed["VW"] * itemsize <= desc.vector_width * 4  # one register's lanes
            assert packed["NR"] % packed["VW"] == 0
            continue
        sets = [q for q in entry["xgemm"] if gm.xgemm_valid(q)]
        assert sets, (name, kernel)
        for q in sets:  # every set the engine may take, not just the first
            wgs = q["MDIMC"] * q["NDIMC"]
            assert wgs <= desc.max_work_group and wgs % min(desc.simd_width, wgs) == 0, q
            assert gm.xgemm_local_bytes(q, itemsize) <= desc.local_mem, q
        tiled = entry["tiled"]
        lx, ly = tiled["TSN"] // tiled["WPTN"], tiled["TSM"] // tiled["WPTM"]
        assert lx * ly <= desc.max_work_group


@pytest.fixture
def standing_in(device, monkeypatch):
    """A function that makes the test's device report a Description's kind and limits, and
    take its GEMM entry (with the small-problem thresholds off, so that small products run the
    fast family); the in-memory caches are emptied around it, so no choice made for the
    described device outlives the test."""
    def stand_in(desc):
        caches.clear_cache()
        for attr in ("is_cpu", "is_gpu", "max_work_group", "local_mem"):
            monkeypatch.setattr(device, attr, getattr(desc, attr))
        entries = {4: tune.database_entry("gemm", "gemm_float32", desc),
                   8: tune.database_entry("gemm", "gemm_float64", desc)}
        for e in entries.values():
            e.update(min_work=0, min_dim=0, min_m=0)
        monkeypatch.setattr(gm, "entry_for", lambda dev, dtype: entries[np.dtype(dtype).itemsize])
        return entries
    yield stand_in
    monkeypatch.undo()
    caches.clear_cache()


def _local_bytes(kernel, device, args):
    static = kernel.get_work_group_info(cl.kernel_work_group_info.LOCAL_MEM_SIZE,
                                        device.cl_device)
    return static + sum(a.size for a in args if isinstance(a, cl.LocalMemory))


def _check_launches(launches, desc, device):
    assert launches
    for kernel, _, local, args in launches:
        if local is not None:
            assert int(np.prod(local)) <= desc.max_work_group, (kernel.function_name, local)
            assert all(n <= m for n, m in zip(local, desc.max_work_item_sizes)), local
        assert _local_bytes(kernel, device, args) <= desc.local_mem, kernel.function_name


def _run_families(device, dtype, rng):
    """One small call of each family that takes tuned sizes: (result, float64 reference)."""
    a = rng.standard_normal((70, 90))
    b = rng.standard_normal((90, 50))
    x = rng.standard_normal((4, 6, 9, 9))
    w = rng.standard_normal((5, 6, 3, 3))
    t = lambda v: cltensor.tensor(v.astype(dtype), device=device)  # noqa: E731
    F = cltensor.nn.functional
    torch = pytest.importorskip("torch")
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)
    e = np.exp(a - a.max(1, keepdims=True))
    return [
        (t(a) @ t(b), a @ b),
        (F.conv2d(t(x), t(w), padding=1), torch.nn.functional.conv2d(tx, tw, padding=1).numpy()),
        (t(a).sum(1), a.sum(1)),
        (t(a).cumsum(1), a.cumsum(1)),
        (cltensor.softmax(t(a), 1), e / e.sum(1, keepdims=True)),
        (F.max_pool2d(t(x), 2), torch.nn.functional.max_pool2d(tx, 2).numpy()),
        (F.layer_norm(t(a), (90,)), torch.nn.functional.layer_norm(torch.from_numpy(a),
                                                                   (90,)).numpy()),
    ]


@pytest.mark.parametrize("name", NAMES)
def test_each_family_builds_and_runs_within_the_described_limits(device, standing_in, name,
                                                                 rng):
    desc = DEVICES[name]
    standing_in(desc)
    for dtype in dtypes_of(desc) if device.has_fp64 else ["float32"]:
        with program.record() as launches:
            results = _run_families(device, dtype, rng)
        _check_launches(launches, desc, device)
        tol = 1e-4 if dtype == "float32" else 1e-10
        for got, want in results:
            err = np.linalg.norm(got.numpy() - want) / np.linalg.norm(want)
            assert err < tol, (name, dtype, got.shape, err)


# ---- the database's keys ----------------------------------------------------------------------

def _db(tmp_path, monkeypatch, vendors):
    monkeypatch.setattr(tune, "DB_DIR", tmp_path)
    (tmp_path / "gemm.json").write_text(json.dumps({"gemm_float32": {"vendors": vendors}}))
    tune.clear()


@pytest.fixture
def fresh_db(tmp_path, monkeypatch):
    yield lambda vendors: _db(tmp_path, monkeypatch, vendors)
    monkeypatch.undo()
    tune.clear()


def test_vendor_strings_are_normalised():
    assert tune.vendor_key("Intel(R) Corporation") == tune.vendor_key("Intel") == "intel"
    assert tune.vendor_key("Advanced Micro Devices, Inc.") == "amd"
    assert tune.vendor_key("NVIDIA Corporation") == "nvidia"
    assert tune.vendor_key("AuthenticAMD", "Portable Computing Language") == "pocl"
    assert tune.normalize_name("Intel(R) Xeon(R) Gold 6138 CPU @ 2.00GHz") == \
        "intel xeon gold 6138 cpu 2 00ghz"


def test_device_keys_match_normalised_names_and_platforms(fresh_db):
    fresh_db({"intel": {"devices": {
        "intel(r) opencl / amd epyc": {"min_m": 1},
        "Intel OpenCL Graphics / AMD EPYC": {"min_m": 2},  # another platform's
        "AMD EPYC": {"min_dim": 3}}}})
    got = tune.database_entry("gemm", "gemm_float32", DEVICES["intel-cpu"])
    assert (got["min_m"], got["min_dim"]) == (1, 4)  # the platform's key wins, alone


def test_driver_tags_carry_across_minor_updates(fresh_db):
    fresh_db({"intel": {"devices": {
        "Intel(R) OpenCL / AMD EPYC [driver 2026.22]": {"min_m": 22},
        "Intel(R) OpenCL / AMD EPYC [driver 2026.25]": {"min_m": 25},
        "Intel(R) OpenCL / AMD EPYC [driver 2025.30]": {"min_m": 30}}}})
    base = DEVICES["intel-cpu"]

    def min_m(driver):
        desc = dataclasses.replace(base, driver=driver)
        return tune.database_entry("gemm", "gemm_float32", desc).get("min_m")
    assert min_m("2026.22.10.0.01_160000") == 22
    assert min_m("2026.23.1") == 22  # the nearest at or below
    assert min_m("2026.26") == 25
    assert min_m("2026.1") == 22  # older than every tag of its major: the nearest above
    assert min_m("2025.31") == 30
    assert min_m("2027.1") is None  # another major version: the derived defaults only


def test_a_vendor_default_of_the_other_kind_is_skipped(fresh_db):
    fresh_db({"pocl": {"default": {"family": "packed", "min_m": 5}}})
    gpu = dataclasses.replace(DEVICES["amd-gpu"], platform="Portable Computing Language")
    got = tune.database_entry("gemm", "gemm_float32", gpu)
    assert got["family"] == "xgemm" and "min_m" not in got
    assert tune.database_entry("gemm", "gemm_float32", DEVICES["pocl"])["min_m"] == 5
