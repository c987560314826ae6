"""ct.save / ct.load: nested objects and optimizer state round-trip, in torch's zip format (read
and written both ways against torch, views kept shared) and as .npz; a failed or killed save
leaves the previous checkpoint whole; a bad or malicious file gives a ValueError that names it."""
import errno
import io
import math
import os
import re
import signal
import struct
import subprocess
import sys
import time
import zipfile
from collections import Counter, OrderedDict

import numpy as np
import pytest
from conftest import subprocess_env

import cltensor as ct
from cltensor import nn, optim, serialization
from cltensor.serialization import torch_write


def _same(a, b):
    """a (saved) and b (loaded) hold the same structure, tensors equal by value and dtype."""
    if isinstance(a, (ct.Tensor, np.ndarray)):
        want = a.numpy() if isinstance(a, ct.Tensor) else a
        assert isinstance(b, ct.Tensor) and b.dtype == want.dtype and b.shape == want.shape
        np.testing.assert_array_equal(b.numpy(), want)
    elif isinstance(a, dict):
        assert type(b) is type(a) and list(a) == list(b)
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


# ---- torch's zip format -------------------------------------------------------------------------

def test_torch_format_round_trip_keeps_numbers_and_containers(device, tmp_path):
    w = ct.arange(12, dtype=ct.float32, device=device).reshape(3, 4)
    obj = {"state": OrderedDict([("w", w), ("n", ct.tensor(5, device=device))]),
           "numbers": [0, 255, 256, -1, 2 ** 40, -2 ** 70, 1.5, float("inf"), True, None],
           "text": ("ascii", "ünï\u20ac", ""), 3: {(1, "k"): []}, "array": np.arange(3.0),
           "empty": ct.zeros((0, 3), device=device)}
    path = tmp_path / "ckpt.pt"
    ct.save(obj, path)
    back = ct.load(path, map_location=device)
    _same(obj, back)
    assert type(back["numbers"][4]) is int and type(back["numbers"][6]) is float
    with zipfile.ZipFile(path) as zf:
        assert "archive/data.pkl" in zf.namelist()  # torch's layout, not an npz


def _data_offsets(path):
    """{member: offset of its data in the file} for the storages of a torch archive."""
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as zf:
        infos = [i for i in zf.infolist() if "/data/" in i.filename]
    out = {}
    for info in infos:
        name_len, extra_len = struct.unpack("<HH", raw[info.header_offset + 26:
                                                       info.header_offset + 30])
        out[info.filename] = info.header_offset + 30 + name_len + extra_len
    return out


def _dtype_tensors(device):
    """One tensor per dtype cltensor has, values at the edges of each range."""
    out = {"f32": ct.tensor([1.5, -0.0, 3.4e38, 1e-45, float("inf")], device=device),
           "i64": ct.tensor([-2 ** 63, 2 ** 63 - 1, 0], dtype=ct.int64, device=device),
           "i32": ct.tensor([-2 ** 31, 2 ** 31 - 1], dtype=ct.int32, device=device),
           "bool": ct.tensor([True, False, True], device=device)}
    if device.has_fp64:
        out["f64"] = ct.tensor([1 / 3, -1e308, 5e-324], dtype=ct.float64, device=device)
    return out


def test_cltensor_checkpoint_loads_in_torch(device, tmp_path):
    torch = pytest.importorskip("torch")
    base = ct.arange(24, dtype=ct.float32, device=device).reshape(4, 6)
    views = {"base": base, "t": base.t(), "slice": base[1:3, 2:5], "row": base[3]}
    tensors = _dtype_tensors(device)
    path = tmp_path / "from_cltensor.pt"
    arrays = {"np_u8": np.array([0, 255], np.uint8), "np_i8": np.array([-128, 127], np.int8),
              "np_i16": np.array([-32768, 7], np.int16), "np_f16": np.array([1.5, -6e4], np.float16)}
    ct.save({**views, **tensors, **arrays}, path)
    got = torch.load(path, weights_only=True)
    for key, t in {**views, **tensors}.items():
        assert got[key].shape == t.shape and got[key].stride() == t.strides, key
        assert got[key].storage_offset() == t.offset, key
        mine = np.ascontiguousarray(got[key].numpy())
        np.testing.assert_array_equal(mine.view(np.uint8), t.numpy().view(np.uint8))
    for key, arr in arrays.items():
        assert str(got[key].dtype) == f"torch.{arr.dtype}" and got[key].tolist() == arr.tolist()
    ptr = got["base"].untyped_storage().data_ptr()
    assert all(got[k].untyped_storage().data_ptr() == ptr for k in views)
    offsets = _data_offsets(path)
    assert len(offsets) == 1 + len(tensors) + len(arrays)  # the views share one storage entry
    assert all(off % 64 == 0 for off in offsets.values()), offsets


