"""A device as a new user meets it: GEMM at 2048^3 against numpy and the AlexNet batch-8 training
step against PyTorch CPU, untuned (an empty user cache and the shipped database without this
device's own entries, so only the defaults derived from what the device reports apply) and,
with --tune, again after `python -m cltensor.tune all` has filled that cache. Side by side in
one process; each round runs one cltensor product (step) and one reference product (step),
interleaved, and the figures are medians over --reps rounds after a warm-up round.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
        python benchmarks/untuned.py [--device SPEC] [--reps 5] [--tune] [--quick] [--json out.json]

(with OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE set, numpy may keep to older kernels: the script
warns, as the JSON's "openblas_env" records)

"wall" is the wall clock per call with a finished queue; "cpu" the process CPU time per call
(the OpenCL runtime's threads included), which a machine shared with other work blurs less.
Ratios are reference time / cltensor time: above 1, cltensor is faster. Targets (issue-level,
docs/implementations.md): untuned, GEMM >= 0.7x numpy and the step at most 1.5x PyTorch's time
(ratio >= 0.67); after tuning, GEMM >= 0.9x and the step at most PyTorch's time.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


# seconds each call waits before it is timed: longer than the reference's threads (OpenBLAS,
# PyTorch's OpenMP) spin after a call, which slowed whatever ran next on a CPU device
SETTLE_S = 0.3


def _timed(fn):
    """(wall s, process CPU s) of one call of fn, after SETTLE_S of rest."""
    time.sleep(SETTLE_S)
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def interleaved(ours, ref, reps):
    """Medians of (wall, cpu) for ours and ref, alternating, after one warm-up call of each."""
    ours(), ref()
    rows = [(_timed(ours), _timed(ref)) for _ in range(reps)]
    med = lambda k, j: statistics.median(r[k][j] for r in rows)  # noqa: E731
    return {"ours_wall": med(0, 0), "ours_cpu": med(0, 1),
            "ref_wall": med(1, 0), "ref_cpu": med(1, 1)}


def gemm_case(ct, device, n, reps):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    ta, tb = ct.from_numpy(a, device=device), ct.from_numpy(b, device=device)
    out = ct.empty((n, n), device=device)

    def ours():
        ct.matmul(ta, tb, out=out)
        device.synchronize()

    err = np.abs(ct.matmul(ta, tb).numpy() - a.astype(np.float64) @ b).max()
    res = interleaved(ours, lambda: a @ b, reps)
    res.update(case=f"GEMM {n}^3", max_abs_err=float(err), gflop=2 * n**3 / 1e9)
    return res


def training_steps(name, device, batch, tdev):
    """(cltensor step, torch step): network `name` in cltensor native on `device` and in
    torch.nn on torch device `tdev`, with the same weights and data; each step zeroes the
    gradients, runs forward and backward, and returns with its queue finished."""
    import torch

    import cltensor as ct
    from convnet_benchmarks import bench
    model = bench.build_cltensor(name, device, "float32")
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal(bench.input_shape(name, batch)).astype(np.float32)
    x = ct.from_numpy(x_np, device=device)
    g_np = rng.standard_normal(tuple(model(x).shape)).astype(np.float32)
    g = ct.from_numpy(g_np, device=device)
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    tmodel = bench.build_torch(name, state, tdev, "float32")
    tx, tg = torch.from_numpy(x_np).to(tdev), torch.from_numpy(g_np).to(tdev)
    torch_sync = torch.opencl.synchronize if tdev.type == "opencl" else lambda: None
    return _step(model, x, g, device.synchronize), _step(tmodel, tx, tg, torch_sync)


def _step(model, x, g, sync):
    def step():
        model.zero_grad(set_to_none=True)
        model(x).backward(g)
        sync()
    return step


def alexnet_case(ct, device, batch, reps):
    import torch
    ours, ref = training_steps("alexnet", device, batch, torch.device("cpu"))
    res = interleaved(ours, ref, reps)
    res.update(case=f"AlexNet batch {batch} step")
    return res


def strip_device_entries(tunedb, device, folder):
    """Point the shipped database at a copy without the entries that match `device` or that
    it would take as a sibling of its GPU architecture (an H100 the H200's); returns the keys
    removed."""
    desc, removed = device.description(), []

    def serves(key, entry):
        return (tunedb._key_rank(key, desc) is not None or
                bool(desc.arch) and isinstance(entry, dict) and entry.get("arch") == desc.arch)
    folder.mkdir(parents=True, exist_ok=True)
    for path in Path(tunedb.DB_DIR).glob("*.json"):
        data = json.loads(path.read_text())
        for table in data.values():
            for vendor in table.get("vendors", {}).values() if isinstance(table, dict) else ():
                devices = vendor.get("devices", {})
                for key in [k for k, e in devices.items() if serves(k, e)]:
                    removed.append(f"{path.name}: {key}")
                    del devices[key]
        (folder / path.name).write_text(json.dumps(data))
    tunedb.DB_DIR = folder
    tunedb.clear()
    return removed


def measure(ct, device, args, label):
    rows = [gemm_case(ct, device, args.size, args.reps),
            alexnet_case(ct, device, args.batch, args.reps)]
    for r in rows:
        r["state"] = label
        r["wall_ratio"] = r["ref_wall"] / r["ours_wall"]
        r["cpu_ratio"] = r["ref_cpu"] / r["ours_cpu"]
        print(f"{label:8s} {r['case']:22s} cltensor {r['ours_wall'] * 1e3:9.1f} ms "
              f"(cpu {r['ours_cpu'] * 1e3:8.1f})  reference {r['ref_wall'] * 1e3:9.1f} ms "
              f"(cpu {r['ref_cpu'] * 1e3:8.1f})  ratio wall {r['wall_ratio']:.2f}x "
              f"cpu {r['cpu_ratio']:.2f}x", flush=True)
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default=None)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--size", type=int, default=2048)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--tune", action="store_true", help="then run `tune all` and measure again")
    p.add_argument("--quick", action="store_true", help="tune with --quick")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    blas_env = {k: v for k, v in os.environ.items() if k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    if blas_env:
        print(f"warning: {blas_env} may hold numpy's OpenBLAS to older kernels; unset them for "
              "a fair reference", file=sys.stderr)
    scratch = Path(tempfile.mkdtemp(prefix="cltensor-untuned-"))
    os.environ["CLTENSOR_CACHE_DIR"] = str(scratch / "cache")
    os.environ.pop("CLTENSOR_AUTOTUNE", None)
    import cltensor as ct
    from cltensor import tune, tunedb
    device = ct.get_device(args.device)
    removed = strip_device_entries(tunedb, device, scratch / "tuning")
    print(f"device: {device.name} ({device.platform_name}, driver "
          f"{device.cl_device.driver_version}); shipped entries set aside: {removed or 'none'}")
    print(f"tuned entry: {tunedb.is_tuned('gemm', 'gemm_float32', device)}; gemm family "
          f"{tunedb.current('gemm', 'gemm_float32', device)['family']}", flush=True)
    rows = measure(ct, device, args, "untuned")
    if args.tune:
        t0 = time.perf_counter()
        tune.main(["all", "--device", str(device.index)] + (["--quick"] if args.quick else []))
        print(f"tune all: {time.perf_counter() - t0:.0f} s", flush=True)
        tunedb.clear()
        ct.clear_cache()
        rows += measure(ct, device, args, "tuned")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device.name, "removed": removed,
                                               "load": os.getloadavg(), "openblas_env": blas_env,
                                               "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
