"""python -m convnet_benchmarks --framework torch-opencl: the torch.nn network on cltensor's
PyTorch device beside cltensor native and torch CPU in one run, its output checked."""
import json

import pytest

# torch, skipping when it is missing or too old
from test_torch_device import torch  # noqa: F401
from test_convnet_benchmarks import small_model  # noqa: F401  (a tiny benchmark network)
from convnet_benchmarks.__main__ import main  # noqa: E402


@pytest.mark.usefixtures("small_model")
def test_framework_torch_opencl_row(device, tmp_path):
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
