"""The GEMM family choices of the networks' linear layers at small batches: each product of a
Linear's training step (forward x @ W^T, input gradient g @ W, weight gradient g^T @ x) timed
with the choice the database makes and with each family forced, at batch 1, 2, 4, 8 and 16.

    python benchmarks/small_batch.py [--device SPEC] [--batches 1,2,4,8,16] [--reps 5]
                                     [--layers alexnet.fc6,googlenet.fc] [--json out.json]

Times are wall-clock ms of one call with the queue drained (host time included: at batch 1 it
is part of the cost), medians over --reps rounds, the variants interleaved within each round
so that a busy machine slows them alike. "auto" is the database's choice (its family is named
beside it); a forced family runs through gemm_into's `entry` with the thresholds moved so that
it applies (rowdot: the forward product only, where A and B are K-contiguous; rowaxpy: the input
gradient, where B's columns are contiguous).
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
from cltensor.ops import gemm as gm  # noqa: E402
from cltensor.ops.gemm import choice, kit  # noqa: E402

# (name, in_features, out_features) of the four networks' linear layers
LAYERS = {"alexnet.fc6": (9216, 4096), "alexnet.fc7": (4096, 4096), "alexnet.fc8": (4096, 1000),
          "overfeat.fc1": (36864, 3072), "overfeat.fc2": (3072, 4096), "vgg.fc6": (25088, 4096),
          "googlenet.fc": (1024, 1000)}
FORCED = {"rowdot": {"rowdot_max_m": 16},
          "rowaxpy": {"rowdot_max_m": 0, "rowaxpy_max_m": 16},
          "direct": {"rowdot_max_m": 0, "rowaxpy_max_m": 0, "min_work": 1 << 62},
          "packed": {"rowdot_max_m": 0, "rowaxpy_max_m": 0, "min_work": 0, "min_dim": 0,
                     "min_m": 0}}


def products(x, w, g):
    """(pass, a, b) of a Linear's step: a @ b for each of its three products."""
    return [("fwd", x, w.mT), ("dx", g, w), ("dw", g.mT, x)]


def family(p_a, p_b, entry):
    """The family gemm_into picks for a @ b under entry (no plug-in)."""
    c = ct.ClTensor.empty_on((p_a.shape[0], p_b.shape[1]), p_a.dtype, p_a.device)
    p = kit.Problem(c.device, c.dtype, p_a.shape[0], p_b.shape[1], p_a.shape[1], (),
                    *[kit.Operand(t, (), t.strides[0], t.strides[1]) for t in (p_a, p_b, c, c)])
    return gm.engine._family(p, entry)


def time_round(device, a, b, entries):
    """Wall-clock ms of one product per variant (entry None: the database's choice)."""
    out = ct.ClTensor.empty_on((a.shape[0], b.shape[1]), a.dtype, device)
    times = {}
    for name, entry in entries.items():
        device.synchronize()
        t0 = time.perf_counter()
        gm.gemm_into(a, b, out, entry=entry)
        device.synchronize()
        times[name] = (time.perf_counter() - t0) * 1e3
    return times


def run_layer(device, name, batch, reps, rng):
    k, n = LAYERS[name]
    x = ct.from_numpy(rng.standard_normal((batch, k), np.float32), device=device)
    w = ct.from_numpy(rng.standard_normal((n, k), np.float32), device=device)
    g = ct.from_numpy(rng.standard_normal((batch, n), np.float32), device=device)
    base = choice.entry_for(device, np.float32)
    rows = []
    for pas, a, b in products(x, w, g):
        entries = {"auto": None}
        for fam, moves in FORCED.items():
            entry = dict(base, **moves)
            if family(a, b, entry) == fam:
                entries[fam] = entry
        time_round(device, a, b, entries)  # warm-up: kernels built
        rounds = [time_round(device, a, b, entries) for _ in range(reps)]
        med = {v: statistics.median(r[v] for r in rounds) for v in entries}
        rows.append({"layer": name, "batch": batch, "pass": pas,
                     "auto_family": family(a, b, base), **med})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--batches", default="1,2,4,8,16")
    ap.add_argument("--layers", default=",".join(LAYERS))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    device = ct.get_device(args.device)
    rng = np.random.default_rng(0)
    rows = []
    print(f"GEMM choices at small batches on {device.name}, ms (medians of {args.reps})")
    print("| layer | batch | pass | auto (family) | " + " | ".join(FORCED) + " |")
    print("| --- " * (4 + len(FORCED)) + "|")
    for name in args.layers.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            for r in run_layer(device, name, batch, args.reps, rng):
                rows.append(r)
                cells = [f"{r[v]:.3f}" if v in r else "-" for v in FORCED]
                print(f"| {name} | {batch} | {r['pass']} | {r['auto']:.3f} ({r['auto_family']}) | "
                      + " | ".join(cells) + " |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
