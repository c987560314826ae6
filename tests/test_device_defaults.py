"""Defaults for devices the tuning database does not name, and the database's key matching.

DEVICES describes six devices by what they report: the two CPU runtimes this project is
tested on, three GPUs with their real limits, and Oclgrind as its CPU-style run sees itself.
Each kernel family's choice for each one must fit its limits; the kernels are built and run on
the real device of the test with the described device's kind, work-group limit and local
memory standing in for its own.
"""
import dataclasses
import json

import numpy as np
import pyopencl as cl
import pytest

import cltensor
from cltensor import caches, tune, tunedb
from cltensor.conv import conv2d
from cltensor import device as device_module
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
    # Oclgrind as its CPU-style run sees it: one-lane vectors, 32 KiB of local memory
    "oclgrind-cpu": Description("Oclgrind Simulator", "Oclgrind", "Oclgrind", "Oclgrind 21.10",
                                "cpu", 1, 32 * KIB, 1024, (1024, 1024, 1024), 1, 1, True),
}
NAMES = list(DEVICES)
SET_LISTS = ("xgemm", "cx_sets", "cx_conv", "cx_wgrad")  # gemm.json's lists of xgemm-style sets
# Devices whose shipped entries were measured and tested on the device itself: the run test
# takes their derived defaults (PoCL compiles the H200's 128x128 sets for minutes at launch)
MEASURED = ("NVIDIA H200",)
ALGOS = ["im2col", "implicit_gemm", "winograd", "winograd_4x4"]  # 3x3, stride 1


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
            # one register's lanes, and a vector type OpenCL has (two lanes at least)
            assert 2 <= packed["VW"] and packed["VW"] * itemsize <= max(desc.vector_width * 4, 16)
            assert packed["NR"] % packed["VW"] == 0
            continue
        assert [q for q in entry["xgemm"] if gm.xgemm_valid(q)], (name, kernel)
        sets = [q for key in SET_LISTS for q in entry.get(key, [])]
        for q in sets:  # every set the engine may take, not just the first
            assert gm.xgemm_valid(q), q
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
        entry = tune.derived_defaults if desc.name in MEASURED else (
            lambda kernel, d: tune.database_entry("gemm", kernel, d))
        entries = {4: entry("gemm_float32", desc), 8: entry("gemm_float64", desc)}
        for e in entries.values():
            e.update(min_work=0, min_dim=0, min_m=0)
            # NOTE: the first set of each list: PoCL compiles a GPU-style kernel for minutes at
            # first launch; test_gemm_parameters_fit_the_device checks every set's limits
            e.update({key: e[key][:1] for key in SET_LISTS if key in e})
        monkeypatch.setattr(gm, "entry_for", lambda dev, dtype: entries[np.dtype(dtype).itemsize])
        return entries
    yield stand_in
    monkeypatch.undo()
    caches.clear_cache()


def _local_bytes(kernel, device, args):
    static = kernel.get_work_group_info(cl.kernel_work_group_info.LOCAL_MEM_SIZE,
                                        device.cl_device)
    return static + sum(a.size for a in args if isinstance(a, cl.LocalMemory))


@pytest.fixture
def launches(monkeypatch):
    """The launches made during the test, as (kernel, local size, arguments): every kernel call
    (program.record cannot be used: the conv algorithms record their own replays)."""
    seen, call = [], cl.Kernel.__call__

    def recorded(kernel, queue, gsize, local, *args, **kwargs):
        seen.append((kernel, local, args))
        return call(kernel, queue, gsize, local, *args, **kwargs)
    monkeypatch.setattr(cl.Kernel, "__call__", recorded)
    return seen


def _check_launches(launches, desc, device):
    assert launches
    for kernel, local, args in launches:
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
    tconv = torch.nn.functional.conv2d
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)
    e = np.exp(a - a.max(1, keepdims=True))
    convs = [(conv2d(t(x), t(w), padding=1, algo=algo), tconv(tx, tw, padding=1).numpy())
             for algo in ALGOS]
    w1 = w[:, :, :1, :1]
    convs += [(conv2d(t(x), t(w1), algo="gemm_1x1"), tconv(tx, torch.from_numpy(w1)).numpy()),
              (conv2d(t(x), t(w), stride=2, algo="s2d_winograd"), tconv(tx, tw, stride=2).numpy())]
    return convs + [
        (t(a) @ t(b), a @ b),
        (t(a[:3]) @ t(b), a[:3] @ b),  # few rows: gemm_rowaxpy(_wg) where the entry asks
        (t(a).sum(1), a.sum(1)),
        (t(a).cumsum(1), a.cumsum(1)),
        (cltensor.softmax(t(a), 1), e / e.sum(1, keepdims=True)),
        (F.max_pool2d(t(x), 2), torch.nn.functional.max_pool2d(tx, 2).numpy()),
        (F.layer_norm(t(a), (90,)), torch.nn.functional.layer_norm(torch.from_numpy(a),
                                                                   (90,)).numpy()),
    ]


