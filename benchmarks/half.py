"""float32 against float16 and bfloat16 storage: memory-bound ops on tensors of --mib MiB (of
float32; the 16-bit ones hold the same elements in half the bytes) and the peak memory of a
small CNN's training step, float32 against autocast.

    python benchmarks/half.py [--mib 64] [--reps 5] [--batch 32] [--device SPEC] [--json out.json]
                              [--ops NAME ...] [--no-memory] [--trace-peak PRECISION]
                              [--networks NAME ...]

Each op runs once per dtype in turn, --reps rounds (interleaved, so a busy machine slows all
dtypes alike); the table gives the median wall and CPU ms per dtype and the 16-bit ones'
speed-ups by both. The
memory figure is cltensor.memory_stats' peak over building the model and one forward and backward:
under autocast (parameters float32), and with the model and its input stored in 16 bits.
--trace-peak lists the buffers alive at one precision's peak (size, dtype, where made).
--networks NAME ... gives the same peak for convnet_benchmarks' networks (one forward and
backward from a gradient of ones, at --batch), float32 against 16-bit storage.
"""
import argparse
import gc
import json
import statistics
import sys
import time
import traceback
import weakref
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import cltensor as ct  # noqa: E402
import cltensor.nn.functional as F  # noqa: E402
from cltensor.device import Storage  # noqa: E402
from cltensor.tensor import ClTensor  # noqa: E402

DTYPES = ("float32", "float16", "bfloat16")
OPS = {
    "copy (clone)": lambda x: x.clone(),
    "relu": F.relu,
    "add": lambda x: x + x,
    "x * 0.5 + 1": lambda x: x * 0.5 + 1,
    "sum over rows": lambda x: x.sum(1),
    "softmax over rows": lambda x: F.softmax(x, 1),
    "batch_norm (train)": lambda x: F.batch_norm(x.view(64, -1, 64, 64)[:, :16], None, None,
                                                 training=True),
    "layer_norm": lambda x: F.layer_norm(x, x.shape[1:]),
    "max_pool2d 2x2": lambda x: F.max_pool2d(x.view(64, -1, 64, 64), 2),
    # padded 3x3 windows (GoogLeNet's): stride 1 as in the inception blocks' pool branch
    "max_pool2d 3x3 s1 p1": lambda x: F.max_pool2d(x.view(16, -1, 128, 128), 3, 1, 1),
    "max_pool2d 3x3 s2 p1": lambda x: F.max_pool2d(x.view(16, -1, 128, 128), 3, 2, 1),
}


def time_op(fn, x, device):
    """(wall ms, CPU ms) of one call: the CPU time is the process's, all threads (PoCL's workers
    run in it), which other jobs on a shared machine disturb less than the wall time."""
    device.synchronize()
    t, c = time.perf_counter(), time.process_time()
    fn(x)
    device.synchronize()
    return (time.perf_counter() - t) * 1e3, (time.process_time() - c) * 1e3


def bench_ops(device, mib, reps, only=None):
    n = mib * 2**20 // 4
    base = ct.randn(64, n // 64, device=device)
    inputs = {d: base.to(getattr(ct, d)) for d in DTYPES}
    rows = []
    for name, fn in OPS.items():
        if only and not any(o in name for o in only):
            continue
        for d in DTYPES:
            fn(inputs[d])  # builds the kernels
        times = {d: [] for d in DTYPES}
        for _ in range(reps):
            for d in DTYPES:
                times[d].append(time_op(fn, inputs[d], device))
        wall = {d: statistics.median(t for t, _ in v) for d, v in times.items()}
        cpu = {d: statistics.median(c for _, c in v) for d, v in times.items()}
        rows.append({"op": name, **{f"{d}_ms": round(wall[d], 2) for d in DTYPES},
                     **{f"{d}_cpu_ms": round(cpu[d], 2) for d in DTYPES},
                     **{f"{d}_speedup": round(wall["float32"] / wall[d], 2) for d in DTYPES[1:]},
                     **{f"{d}_cpu_speedup": round(cpu["float32"] / cpu[d], 2)
                        for d in DTYPES[1:]}})
        print(f"{name:20s} " + "  ".join(f"{d} {wall[d]:7.2f} ms" for d in DTYPES) +
              "  speed-up " + " / ".join(f"{wall['float32'] / wall[d]:.2f}x" for d in DTYPES[1:]) +
              "  CPU time " + " / ".join(f"{cpu[d]:.1f}" for d in DTYPES) + " ms, " +
              " / ".join(f"{cpu['float32'] / cpu[d]:.2f}x" for d in DTYPES[1:]), flush=True)
    return rows


def cnn():
    nn = ct.nn
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64),
                         nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


# peak memory rows: autocast in a 16-bit dtype over float32 parameters (fp32: none), or the
# model and its input stored in the 16-bit dtype (no autocast)
PRECISIONS = {"fp32": (None, None), "bf16": (ct.bfloat16, None), "fp16": (ct.float16, None),
              "bf16 storage": (None, ct.bfloat16), "fp16 storage": (None, ct.float16)}


