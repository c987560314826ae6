"""Devices, the default device, memory stats, the program cache and build errors, the profiler."""
import gc
import json
import os
import re
import subprocess
import sys

import numpy as np
import pyopencl as cl
import pytest

import cltensor as ct
from cltensor import device as device_mod
from cltensor import program
from conftest import subprocess_env



def _run(code, **env):
    """Run Python code in a fresh process with the repository on the path."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=subprocess_env(**env), timeout=300)


def test_devices_lists_every_device():
    infos = ct.devices()
    assert infos and len(infos) == len(device_mod.all_devices())
    for d in infos:
        assert d.compute_units > 0 and d.global_mem > 0 and d.max_alloc > 0
        assert d.max_work_group >= 1 and d.type in ("GPU", "CPU", "other")
        assert ":" in d.index and d.name and d.platform


def test_cli_prints_the_table():
    out = subprocess.run([sys.executable, "-m", "cltensor"], capture_output=True, text=True,
                         env=subprocess_env(), timeout=120)
    assert out.returncode == 0, out.stderr
    for d in ct.devices():
        assert d.name in out.stdout
    assert "* default device" in out.stdout


def test_default_device_prefers_gpu_else_cpu():
    devs = device_mod.all_devices()
    chosen = device_mod._pick_default() if not os.environ.get("CLTENSOR_DEVICE") else None
    if chosen is not None:
        gpus = [d for d in devs if d.is_gpu]
        assert chosen is (gpus[0] if gpus else chosen)
        assert chosen.is_gpu or not gpus


def test_device_selection_by_env_index_and_name(device):
    code = "import cltensor as ct; print(ct.default_device().index); print(ct.zeros(1).device.index)"
    for spec in (device.index, device.name[:10]):
        out = _run(code, CLTENSOR_DEVICE=spec)
        assert out.returncode == 0, out.stderr
        got = out.stdout.split()
        assert got[0] == got[1]
        assert device_mod.get_device(got[0]).name == device.name
    bad = _run(code, CLTENSOR_DEVICE="no-such-device-xyz")
    assert bad.returncode != 0 and "no OpenCL device matches 'no-such-device-xyz'" in bad.stderr


def test_set_default_device_and_device_argument(device):
    old = ct.default_device()
    try:
        ct.set_default_device(device.index)
        assert ct.zeros(2).device is device
        assert ct.tensor([1.0]).device is device
    finally:
        ct.set_default_device(old)
    assert ct.ones(2, device=device.index).device is device
    with pytest.raises(ct.DeviceError, match="no OpenCL device matches"):
        ct.zeros(1, device="9:9")
    with pytest.raises(TypeError, match="device must be"):
        ct.zeros(1, device=3.5)


def test_no_device_gives_install_help(monkeypatch):
    monkeypatch.setattr(device_mod, "_devices", None)
    monkeypatch.setattr(device_mod, "_default", None)
    monkeypatch.setattr(device_mod.cl, "get_platforms", lambda: [])
    with pytest.raises(ct.DeviceError, match="pocl-opencl-icd"):
        ct.default_device()


def test_memory_stats_track_live_tensors_and_peak(device):
    gc.collect()  # NOTE: earlier tests' tensors in reference cycles, freed at any moment
    base = ct.memory_stats(device)["allocated"]
    ct.reset_peak_memory_stats(device)
    a = ct.empty(1000, device=device)
    b = ct.empty(500, dtype=ct.float64 if device.has_fp64 else ct.int32, device=device)
    assert ct.memory_stats(device)["allocated"] == base + 4000 + 500 * b.element_size()
    peak = ct.memory_stats(device)["peak"]
    del a, b
    assert ct.memory_stats(device)["allocated"] == base
    assert ct.memory_stats(device)["peak"] == peak
    v = ct.empty(10, device=device)
    w = v.T[::2]  # views hold the storage alive, but allocate nothing
    del v
    assert ct.memory_stats(device)["allocated"] == base + 40
    del w
    assert ct.memory_stats(device)["allocated"] == base


def test_empty_cache_gives_back_unused_buffers_only(device):
    keep = ct.full((1000,), 2.0, device=device)
    gone = ct.empty(3 * 2**20 + 17, device=device)  # 12 MiB, back in the pool once deleted
    del gone
    pooled = ct.memory_stats(device)["pool_held"]
    ct.empty_cache(device)
    assert ct.memory_stats(device)["pool_held"] <= pooled - 12 * 2**20
    assert (keep.numpy() == 2).all()
    assert (ct.ones(5, device=device) + keep[:5]).numpy().tolist() == [3.0] * 5


def test_program_cache_in_memory(device):
    p1 = program.build_program(device, "elementwise.cl", {"OP": "OP_neg", "NARGS": 1, "T0": "float",
                                                          "CT": "float", "OUT_T": "float", "CT_FLOAT": None})
    p2 = program.build_program(device, "elementwise.cl", {"NARGS": 1, "OP": "OP_neg", "T0": "float",
                                                          "CT": "float", "OUT_T": "float", "CT_FLOAT": None})
    assert p1 is p2


def test_memo_with_keeps_its_anchor_and_starts_afresh_past_its_limit(monkeypatch):
    monkeypatch.setattr(program, "MEMO_LIMIT", 3)
    cache, made = {}, []
    sets = [[k] for k in range(5)]

    def ask(key, anchor):
        return program.memo_with(cache, (key,), anchor, lambda: made.append(key) or key * 10)

    assert [ask(k, sets[k]) for k in range(3)] == [0, 10, 20] and made == [0, 1, 2]
    assert ask(1, sets[1]) == 10 and made == [0, 1, 2]  # remembered
    assert ask(3, sets[3]) == 30 and len(cache) == 1  # full: cleared before the new entry
    assert ask(0, sets[0]) == 0 and made == [0, 1, 2, 3, 0] and len(cache) == 2
    other = [0]
    assert ask(0, other) == 0 and made[-1] == 0 and len(cache) == 3  # another anchor: made again


@pytest.mark.parametrize("driver_caches", [True, None])
def test_program_cache_on_disk(device, tmp_path, driver_caches):
    """Builds are cached on disk by the driver where it caches source builds itself (pyopencl's
    has_src_build_cache: PoCL, NVIDIA), else as cltensor binaries in a folder keyed by device
    and driver. Both policies forced in turn (the subprocess patches pyopencl's answer)."""
    code = (f"import pyopencl.characterize as c; c.has_src_build_cache = lambda dev: {driver_caches!r}; "
            f"import cltensor as ct; d = ct.get_device({device.index!r}); "
            "x = ct.ones(3, device=d) * 2; print(x.numpy().sum())")
    out = _run(code, CLTENSOR_CACHE_DIR=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) == 6.0
    folder = os.path.basename(program.cache_dir(device))
    assert re.sub(r"[^A-Za-z0-9_.-]+", "_", device.cl_device.driver_version) in folder
    assert re.sub(r"[^A-Za-z0-9_.-]+", "_", device.name)[:20] in folder
    cached = os.listdir(tmp_path / "kernels" / folder) if (tmp_path / "kernels").exists() else []
    if driver_caches:
        assert cached == [], "binaries written where the driver caches builds"
    else:
        assert os.listdir(tmp_path / "kernels") == [folder] and cached, "no binaries written"
    again = _run(code, CLTENSOR_CACHE_DIR=str(tmp_path))  # a second process reuses them
    assert again.returncode == 0 and float(again.stdout) == 6.0


def test_build_failure_carries_file_options_and_log(device):
    with pytest.raises(ct.KernelBuildError) as info:
        program.build_program(device, "broken.cl", {"FOO": 3},
                              source="__kernel void f(__global float* x) { x[0] = undefined_name; }")
    err = info.value
    exact = (program.EXACT_DIV_SQRT,) if device.exact_div_sqrt else ()
    assert err.filename == "broken.cl" and err.options == ("-DFOO=3",) + exact
    assert "undefined_name" in str(err) and "-DFOO=3" in str(err)
    with pytest.raises(FileNotFoundError, match="no_such_file.cl"):
        program.build_program(device, "no_such_file.cl")


def test_rebuild_builds_the_edited_binary(device, rng):
    """build_program's rebuild: the program's binary, edited, built again (the NVIDIA plug-in's
    PTX route); a binary that does not build raises KernelBuildError naming the file."""
    src = "__kernel void twice(__global float* x) { x[get_global_id(0)] *= 2.0f; }"
    seen = []
    same = lambda binary: seen.append(binary) or binary  # noqa: E731
    prog = program.build_program(device, "twice.cl", {"X": 1}, source=src, rebuild=same)
    assert len(seen) == 1 and seen[0]
    assert program.build_program(device, "twice.cl", {"X": 1}, source=src, rebuild=same) is prog
    x = rng.standard_normal(37).astype(np.float32)
    t = ct.from_numpy(x, device=device)
    program.launch(device, program.get_kernel(device, "twice.cl", "twice", {"X": 1}, src, same),
                   (37,), None, t.storage.buf)
    np.testing.assert_array_equal(t.numpy(), 2 * x)
    with pytest.raises(ct.KernelBuildError, match="twice.cl"):
        program.build_program(device, "twice.cl", {"X": 2}, source=src,
                              rebuild=lambda binary: b"not a binary")


def test_profile_records_kernels_and_writes_chrome_trace(device, tmp_path):
    x = ct.ones(1000, device=device)
    with ct.profile() as prof:
        y = ct.exp(x * 2)
        z = y + x.T
    assert z.shape == (1000,)
    rows = prof.table()
    assert sum(r[1] for r in rows) == 3
    assert all(r[2] >= 0 for r in rows)
    text = str(prof)
    assert "ew_contig" in text and "calls" in text
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    assert len(events) == 3 and all(e["ph"] == "X" and e["dur"] >= 0 for e in events)
    np.testing.assert_allclose(z.numpy(), np.exp(2.0) + 1, rtol=1e-6)


def test_queue_profiles_only_while_profiling_keeping_the_order(device, rng):
    """A device's queue has no profiling (NVIDIA's driver enqueues slower with it) but while a
    thread profiles: the first launch inside profile() moves it to one with profiling, nested
    profiles keep it, and the last profile's end moves it back; commands keep their order."""
    fresh = device_mod.Device(device.index, device.cl_device)  # a device of its own
    profiling = cl.command_queue_properties.PROFILING_ENABLE
    a = rng.standard_normal(200_000).astype(np.float32)
    x = ct.from_numpy(a, device=fresh)
    before = fresh.queue
    assert not fresh.profiling and not before.properties & profiling
    y = x * 3
    with ct.profile() as outer:
        z = y + 1  # the first launch inside profile() moves the queue
        moved = fresh.queue
        with ct.profile() as inner:
            w = z * 2
    v = w - 1
    assert moved is not before and moved.properties & profiling
    assert not fresh.profiling and not fresh.queue.properties & profiling  # back, once done
    np.testing.assert_allclose(v.numpy(), (a * 3 + 1) * 2 - 1, rtol=1e-6)
    assert [r["name"] for r in outer.records()] == ["ew_contig", "ew_contig"]
    (rec,) = inner.records()
    assert rec["end_ns"] >= rec["start_ns"]
