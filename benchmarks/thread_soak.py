"""Two threads train two models of examples/digits.py at once, on one device; the same training
is then run one model after the other. Checks and prints: the losses of every step and the
final parameters equal bit for bit, and the memory held by live tensors stays flat: sampled
every SAMPLE_EVERY steps with both threads between steps, its most in the second half of the
steps is no more than in the first half, and the threaded runs hold what the sequential ones
hold when they end.

    python benchmarks/thread_soak.py [--steps 2000] [--device SPEC] [--json out.json]

tests/test_threads.py runs it for 100 steps, and for 2,000 with `pytest -m soak`.
"""
import argparse
import gc
import importlib.util
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import cltensor  # noqa: E402
import cltensor.optim  # noqa: E402

BATCH = 64
SAMPLE_EVERY = 20  # steps between memory samples


def _digits():
    spec = importlib.util.spec_from_file_location("digits_example", ROOT / "examples" / "digits.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_runs(digits, device):
    """Two (model, optimizer, seed) triples, made in this thread (weights from the global
    generator, seeded per model)."""
    runs = []
    for seed in (1, 2):
        cltensor.manual_seed(seed)
        model = digits.build_model("cnn").to(device)
        runs.append((model, cltensor.optim.Adam(model.parameters(), lr=1e-2), seed))
    return runs


def train(run, data, steps, device, at_sample):
    """`steps` Adam steps on random mini-batches (numpy, seeded per run); the loss of each.
    Calls at_sample(step) every SAMPLE_EVERY steps."""
    model, optimizer, seed = run
    x, y = data
    rng = np.random.default_rng(seed)
    loss_fn, losses = cltensor.nn.CrossEntropyLoss(), []
    for step in range(steps):
        idx = rng.integers(0, len(y), BATCH)
        optimizer.zero_grad()
        loss = loss_fn(model(cltensor.from_numpy(x[idx], device=device)),
                       cltensor.from_numpy(y[idx], device=device))
        loss.backward()
        optimizer.step()
        losses.append(float(loss.item()))
        if step % SAMPLE_EVERY == 0:
            at_sample(step)
    return losses


def _allocated(device):
    """Bytes of live tensors, once reference cycles (modules, autograd graphs) are collected."""
    gc.collect()
    return cltensor.memory_stats(device)["allocated"]


def _params(run):
    return [p.detach().numpy() for p in run[0].parameters()]


def _threaded(runs, data, steps, device, samples):
    """Each run trained in its own thread; memory sampled with every thread between steps."""
    losses, between = [None] * len(runs), threading.Barrier(len(runs))

    def at_sample(step):
        if between.wait() == 0:
            samples.append((step, _allocated(device), cltensor.memory_stats(device)["pool_held"]))
        between.wait()

    def body(i):
        try:
            losses[i] = train(runs[i], data, steps, device, at_sample)
        finally:
            if losses[i] is None:
                between.abort()  # the other threads stop waiting for this one

    threads = [threading.Thread(target=body, args=(i,)) for i in range(len(runs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if any(item is None for item in losses):
        raise RuntimeError("a training thread failed (its traceback is printed above)")
    return losses


def soak(device=None, steps=2000):
    """Figures of the threaded and the sequential training (see the module's docstring)."""
    device = cltensor.get_device(device)
    digits = _digits()
    x, y, _, _ = digits.load_data()
    # NOTE: a few steps first make the caches that live on (kernels, plans, small constants)
    train(make_runs(digits, device)[0], (x, y), 2, device, lambda step: None)
    start, before = time.perf_counter(), _allocated(device)
    runs, samples = make_runs(digits, device), []
    threaded = _threaded(runs, (x, y), steps, device, samples)
    threaded_s = time.perf_counter() - start
    held = _allocated(device) - before
    params = [_params(r) for r in runs]
    del runs
    start, before = time.perf_counter(), _allocated(device)
    seq_runs = make_runs(digits, device)
    sequential = [train(r, (x, y), steps, device, lambda step: None) for r in seq_runs]
    sequential_s = time.perf_counter() - start
    half = steps // 2
    stats = cltensor.memory_stats(device)
    return {
        "steps": steps, "device": str(device),
        "threaded_s": round(threaded_s, 2), "sequential_s": round(sequential_s, 2),
        "threaded_losses": threaded, "sequential_losses": sequential,
        "params_equal": all(np.array_equal(a, b) for p, r in zip(params, seq_runs)
                            for a, b in zip(p, _params(r))),
        "early_allocated_max": max(a for s, a, _ in samples if SAMPLE_EVERY <= s < half),
        "late_allocated_max": max(a for s, a, _ in samples if s >= half),
        "early_pool_max": max(p for s, _, p in samples if SAMPLE_EVERY <= s < half),
        "late_pool_max": max(p for s, _, p in samples if s >= half),
        "held_after_threaded": held,
        "held_after_sequential": _allocated(device) - before,
        "peak": stats["peak"], "pool_held": stats["pool_held"],
        "final_losses": [t[-1] for t in threaded],
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--device", default=None, help="cltensor device (index or name)")
    p.add_argument("--json", default=None, help="also write the figures here")
    args = p.parse_args(argv)
    fig = soak(args.device, args.steps)
    same = fig["threaded_losses"] == fig["sequential_losses"] and fig["params_equal"]
    flat = (fig["late_allocated_max"] <= fig["early_allocated_max"] and
            fig["held_after_threaded"] == fig["held_after_sequential"])
    shown = {k: v for k, v in fig.items() if not k.endswith("_losses")}
    print(json.dumps(shown, indent=1))
    print(f"threaded == sequential: {same}; memory flat: {flat}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(fig, f)
    return 0 if same and flat else 1


if __name__ == "__main__":
    sys.exit(main())