@pytest.mark.parametrize("name", NAMES)
def test_each_family_builds_and_runs_within_the_described_limits(device, standing_in, launches,
                                                                 name, rng):
    desc = DEVICES[name]
    standing_in(desc)
    # NOTE: float64 on the CPU descriptions only: PoCL compiles each GPU-style float64 kernel
    # for minutes at first launch (the fit test checks the GPUs' float64 sets)
    for dtype in dtypes_of(desc) if device.has_fp64 and desc.is_cpu else ["float32"]:
        results = _run_families(device, dtype, rng)
        _check_launches(launches, desc, device)
        names = {kernel.function_name for kernel, _, _ in launches}
        assert desc.is_cpu or "gemm_rowaxpy_wg" in names, names  # GPUs' few-row products
        tol = 1e-4 if dtype == "float32" else 1e-10
        for got, want in results:
            err = np.linalg.norm(got.numpy() - want) / np.linalg.norm(want)
            assert err < tol, (name, dtype, got.shape, err)


# ---- the database's keys ----------------------------------------------------------------------

def _db(tmp_path, monkeypatch, vendors):
    monkeypatch.setattr(tunedb, "DB_DIR", tmp_path)  # the module that reads it
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


def test_an_unnamed_gpu_takes_its_architecture_siblings_entry(fresh_db):
    sets = [{"MWG": 128, "NWG": 64, "KWG": 16, "MDIMC": 16, "NDIMC": 8, "VWM": 4, "VWN": 4,
             "STRM": 0, "STRN": 1, "PADA": 4, "PADB": 4, "NBUF": 1}]
    fresh_db({"nvidia": {"devices": {"NVIDIA H200": {"arch": "sm_90", "xgemm": sets},
                                     "NVIDIA A100": {"arch": "sm_80", "min_m": 80}}}})
    h200 = DEVICES["nvidia-h200"]

    def entry(name, arch):
        desc = dataclasses.replace(h200, name=name, arch=arch)
        return tune.database_entry("gemm", "gemm_float32", desc)
    assert entry("NVIDIA H100 80GB HBM3", "sm_90")["xgemm"] == sets  # no key names it: sm_90's
    assert "min_m" not in entry("NVIDIA H100 80GB HBM3", "sm_90")
    assert entry("NVIDIA A100-SXM4-40GB", "sm_90")["min_m"] == 80  # a name beats the arch
    other = entry("NVIDIA L40S", "sm_89")
    assert other["xgemm"] != sets and "min_m" not in other  # another architecture: defaults
    assert entry("NVIDIA H100 PCIe", "")["xgemm"] != sets  # no architecture reported


def test_a_database_arch_must_be_a_name():
    good = {"gemm_float32": {"vendors": {"nvidia": {"devices": {"X": {"arch": "sm_90"}}}}}}
    tunedb.validate_database(good)
    bad = {"gemm_float32": {"vendors": {"nvidia": {"devices": {"X": {"arch": 90}}}}}}
    with pytest.raises(ValueError, match="arch"):
        tunedb.validate_database(bad)


class _CheckingDevice:
    """A cl.Device stand-in that, like Oclgrind, refuses queries no extension of its defines."""
    type = cl.device_type.GPU

    def __init__(self, extensions, answers):
        self.extensions, self.answers, self.asked = extensions, answers, []

    def get_info(self, code):
        self.asked.append(code)
        if code not in self.answers:
            raise cl.LogicError("clGetDeviceInfo: CL_INVALID_VALUE")
        return self.answers[code]


def test_lockstep_width_asks_only_what_the_extensions_define():
    plain = _CheckingDevice("cl_khr_fp64 cl_khr_int64_base_atomics", {})
    assert device_module._simd_width(plain, 4) == 1 and plain.asked == []
    amd = _CheckingDevice("cl_khr_fp64 cl_amd_device_attribute_query", {0x4043: 64})
    assert device_module._simd_width(amd, 4) == 64 and amd.asked == [0x4043]
    intel = _CheckingDevice("cl_intel_required_subgroup_size", {0x4108: [8, 16, 32]})
    assert device_module._simd_width(intel, 4) == 32


def test_architecture_asks_only_what_the_extensions_define():
    plain = _CheckingDevice("cl_khr_fp64", {})
    assert device_module._arch(plain) == "" and plain.asked == []
    nv = _CheckingDevice("cl_nv_device_attribute_query", {0x4000: 9, 0x4001: 0})
    assert device_module._arch(nv) == "sm_90" and nv.asked == [0x4000, 0x4001]
    amd = _CheckingDevice("cl_amd_device_attribute_query", {})
    amd.name = "gfx90a:sramecc+:xnack-"
    assert device_module._arch(amd) == "gfx90a" and amd.asked == []
