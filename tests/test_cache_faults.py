"""Faults in cltensor's on-disk caches and databases: truncated, garbage, wrongly typed files,
folders of another user or writable by others, and two processes writing at once. Each leaves
cltensor computing right answers with one CacheWarning, and stored results are never lost."""
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import cltensor as ct
from cltensor import backends, tune
from cltensor.conv import dispatch
from cltensor.diskfiles import CacheWarning
from conftest import subprocess_env

# A product small enough for every device's small-problem kernel (gemm_direct on PoCL)
N = 9


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private cache root for one test; the lookups read so far forgotten before and after."""
    root = tmp_path / "cache"
    monkeypatch.setenv("CLTENSOR_CACHE_DIR", str(root))
    tune.clear()
    dispatch.clear_cache()
    yield root
    tune.clear()
    dispatch.clear_cache()


def _ones_product(device, dtype=np.float32):
    a = ct.ones(N, N, dtype=dtype, device=device)
    return (a @ a).numpy()


def _plant(path, text):
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(text)


def _one_warning(record):
    found = [w for w in record if issubclass(w.category, CacheWarning)]
    assert len(found) == 1, [str(w.message) for w in found]
    return str(found[0].message)


BAD_TUNING_FILES = {
    "truncated": '{"gemm_float32": {"family": "pac',
    "garbage": "\x00\x01 not json at all",
    "list": "[]",
    "wrong type": '{"gemm_float32": 5}',
    "unknown family": '{"gemm_float32": {"family": "bogus"}}',
    "unknown kernel": '{"conv_nonesuch": {}}',
    "value out of range": '{"gemm_float32": {"direct": {"TM": 8, "TN": 16, "VW": 3}}}',
    # before the schema this became -DZZ=1 -DT=int: ones @ ones gave zeros
    "option injection": '{"gemm_float32": {"direct": {"TM": 8, "TN": 16, "VW": 8, '
                        '"ZZ": "1 -DT=int"}}}',
    "string for an int": '{"gemm_float32": {"min_work": "1 -DT=int"}}',
}


@pytest.mark.parametrize("kind", BAD_TUNING_FILES)
def test_bad_tuning_file_is_set_aside(device, cache, kind):
    path = tune.user_cache_path(device)
    _plant(path, BAD_TUNING_FILES[kind])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = _ones_product(device)
    np.testing.assert_array_equal(got, np.full((N, N), N, np.float32))
    assert "corrupt" in _one_warning(record)
    assert not path.exists() and path.with_name(path.name + ".corrupt").exists()
    # the tuner stores into the cleared place, and the next lookup uses it
    tune.store("gemm_float32", device, {"min_work": 12345})
    assert tune.lookup("gemm", "gemm_float32", device)["min_work"] == 12345


def test_store_over_a_corrupt_file_keeps_the_new_entry(device, cache):
    path = tune.user_cache_path(device)
    _plant(path, "[]")
    with pytest.warns(CacheWarning, match="corrupt"):
        tune.store("gemm_float64", device, {"min_dim": 3})
    assert json.loads(path.read_text()) == {"gemm_float64": {"min_dim": 3}}


@pytest.mark.parametrize("params", [{"direct": {"TM": 8, "TN": 16, "VW": 8, "ZZ": "1"}},
                                    {"min_work": -1}, {"family": "bogus"}, {"split_k": 1}])
def test_store_refuses_values_outside_the_schema(device, cache, params):
    with pytest.raises(ValueError, match="gemm_float32"):
        tune.store("gemm_float32", device, params)
    with pytest.raises(ValueError, match="unknown kernel"):
        tune.store("gemm_nonesuch", device, {})
    assert not tune.user_cache_path(device).exists()


def test_shipped_database_passes_the_schema():
    data = json.loads((tune.DB_DIR / "gemm.json").read_text())
    tune.validate_database(data)
    with pytest.raises(ValueError, match="unknown key '_about'"):
        tune.validate_database(dict(data, _about="prose"))
    with pytest.raises(ValueError, match="unknown kernel family"):
        tune.database("nonesuch")


def _refuse(folder, how):
    if how == "others can write":
        folder.chmod(0o777)
    else:
        os.chown(folder, os.geteuid() + 12345, -1)


@pytest.mark.parametrize("how", ["others can write", "another owner"])
def test_unsafe_cache_folder_is_refused(device, cache, how):
    if how == "another owner" and os.geteuid() != 0:
        pytest.skip("changing a folder's owner needs root")
    path = tune.user_cache_path(device)
    # a planted entry that would slow every product down: ignored in a refused folder
    _plant(path, json.dumps({"gemm_float32": {"family": "direct", "min_work": 7}}))
    _refuse(cache, how)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = _ones_product(device)
        assert tune.lookup("gemm", "gemm_float32", device).get("min_work") != 7
    np.testing.assert_array_equal(got, np.full((N, N), N, np.float32))
    assert "refusing cache folder" in _one_warning(record)
    with pytest.raises(PermissionError, match="refused"):
        tune.store("gemm_float32", device, {"min_work": 5})
    assert json.loads(path.read_text())["gemm_float32"]["min_work"] == 7  # left as it was


_STORE_LOOP = """
import sys, cltensor
from cltensor import tune
from cltensor.conv import dispatch
device = cltensor.get_device(sys.argv[1])
kernel, rounds = sys.argv[2], int(sys.argv[3])
class Problem:
    def __init__(self, i): self.i = i
    def key(self): return f"{kernel}-{self.i}"