def test_torch_checkpoint_loads_in_cltensor(device, tmp_path):
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(0)
    base = torch.randn(5, 6, generator=gen)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    typed = {str(d): torch.tensor([0, 1, 100, -7, 3]).to(d) for d in
             (torch.float32, torch.float64, torch.int64, torch.int32, torch.bool, torch.uint8,
              torch.int8, torch.int16, torch.float16, torch.bfloat16)}
    obj = {"views": [base, base.t(), base[2:, 1::2], base[0].expand(3, 6)],
           "model": model.state_dict(), "params": list(model.parameters()),
           "optim": opt.state_dict(), "typed": typed, "n": 4, "x": 0.25}
    path = tmp_path / "from_torch.pt"
    torch.save(obj, path)
    got = ct.load(path, map_location=device)
    for t, mine in zip(obj["views"], got["views"]):
        assert mine.shape == tuple(t.shape) and mine.strides == t.stride()
        np.testing.assert_array_equal(mine.numpy().view(np.uint32), t.numpy().view(np.uint32))
    assert len({id(v.storage) for v in got["views"]}) == 1  # one device buffer for the views
    assert list(got["model"]) == ["weight", "bias"] and type(got["model"]) is OrderedDict
    np.testing.assert_array_equal(got["params"][0].numpy(), model.weight.detach().numpy())
    assert got["params"][0].requires_grad and not got["model"]["weight"].requires_grad
    mine = nn.Linear(3, 2).to(device)
    mine.load_state_dict(got["model"])  # torch's weights drive a cltensor module
    np.testing.assert_allclose(mine(ct.ones(1, 3, device=device)).numpy(),
                               model(torch.ones(1, 3)).detach().numpy(), rtol=1e-6, atol=1e-6)
    exp_avg = got["optim"]["state"][0]["exp_avg"].numpy()
    np.testing.assert_array_equal(exp_avg, opt.state_dict()["state"][0]["exp_avg"].numpy())
    assert got["optim"]["param_groups"][0]["betas"] == (0.9, 0.999)
    for name, t in typed.items():
        want = t.float().numpy() if t.dtype in (torch.float16, torch.bfloat16) else t.numpy()
        assert got["typed"][name].tolist() == want.tolist(), name
    for name in ("uint8", "int8", "int16", "float16", "bfloat16"):  # kept, not widened
        assert got["typed"][f"torch.{name}"].dtype == getattr(ct, name)
    assert (got["n"], got["x"]) == (4, 0.25)
    with pytest.raises(TypeError, match="ComplexFloatStorage"):
        torch.save(torch.ones(2, dtype=torch.complex64), path)
        ct.load(path, map_location=device)


def test_map_location_forms(device, tmp_path):
    path = tmp_path / "w.pt"
    ct.save({"w": ct.ones(2, device=device)}, path)
    seen = []

    def keep(storage, location):
        seen.append(location)
        return storage

    gpu = ["cuda:0"] if ct.cuda.is_available() else []
    for where in ["cpu", *gpu, device, device.index, {"cpu": device}, keep, None]:
        got = ct.load(path, map_location=where)["w"]
        assert got.tolist() == [1.0, 1.0], where
    assert got.device == ct.get_device(None) and seen == ["cpu"]
    assert ct.load(path, map_location={"cpu": device})["w"].device == device
    odd = tmp_path / "odd_location.pt"  # saved on a location no OpenCL device is named
    odd.write_bytes(_archive(_tensor_pickle().replace(b"\x03\x00\x00\x00cpu",
                                                      b"\x03\x00\x00\x00xyz"),
                             [("0", bytes(12))]))
    unmapped = ct.load(odd, map_location={"cuda:1": device})
    assert unmapped.device == ct.get_device(None) and unmapped.tolist() == [0.0] * 3
    with pytest.raises(TypeError, match="map_location must be"):
        ct.load(path, map_location=3)
    with pytest.raises(ZeroDivisionError):  # an error in the caller's function stays its own
        ct.load(path, map_location=lambda s, loc: 1 / 0)


