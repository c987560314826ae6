"""The NVIDIA plug-in's wgmma parameter sets, each forced alone on a Hopper GPU: the GEMM
kernel's time (nvwg_gemm) and the whole product's (with the operand packs), against
torch.matmul (cuBLAS) on the same operands in the same process. The data behind HALF_CONFIGS
(16-bit products) and CONFIGS' wgmma set (float32 in TF32) in cltensor/plugins/nvidia.py.

    python benchmarks/wgmma_sets.py [--device SPEC] [--dtype bfloat16|float16|float32]
                                    [--sizes 8192 4096] [--reps 5] [--sweep] [--wide]
                                    [--json out.json]

Without --sweep it times the shipped sets of the type; --sweep times every tile width (BN 128
to 256) with BK 8 and 16 words at the most stages NVIDIA's 48 KiB of local memory holds, wait
depth 0 and 1 and MIN_GROUPS 0, 2 and 3, one warpgroup and the producer warp; --wide sweeps
128-row tiles instead (two warpgroups and the producer warp, BN 128 to 256, BK 8, wait depth
1, MIN_GROUPS 1: ptxas then keeps the registers within what one work-group of 288 work-items
may hold, which it exceeds uncapped; a cap for two is too few for the kernel), whose operands
are read fewer times. Before each set
the GEMM plans are cleared: gemm_into replays the launches of the last product of the same
shapes, which would run the previous set's kernel. Times are medians of --reps profiled calls
after one warm-up call; each result is compared with cuBLAS's (relative Frobenius norm).
"""
import argparse
import itertools
import json
import sys

import numpy as np

import cltensor
from cltensor import backends
from cltensor.ops import gemm as gm
from cltensor.plugins import nvidia

LOCAL_LIMIT = 48 * 1024  # NVIDIA's OpenCL, per work-group


def sweep_sets(wide=False):
    """The sets --sweep times (see the module's docstring)."""
    sets = []
    choices = ((8, 16), (0, 1), (0, 2, 3)) if not wide else ((8,), (1,), (1,))
    for bn, bk, wait, groups in itertools.product((128, 160, 192, 224, 256), *choices):
        q = {"BN": bn, "WGS_M": 2 if wide else 1, "BK": bk, "STAGES": 2, "WG_WAIT": wait,
             "PRODUCER": 1, "GROUP_M": 8, "MIN_GROUPS": groups}
        fits = [s for s in range(2, 9) if nvidia.local_bytes(dict(q, STAGES=s)) +
                nvidia.LOCAL_RESERVED <= LOCAL_LIMIT]
        if fits and max(fits) > wait:
            sets.append(dict(q, STAGES=max(fits)))
    return sets


def shipped_sets(dtype):
    if dtype == "float32":
        return [q for q in nvidia.CONFIGS if nvidia.is_wgmma(q)]
    return list(nvidia.HALF_CONFIGS)


def force(plugin, q, dtype):
    """Make q the plug-in's only set for products of dtype, with the plans cleared."""
    q = dict(q, rate=q.get("rate", 1.0), groups_per_cu=q.get("groups_per_cu", 1))
    if dtype == "float32":
        plugin.configs = (q,)
    else:
        nvidia.HALF_CONFIGS = (q,)
        plugin.configs = ()  # NOTE: its mma.sync sets would join the 16-bit plan
    gm.engine.clear_plans()


def cublas(torch, a, b, name, reps):
    """(ms, result) of torch.matmul on copies of a and b (torch dtype `name`): median of reps
    CUDA-event timings."""
    ta, tb = (torch.from_numpy(x.float().numpy()).cuda().to(getattr(torch, name)) for x in (a, b))
    for _ in range(3):
        tc = ta @ tb
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        tc = ta @ tb
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return float(np.median(times)), tc.float().cpu().numpy()


def time_set(a, b, c, reps):
    """{"kernel_ms", "total_ms"} of gemm_into(a, b, c): medians over reps profiled calls."""
    gm.gemm_into(a, b, c)
    calls = []
    for _ in range(reps):
        with cltensor.profile() as prof:
            gm.gemm_into(a, b, c)
        calls.append({name: ms for name, _, ms, _ in prof.table()})
    if "nvwg_gemm" not in calls[0]:
        return {"ran": sorted(calls[0])}  # the set did not build or fit: another path ran
    return {"kernel_ms": float(np.median([k["nvwg_gemm"] for k in calls])),
            "total_ms": float(np.median([sum(k.values()) for k in calls]))}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", help="cltensor device spec (default: the default device)")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8192, 4096])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--wide", action="store_true", help="--sweep's 128-row tiles")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    device = cltensor.get_device(args.device) if args.device else cltensor.default_device()
    plugin = next((p for p in cltensor.plugins() if isinstance(p, nvidia.NvidiaTensorCores)
                   and p.serves(device)), None)
    if plugin is None or not nvidia.is_sm90(device):
        raise SystemExit(f"wgmma_sets: {device} is not an NVIDIA GPU of compute capability 9.0 "
                         "that the plug-in serves (wgmma is Hopper's)")
    import torch
    backends.allow_tf32 = True
    torch.backends.cuda.matmul.allow_tf32 = True
    rng = np.random.default_rng(0)
    dtype = getattr(cltensor, args.dtype)
    cases = {}
    for s in args.sizes:
        a, b = (cltensor.from_numpy(rng.uniform(-1, 1, (s, s)).astype(np.float32),
                                    device=device).to(dtype) for _ in range(2))
        ref_ms, ref = cublas(torch, a, b, args.dtype, args.reps)
        cases[s] = (a, b, cltensor.empty(s, s, dtype=dtype, device=device), ref_ms, ref)
        print(f"cuBLAS {args.dtype} {s}^3: {ref_ms:.3f} ms, {2 * s ** 3 / ref_ms / 1e9:.1f} "
              "TFLOP/s", flush=True)
    rows = []
    for q in sweep_sets(args.wide) if args.sweep else shipped_sets(args.dtype):
        row = {k: q[k] for k in nvidia.WGMMA_KEYS + ("MIN_GROUPS",) if k in q}
        force(plugin, q, args.dtype)
        for s, (a, b, c, ref_ms, ref) in cases.items():
            got = time_set(a, b, c, args.reps)
            if "kernel_ms" in got:
                got.update(kernel_tflops=2 * s ** 3 / got["kernel_ms"] / 1e9,
                           tflops=2 * s ** 3 / got["total_ms"] / 1e9,
                           vs_cublas=ref_ms / got["total_ms"],
                           rel_diff=float(np.linalg.norm(c.float().numpy() - ref) /
                                          np.linalg.norm(ref)))
            row[str(s)] = got
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": str(device), "dtype": args.dtype,
                       "cublas_ms": {str(s): v[3] for s, v in cases.items()}, "rows": rows},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
