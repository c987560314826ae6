"""Long runs: a training loop keeps device memory in use flat and host memory bounded (leaks),
and the same seed on the same device gives the same training step bit for bit (determinism)."""
import gc
import os

import numpy as np
import pytest

import cltensor
import cltensor.nn.functional as F
from cltensor import nn

STEPS = 1000
WARMUP = 50


def rss_bytes():
    """The process's resident set size now (Linux /proc; None elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return None


def tiny_net():
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(4 * 3 * 3, 5))


def train_steps(model, opt, x, y, steps):
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return loss.item()


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_training_loop_does_not_leak(device, rng, optimizer):
    cltensor.manual_seed(0)
    model = tiny_net().to(device)
    opt = (cltensor.optim.SGD(model.parameters(), lr=0.05, momentum=0.9) if optimizer == "sgd"
           else cltensor.optim.Adam(model.parameters(), lr=1e-3))
    x = cltensor.from_numpy(rng.standard_normal((3, 2, 6, 6)).astype(np.float32), device=device)
    y = cltensor.from_numpy(rng.integers(0, 5, size=3).astype(np.int64), device=device)

    first = train_steps(model, opt, x, y, WARMUP)
    device.synchronize()
    gc.collect()  # NOTE: earlier tests' reference cycles would otherwise free memory mid-loop
    allocated, rss = cltensor.memory_stats(device)["allocated"], rss_bytes()
    samples = []
    for _ in range(10):
        last = train_steps(model, opt, x, y, (STEPS - WARMUP) // 10)
        device.synchronize()
        samples.append(cltensor.memory_stats(device)["allocated"])
    assert samples == [allocated] * 10, f"device memory in use grew: {allocated} -> {samples}"
    if rss is not None:
        grown = rss_bytes() - rss
        assert grown < 32 * 2**20, f"host memory grew by {grown / 2**20:.1f} MiB over {STEPS} steps"
    assert np.isfinite(last) and last <= first, (first, last)  # it trained, not diverged


def test_unused_graph_is_freed_without_the_cycle_collector(device, rng):
    """A forward nobody runs backward through (e.g. `model(x).numpy()`) frees its activations
    when its output goes, with no reference cycle through functions that save their output
    (ReLU, exp, sigmoid) left for gc to find later."""
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(4 * 3 * 3, 5), nn.Sigmoid()).to(device)
    x = cltensor.from_numpy(rng.standard_normal((3, 2, 6, 6)).astype(np.float32), device=device)
    model(x).exp().numpy()  # warm-up: caches that legitimately stay (e.g. filter transforms)
    device.synchronize()
    gc.collect()
    before = cltensor.memory_stats(device)["allocated"]
    gc.disable()
    try:
        model(x).exp().numpy()
        device.synchronize()
        assert cltensor.memory_stats(device)["allocated"] == before
    finally:
        gc.enable()


def deterministic_run(device, seed, steps=3):
    """Losses, parameters and gradients of a few seeded training steps (dropout, batch norm)."""
    cltensor.manual_seed(seed)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.3),
                          nn.Linear(4 * 3 * 3, 5)).to(device)
    opt = cltensor.optim.Adam(model.parameters(), lr=1e-2)
    x = cltensor.randn(4, 2, 6, 6, device=device)
    y = cltensor.randint(0, 5, (4,), device=device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.numpy())
    tensors = [t.numpy() for p in model.parameters() for t in (p, p.grad)]
    return losses + tensors + [b.numpy() for b in model.buffers()]


def test_same_seed_same_device_is_bit_identical(device):
    first, second = deterministic_run(device, 5), deterministic_run(device, 5)
    for a, b in zip(first, second, strict=True):
        assert a.tobytes() == b.tobytes()
    other = deterministic_run(device, 6)
    assert any(a.tobytes() != b.tobytes() for a, b in zip(first, other))
