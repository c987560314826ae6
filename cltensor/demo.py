"""python -m cltensor.demo: the main job until the convnet benchmarks land.

Runs tensor ops and a small MLP forward on the default device (CLTENSOR_DEVICE picks another),
checks each result against numpy in float64, and prints times measured with a finished queue.
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np

import cltensor as ct
from cltensor.testing import rel_error


def timed(fn, device, repeat=5):
    """Median wall time of fn() in ms, the queue finished around each run, warm-up excluded."""
    fn()
    device.synchronize()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        device.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def mlp_forward(x, layers):
    """Linear + ReLU layers, then a softmax over classes."""
    for i, (w, b) in enumerate(layers):
        x = x @ w.T + b
        if i < len(layers) - 1:
            x = ct.relu(x)
    z = x - x.max(dim=1, keepdim=True).values
    e = ct.exp(z)
    return e / e.sum(dim=1, keepdim=True)


def mlp_reference(x, layers):
    for i, (w, b) in enumerate(layers):
        x = x @ w.T + b
        if i < len(layers) - 1:
            x = np.maximum(x, 0)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def run(batch, sizes, device):
    rng = np.random.default_rng(0)
    results = []

    def check(name, got, ref, ms, work=None):
        err = rel_error(got, ref)
        row = {"op": name, "ms": round(ms, 3), "rel_error": err}
        if work:
            row[work[0]] = round(work[1] / ms / 1e6, 2)
        results.append(row)
        extra = f"  {work[0]} {row[work[0]]:.2f}" if work else ""
        print(f"  {name:32s} {ms:9.3f} ms   rel err {err:.1e}{extra}")
        if not err < 1e-4:
            raise SystemExit(f"demo: {name} disagrees with numpy (relative error {err:.2e})")

    n = 1 << 20
    a_np = rng.standard_normal(n).astype(np.float32)
    a = ct.from_numpy(a_np, device=device)
    ms = timed(lambda: a * 2.0 + 1.0, device)
    check("elementwise a*2+1 (1M)", a * 2.0 + 1.0, a_np.astype(np.float64) * 2 + 1, ms,
          ("GB/s", 4 * 4 * n))
    ms = timed(lambda: a.sum(), device)
    check("sum (1M)", a.sum(), a_np.astype(np.float64).sum(), ms, ("GB/s", 4 * n))
    m_np = rng.standard_normal((512, 384)).astype(np.float32)
    m = ct.from_numpy(m_np, device=device)
    ms = timed(lambda: m.T.contiguous(), device)
    check("transpose copy 512x384", m.T.contiguous(), m_np.T, ms, ("GB/s", 8 * m_np.size))
    k_np = rng.standard_normal((384, 256)).astype(np.float32)
    k = ct.from_numpy(k_np, device=device)
    ms = timed(lambda: m @ k, device)
    check("matmul 512x384 @ 384x256", m @ k, m_np.astype(np.float64) @ k_np, ms,
          ("GFLOP/s", 2 * 512 * 384 * 256))

    dims = [sizes[0]] + sizes[1:]
    layers_np = [((rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32),
                  (rng.standard_normal(o) * 0.1).astype(np.float32))
                 for i, o in zip(dims[:-1], dims[1:])]
    layers = [(ct.from_numpy(w, device=device), ct.from_numpy(b, device=device))
              for w, b in layers_np]
    x_np = rng.standard_normal((batch, dims[0])).astype(np.float32)
    x = ct.from_numpy(x_np, device=device)
    ms = timed(lambda: mlp_forward(x, layers), device)
    flops = sum(2 * batch * i * o for i, o in zip(dims[:-1], dims[1:]))
    check(f"MLP forward {'-'.join(map(str, dims))} b{batch}", mlp_forward(x, layers),
          mlp_reference(x_np.astype(np.float64), [(w.astype(np.float64), b) for w, b in layers_np]),
          ms, ("GFLOP/s", flops))
    return results


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--sizes", type=int, nargs="+", default=[784, 512, 256, 10])
    p.add_argument("--json", help="write the results to this file")
    args = p.parse_args(argv)
    device = ct.default_device()
    print(f"cltensor demo on {device} ({device.platform_name})")
    results = run(args.batch, args.sizes, device)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device.name, "results": results}, f, indent=1)
    print("all results agree with numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