def peak_memory(device, precision, batch=32):
    """MiB of one training step's peak, parameters included (allocated from before the model)."""
    low, storage = PRECISIONS[precision]
    ct.manual_seed(0)
    ct.empty_cache(device)
    ct.reset_peak_memory_stats(device)
    before = ct.memory_stats(device)["allocated"]
    model = cnn().to(device=device, dtype=storage or ct.float32)
    x = ct.randn(batch, 3, 64, 64, device=device, dtype=storage or ct.float32)
    y = ct.randint(0, 10, (batch,), device=device)
    with ct.autocast("opencl", dtype=low or ct.float16, enabled=low is not None):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    device.synchronize()
    peak = (ct.memory_stats(device)["peak"] - before) / 2**20
    del model, x, y, loss
    return peak


def network_peak(device, name, dtype, batch):
    """MiB of one training step's peak of a convnet_benchmarks network stored in dtype,
    parameters included (the peak counted from after the model is built: it is built in
    float32 and then cast)."""
    from convnet_benchmarks.bench import build_cltensor, input_shape
    gc.collect()  # the last network's modules, held in reference cycles
    ct.empty_cache(device)
    before = ct.memory_stats(device)["allocated"]
    model = build_cltensor(name, device, dtype)
    ct.reset_peak_memory_stats(device)
    x = ct.randn(*input_shape(name, batch), device=device, dtype=dtype)
    out = model(x)
    out.backward(ct.ones_like(out))
    device.synchronize()
    peak = (ct.memory_stats(device)["peak"] - before) / 2**20
    del model, x, out
    return peak


class PeakTracer:
    """While active, records every device buffer made (bytes, dtype, the cltensor frames that
    made it) and keeps the live set at the highest total seen. A debugging aid: it patches the
    Storage and ClTensor constructors, so normal runs pay nothing."""

    def __enter__(self):
        self.live, self.total, self.peak, self.at_peak = weakref.WeakKeyDictionary(), 0, 0, []
        self._saved = Storage.__init__, ClTensor.__init__
        storage_init, tensor_init = self._saved
        tracer = self

        def traced_storage(storage, device, nbytes):
            storage_init(storage, device, nbytes)
            tracer._made(storage, nbytes)

        def traced_tensor(t, storage, shape, strides, offset, dtype):
            tensor_init(t, storage, shape, strides, offset, dtype)
            rec = tracer.live.get(storage)
            if rec is not None and rec[1] is None:
                rec[1] = str(t.dtype)

        Storage.__init__, ClTensor.__init__ = traced_storage, traced_tensor
        return self

    def __exit__(self, *exc):
        Storage.__init__, ClTensor.__init__ = self._saved

    def _made(self, storage, nbytes):
        frames = [f for f in traceback.extract_stack()[:-2] if "cltensor" in f.filename and
                  not f.filename.endswith(("device.py", "tensor.py"))]
        site = " < ".join(f"{Path(f.filename).parent.name}/{Path(f.filename).name}:{f.lineno} "
                          f"{f.name}" for f in frames[-1:-4:-1])
        self.live[storage] = [nbytes, None, site]
        total = sum(rec[0] for rec in self.live.values())
        if total > self.peak:
            self.peak, self.at_peak = total, list(self.live.values())

    def report(self, top=25):
        rows = sorted(self.at_peak, key=lambda r: -r[0])
        lines = [f"{self.peak / 2**20:.1f} MiB live at the peak in {len(rows)} buffers:"]
        lines += [f"{n / 2**20:8.2f} MiB {d or '?':9s} {site}" for n, d, site in rows[:top]]
        rest = sum(r[0] for r in rows[top:])
        if rest:
            lines.append(f"{rest / 2**20:8.2f} MiB in {len(rows) - top} smaller buffers")
        return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--batch", type=int, default=32, help="the CNN's batch (peak memory)")
    p.add_argument("--device", default=None)
    p.add_argument("--json", default=None)
    p.add_argument("--ops", nargs="*", default=None, help="only the ops whose names hold these")
    p.add_argument("--no-memory", action="store_true", help="skip the CNN's peak memory")
    p.add_argument("--trace-peak", choices=list(PRECISIONS), default=None,
                   help="list the buffers alive at this precision's peak, and stop")
    p.add_argument("--networks", nargs="+", default=None,
                   help="convnet_benchmarks' networks' peak memory at --batch, and stop")
    args = p.parse_args(argv)
    device = ct.get_device(args.device)
    if args.networks:
        for name in args.networks:
            peaks = {d: network_peak(device, name, getattr(ct, d), args.batch) for d in DTYPES}
            print(f"{name} batch {args.batch}: peak MiB " + ", ".join(
                f"{d} {v:.1f} ({v / peaks['float32']:.3f}x)" for d, v in peaks.items()),
                flush=True)
        return 0
    if args.trace_peak:
        peak_memory(device, args.trace_peak, args.batch)  # builds the kernels
        with PeakTracer() as tracer:
            peak_memory(device, args.trace_peak, args.batch)
        print(tracer.report())
        return 0
    print(f"device: {device.name}; {args.mib} MiB of float32 per input")
    rows = bench_ops(device, args.mib, args.reps, args.ops)
    memory = {} if args.no_memory else \
        {pr: round(peak_memory(device, pr, args.batch), 1) for pr in PRECISIONS}
    if memory:
        print("peak memory of a CNN training step (MiB, parameters included): " +
              ", ".join(f"{k} {v}" for k, v in memory.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device.name, "mib": args.mib,
                                               "ops": rows, "peak_mib": memory}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
