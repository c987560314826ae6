"""Host-side cost of a training step: the Python time to enqueue one forward and backward of a
convnet_benchmarks model (zero_grad, forward, backward; no input gradient, as the benchmark
protocol), without waiting for the device; eager, and with --graphs also replayed from a
captured graph (cltensor.graphs); with --ops, the same per launch for each op kind.

    python benchmarks/host_overhead.py [--model alexnet,googlenet] [--batch 1] [--steps 5]
                                       [--device SPEC] [--tf32] [--json out.json] [--profile]
                                       [--graphs] [--ops all|add,conv2d,...] [--reps 50]
                                       [--wake 0,4,16] [--chain 200] [--delay-us 20]

Each step: the queue is drained, then the clock runs from zero_grad to backward's return (the
launches are enqueued, not finished), then the queue is drained again (not timed). Prints, over
--steps steps after --warmup ones: the median wall-clock ms ("host ms") and its spread, the
median CPU ms of the enqueuing thread ("cpu ms": it leaves out waiting for a core, so a busy
machine blurs it less), the kernel launches per step and the wall-clock us per launch. On CPU
devices (PoCL) the device's threads run kernels while Python enqueues, so they compete for the
cores: run it a few times. --tf32 sets cltensor.backends.allow_tf32 (the NVIDIA plug-in's
path). --profile adds a cProfile summary (CPU time) of one step.

--graphs: the step is also captured (after the warm-up) and its replay timed the same way,
eager and replayed steps alternating. --ops: each op kind called --reps times on small tensors,
eager against one replay of the same calls captured, alternating for --steps rounds; prints the
median us of host time per launch for both (the kernels are small: this is the enqueue cost).

--wake 0,4,16: what waking the OpenCL runtime's idle threads costs the enqueuing thread. A
chain of --chain small ReLUs (4096 floats, as at batch 1) with --delay-us of busy Python
after each launch (a host slower than the kernels: each launch finds the queue drained) is
timed as launched (0) and released to the device k launches at a time (a barrier enqueued
before every k-th launch waits on a user event, set complete after that batch's last launch),
the k values alternating; prints the enqueuing thread's CPU us per launch and the wall us per
launch to the chain's end. For each --model it also counts the launches of one profiled step
that found the queue drained (enqueued after the previous launch ended), which are the only
ones a batch could spare a wake-up; profiling slows the host, so this errs high.
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
import pyopencl as cl

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


def capture(step, device):
    """A Graph of one call of step (after the caller's warm-up)."""
    device.synchronize()
    g = ct.Graph()
    with ct.graph(g):
        step()
    return g


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


def time_alternating(steps_by_name, device, rounds):
    """{name: (wall ms, cpu ms) per round}, each round calling every step once in turn."""
    out = {name: ([], []) for name in steps_by_name}
    for _ in range(rounds):
        for name, step in steps_by_name.items():
            wall, cpu = time_host(step, device, 1, 0)
            out[name][0].extend(wall)
            out[name][1].extend(cpu)
    return out


def op_cases(device):
    """{op kind: a function that calls it once} on small tensors (no autograd)."""
    F = ct.nn.functional
    ct.manual_seed(0)
    x, y = ct.randn(8, 16, device=device), ct.randn(8, 16, device=device)
    img = ct.randn(1, 4, 8, 8, device=device)
    conv = ct.nn.Conv2d(4, 4, 3, padding=1).to(device=device)
    lin = ct.nn.Linear(16, 16).to(device=device)
    w = ct.randn(4096, device=device).requires_grad_()
    w.grad = ct.randn(4096, device=device)
    sgd = ct.optim.SGD([w], lr=1e-3, momentum=0.9)
    adam = ct.optim.Adam([w], lr=1e-3)
    return {"add": lambda: x + y, "mul_scalar": lambda: x * 2.0, "relu": lambda: F.relu(x),
            "sum": lambda: x.sum(1), "softmax": lambda: F.softmax(x, 1),
            "linear": lambda: lin(x), "conv2d": lambda: conv(img),
            "max_pool2d": lambda: F.max_pool2d(img, 2), "copy_": lambda: y.copy_(x),
            "sgd_step": sgd.step, "adam_step": adam.step}


def op_overhead(fn, device, reps, rounds):
    """Median us of host time per launch of `reps` calls of fn, eager and replayed, and the
    launches per call."""
    with ct.no_grad():
        fn()  # builds, tunes, optimizer state
        launches = count_launches(fn, device)
        g = capture(lambda: [fn() for _ in range(reps)], device)
        times = time_alternating({"eager": lambda: [fn() for _ in range(reps)],
                                  "replay": g.replay}, device, rounds)
    n = max(launches * reps, 1)
    out = {"launches_per_call": launches}
    for mode, (wall, cpu) in times.items():
        out[f"{mode}_us"] = statistics.median(wall) * 1e3 / n
        out[f"{mode}_cpu_us"] = statistics.median(cpu) * 1e3 / n
    return out


def report_ops(names, device, reps, rounds):
    cases = op_cases(device)
    unknown = [n for n in names if n not in cases]
    if unknown:
        raise SystemExit(f"--ops: unknown op kind(s) {', '.join(unknown)}; "
                         f"choose from {', '.join(cases)}")
    print(f"us of host time per launch (wall clock, and the enqueuing thread's CPU time), "
          f"{reps} calls, median of {rounds} rounds")
    print(f"{'op':12s} {'launches':>9s} {'eager':>9s} {'replay':>9s} {'eager cpu':>10s} "
          f"{'replay cpu':>11s}")
    results = {}
    for name in names:
        r = results[name] = op_overhead(cases[name], device, reps, rounds)
        print(f"{name:12s} {r['launches_per_call']:9d} {r['eager_us']:9.1f} {r['replay_us']:9.1f} "
              f"{r['eager_cpu_us']:10.1f} {r['replay_cpu_us']:11.1f}")
    return results


def spin(us):
    """Busy Python for `us` microseconds of this thread's CPU time."""
    end = time.thread_time() + us * 1e-6
    while time.thread_time() < end:
        pass


def wake_chain(device, n, k, delay_us):
    """A step of n ReLUs in a chain, delay_us of busy Python after each launch, released to
    the device k launches at a time (0: each as it is launched)."""
    x = ct.randn(4096, device=device)
    relu = ct.nn.functional.relu

    def step():
        y, gate = x, None
        try:
            for i in range(n):
                if k and gate is None:
                    gate = cl.UserEvent(device.context)
                    device.enqueue(cl.enqueue_barrier, wait_for=[gate])
                y = relu(y)
                if k and i % k == k - 1:
                    gate = release(gate)
                spin(delay_us)
        finally:
            release(gate)  # NOTE: a gate left closed would hang the next wait
    return step


def release(gate):
    """Let the launches behind gate (a user event, or None) run; returns None."""
    if gate is not None:
        gate.set_status(cl.command_execution_status.COMPLETE)


def time_to_end(step, device):
    """(enqueuing thread's CPU s, wall s to return, wall s to the queue drained) of one call."""
    device.synchronize()
    t0, c0 = time.perf_counter(), time.thread_time()
    step()
    c1, t1 = time.thread_time(), time.perf_counter()
    device.synchronize()
    return c1 - c0, t1 - t0, time.perf_counter() - t0


def drained_launches(step, device):
    """(launches, those that found the queue drained) in one profiled call of step; the
    first, after the queue is drained, counts."""
    device.synchronize()
    with ct.profile() as prof:
        step()
    device.synchronize()
    events = [e[3] for e in prof.events]
    later = sum(b.profile.queued >= a.profile.end for a, b in zip(events, events[1:]))
    return len(events), later + bool(events)


def report_wake(names, device, args):
    ks = [int(k) for k in args.wake.split(",")]
    print(f"chain of {args.chain} ReLUs, {args.delay_us:g} us of Python after each launch, "
          f"released k at a time; us per launch, median of {args.steps} rounds")
    print(f"{'k':>4s} {'cpu us':>8s} {'enqueue us':>11s} {'wall us':>8s}")
    steps = {k: wake_chain(device, args.chain, k, args.delay_us) for k in ks}
    times = {k: [] for k in ks}
    for step in steps.values():
        step()
    for _ in range(args.steps):
        for k, step in steps.items():
            times[k].append(time_to_end(step, device))
    out = {"chain": {}, "drained": {}}
    for k, rows in times.items():
        cpu, enq, wall = (statistics.median(col) * 1e6 / args.chain for col in zip(*rows))
        out["chain"][k] = {"cpu_us": cpu, "enqueue_us": enq, "wall_us": wall}
        print(f"{k:4d} {cpu:8.1f} {enq:11.1f} {wall:8.1f}")
    for name in names:
        step = make_step(name, device, args.batch)
        step()
        launches, drained = drained_launches(step, device)
        out["drained"][name] = {"launches": launches, "drained": drained}
        print(f"{name} (batch {args.batch}): {drained} of {launches} launches found the queue "
              f"drained")
    return out


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


def report_models(names, device, args):
    print(f"device: {device}, batch {args.batch}, median of {args.steps} steps after "
          f"{args.warmup}{', allow_tf32' if args.tf32 else ''}")
    print(f"{'model':20s} {'host ms':>9s} {'min':>8s} {'max':>8s} {'cpu ms':>8s} "
          f"{'launches':>9s} {'us/launch':>10s}")
    results = {}
    for name in names:
        step = make_step(name, device, args.batch)
        wall, cpu = time_host(step, device, args.steps, args.warmup)
        launches = count_launches(step, device)
        rows = {name: (wall, cpu)}
        if args.graphs:
            g = capture(step, device)
            rows = {f"{name} {k}": v for k, v in time_alternating(
                {"eager": step, "replay": g.replay}, device, args.steps).items()}
        for label, (wall, cpu) in rows.items():
            med, cpu_med = statistics.median(wall), statistics.median(cpu)
            results[label] = {"host_ms": wall, "median_ms": med, "cpu_ms": cpu,
                              "median_cpu_ms": cpu_med, "launches": launches}
            print(f"{label:20s} {med:9.2f} {min(wall):8.2f} {max(wall):8.2f} {cpu_med:8.2f} "
                  f"{launches:9d} {med * 1e3 / max(launches, 1):10.1f}")
        if args.profile:
            print_profile(step, device, args.top)
    return results


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="alexnet,googlenet",
                   help=f"comma-separated, from {', '.join(MODELS)}; '' for none")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--device", default=None, help="cltensor device (index or name)")
    p.add_argument("--tf32", action="store_true", help="set cltensor.backends.allow_tf32")
    p.add_argument("--json", default=None, help="also write the results here")
    p.add_argument("--profile", action="store_true", help="print a cProfile summary of one step")
    p.add_argument("--top", type=int, default=40, help="functions in the --profile summary")
    p.add_argument("--graphs", action="store_true",
                   help="also time each step replayed from a captured graph")
    p.add_argument("--ops", default=None,
                   help="'all' or comma-separated op kinds: us per launch, eager and replayed")
    p.add_argument("--reps", type=int, default=50, help="calls of each op kind per round")
    p.add_argument("--wake", default=None,
                   help="comma-separated launches per release to compare (0: as launched)")
    p.add_argument("--chain", type=int, default=200, help="--wake: ReLUs in the chain")
    p.add_argument("--delay-us", type=float, default=20.0,
                   help="--wake: busy Python after each of the chain's launches")
    args = p.parse_args(argv)
    device = ct.get_device(args.device)
    ct.backends.allow_tf32 = args.tf32
    names = [n for n in args.model.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    if args.wake:
        out = {"device": str(device), "batch": args.batch, "wake": report_wake(names, device, args)}
        names = []
    else:
        out = {"device": str(device), "batch": args.batch}
    out.update(allow_tf32=args.tf32, results=report_models(names, device, args) if names else {})
    if args.ops:
        ops = list(op_cases(device)) if args.ops == "all" else args.ops.split(",")
        out["ops"] = report_ops(ops, device, args.reps, args.steps)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
