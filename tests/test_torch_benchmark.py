"""python -m convnet_benchmarks --framework torch-opencl: the torch.nn network on cltensor's
PyTorch device beside cltensor native and torch CPU in one run, its output checked."""
import json
import os
import sys
import tempfile
import types

import pytest

from conftest import ran_in_fresh_process, torch_for_the_device

# NOTE: not cltensor.torch: the benchmark runs torch's CUDA rows before it registers opencl
torch = torch_for_the_device()
from test_convnet_benchmarks import small_model  # noqa: E402, F401  (a tiny benchmark network)
from convnet_benchmarks.__main__ import main  # noqa: E402


@pytest.mark.usefixtures("small_model")
def test_framework_torch_opencl_row(device, tmp_path, request):
    if ran_in_fresh_process(request):
        return
    out, md = tmp_path / "res.json", tmp_path / "res.md"
    argv = ["--model", "small", "--batch-size", "2", "--iterations", "1", "--device",
            device.index, "--framework", "torch-opencl", "--no-layers", "--json", str(out),
            "--markdown", str(md)]
    assert main(argv) == 0
    row = json.loads(out.read_text())["rows"][0]
    for fw in ("cltensor", "torch_opencl", "torch"):  # torch-opencl implies --compare torch
        assert row[fw]["total"]["median"] > 0, fw
    assert row["torch_opencl"]["output_rel_error"] < 1e-4
    assert row["torch_opencl"]["fallback_ops"] == []  # the step all on the device
    assert "| small | 2 | torch_opencl |" in md.read_text()


@pytest.mark.usefixtures("small_model")
def test_torch_rows_run_before_the_device_is_registered(device, tmp_path, monkeypatch, request):
    """Every network's torch rows run before cltensor.torch registers the device: after it,
    torch's engine takes opencl for the process's accelerator and CUDA backwards trip an
    internal assertion (torch 2.11 on an H100)."""
    if ran_in_fresh_process(request):
        return
    from convnet_benchmarks import bench, torch_opencl
    calls, register, run_torch = [], torch_opencl.register, bench.run_torch
    monkeypatch.setattr(torch_opencl, "register", lambda: (calls.append("register"), register()))
    monkeypatch.setattr(bench, "run_torch",
                        lambda *a, **k: (calls.append("torch"), run_torch(*a, **k))[1])
    argv = ["--model", "small", "--batch-size", "2", "--iterations", "1", "--device",
            device.index, "--framework", "torch-opencl", "--no-layers", "--json",
            str(tmp_path / "res.json")]
    assert main(argv) == 0
    assert calls[-1] == "register" and "torch" in calls, calls
    row = json.loads((tmp_path / "res.json").read_text())["rows"][0]
    assert row["torch_opencl"]["total"]["median"] > 0


@pytest.mark.usefixtures("small_model")
def test_torch_device_script_reports_the_main_threads_cpu(device, tmp_path, capsys):
    """benchmarks/torch_device.py --thread-cpu: the main thread's CPU per step, each way."""
    from test_benchmark_scripts import script
    out = tmp_path / "td.json"
    script("torch_device").main(["--model", "small", "--batch", "1", "--reps", "2", "--device",
                                 device.index, "--thread-cpu", "--json", str(out)])
    (row,) = json.loads(out.read_text())["rows"]
    assert row["ref_thread"] > 0 and row["ours_thread"] > 0
    assert row["thread"] == pytest.approx(row["ours_thread"] / row["ref_thread"])
    assert "main thread CPU" in capsys.readouterr().out


@pytest.mark.usefixtures("small_model")
def test_torch_device_script_lists_the_kernels_that_differ(device, capsys, monkeypatch):
    """torch_device.py --kernels N: one profiled step each way, the N kernel names whose time
    differs most (a name run one way only among them), with the launches and ms of both, after
    a line of the totals."""
    from test_benchmark_scripts import script
    mod = script("torch_device")
    native, through_torch = mod.steps("small", device, 1)
    ref = mod.kernel_table(native, device)
    assert ref and all(c > 0 and ms >= 0 for c, ms in ref.values())
    tables = {native: {"a": (2, 1.0), "b": (1, 0.5)}, through_torch: {"a": (2, 1.1), "c": (3, 2.0)}}
    with monkeypatch.context() as m:
        m.setattr(mod, "kernel_table", lambda step, dev: tables[step])
        lines = mod.kernel_diff(native, through_torch, device, 2)
    assert len(lines) == 3 and "native     3 /     1.500 ms" in lines[0]
    assert "torch-opencl     5 /     3.100 ms" in lines[0]
    assert lines[1].split()[0] == "c" and "native     0 /" in lines[1]
    assert lines[2].split()[0] == "b" and "torch-opencl     0 /" in lines[2]
    mod.main(["--model", "small", "--batch", "1", "--reps", "1", "--device", device.index,
              "--kernels", "3"])
    printed = capsys.readouterr().out.splitlines()
    assert "all kernels" in printed[1] and len(printed) == 5


def test_a_test_runs_again_in_a_fresh_process(request, monkeypatch):
    """ran_in_fresh_process, where cltensor.torch is imported and torch has CUDA: the test runs
    again in a child pytest (which runs the body: the helper declines there), and the parent
    returns True once the child passed."""
    child = bool(os.environ.get("CLTENSOR_FRESH_PROCESS"))
    marker = os.path.join(tempfile.gettempdir(),
                          f"cltensor-fresh-{os.getppid() if child else os.getpid()}")
    if child:
        assert ran_in_fresh_process(request) is False
        with open(marker, "w") as f:
            f.write("ran")
        return
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setitem(sys.modules, "cltensor.torch",
                        sys.modules.get("cltensor.torch") or types.ModuleType("cltensor.torch"))
    try:
        assert ran_in_fresh_process(request) is True
        with open(marker) as f:
            assert f.read() == "ran"
    finally:
        if os.path.exists(marker):
            os.remove(marker)
