"""cltensor.distributed and DistributedDataParallel. The collectives and DDP run as 2-rank jobs
under mpirun (tests/distributed/*.py), on each device; they skip only when mpirun or mpi4py is
absent (scripts/setup.sh installs both)."""
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, subprocess_env

import cltensor as ct
import cltensor.distributed as dist
from cltensor.distributed import group as pg
from cltensor.distributed import shm
from cltensor.distributed.staging import Staged
from cltensor.nn.parallel.distributed import make_buckets
from cltensor.utils.data import DistributedSampler
from convnet_benchmarks.distributed import predicted_efficiency

HAVE_MPI = shutil.which("mpirun") is not None and importlib.util.find_spec("mpi4py") is not None
needs_mpi = pytest.mark.skipif(not HAVE_MPI, reason="needs Open MPI's mpirun and mpi4py "
                               "(scripts/setup.sh installs them)")


def mpirun(device, script, *args, timeout=240):
    env = subprocess_env(CLTENSOR_DEVICE=device.index, OMPI_ALLOW_RUN_AS_ROOT="1",
                         OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    cmd = ["mpirun", "-n", "2", "--oversubscribe", "-x", "PYTHONPATH", "-x", "CLTENSOR_DEVICE",
           sys.executable, os.path.join(ROOT, "tests", "distributed", script), *map(str, args)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def _ok(proc, text):
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert out.count(text) == 2, out[-4000:]   # both ranks


@needs_mpi
def test_every_collective_matches_numpy(device):
    _ok(mpirun(device, "collectives.py"), "collectives ok")


@needs_mpi
@pytest.mark.parametrize("micro,path", [(1, "mpi"), (2, "mpi"), (1, "shm")],
                         ids=["sync", "no_sync-accumulation", "sync-shared-memory"])
def test_ddp_equals_one_process_on_whole_batches(device, micro, path):
    _ok(mpirun(device, "ddp_train.py", 3, micro, *(["shm"] if path == "shm" else [])),
        "ddp matches")


@needs_mpi
def test_ddp_find_unused_parameters(device):
    _ok(mpirun(device, "ddp_unused.py"), "unused parameters ok")


@needs_mpi
def test_benchmark_reports_ranks_aggregate_and_efficiency(device, tmp_path):
    out = tmp_path / "dist.json"
    proc = mpirun(device, "bench_small.py", out)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    row = json.loads(out.read_text())["distributed"][0]
    assert row["world_size"] == 2 and len(row["rank_img_s"]) == 2
    assert all(v > 0 for v in row["rank_img_s"]) and row["single_ms"] > 0
    assert row["aggregate_img_s"] == pytest.approx(sum(row["rank_img_s"]))
    alone = row["batch_per_rank"] / row["single_ms"] * 1e3
    assert row["efficiency"] == pytest.approx(row["aggregate_img_s"] / (2 * alone))
    assert "| small | 2 | 2 |" in proc.stdout
    # the split: the small network's gradients (conv 4x3x3x3 + 4, linear 5x256 + 5) in one bucket
    assert row["gradient_bytes"] == (4 * 27 + 4 + 5 * 256 + 5) * 4 and row["buckets"] == 1
    assert row["staging_ms"] > 0 and row["all_reduce_ms"] > 0
    assert 0 < row["single_backward_ms"] < row["single_ms"]
    assert row["exposed_ms"] == pytest.approx(sum(row["rank_ms"]) / 2 - row["single_ms"])
    assert row["predicted_efficiency"] == pytest.approx(predicted_efficiency(
        row["single_ms"], row["single_backward_ms"], row["staging_ms"] + row["all_reduce_ms"], 1))
    assert "| small | " in proc.stdout.split("staging ms")[1]


def test_shared_window_grows_only_where_shared_memory_has_room(monkeypatch):
    """A window too large for the shared-memory filesystem is never made (touching a page past
    a full tmpfs kills the process): the call goes through MPI instead."""
    class Node:
        def Get_rank(self):
            return 0

        def Get_size(self):
            return 2

    r = shm.Reducer(Node())
    assert r._room(1 << 20) and not r._room(1 << 60)  # a MiB fits; an exabyte does not
    r.capacity = 1 << 60
    assert r._room(1 << 60)  # a window that fits already needs no room
    monkeypatch.setattr(shm.os, "statvfs", lambda path: (_ for _ in ()).throw(OSError("gone")))
    r.capacity = 0
    assert not r._room(1 << 20)  # no filesystem to ask: MPI
    assert shm._rounded(1) == 1 << 20 and shm._rounded(3 << 20) == 3 << 20


def test_predicted_efficiency_is_the_documented_model():
    """docs/distributed.md's table: VGG-A and GoogLeNet on two GPUs over PCIe, with overlap."""
    assert predicted_efficiency(37.4, 25.9, 29.7, 21) == pytest.approx(0.881, abs=1e-3)
    assert predicted_efficiency(42.2, 29.7, 1.6, 2) == pytest.approx(0.981, abs=1e-3)
    assert predicted_efficiency(10.0, 6.7, 5.0, 1) == pytest.approx(10 / 15)  # one bucket: none hidden
    assert predicted_efficiency(10.0, 6.7, 0.0, 0) == 1.0


@needs_mpi
def test_a_rank_that_raises_fails_the_job_with_its_error(device):
    proc = mpirun(device, "failure.py", "raise", timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "all_reduce returned" not in out
    assert "rank 1 failed" in out and "ValueError: rank one cannot go on" in out, out[-4000:]


@needs_mpi
@pytest.mark.parametrize("mode", ["timeout", "timeout-shm"])
def test_a_missing_rank_times_out_with_a_clear_message(device, mode):
    proc = mpirun(device, "failure.py", mode, timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "all_reduce timed out after 2 s on rank 0" in out, out[-4000:]


@needs_mpi
def test_is_available_does_not_start_mpi():
    code = ("import sys, cltensor.distributed as d; assert d.is_available(); "
            "assert 'mpi4py.MPI' not in sys.modules, 'MPI was loaded'")
    proc = subprocess.run([sys.executable, "-c", code], env=subprocess_env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_bad_backend_and_init_method():
    with pytest.raises(ValueError, match="backend 'nccl' is not supported"):
        dist.init_process_group("nccl")
    with pytest.raises(ValueError, match="init_method 'tcp://x:1'"):
        dist.init_process_group("mpi", init_method="tcp://x:1")


def test_collectives_before_init_say_so(device):
    t = ct.zeros(3, device=device)
    for call in (lambda: dist.all_reduce(t), lambda: dist.get_rank(), lambda: dist.barrier()):
        with pytest.raises(dist.DistributedError, match="init_process_group"):
            call()
    with pytest.raises(ValueError, match="num_replicas and rank explicitly"):
        DistributedSampler(range(4))


@pytest.mark.parametrize("local_rank,want", [(0, "gpu0"), (1, "gpu1"), (2, "gpu0")])
def test_local_rank_picks_the_hosts_gpu(monkeypatch, local_rank, want):
    class Fake:
        def __init__(self, name, is_gpu):
            self.name, self.is_gpu = name, is_gpu

    picked = []
    monkeypatch.delenv("CLTENSOR_DEVICE", raising=False)
    monkeypatch.setattr(pg, "all_devices", lambda: [Fake("cpu", False), Fake("gpu0", True),
                                                    Fake("gpu1", True)])
    monkeypatch.setattr(pg, "set_default_device", lambda d: picked.append(d.name))
    pg._pick_device(local_rank)
    assert picked == [want]
    monkeypatch.setenv("CLTENSOR_DEVICE", "cpu")   # the user's choice wins
    pg._pick_device(local_rank)
    assert picked == [want]


def test_missing_mpi4py_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    with pytest.raises(ImportError, match=r"cltensor\[distributed\]"):
        dist.init_process_group("mpi")
    assert not dist.is_available()


@pytest.mark.parametrize("sizes", [[7], [5, 0, 300]], ids=["one", "bucket"])
def test_staging_round_trip(device, sizes):
    """Tensors packed into one host array and back; one tensor on a CPU device is mapped in
    place (no copy), a bucket is copied into a pooled buffer."""
    base = [np.arange(n, dtype=np.float32) + 10 * i for i, n in enumerate(sizes)]
    ts = [ct.from_numpy(b, device=device) for b in base]
    s = Staged(ts)
    s.wait()
    np.testing.assert_array_equal(s.host, np.concatenate(base))
    assert (s._mapped is not None) == (device.is_cpu and len(sizes) == 1)
    s.host *= -1
    s.finish()
    for t, b in zip(ts, base):
        np.testing.assert_array_equal(t.numpy(), -b)
    again = Staged(ts, copy_in=False)   # the pooled buffer comes back for the same size
    assert len(sizes) == 1 or again._whole is s._whole
    again.finish()


@pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None, reason="needs mpi4py")
def test_missing_mpi_library_names_open_mpi(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)   # as when libmpi cannot load
    with pytest.raises(ImportError, match="install Open MPI: apt-get install openmpi-bin"):
        dist.init_process_group("mpi")
    assert not dist.is_initialized()


def test_buckets_follow_reverse_order_dtype_and_cap(device):
    ps = [ct.zeros(n, dtype=d, device=device) for n, d in
          [(4, "float32"), (300, "float32"), (2, "float64"), (100, "float32"), (100, "float32")]]
    # 1 KiB cap: 400 bytes fit twice; the float64 one breaks the run; 1200 bytes stands alone
    assert make_buckets(ps, 1024) == [[4, 3], [2], [1], [0]]
    assert make_buckets(ps, 25 * 2**20) == [[4, 3], [2], [1, 0]]
    assert np.dtype(ps[2].dtype) == np.float64