def _archive(pickled, storages=(), name="archive"):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(f"{name}/data.pkl", pickled)
        for key, data in storages:
            zf.writestr(f"{name}/data/{key}", data)
    return buf.getvalue()


def _tensor_pickle(numel=3, offset=0, size=(3,), stride=(1,), after=b""):
    """A pickle of one float32 tensor, with `after` ops applied to it before STOP."""
    p = torch_write._Pickler()
    body = p._rebuild(b"ctorch\nFloatStorage\n", "0", numel, offset, size, stride, False)
    return torch_write._PROTO + body + after + torch_write._STOP


def test_malicious_pickles_are_refused_without_running(device, tmp_path):
    marker = tmp_path / "ran"
    command = f"touch {marker}".encode()
    calls = {"os.system": b"cos\nsystem\n", "posix.system": b"cposix\nsystem\n",
             "builtins.eval": b"\x8c\x08builtins\x8c\x04eval\x93"}
    for name, global_op in calls.items():
        pickled = b"\x80\x04" + global_op + b"X" + struct.pack("<I", len(command)) + command + \
            b"\x85R."
        path = tmp_path / "evil.pt"
        path.write_bytes(_archive(pickled))
        for weights_only in (True, False):
            with pytest.raises(ValueError, match=f"evil.pt.*{name}.*state_dict"):
                ct.load(path, map_location=device, weights_only=weights_only)
    assert not marker.exists()
    # a BUILD that would repoint a tensor's offset
    build = b"}X\x06\x00\x00\x00offsetK\x05sb"
    path.write_bytes(_archive(_tensor_pickle(after=build), [("0", bytes(12))]))
    with pytest.raises(ValueError, match="BUILD"):
        ct.load(path, map_location=device)