for i in range(rounds):
    tune.store(kernel, device, {"min_work": i})
    dispatch._to_disk(device, Problem(i), "forward", "im2col", {"im2col": float(i)})
print("done")
"""


def test_two_processes_storing_at_once_lose_nothing(device, cache):
    """Each process stores its own kernel's entry and its own conv choices many times; at the
    end both files parse and hold every last entry of both."""
    rounds = 40
    env = subprocess_env(CLTENSOR_CACHE_DIR=str(cache))
    procs = [subprocess.Popen([sys.executable, "-c", _STORE_LOOP, device.index, kernel,
                               str(rounds)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for kernel in ("gemm_float32", "gemm_float64")]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and "done" in out, err[-2000:]
    tuned = json.loads(tune.user_cache_path(device).read_text())
    assert tuned == {k: {"min_work": rounds - 1} for k in ("gemm_float32", "gemm_float64")}
    conv = json.loads(dispatch.cache_path(device).read_text())
    assert len(conv) == 2 * rounds
    assert not [f for f in os.listdir(tune.user_cache_path(device).parent) if "tmp" in f]


@pytest.mark.parametrize("kind", ["truncated", "list", "wrong type"])
def test_bad_conv_benchmark_file_is_set_aside(device, cache, kind, monkeypatch):
    text = {"truncated": '{"x|forward": {"algo": "im2c', "list": "[]",
            "wrong type": '{"x|forward": {"algo": 5, "times_ms": []}}'}[kind]
    path = dispatch.cache_path(device)
    _plant(path, text)
    monkeypatch.setattr(backends, "benchmark", True)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = ct.nn.functional.conv2d(ct.from_numpy(x, device=device),
                                      ct.from_numpy(w, device=device), padding=1).numpy()
    torch = pytest.importorskip("torch")
    want = torch.nn.functional.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(),
                                      padding=1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert "corrupt" in _one_warning(record)
    data = json.loads(path.read_text())  # rewritten with the new choice, valid
    dispatch.validate_disk(data)
    assert data and path.with_name(path.name + ".corrupt").exists()


# ---- program binaries -------------------------------------------------------------------------

_BUILD = """
import sys, warnings
import pyopencl.characterize as c
if sys.argv[2] == "binaries":
    c.has_src_build_cache = lambda dev: None  # force cltensor's binary cache
