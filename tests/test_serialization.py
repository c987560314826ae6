"""ct.save / ct.load: nested objects and optimizer state round-trip; a failed or killed save
leaves the previous checkpoint whole; a bad file gives a ValueError that names it."""
import errno
import io
import math
import os
import signal
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest

import cltensor as ct
from cltensor import nn, optim, serialization
from conftest import subprocess_env


def _same(a, b):
    """a (saved) and b (loaded) hold the same structure, tensors equal by value and dtype."""
    if isinstance(a, (ct.Tensor, np.ndarray)):
        want = a.numpy() if isinstance(a, ct.Tensor) else a
        assert isinstance(b, ct.Tensor) and b.dtype == want.dtype and b.shape == want.shape
        np.testing.assert_array_equal(b.numpy(), want)
    elif isinstance(a, dict):
        assert type(b) is dict and list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert type(b) is type(a) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b)
    else:
        assert type(b) is type(a) and b == a


def test_nested_objects_round_trip(device, tmp_path):
    obj = {"weights": {"w": ct.arange(6, dtype=ct.float32, device=device).reshape(2, 3),
                       "mask": ct.ones(3, dtype=ct.bool, device=device)},
           7: ["text", None, True, 3, -2.5, float("inf"), float("nan"), (1, (2.0, "x"))],
           (1, 2): np.arange(4, dtype=np.int64), "empty": [], "nested": {"a": {}}}
    path = tmp_path / "nested.ckpt"
    ct.save(obj, path)
    _same(obj, ct.load(path, device=device))
    buf = io.BytesIO()
    ct.save([1, ct.zeros(2, device=device)], buf)
    buf.seek(0)
    _same([1, ct.zeros(2, device=device)], ct.load(buf, device=device))
    # a dict of tensors stays a plain numpy archive
    path = tmp_path / "flat.npz"
    ct.save({"a": ct.ones(2, device=device), "n": 3}, path)
    with np.load(path) as raw:
        assert list(raw.files) == ["a", "n"]
    assert list(ct.load(path, device=device)) == ["a", "n"]


def test_optimizer_state_round_trips(device, tmp_path):
    """Adam saved after two steps and loaded into a fresh optimizer takes the same third step."""
    rng = np.random.default_rng(0)
    x = ct.from_numpy(rng.standard_normal((4, 3)).astype(np.float32), device=device)

    def step(model, opt):
        opt.zero_grad()
        (model(x) ** 2).sum().backward()
        opt.step()

    a = nn.Linear(3, 2).to(device)
    opt_a = optim.Adam(a.parameters(), lr=0.1, betas=(0.8, 0.9), amsgrad=True)
    step(a, opt_a)
    step(a, opt_a)
    ct.save({"model": a.state_dict(), "optim": opt_a.state_dict()}, tmp_path / "ckpt")
    loaded = ct.load(tmp_path / "ckpt", device=device)
    assert loaded["optim"]["param_groups"][0]["betas"] == (0.8, 0.9)
    b = nn.Linear(3, 2).to(device)
    opt_b = optim.Adam(b.parameters(), lr=0.5)
    b.load_state_dict(loaded["model"])
    opt_b.load_state_dict(loaded["optim"])
    step(a, opt_a)
    step(b, opt_b)
    for p, q in zip(a.parameters(), b.parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy())


def _bad_files(tmp_path, device):
    good = tmp_path / "good.npz"
    ct.save({"w": ct.ones(1000, device=device)}, good)
    data = good.read_bytes()
    nested = tmp_path / "nested.npz"
    ct.save({"w": [ct.ones(3, device=device)]}, nested)
    files = {"truncated": data[: len(data) // 2], "garbage": b"\x00garbage" * 100,
             "json": b'{"w": [1, 2, 3]}', "empty": b"",
             "flipped": data[:-200] + bytes(b ^ 0xFF for b in data[-200:])}
    for name, bad_tree in {"bad tree": b'{"format": "cltensor-tree", "version": 1, '
                                       b'"root": {"tensor": 5}}',
                           "unknown tree": b'{"format": "other", "root": {}}',
                           "unhashable key": b'{"format": "cltensor-tree", "version": 1, '
                                             b'"root": {"dict": [[{"list": []}, '
                                             b'{"int": 1}]]}}'}.items():
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr(serialization.TREE, bad_tree)
        files[name] = buf.getvalue()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("notes.txt", "not an array")
    files["not arrays"] = buf.getvalue()
    return files


def test_bad_files_raise_value_error_naming_the_file(device, tmp_path):
    for kind, data in _bad_files(tmp_path, device).items():
        path = tmp_path / f"{kind.replace(' ', '_')}.npz"
        path.write_bytes(data)
        with pytest.raises(ValueError, match=str(path.name)) as info:
            ct.load(path, device=device)
        assert "load:" in str(info.value), kind
        with pytest.raises(ValueError, match="load:"):
            ct.load(io.BytesIO(data), device=device)


def test_failed_save_leaves_the_old_checkpoint(device, tmp_path, monkeypatch):
    """A full disk part-way through a save: the old file is whole and no temporary is left."""
    path = tmp_path / "model.npz"
    ct.save({"w": ct.ones(5, device=device)}, path)
    os.chmod(path, 0o640)
    written = []
    real = np.lib.format.write_array

    def fill_disk(f, arr, **kw):
        if written:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(arr)
        real(f, arr, **kw)

    monkeypatch.setattr(np.lib.format, "write_array", fill_disk)
    with pytest.raises(OSError, match="No space"):
        ct.save({"a": ct.zeros(5, device=device), "b": ct.zeros(5, device=device)}, path)
    monkeypatch.undo()
    np.testing.assert_array_equal(ct.load(path, device=device)["w"].numpy(), np.ones(5))
    assert os.listdir(tmp_path) == ["model.npz"]
    ct.save({"w": ct.zeros(5, device=device)}, path)  # a later save keeps the file's mode
    assert os.stat(path).st_mode & 0o777 == 0o640


_BIG_SAVE = """
import sys, numpy as np, cltensor
big = {f"w{i}": np.full((4 << 20,), i, np.float32) for i in range(24)}  # 24 x 16 MiB
print("saving", flush=True)
cltensor.save(big, sys.argv[1])
"""


def test_killed_writer_never_destroys_the_previous_checkpoint(device, tmp_path):
    path = tmp_path / "ckpt.npz"
    ct.save({"w": ct.full((3,), 7.0, device=device)}, path)
    before = path.stat()
    proc = subprocess.Popen([sys.executable, "-c", _BIG_SAVE, str(path)],
                            env=subprocess_env(CLTENSOR_CACHE_DIR=str(tmp_path / "cache")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == b"saving"
        deadline = time.time() + 60
        # kill once the save has begun writing: a temporary file, or the target changed
        while time.time() < deadline and proc.poll() is None:
            others = [f for f in os.listdir(tmp_path) if f not in ("ckpt.npz", "cache")]
            now = path.stat() if path.exists() else None
            if others and os.path.getsize(tmp_path / others[0]) > (1 << 20) or \
                    now is None or now.st_size != before.st_size:
                break
            time.sleep(0.002)
        assert proc.poll() is None, "the save ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    np.testing.assert_array_equal(ct.load(path, device=device)["w"].numpy(), np.full(3, 7.0))
