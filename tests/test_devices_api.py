"""Devices as torch scripts write them: cltensor.device, "cpu"/"cuda" names, cltensor.cuda,
cltensor.accelerator, .cpu()/.cuda(), pickling, DLPack.

Machines with and without a GPU are both tested on every device: `machine` swaps the list of
devices for one where the test device appears as a CPU, as a GPU, or both."""
import copy
import itertools
import pickle

import numpy as np
import pytest

import cltensor as ct
from cltensor import device as devmod


_FAKE_INDICES = itertools.count()


def _as(device, kind):
    """A new Device over the test device's OpenCL device that reports itself a CPU or a GPU;
    its index is new, as caches keyed by index must not mix its context with another's."""
    d = devmod.Device(f"8:{next(_FAKE_INDICES)}", device.cl_device)
    d.is_cpu, d.is_gpu = kind == "cpu", kind == "gpu"
    return d


@pytest.fixture
def machine(device, monkeypatch):
    """machine(*kinds, default=i) makes the devices present those kinds ("cpu", "gpu"), all
    over the test device, with the i-th the default; returns them."""
    def make(*kinds, default=0):
        devs = [_as(device, kind) for kind in kinds]
        monkeypatch.setattr(devmod, "_devices", devs)
        monkeypatch.setattr(devmod, "_default", devs[default])
        return devs
    return make


def test_device_objects_read_like_torchs():
    d = ct.device("cuda:1")
    assert (d.type, d.index, str(d), repr(d)) == ("cuda", 1, "cuda:1", "device(type='cuda', index=1)")
    assert ct.device("cuda", 1) == d == ct.device(d) and hash(ct.device("cuda", 1)) == hash(d)
    assert (ct.device("cpu").type, ct.device("cpu").index, str(ct.device("cpu"))) == ("cpu", None, "cpu")
    assert ct.device("cuda") != ct.device("cuda:0")  # as torch: unnumbered is another name
    assert ct.device(0) == ct.device("cuda:0") and ct.device("opencl:2").index == 2
    assert isinstance(d, ct.device) and not isinstance("cuda:1", ct.device)
    assert {ct.device("cpu"): 1}[ct.device("cpu")] == 1
    assert pickle.loads(pickle.dumps(d)) == d and copy.deepcopy(d) == d
    with pytest.raises(AttributeError):
        d.index = 2
    for bad, error in [("gpu", ValueError), ("cuda:-1", ValueError), ("cuda:x", ValueError),
                       ("cpu:0:1", ValueError), (1.5, TypeError)]:
        with pytest.raises(error, match="device"):
            ct.device(bad)
    with pytest.raises(ValueError, match="index must be an int >= 0"):
        ct.device("cuda", -1)
    with pytest.raises(ValueError, match="has an index already"):
        ct.device("cuda:0", 1)


def test_device_repr_matches_torch():
    torch = pytest.importorskip("torch")
    for name in ("cpu", "cuda", "cuda:1", "cpu:0"):
        assert repr(ct.device(name)) == repr(torch.device(name))
        assert str(ct.device(name)) == str(torch.device(name))
        assert ct.device(torch.device(name)) == ct.device(name)


def test_tensor_device_compares_equal_to_its_name(device):
    x = ct.tensor([1.0, 2.0], device=device)
    name = ct.device(x.device)
    assert ct.get_device(name) is device and ct.get_device(str(name)) is device
    assert x.device == name and name == x.device and x.device != ct.device("opencl", 99)
    assert x.device.type == {True: "cpu", False: "cuda" if device.is_gpu else "opencl"}[device.is_cpu]
    assert (x.is_cpu, x.is_cuda, x.is_xpu) == (device.is_cpu, device.is_gpu, False)
    assert x.get_device() == (-1 if device.is_cpu else name.index)


