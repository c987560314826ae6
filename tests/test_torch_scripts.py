"""The reduced third-party training scripts of tests/scripts/ as PyTorch programs on the
"opencl" device: each script's text with torch imported (cltensor.torch registering the
device) and its `"cuda" if torch.cuda.is_available() else "cpu"` choice made "opencl" (the
quickstart finds the device through torch.accelerator), run in-process for a few steps with
every operator on the device (a CPU fallback is an error). The loss must stay finite and go
down."""
import re

import pytest
from test_scripts import NAMES, SCRIPTS, _goes_down

# torch (skipping when it is missing or too old) and the fixtures making `device` opencl:0
from test_torch_device import device_only, ocl, torch  # noqa: F401

pytestmark = pytest.mark.usefixtures("ocl", "device_only")
# time_sequence_prediction calls .numpy() on a device tensor, which torch refuses on any
# accelerator (cltensor allows it)
ON_DEVICE = [n for n in NAMES if n != "time_sequence_prediction"]
_CHOICE = re.compile(r'"cuda(:0)?" if torch\.cuda\.is_available\(\) else "cpu"')


def _load_on_opencl(name):
    path = SCRIPTS / f"{name}.py"
    source = path.read_text().replace("import cltensor as torch", "import torch")
    source = _CHOICE.sub('"opencl"', source.replace("cltensor", "torch"))
    # the quickstart asks torch.accelerator, which names "opencl" itself
    assert '"opencl"' in source or "torch.accelerator" in source, f"{name}: no device choice"
    module = type(pytest)(f"torch_script_{name}")
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


@pytest.mark.parametrize("name", ON_DEVICE)
def test_script_trains_on_the_opencl_device(tmp_path, name):
    _goes_down(_load_on_opencl(name).main(["--save-dir", str(tmp_path)]))
