"""Third-party training scripts, reduced (tests/scripts/): each written as a torch user writes
it with only `import cltensor as torch`, run in-process on every device (the default device set
to it) on local random data for a few steps. The loss must stay finite and go down; where a
script's model and training loop can be shared (regression, time_sequence_prediction,
quickstart), the same script run with torch itself (the import swapped back) from the same
weights gives the same losses."""
import importlib.util
import math
import pathlib

import numpy as np
import pytest
import torch

import cltensor

SCRIPTS = pathlib.Path(__file__).parent / "scripts"
NAMES = ["mnist", "mnist_rnn", "vae", "regression", "time_sequence_prediction", "dcgan",
         "word_language_model", "siamese_network", "cifar_resnet", "cifar_dla", "quickstart",
         "cifar10_tutorial"]


def _load(name, with_torch=False):
    """The script as a module; with_torch runs its text with torch where it imports cltensor."""
    path = SCRIPTS / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"script_{name}_{with_torch:d}", path)
    module = importlib.util.module_from_spec(spec)
    if with_torch:
        source = path.read_text().replace("import cltensor as torch", "import torch")
        exec(compile(source.replace("cltensor", "torch"), str(path), "exec"), module.__dict__)
    else:
        spec.loader.exec_module(module)
    return module


@pytest.fixture
def on_device(device):
    """The default device set to `device`, and the backend flags scripts set put back."""
    prev, flags = cltensor.default_device(), (cltensor.backends.benchmark,
                                              cltensor.backends.cudnn.deterministic)
    cltensor.set_default_device(device)
    yield device
    cltensor.set_default_device(prev)
    cltensor.backends.benchmark, cltensor.backends.cudnn.deterministic = flags


def _goes_down(losses):
    assert losses and all(math.isfinite(x) for x in losses), losses
    third = max(1, len(losses) // 3)
    assert np.mean(losses[-third:]) < np.mean(losses[:third]), losses


@pytest.mark.parametrize("name", NAMES)
def test_script_trains(on_device, tmp_path, name):
    losses = _load(name).main(["--save-dir", str(tmp_path)])
    _goes_down(losses)


def _quickstart(script, model, device):
    """Two epochs of the quickstart's own train and test loops (no shuffling, no dropout: the
    same steps under either library); the test losses."""
    data = script.DataLoader(script.fake_fashion(64, 0), batch_size=32)
    held_out = script.DataLoader(script.fake_fashion(32, 1), batch_size=32)
    loss_fn = script.nn.CrossEntropyLoss()
    optimizer = script.torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(2):
        script.train(data, model, loss_fn, optimizer, device)
        losses.append(script.test(held_out, model, loss_fn, device))
    return losses


RUNS = {"regression": lambda script, model, device: script.train(model, device, 6),
        "time_sequence_prediction": lambda script, model, device: script.train(model, device, 2),
        "quickstart": _quickstart}
MODELS = {"regression": "build_model", "time_sequence_prediction": "build_model",
          "quickstart": "NeuralNetwork"}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_script_tracks_torch(on_device, name):
    ours_script, torch_script = _load(name), _load(name, with_torch=True)
    ours = getattr(ours_script, MODELS[name])().to(on_device)
    theirs = getattr(torch_script, MODELS[name])()
    theirs.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in
                            ours.state_dict().items()})
    got = RUNS[name](ours_script, ours, on_device)
    want = RUNS[name](torch_script, theirs, "cpu")
    _goes_down(got)
    np.testing.assert_allclose(got, want, rtol=2e-4)