import cltensor as ct
warnings.simplefilter("always")
x = ct.ones(3, device=ct.get_device(sys.argv[1])) * 2
print(x.numpy().sum())
"""


def _build_process(device, root, policy, **env):
    env = subprocess_env(CLTENSOR_CACHE_DIR=str(root), **env)
    env.pop("POCL_CACHE_DIR", None)
    return subprocess.run([sys.executable, "-c", _BUILD, device.index, policy], env=env,
                          capture_output=True, text=True, timeout=300)


def _ran_right(out):
    assert out.returncode == 0, out.stderr[-3000:]
    assert float(out.stdout.strip().splitlines()[-1]) == 6.0
    return out.stderr


def _files(folder):
    return [os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs]


_PLANTED = b"cos\nsystem\n(S'touch %s'\ntR."  # a pickle that runs a shell command


def test_builds_from_cached_binaries_warn_nothing(device, tmp_path):
    # Intel's CPU runtime logs its options on every build from a binary, which pyopencl turned
    # into a CompilerWarning per kernel
    root = tmp_path / "cache"
    first = _ran_right(_build_process(device, root, "binaries"))
    assert _files(root / "kernels"), "no binaries written"
    again = _ran_right(_build_process(device, root, "binaries"))
    assert "CompilerWarning" not in first + again, (first + again)[-2000:]


@pytest.mark.parametrize("fault", ["truncated", "garbage", "planted pickle"])
def test_corrupt_program_binaries_are_rebuilt(device, tmp_path, fault):
    root = tmp_path / "cache"
    assert "CacheWarning" not in _ran_right(_build_process(device, root, "binaries"))
    files = _files(root / "kernels")
    assert files, "no binaries written"
    marker = tmp_path / "pwned"
    for path in files:
        data = open(path, "rb").read()
        bad = {"truncated": data[: len(data) // 2], "garbage": os.urandom(len(data)),
               "planted pickle": _PLANTED % str(marker).encode()}[fault]
        open(path, "wb").write(bad)
    err = _ran_right(_build_process(device, root, "binaries"))
    assert not marker.exists(), "a file of the cache was unpickled"
    assert "CacheWarning" in err and "corrupt" in err
    # rebuilt and stored again: a third process reads them without a warning
    assert "CacheWarning" not in _ran_right(_build_process(device, root, "binaries"))


@pytest.mark.parametrize("how", ["others can write", "another owner"])
def test_unsafe_program_cache_folder_is_refused(device, tmp_path, how):
    if how == "another owner" and os.geteuid() != 0:
        pytest.skip("changing a folder's owner needs root")
    root = tmp_path / "cache"
    root.mkdir()
    _refuse(root, how)
    err = _ran_right(_build_process(device, root, "binaries"))
    assert err.count("refusing cache folder") == 1, err[-3000:]
    assert not (root / "kernels").exists()


def test_concurrent_program_builds(device, tmp_path):
    root = tmp_path / "cache"
    env = subprocess_env(CLTENSOR_CACHE_DIR=str(root))
    procs = [subprocess.Popen([sys.executable, "-c", _BUILD, device.index, "binaries"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and float(out.strip().splitlines()[-1]) == 6.0, err[-2000:]
        assert "CacheWarning" not in err
    assert _files(root / "kernels") and not [f for f in _files(root) if f.endswith(".tmp")]


def test_pocl_cache_entries_cut_short_are_removed(device, tmp_path):
    """PoCL aborts the process (status 134) on a cut program.bc or kernel .so of its cache;
    cltensor keeps PoCL's cache under its root and removes such entries first."""
    if "portable computing language" not in device.cl_device.platform.name.lower():
        pytest.skip("PoCL's own cache")
    root = tmp_path / "cache"
    _ran_right(_build_process(device, root, "driver"))
    cut = [f for f in _files(root / "pocl") if f.endswith((".so", "program.bc"))]
    assert cut, "PoCL's cache is not under cltensor's cache root"
    for path in cut:
        data = open(path, "rb").read()
        open(path, "wb").write(data[: len(data) // 3])
    err = _ran_right(_build_process(device, root, "driver"))
    assert "PoCL cache entry" in err and "cut short" in err


def test_tuner_keeps_its_winner_when_the_cache_folder_is_refused(device, cache, tmp_path,
                                                                 monkeypatch, capsys):
    winner = {"family": "direct", "min_work": 99}
    monkeypatch.setattr(tune, "tune_gemm", lambda *a: (dict(winner), []))
    cache.mkdir()
    cache.chmod(0o777)
    report = tmp_path / "report.json"
    with pytest.warns(CacheWarning, match="refusing"):
        status = tune.main(["gemm", "--device", device.index, "--json", str(report)])
    assert status == 1 and "not stored" in capsys.readouterr().err
    assert json.loads(report.read_text())["winners"]["gemm_float32"] == winner
    assert not (cache / "tuning").exists()
