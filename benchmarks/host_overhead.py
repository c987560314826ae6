"""Host-side cost of a training step: the Python time to enqueue one forward and backward of a
convnet_benchmarks model (zero_grad, forward, backward; no input gradient, as the benchmark
protocol), without waiting for the device.

    python benchmarks/host_overhead.py [--model alexnet,googlenet] [--batch 1] [--steps 5]
                                       [--device SPEC] [--tf32] [--json out.json] [--profile]

Each step: the queue is drained, then the clock runs from zero_grad to backward's return (the
launches are enqueued, not finished), then the queue is drained again (not timed). Prints, over
--steps steps after --warmup ones: the median wall-clock ms ("host ms") and its spread, the
median CPU ms of the enqueuing thread ("cpu ms": it leaves out waiting for a core, so a busy
machine blurs it less), the kernel launches per step and the wall-clock us per launch. On CPU
devices (PoCL) the device's threads run kernels while Python enqueues, so they compete for the
cores: run it a few times. --tf32 sets cltensor.backends.allow_tf32 (the NVIDIA plug-in's
path). --profile adds a cProfile summary (CPU time) of one step.
"""
import argparse
import cProfile
import json
import pstats
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import cltensor as ct  # noqa: E402
from convnet_benchmarks.models import INPUTS, MODELS  # noqa: E402


def make_step(name, device, batch):
    """A function that enqueues one training step (forward, zero_grad, backward) of model `name`."""
    ct.manual_seed(0)
    model = MODELS[name](ct).to(device=device, dtype=ct.float32)
    c, hw, _, _ = INPUTS[name]
    rng = np.random.default_rng(0)
    x = ct.from_numpy(rng.standard_normal((batch, c, hw, hw), np.float32), device=device)
    out_shape = model(x).shape
    g = ct.from_numpy(rng.standard_normal(out_shape, np.float32), device=device)

    def step():
        model.zero_grad(set_to_none=True)
        model(x).backward(g)
    return step


def time_host(step, device, steps, warmup):
    """Wall and CPU ms of the Python thread for each of `steps` steps (after `warmup` untimed
    ones), the queue drained between steps.

    NOTE: the CPU time (time.thread_time) counts only the enqueuing thread, so it leaves out the
    time the thread waits for a core that other processes or the device's threads hold.
    """
    for _ in range(warmup):
        step()
        device.synchronize()
    wall, cpu = [], []
    for _ in range(steps):
        device.synchronize()
        t0, c0 = time.perf_counter(), time.thread_time()
        step()
        c1, t1 = time.thread_time(), time.perf_counter()
        wall.append((t1 - t0) * 1e3)
        cpu.append((c1 - c0) * 1e3)
        device.synchronize()
    return wall, cpu


def count_launches(step, device):
    with ct.profile() as prof:
        step()
    device.synchronize()
    return len(prof.events)


def print_profile(step, device, top):
    prof = cProfile.Profile(time.thread_time)  # CPU time: a busy machine blurs it less
    device.synchronize()
    prof.enable()
    step()
    prof.disable()
    device.synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="alexnet,googlenet",
                   help=f"comma-separated, from {', '.join(MODELS)}")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--device", default=None, help="cltensor device (index or name)")
    p.add_argument("--tf32", action="store_true", help="set cltensor.backends.allow_tf32")
    p.add_argument("--json", default=None, help="also write the results here")
    p.add_argument("--profile", action="store_true", help="print a cProfile summary of one step")
    p.add_argument("--top", type=int, default=40, help="functions in the --profile summary")
    args = p.parse_args(argv)
    device = ct.get_device(args.device)
    ct.backends.allow_tf32 = args.tf32
    names = args.model.split(",")
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    print(f"device: {device}, batch {args.batch}, median of {args.steps} steps after "
          f"{args.warmup}{', allow_tf32' if args.tf32 else ''}")
    print(f"{'model':12s} {'host ms':>9s} {'min':>8s} {'max':>8s} {'cpu ms':>8s} {'launches':>9s} "
          f"{'us/launch':>10s}")
    results = {}
    for name in names:
        step = make_step(name, device, args.batch)
        wall, cpu = time_host(step, device, args.steps, args.warmup)
        launches = count_launches(step, device)
        med, cpu_med = statistics.median(wall), statistics.median(cpu)
        results[name] = {"host_ms": wall, "median_ms": med, "cpu_ms": cpu,
                         "median_cpu_ms": cpu_med, "launches": launches}
        print(f"{name:12s} {med:9.2f} {min(wall):8.2f} {max(wall):8.2f} {cpu_med:8.2f} "
              f"{launches:9d} {med * 1e3 / max(launches, 1):10.1f}")
        if args.profile:
            print_profile(step, device, args.top)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": str(device), "batch": args.batch, "allow_tf32": args.tf32,
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
