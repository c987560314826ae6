"""The PyTorch "opencl" device's cost (cltensor.torch): a training step (forward and backward,
the benchmark protocol's) of each network written in torch.nn on "opencl" against the same
network in cltensor native, on the same device, weights and data, interleaved step by step in
one process; medians over --reps steps after a warm-up step each.

    python benchmarks/torch_device.py [--model googlenet,alexnet] [--batch 2 | 0] [--reps 10]
                                      [--device SPEC] [--thread-cpu] [--kernels N]
                                      [--json out.json]

Prints torch-opencl's time over native's by the wall clock and by the process CPU time (the
OpenCL runtime's threads included: on a CPU device shared with other work it moves less).
--thread-cpu adds the main thread's CPU time per step (the host work of issuing the step, which
bounds a fast device; the OpenCL runtime's threads excluded) and the ms torch-opencl adds to it.
--kernels N profiles one more step of each (cltensor.profile) and lists the N kernel names whose
device time differs most between the two: launches and ms, native against torch-opencl.
The target (docs/torch_device.md) is at most 1.15x.
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]  # the package, and untuned.py beside this script
from untuned import interleaved, training_steps  # noqa: E402

from convnet_benchmarks import torch_opencl  # noqa: E402
from convnet_benchmarks.models import INPUTS, MODELS  # noqa: E402


def standard_batch(name, device):
    """The convnet benchmarks' batch for this network on a GPU or a CPU device."""
    _, _, gpu_batch, cpu_batch = INPUTS[name]
    return gpu_batch if device.is_gpu else cpu_batch


def steps(name, device, batch):
    """(native step, torch-opencl step) on the same weights and data, each ending synchronised."""
    import torch

    import cltensor as ct
    torch_opencl.register()
    ct.set_default_device(device)  # opencl:0
    return training_steps(name, device, batch, torch.device("opencl"))


def thread_timed(fn, sink):
    """fn, appending each call's CPU time on the calling thread (seconds) to sink."""
    def call():
        start = time.thread_time()
        fn()
        sink.append(time.thread_time() - start)
    return call


def measure(native, through_torch, reps):
    """interleaved()'s medians, with the main thread's CPU medians (warm-up call dropped)."""
    ours_thread, ref_thread = [], []
    r = interleaved(thread_timed(through_torch, ours_thread), thread_timed(native, ref_thread),
                    reps)
    r.update(ours_thread=statistics.median(ours_thread[1:]),
             ref_thread=statistics.median(ref_thread[1:]))
    return r


def kernel_table(step, device):
    """{kernel name: (launches, ms)} of one profiled call of step."""
    import cltensor as ct
    device.synchronize()
    with ct.profile() as prof:
        step()
        device.synchronize()
    return {name: (calls, ms) for name, calls, ms, _ in prof.table()}


def kernel_diff(native, through_torch, device, top):
    """Lines for the `top` kernel names whose time differs most between the two steps."""
    ours, ref = kernel_table(through_torch, device), kernel_table(native, device)
    names = sorted(set(ours) | set(ref),
                   key=lambda n: -abs(ours.get(n, (0, 0))[1] - ref.get(n, (0, 0))[1]))
    def line(label, r, o):
        return (f"  {label[:32]:32s} native {r[0]:5d} / {r[1]:9.3f} ms, "
                f"torch-opencl {o[0]:5d} / {o[1]:9.3f} ms")

    def total(t):
        return sum(c for c, _ in t.values()), sum(ms for _, ms in t.values())
    return [line("all kernels", total(ref), total(ours))] + [
        line(n, ref.get(n, (0, 0.0)), ours.get(n, (0, 0.0))) for n in names[:top]]


def report(r, thread_cpu):
    line = (f"{r['model']:10s} batch {r['batch']}: native {r['ref_wall'] * 1e3:8.1f} ms, "
            f"torch-opencl {r['ours_wall'] * 1e3:8.1f} ms; torch-opencl / native: wall "
            f"{r['wall']:.2f}x, CPU time {r['cpu']:.2f}x")
    if thread_cpu:
        line += (f"; main thread CPU {r['ref_thread'] * 1e3:.1f} vs "
                 f"{r['ours_thread'] * 1e3:.1f} ms: {r['thread']:.2f}x "
                 f"(+{(r['ours_thread'] - r['ref_thread']) * 1e3:.1f} ms)")
    print(line, flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="alexnet,overfeat,vgg_a,googlenet")
    p.add_argument("--batch", type=int, default=2,
                   help="images per step; 0: each network's standard batch for the device")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--device", default=None)
    p.add_argument("--thread-cpu", action="store_true",
                   help="also report the main thread's CPU time per step")
    p.add_argument("--kernels", type=int, default=0, metavar="N",
                   help="list the N kernels whose time differs most between the two steps")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    import cltensor as ct
    device = ct.get_device(args.device)
    rows = []
    for name in args.model.split(","):
        if name not in MODELS:
            p.error(f"unknown model {name!r}; expected some of {', '.join(MODELS)}")
        batch = args.batch or standard_batch(name, device)
        native, through_torch = steps(name, device, batch)
        r = measure(native, through_torch, args.reps)
        r.update(model=name, batch=batch, wall=r["ours_wall"] / r["ref_wall"],
                 cpu=r["ours_cpu"] / r["ref_cpu"], thread=r["ours_thread"] / r["ref_thread"])
        rows.append(r)
        report(r, args.thread_cpu)
        if args.kernels:
            print("\n".join(kernel_diff(native, through_torch, device, args.kernels)), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device.name, "load": os.getloadavg(),
                                               "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