def test_creation_to_and_cpu_take_device_names(device, rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    name = ct.device(device)
    for spec in (name, str(name)):
        for x in (ct.tensor(a, device=spec), ct.from_numpy(a, device=spec),
                  ct.zeros(3, device=spec), ct.ones_like(ct.zeros(2), device=spec),
                  ct.arange(3, device=spec), ct.empty(2, device=spec), ct.rand(2, device=spec),
                  ct.eye(2, device=spec), ct.zeros(1).new_zeros(2, device=spec),
                  ct.zeros(1).new_full((2,), 1.0, device=spec),
                  ct.zeros(1).new_tensor([1.0], device=spec),
                  ct.nn.Linear(2, 2, device=spec).weight):
            assert x.device is device, (spec, x)
    x = ct.tensor(a, device=device)
    cpu = ct.get_device("cpu")
    for moved in (x.to("cpu"), x.to(ct.device("cpu"), non_blocking=True), x.cpu(),
                  x.to(device="cpu", dtype=ct.float32), x.pin_memory().cpu()):
        assert moved.device is cpu and moved.device == ct.device("cpu")
        np.testing.assert_array_equal(moved.numpy(), a)
    assert x.to(name, non_blocking=True) is x and x.pin_memory() is x
    assert x.cpu().is_pinned() == cpu.is_cpu
    assert x[0, 0].cpu().item() == a[0, 0]


def test_no_gpu_cuda_is_absent_with_a_clear_error(machine):
    (cpu,) = machine("cpu")
    x = ct.tensor([1.0, 2.0])
    assert x.device is cpu and ct.get_device("cpu") is cpu and x.cpu() is x
    assert not ct.cuda.is_available() and ct.cuda.device_count() == 0
    assert not ct.accelerator.is_available() and ct.accelerator.current_accelerator() is None
    assert not ct.backends.cuda.is_built() and not ct.backends.mps.is_available()
    for call in (lambda: x.cuda(), lambda: x.to("cuda"), lambda: ct.zeros(1, device="cuda:0"),
                 lambda: ct.cuda.current_device(), lambda: ct.cuda.synchronize(),
                 lambda: ct.cuda.memory_allocated(), lambda: ct.get_device(ct.device("cuda"))):
        with pytest.raises(ct.DeviceError, match="no OpenCL GPU was found"):
            call()
    assert ct.device("cuda") != x.device  # comparing never raises
    ct.cuda.manual_seed(1)  # as torch without CUDA: ignored
    ct.cuda.manual_seed_all(1)
    with pytest.raises(ct.DeviceError, match="'mps' has no OpenCL device"):
        ct.tensor([1.0], device="mps")


def test_gpu_is_cuda_and_the_cpu_device_is_cpu(machine):
    cpu, gpu = machine("cpu", "gpu", default=1)
    a = np.arange(4, dtype=np.float32)
    x = ct.tensor(a)  # the default device: the GPU
    assert x.device is gpu and x.device == ct.device("cuda") and x.device == ct.device("cuda:0")
    assert (str(ct.device(x.device)), x.is_cuda, x.is_cpu, x.get_device()) == ("cuda:0", True, False, 0)
    assert not x.is_pinned() and x.pin_memory() is x
    h = x.cpu()
    assert h.device is cpu and h.is_cpu and h.get_device() == -1 and str(ct.device(h.device)) == "cpu"
    np.testing.assert_array_equal(h.numpy(), a)
    for back in (h.cuda(), h.cuda(0), h.cuda("cuda:0"), h.to("cuda", non_blocking=True),
                 h.to(ct.accelerator.current_accelerator())):
        assert back.device is gpu
        np.testing.assert_array_equal(back.numpy(), a)
    with pytest.raises(ct.DeviceError, match="there are 1 cuda devices"):
        h.cuda(1)
    assert ct.cuda.is_available() and ct.accelerator.is_available() and ct.backends.cuda.is_built()
    assert (ct.cuda.device_count(), ct.accelerator.device_count(), ct.cuda.current_device()) == (1, 1, 0)
    assert ct.accelerator.current_accelerator() == ct.device("cuda")
    assert ct.cuda.get_device_name() == gpu.name and ct.cuda.get_device_name(0) == gpu.name
    assert ct.cuda.is_initialized() and not ct.cuda.is_bf16_supported()
    props = ct.cuda.get_device_properties(0)
    assert props.name == gpu.name and props.total_memory == gpu.cl_device.global_mem_size > 0
    assert props.multi_processor_count == gpu.cl_device.max_compute_units


def test_backends_cuda_and_mps_probes(machine, monkeypatch):
    monkeypatch.setattr(ct.backends, "allow_tf32", False)
    ct.backends.cuda.matmul.allow_tf32 = True  # torch's spelling of the same switch
    assert ct.backends.allow_tf32 is True and ct.backends.cuda.matmul.allow_tf32 is True
    ct.backends.allow_tf32 = False
    assert ct.backends.cuda.matmul.allow_tf32 is False
    assert not (ct.backends.mps.is_available() or ct.backends.mps.is_built())
    machine("cpu")
    assert not ct.backends.cuda.is_built()
    machine("cpu", "gpu")
    assert ct.backends.cuda.is_built()


def test_cuda_memory_seed_and_device_context(machine):
    cpu, gpu0, gpu1 = machine("cpu", "gpu", "gpu", default=0)
    assert ct.get_device("cuda") is gpu0  # default is a CPU: "cuda" is the first GPU
    ct.cuda.reset_peak_memory_stats()
    before = ct.cuda.memory_allocated()
    x = ct.tensor(np.zeros(1000, np.float32), device="cuda")
    assert ct.cuda.memory_allocated() - before == 4000 and ct.cuda.max_memory_allocated() >= 4000
    assert ct.cuda.memory_reserved() >= ct.cuda.memory_allocated() >= 4000
    del x
    assert ct.cuda.memory_allocated() == before and ct.cuda.max_memory_allocated() >= before + 4000
    ct.cuda.reset_peak_memory_stats()
    assert ct.cuda.max_memory_allocated() == before
    ct.cuda.empty_cache()
    ct.cuda.synchronize()
    ct.accelerator.synchronize()
    with ct.cuda.device(1):
        assert ct.cuda.current_device() == 1 and ct.tensor([1.0]).device is gpu1
        assert ct.accelerator.current_device_index() == 1
    assert ct.get_device(None) is cpu
    ct.cuda.set_device(1)
    assert ct.get_device(None) is gpu1 and ct.get_device("cuda") is gpu1
    with pytest.raises(ValueError, match="not a GPU"):
        ct.cuda.set_device("cpu")
    ct.cuda.manual_seed(7)
    a = ct.random.default_generator.get_state()
    ct.manual_seed(8)
    assert not np.array_equal(ct.random.default_generator.get_state(), a)
    ct.cuda.manual_seed_all(7)
    assert np.array_equal(ct.random.default_generator.get_state(), a)


def test_cltensor_device_takes_torch_names(machine, monkeypatch):
    for spec, want in [("cpu", 0), ("cuda", 1), ("cuda:1", 2), ("opencl:0", 0), (None, 2)]:
        devs = machine("cpu", "gpu", "gpu")
        monkeypatch.setattr(devmod, "_default", None)
        monkeypatch.setenv("CLTENSOR_DEVICE", spec or f" {devs[2].index}")
        assert ct.default_device() is devs[want], spec
    devs = machine("cpu", "gpu")
    ct.set_default_device("cpu")
    assert ct.default_device() is devs[0] and ct.get_device("cuda") is devs[1]


def test_cpu_without_a_cpu_device_is_the_default_device(machine, tmp_path):
    (gpu,) = machine("gpu")
    x = ct.tensor([[1.5, 2.5]])
    assert x.cpu() is x and ct.get_device("cpu") is gpu
    assert x.cpu().device.type == "cuda"  # reported as it is
    assert x.cpu().numpy().tolist() == [[1.5, 2.5]] and x[0, 1].cpu().item() == 2.5
    ct.save({"x": x}, tmp_path / "x.pt")
    assert ct.load(tmp_path / "x.pt", map_location="cpu")["x"].device is gpu


def test_module_to_cpu_and_cuda_keep_parameters(machine):
    cpu, gpu = machine("cpu", "gpu")
    model = ct.nn.Linear(3, 2)
    w = model.weight
    want = model.weight.numpy()
    for step, where in [(lambda m: m.to("cuda", non_blocking=True), gpu), (lambda m: m.cpu(), cpu),
                        (lambda m: m.cuda(), gpu), (lambda m: m.to(ct.device("cpu")), cpu),
                        (lambda m: m.to(device="cuda:0"), gpu)]:
        assert step(model) is model and model.weight is w
        assert w.device is where and model.bias.device is where
        np.testing.assert_array_equal(w.numpy(), want)


def test_pickle_tensors_models_and_optimizers(device, rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    for t in (ct.tensor(a, device=device), ct.tensor(a, device=device).t(),
              ct.tensor([1, 2], device=device), ct.tensor([True, False], device=device),
              ct.tensor(a, device=device, requires_grad=True)):
        back = pickle.loads(pickle.dumps(t))
        assert type(back) is ct.Tensor and back.dtype == t.dtype
        assert back.device is ct.get_device(device.type)  # that type's default device
        assert back.requires_grad == t.requires_grad and back.shape == t.shape
        np.testing.assert_array_equal(back.numpy(), t.numpy())
    y = ct.tensor(a, device=device, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="non-leaf"):
        pickle.dumps(y)
    assert pickle.loads(pickle.dumps(device)) is ct.get_device(device.type)


def _train(model, opt, x):
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()


def test_pickle_a_model_with_its_optimizer(device, rng):
    model = ct.nn.Sequential(ct.nn.Linear(4, 3), ct.nn.BatchNorm1d(3)).to(device)
    opt = ct.optim.Adam(model.parameters(), lr=0.1)
    x = ct.tensor(rng.standard_normal((5, 4)).astype(np.float32), device=device)
    _train(model, opt, x)
    model2, opt2 = pickle.loads(pickle.dumps((model, opt)))
    twin, twin_opt = copy.deepcopy((model, opt))
    assert isinstance(model2[0].weight, ct.nn.Parameter) and model2[0].weight.requires_grad
    assert opt2.param_groups[0]["params"][0] is model2[0].weight
    for m, o in ((model, opt), (model2, opt2), (twin, twin_opt)):
        _train(m, o, x.to(m[0].weight.device))
    for (k, v), (k2, v2), (_, v3) in zip(model.state_dict().items(), model2.state_dict().items(),
                                          twin.state_dict().items()):
        assert k == k2 and v2.device is ct.get_device(device.type) and v3.device is device
        np.testing.assert_allclose(v2.numpy(), v.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(v3.numpy(), v.numpy())


def test_dlpack_and_array_out(device, rng):
    torch = pytest.importorskip("torch")
    a = rng.standard_normal((2, 3)).astype(np.float32)
    x = ct.tensor(a, device=device)
    if not device.is_cpu:
        with pytest.raises(BufferError, match="cannot address"):
            np.from_dlpack(x)
        np.testing.assert_array_equal(np.from_dlpack(x, device="cpu"), a)
        return
    assert x.__dlpack_device__() == (1, 0)
    for out in (np.from_dlpack(x), torch.from_dlpack(x).numpy(), torch.tensor(x).numpy(),
                np.asarray(x), np.array(x, dtype=np.float64)):
        np.testing.assert_array_equal(out, a)
    assert torch.tensor(ct.tensor([1, 2], device=device)).dtype == torch.int64
    with pytest.raises(ValueError, match="always gets a copy"):
        np.asarray(x, copy=False)
    with pytest.raises(BufferError, match="copy=False"):
        x.__dlpack__(copy=False)


def test_dlpack_out_of_a_gpu_needs_the_host_asked_for(machine):
    machine("gpu")
    x = ct.tensor([1.0, 2.0])
    assert x.__dlpack_device__() == (4, 0)
    with pytest.raises(BufferError, match="cannot address"):
        np.from_dlpack(x)
    np.testing.assert_array_equal(np.from_dlpack(x, device="cpu"), [1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(x), [1.0, 2.0])  # __array__ works anywhere
    torch = pytest.importorskip("torch")
    with pytest.raises(BufferError, match=r"x\.numpy\(\)"):
        torch.tensor(x)


def test_from_dlpack_reads_host_memory(device, rng):
    torch = pytest.importorskip("torch")
    cpu = ct.get_device("cpu")
    a = rng.standard_normal((2, 3)).astype(np.float32)
    for src in (a, torch.from_numpy(a), a.T, torch.from_numpy(a).t()):
        got = ct.from_dlpack(src)
        assert got.device is cpu and got.dtype == ct.float32
        np.testing.assert_array_equal(got.numpy(), np.asarray(src))
    got = ct.from_dlpack(torch.arange(3), device=device)
    assert got.device is device and got.tolist() == [0, 1, 2] and got.dtype == ct.int64
    x = ct.tensor(a, device=device)
    assert ct.from_dlpack(x) is x and ct.from_dlpack(x, copy=True) is not x
    with pytest.raises(TypeError, match="object with __dlpack__"):
        ct.from_dlpack([1, 2])

    class OnAGpu:
        def __dlpack_device__(self):
            return (2, 0)  # kDLCUDA

        def __dlpack__(self, **kwargs):
            raise BufferError("the data is on a CUDA device")
    with pytest.raises(BufferError, match="reads host memory only"):
        ct.from_dlpack(OnAGpu())


def test_a_scripts_device_idioms_run_with_only_the_import_swapped(device, machine, tmp_path):
    """pytorch/examples' device set-up and checkpointing, as written for torch, on a machine
    with the test device as its GPU and on one with it as its CPU."""
    import cltensor as torch  # the script's only change
    for kinds in (("gpu",), ("cpu",)):
        machine(*kinds)
        use_cuda = torch.cuda.is_available()
        use_accel = torch.accelerator.is_available()
        device = torch.accelerator.current_accelerator() if use_accel else torch.device("cpu")
        assert use_cuda == use_accel == (kinds == ("gpu",))
        torch.manual_seed(1)
        if use_cuda:
            torch.cuda.manual_seed(1)
        model = torch.nn.Linear(2, 1).to(device)
        data = torch.tensor([[1.0, 2.0]]).pin_memory().to(device, non_blocking=True)
        loss = model(data).sum()
        torch.save(model.state_dict(), tmp_path / "m.pt")
        state = torch.load(tmp_path / "m.pt", map_location=device)
        assert all(v.device == device for v in state.values()) and data.device == device
        want = data.numpy() @ model.weight.numpy().T + model.bias.numpy()
        assert abs(loss.cpu().item() - float(want.sum())) < 1e-6
