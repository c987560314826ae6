"""End to end: a short run of examples/digits.py's training loop lowers the loss and reaches
95% test accuracy on scikit-learn's bundled digits, and a trained model survives a save/load."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import cltensor
import cltensor.nn.functional as F
from cltensor.serialization import load, save

pytest.importorskip("sklearn", reason="the digits data ships with scikit-learn")

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "digits.py"
EPOCHS = 6
ACCURACY = 0.95


def _digits_example():
    spec = importlib.util.spec_from_file_location("digits_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_digits_training_reaches_accuracy(device, tmp_path):
    digits = _digits_example()
    # NOTE: the example's CNN needs F.conv2d; until it is exported the same loop trains the MLP
    kind = "cnn" if hasattr(F, "conv2d") else "mlp"
    lines = []
    model, history = digits.train(epochs=EPOCHS, kind=kind, device=device, log=lines.append)
    assert len(lines) == EPOCHS and "test accuracy" in lines[-1]
    losses = [h["train_loss"] for h in history]
    assert losses[-1] < 0.25 * losses[0], f"the loss did not fall enough: {losses}"
    assert history[-1]["test_accuracy"] >= ACCURACY, history[-1]

    # the trained weights, saved and loaded into a fresh model, give the same accuracy
    path = tmp_path / "digits.npz"
    save(model.state_dict(), path)
    fresh = digits.build_model(kind).to(device)
    fresh.load_state_dict(load(path, device=device))
    _, _, x_test, y_test = digits.load_data()
    loss, accuracy = digits.evaluate(fresh, x_test, y_test, device)
    assert accuracy == history[-1]["test_accuracy"]
    assert np.isclose(loss, history[-1]["test_loss"], rtol=1e-5)


def test_training_is_reproducible(device):
    """The same seed gives the same weights and losses (seeded init, deterministic kernels)."""
    digits = _digits_example()
    runs = [digits.train(epochs=1, kind="mlp", device=device, seed=3, log=lambda s: None)
            for _ in range(2)]
    assert runs[0][1][0]["train_loss"] == runs[1][1][0]["train_loss"]
    for a, b in zip(runs[0][0].parameters(), runs[1][0].parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert cltensor.get_device(device) is device
