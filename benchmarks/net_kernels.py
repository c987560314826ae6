"""The kernel table of one training step of convnet_benchmarks' networks, and the convolution
algorithm each pass ran: where a step's device time goes, per kernel name.

    python benchmarks/net_kernels.py [--model vgg_a,googlenet] [--batch 0] [--precision bf16]
                                     [--tf32-fast] [--top 25] [--device SPEC]
                                     [--json out.json]

Each network runs two warm-up steps (kernels built, choices made and listed), three timed
steps (the median wall ms, the queue finished) and one step under cltensor.profile(), whose
OpenCL profiling events give each kernel's calls and ms. --precision bf16|fp16 runs the forward
under cltensor's autocast (parameters float32), as convnet_benchmarks --precision does.
--tf32-fast profiles float32 with allow_tf32 and conv_precision "fast" (the path a 16-bit step
is held against, convnet_benchmarks' cltensor_tf32_fast row).
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import cltensor as ct  # noqa: E402
from cltensor.conv import dispatch  # noqa: E402
from convnet_benchmarks import bench  # noqa: E402
from convnet_benchmarks.models import INPUTS  # noqa: E402


def passes_ran(step):
    """{(layer shape, pass): algorithm} of the convolutions a network's first step ran, from
    the dispatch's choices (traced around `step`; later steps may replay recorded plans)."""
    seen = {}
    real = dispatch.choose

    def traced(p, device, pass_, algo="auto", tensors=None):
        name = real(p, device, pass_, algo, tensors)
        seen[(f"c{p.c}->{p.co} {p.h}x{p.w} k{p.kh}x{p.kw} s{p.sh}", pass_)] = name
        return name
    dispatch.choose = traced
    try:
        step()
    finally:
        dispatch.choose = real
    return seen


def profile_network(name, batch, precision, device, top):
    c, hw, gpu_batch, cpu_batch = INPUTS[name]
    batch = batch or (gpu_batch if device.is_gpu else cpu_batch)
    model = bench.build_cltensor(name, device, "float32")
    rng = np.random.default_rng(0)
    x = ct.from_numpy(rng.standard_normal((batch, c, hw, hw)).astype(np.float32), device=device)

    def step():
        out = bench.forward_at(model, x, precision)
        model.zero_grad(set_to_none=True)
        out.float().sum().backward()
    choices = passes_ran(step)
    step()
    device.synchronize()
    walls = []
    for _ in range(3):
        t0 = time.perf_counter()
        step()
        device.synchronize()
        walls.append((time.perf_counter() - t0) * 1e3)
    with ct.profile() as prof:
        step()
        device.synchronize()
    rows = prof.table()
    return {"model": name, "batch": batch, "precision": precision,
            "wall_ms": statistics.median(walls), "kernel_ms": sum(r[2] for r in rows),
            "launches": sum(r[1] for r in rows),
            "kernels": [{"name": n, "calls": k, "ms": round(ms, 3)} for n, k, ms, _ in rows[:top]],
            "algorithms": [{"layer": layer, "pass": pass_, "algo": algo}
                           for (layer, pass_), algo in sorted(choices.items())]}


def report(res):
    print(f"{res['model']} (batch {res['batch']}, {res['precision']}): wall {res['wall_ms']:.2f} "
          f"ms, kernels {res['kernel_ms']:.2f} ms, {res['launches']} launches")
    for k in res["kernels"]:
        print(f"  {k['name']:32s} {k['calls']:5d} {k['ms']:9.3f} ms")
    for a in res["algorithms"]:
        print(f"  {a['layer']:32s} {a['pass']:16s} {a['algo']}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="vgg_a,googlenet")
    ap.add_argument("--batch", type=int, default=0, help="0: each network's standard batch")
    ap.add_argument("--precision", choices=sorted(bench.PRECISIONS), default="fp32")
    ap.add_argument("--tf32-fast", action="store_true",
                    help="float32 with allow_tf32 and conv_precision 'fast'")
    ap.add_argument("--top", type=int, default=25, help="kernels listed per network")
    ap.add_argument("--device", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    device = ct.get_device(args.device) if args.device else ct.default_device()
    names = args.model.split(",")
    unknown = [n for n in names if n not in INPUTS]
    if unknown:
        ap.error(f"unknown model {unknown[0]!r}; known: {', '.join(sorted(INPUTS))}")
    if args.tf32_fast:
        if args.precision != "fp32":
            ap.error("--tf32-fast profiles float32: leave --precision out")
        ct.backends.allow_tf32, ct.backends.conv_precision = True, "fast"
    results = []
    for name in names:
        results.append(profile_network(name, args.batch, args.precision, device, args.top))
        if args.tf32_fast:
            results[-1]["precision"] = "fp32, tf32 fast"
        report(results[-1])
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device.name, "results": results},
                                              indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