def test_plain_data_torch_allows_loads_and_nothing_else(device, tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "plain.pt"
    plain = {"size": torch.Size([2, 3]), "bytes": b"\x00\xff", "set": {1, 2},
             "counter": Counter("aab"), "complex": 1 + 2j}
    torch.save(plain, path)
    got = ct.load(path, map_location=device)
    assert got == {"size": (2, 3), "bytes": b"\x00\xff", "set": {1, 2},
                   "counter": Counter("aab"), "complex": 1 + 2j}
    for other in (torch.float32, torch.device("cpu")):
        torch.save({"x": other}, path)
        with pytest.raises(ValueError, match="plain.pt' needs the global 'torch"):
            ct.load(path, map_location=device)


def test_build_cannot_change_storages_or_allowed_functions(device, tmp_path):
    path = tmp_path / "build.pt"
    pid = _tensor_pickle()[2:].split(b"Q")[0] + b"Q"  # the storage's persistent id
    state = b"}X\x05\x00\x00\x00shapeK\x05sb"
    cases = {"storage": b"\x80\x02" + pid + state + b".",
             "function": b"\x80\x02ctorch\nSize\n" + state + b"."}
    for pickled in cases.values():
        path.write_bytes(_archive(pickled, [("0", bytes(12))]))
        with pytest.raises(ValueError, match="build.pt"):
            ct.load(path, map_location=device)


def test_bad_torch_archives_raise_value_error_naming_the_file(device, tmp_path):
    good = tmp_path / "good.pt"
    ct.save({"w": ct.ones(100, device=device), "n": [1, 2]}, good)
    data = good.read_bytes()
    files = {"truncated": data[:len(data) // 2], "cut pickle": data[:120],
             "short storage": _archive(_tensor_pickle(), [("0", bytes(8))]),
             "missing storage": _archive(_tensor_pickle()),
             "past the end": _archive(_tensor_pickle(offset=1), [("0", bytes(12))]),
             "bad stride": _archive(_tensor_pickle(stride=(-1,)), [("0", bytes(12))]),
             "garbage pickle": _archive(b"\x80\x02garbage"),
             "bad pid": _archive(b"\x80\x02K\x01Q."),
             "legacy": b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19."}
    for kind, raw in files.items():
        path = tmp_path / f"{kind.replace(' ', '_')}.pt"
        path.write_bytes(raw)
        with pytest.raises(ValueError, match=f"load: .*{path.name}") as info:
            ct.load(path, map_location=device)
        assert re.search("PyTorch checkpoint|npz|legacy format", str(info.value)), kind
    with pytest.raises(ValueError, match="legacy format"):
        ct.load(io.BytesIO(files["legacy"]), map_location=device)


class _Unseekable(io.RawIOBase):
    """A write-only stream that cannot seek (a pipe, a socket)."""

    def __init__(self):
        self.data = b""

    def writable(self):
        return True

    def write(self, b):
        self.data += bytes(b)
        return len(b)


def test_save_format_choice_and_torch_arguments(device, tmp_path):
    ct.save({"w": ct.ones(2, device=device)}, tmp_path / "w.npz")
    with np.load(tmp_path / "w.npz") as raw:
        assert raw.files == ["w"]
    buf = io.BytesIO()
    ct.save({"w": ct.ones(2, device=device)}, buf, _use_new_zipfile_serialization=True)
    assert zipfile.ZipFile(buf).namelist()[0] == "archive/data.pkl"
    buf.seek(0)
    assert ct.load(buf, map_location=device, weights_only=True)["w"].tolist() == [1.0, 1.0]
    pipe = _Unseekable()
    ct.save([ct.ones(2, device=device)], pipe)
    assert ct.load(io.BytesIO(pipe.data), map_location=device)[0].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="legacy"):
        ct.save({}, buf, _use_new_zipfile_serialization=False)
    cycle = [1]
    cycle.append(cycle)
    with pytest.raises(TypeError, match="contains itself"):
        ct.save(cycle, buf)
    with pytest.raises(TypeError, match="complex"):
        ct.save({"z": 1j}, buf)


def test_failed_torch_format_save_leaves_the_old_checkpoint(device, tmp_path, monkeypatch):
    path = tmp_path / "model.pt"
    ct.save({"w": ct.ones(5, device=device)}, path)
    real = torch_write._record

    def fill_disk(zf, f, name, data, aligned=False):
        if name.startswith("data/1"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real(zf, f, name, data, aligned)

    monkeypatch.setattr(torch_write, "_record", fill_disk)
    with pytest.raises(OSError, match="No space"):
        ct.save([ct.zeros(5, device=device), ct.zeros(5, device=device)], path)
    monkeypatch.undo()
    assert ct.load(path, map_location=device)["w"].tolist() == [1.0] * 5
    assert os.listdir(tmp_path) == ["model.pt"]


def test_map_location_takes_torch_style_devices(device, tmp_path):
    """map_location as torch scripts write it: names, device objects (cltensor's and torch's),
    dicts and callables giving them; each tensor lands on the device that name resolves to."""
    torch = pytest.importorskip("torch")
    path = tmp_path / "w.pt"
    ct.save({"w": ct.arange(3.0, device=device)}, path)
    cpu = ct.get_device("cpu")
    own = ct.device(device)  # e.g. device(type='cpu') or device(type='opencl', index=1)
    for where, want in [("cpu", cpu), (ct.device("cpu"), cpu), (torch.device("cpu"), cpu),
                        (own, device), (str(own), device), ({"cpu": own}, device),
                        ({"cpu": "cpu"}, cpu), (lambda s, loc: own, device),
                        (lambda s, loc: "cpu", cpu), (lambda s, loc: s.cpu(), cpu),
                        (lambda s, loc: s.to(own), device)]:
        got = ct.load(path, map_location=where)["w"]
        assert got.device is want and got.device == ct.device(want), where
        assert got.tolist() == [0.0, 1.0, 2.0]
    if not ct.cuda.is_available():
        for where in ("cuda", ct.device("cuda:0"), {"cpu": "cuda"}, lambda s, loc: s.cuda()):
            with pytest.raises(ct.DeviceError, match="no OpenCL GPU"):
                ct.load(path, map_location=where)
    else:
        for where in ("cuda", lambda s, loc: s.cuda(), lambda s, loc: s.cuda(0)):
            assert ct.load(path, map_location=where)["w"].device.type == "cuda"
