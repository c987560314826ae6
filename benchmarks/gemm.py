"""GEMM benchmark: cltensor against numpy (OpenBLAS) on CPU devices and PyTorch/cuBLAS (TF32
off) on GPUs, side by side in one run, for square sizes and the benchmark networks' layer shapes
(their linear layers and im2col GEMMs). Prints a table and writes JSON.

    python benchmarks/gemm.py [--device SPEC] [--json out.json] [--reps 5] [--quick] [--tf32]
                              [--bench-mode] [--half bfloat16|float16] [--kernels]

--tf32 sets cltensor.backends.allow_tf32 (float32 products on tensor cores where a plug-in
offers them: the "family" column then names the plug-in's kernel) and compares with cuBLAS with
TF32 on, and also with cuBLAS in IEEE fp32 (the "fp32 GF/s" column), all in the same run;
where the NVIDIA plug-in serves the device it first times mma.sync's own ceiling (tensor-core
instructions on registers alone: nvidia_mma.cl's nvmma_peak) and, on Hopper, wgmma's
(nvidia_wgmma.cl's nvwg_peak), and prints the largest square product's fraction of them.

--half bfloat16 (or float16) stores A, B and C in that type (sums in float32) and compares with
PyTorch's product of the same 16-bit tensors (cuBLAS's tensor cores) or with numpy in float32.

Times are medians over --reps rounds after a warm-up round (and, on GPUs, after --warmup
seconds of 4096^3 products, since idle clocks ramp up slowly), each round one cltensor product
and one reference product, which goes first in turn, so that both see the same share of a busy
machine. On CPU devices each side is timed in its steady state, as in a training loop's
back-to-back products: it rests 0.3 s (OpenBLAS's threads spin about 0.1 s after a product and
would take the cores from the other side), then runs untimed products for 10 ms, at least one
(after the rest the runtimes' and OpenBLAS's workers sleep, and the first products pay their
wake-up), then the timed one (cltensor's two on the same queue: profiling moves the device to
a new one). A round in whose rests other processes took more than 0.04 CPU seconds is run
again, at most --reps times per case (the JSON's "redone"). Each side's time: cltensor's from
the first kernel's start to the last kernel's end of one call (OpenCL profiling events:
packing kernels included; "cl/ref") and by the wall clock to the end of its kernels (host
time included; "wall"), PyTorch's from CUDA events around one call, numpy's by the wall
clock. "cpu" compares the process CPU time each side took per product (reference /
cltensor): on a CPU device shared with other work it moves far less than the wall clock
does. For numpy to use both cores here, run with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
unset (see the JSON's "numpy_blas").
The family "slabs" is the packed family's deep products in K slabs (gemm_cpu.cl's gemm_slabs).
Each row's JSON also splits one call's kernel time among its launches (packs, the product,
split-K sums: "kernels_ms", means over KERNEL_CALLS profiled calls); --kernels prints it.
"""
import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import cltensor  # noqa: E402
from cltensor.ops import gemm as gm  # noqa: E402
from cltensor.plugins import plugins_for  # noqa: E402


def conv(name, cin, cout, k, out_hw, batch):
    """An im2col convolution as a GEMM: weight (cout, cin*k*k) @ columns (cin*k*k, batch*h*w)."""
    return (name, cout, batch * out_hw * out_hw, cin * k * k, "nn")


def linear(name, fin, fout, batch):
    """A linear layer: x (batch, fin) @ weight.mT, the weight stored (fout, fin)."""
    return (name, batch, fout, fin, "nt")


def layer_shapes(batches):
    """(name, M, N, K, layout) of the four networks' layers (shared/ANCHORS.md), at the batch
    sizes given per network."""
    a, o, v, g = (batches[n] for n in ("alexnet", "overfeat", "vgg", "googlenet"))
    return [
        conv("alexnet.conv1", 3, 64, 11, 55, a), conv("alexnet.conv2", 64, 192, 5, 27, a),
        conv("alexnet.conv3", 192, 384, 3, 13, a), conv("alexnet.conv4", 384, 256, 3, 13, a),
        conv("alexnet.conv5", 256, 256, 3, 13, a), linear("alexnet.fc6", 9216, 4096, a),
        linear("alexnet.fc7", 4096, 4096, a), linear("alexnet.fc8", 4096, 1000, a),
        conv("overfeat.conv2", 96, 256, 5, 20, o), conv("overfeat.conv5", 1024, 1024, 3, 12, o),
        linear("overfeat.fc1", 36864, 3072, o),
        conv("vgg.conv2", 64, 128, 3, 112, v), conv("vgg.conv3", 128, 256, 3, 56, v),
        conv("vgg.conv5", 256, 512, 3, 28, v), conv("vgg.conv7", 512, 512, 3, 14, v),
        linear("vgg.fc6", 25088, 4096, v),
        conv("googlenet.conv1", 3, 64, 7, 112, g), conv("googlenet.conv2", 64, 64, 1, 56, g),
        conv("googlenet.conv3", 64, 192, 3, 56, g), conv("googlenet.3a.1x1", 192, 64, 1, 28, g),
        conv("googlenet.3a.3x3", 96, 128, 3, 28, g), conv("googlenet.4a.1x1", 480, 192, 1, 14, g),
        conv("googlenet.5b.3x3", 192, 384, 3, 7, g), linear("googlenet.fc", 1024, 1000, g),
    ]


class Torch:
    """PyTorch on the first CUDA GPU, TF32 off (IEEE fp32, as cltensor computes) unless tf32."""

    def __init__(self, tf32=False, half=None):
        import torch
        self.torch, self.tf32 = torch, tf32
        self.dtype = getattr(torch, half) if half else None
        self._set_tf32()
        self.name = (f"torch {torch.__version__} / cuBLAS{' TF32' if tf32 else ''}"
                     f"{' ' + half if half else ''} ({torch.cuda.get_device_name()})")

    def _set_tf32(self):
        """NOTE: set before each use: two references (TF32 and fp32) share torch's flags."""
        self.torch.backends.cuda.matmul.allow_tf32 = self.tf32
        self.torch.backends.cudnn.allow_tf32 = self.tf32

    def operands(self, a, b):
        t = self.torch
        a, b = t.from_numpy(a).cuda(), t.from_numpy(b).cuda()
        return (a, b) if self.dtype is None else (a.to(self.dtype), b.to(self.dtype))

    def product(self, a, b):
        self._set_tf32()
        return (a @ b).float().cpu().numpy()

    def once(self, a, b):
        """Seconds of one product, from CUDA events."""
        t = self.torch
        self._set_tf32()
        start, end = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e-3

    def seconds(self, a, b, reps):
        self.once(a, b)
        return float(np.median([self.once(a, b) for _ in range(reps)]))


class Numpy:
    def __init__(self):
        self.name = f"numpy {np.__version__}"
        try:
            from threadpoolctl import threadpool_info
            self.blas = threadpool_info()
        except ImportError:
            self.blas = "threadpoolctl not installed"

    def operands(self, a, b):
        return a, b

    def product(self, a, b):
        return a @ b

    def once(self, a, b):
        """Seconds of one product, by the wall clock."""
        t0 = time.perf_counter()
        a @ b
        return time.perf_counter() - t0

    def seconds(self, a, b, reps):
        self.once(a, b)
        return float(np.median([self.once(a, b) for _ in range(reps)]))


def host_operands(rng, m, n, k, layout, dtype):
    """A (M, K) and B (K, N); with layout 'nt', B as the transpose of a stored (N, K) matrix."""
    a = rng.uniform(-1, 1, (m, k)).astype(dtype)
    b = rng.uniform(-1, 1, (n, k) if layout == "nt" else (k, n)).astype(dtype)
    return a, (b.T if layout == "nt" else b)


def run_case(device, ref, rng, case, dtype, reps, ref_fp32=None, half=None):
    """One case's row; half: the 16-bit type (a cltensor dtype name) that A, B and C are
    stored in, from float32 operands rounded to it (the reference multiplies the same)."""
    name, m, n, k, layout = case
    a, b = host_operands(rng, m, n, k, layout, dtype)
    to = (lambda t: t.to(getattr(cltensor, half))) if half else (lambda t: t)
    ta = to(cltensor.from_numpy(a, device=device))
    tb = to(cltensor.from_numpy(np.ascontiguousarray(b.T), device=device)).mT \
        if layout == "nt" else to(cltensor.from_numpy(b, device=device))
    if half:  # both sides multiply the rounded operands
        a, b = ta.float().numpy(), tb.float().numpy()
    tc = cltensor.empty(m, n, dtype=getattr(cltensor, half) if half else dtype, device=device)
    family = gm.family_of(device, np.dtype(dtype), gm.entry_for(device, np.dtype(dtype)),
                          (m, n, k))
    with cltensor.profile() as prof:
        gm.gemm_into(ta, tb, tc)
    family = plugin_kernel(prof) or ("slabs" if "gemm_slabs" in kernel_names(prof) else family)
    ra, rb = ref.operands(a, b) if ref is not None else (None, None)
    t = interleaved(device, lambda: gm.gemm_into(ta, tb, tc), ref and (lambda: ref.once(ra, rb)),
                    reps)
    secs, rsecs = t["kernel"], t["ref"]
    flops = 2.0 * m * n * k
    row = {"case": name, "M": m, "N": n, "K": k, "layout": layout,
           "dtype": half or np.dtype(dtype).name, "family": family, "cltensor_s": secs,
           "cltensor_gflops": flops / secs / 1e9,
           "cltensor_wall_s": t["wall"], "cltensor_cpu_s": t["cpu"], "redone": t["redone"]}
    row["kernels_ms"] = kernel_split(lambda: gm.gemm_into(ta, tb, tc))
    got = tc.float().numpy()
    if ref is not None:
        want = ref.product(ra, rb)
        row.update(ref_s=rsecs, ref_gflops=flops / rsecs / 1e9, ratio=rsecs / secs,
                   wall_ratio=rsecs / t["wall"], ref_cpu_s=t["ref_cpu"],
                   cpu_ratio=t["ref_cpu"] / t["cpu"],
                   rel_diff_vs_ref=float(np.linalg.norm(got - want) / np.linalg.norm(want)))
    if ref_fp32 is not None and dtype == np.float32 and not half:
        fsecs = ref_fp32.seconds(*ref_fp32.operands(a, b), reps)
        row.update(ref_fp32_s=fsecs, ref_fp32_gflops=flops / fsecs / 1e9)
    return row


# seconds a CPU device's side rests before each product: longer than OpenBLAS's and OpenMP's
# threads spin after a call (OpenBLAS: 2^28 cycles by default, about 0.1 s)
SETTLE_S = 0.3
# untimed products of the same side between the rest and each timed one, on CPU devices, for at
# least this many seconds (at least one product): after the rest the runtimes' and OpenBLAS's
# workers sleep, and the first products pay their wake-up, which a training loop's
# back-to-back products never pay. NOTE: PoCL's and numpy's products of a few ms took up to
# twice as long on the first call; Intel's runtime ran 512^3 (1.3 ms) on one core for a few
# calls more (one warm call: 0.53x numpy, four: 1.05x; 2 Zen 4 cores)
WARM_S = 0.01
# a round is timed again (at most reps more rounds per case) when other processes took more
# than this many CPU seconds during one of its rests: a product sharing its 2 cores with other
# work ran 2-10x slower, numpy's most (OpenBLAS's threads wait for each other)
BUSY_CPU_S = 0.04


def _busy_cpu_s():
    """CPU seconds every process has run since boot (Linux's /proc/stat; None elsewhere)."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:9]]
    except OSError:
        return None
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # less idle, iowait


def rest(seconds):
    """Sleep; returns the CPU seconds other processes took meanwhile (0 where unknown)."""
    b0, c0 = _busy_cpu_s(), time.process_time()
    time.sleep(seconds)
    b1 = _busy_cpu_s()
    return 0.0 if b0 is None else max(0.0, b1 - b0 - (time.process_time() - c0))


def steady(settle, product):
    """Prepares a CPU side's timed call: a rest of `settle` seconds, then untimed
    products (product() returns when its work is done); returns the CPU seconds others took
    during the rest. No rest and no warm-up on GPUs (settle 0)."""
    if not settle:
        return 0.0
    others = rest(settle)
    t0 = time.perf_counter()
    product()
    while time.perf_counter() - t0 < WARM_S:
        product()
    return others


def rounds(reps, sides):
    """[[result of side() for each side] per round], reps rounds after a warm-up round, the
    sides' order rotated each round; each side() returns (result, others' CPU seconds during
    its rest). A round whose rests saw others take more than BUSY_CPU_S is run again, at most
    reps times per call (others' work seconds long, as a test run's, shows in the rests).
    Returns (rounds, rounds redone)."""
    out, redone, r = [], 0, 0
    while len(out) < reps:
        got = [None] * len(sides)
        noise = []
        for i in [(r + j) % len(sides) for j in range(len(sides))]:
            got[i], others = sides[i]()
            noise.append(others)
        if max(noise) > BUSY_CPU_S and redone < reps:
            redone += 1
            continue
        if r:
            out.append(got)
        r += 1
    return out, redone


def interleaved(device, product, ref_once, reps):
    """Medians over reps rounds (rounds()), each round timing one cltensor product (its
    kernels, by OpenCL profiling events, its wall time to the end of its kernels and the
    process CPU time it took) and one reference product (ref_once: its seconds; None: no
    reference; and its process CPU time), so that both see the same share of a busy machine:
    {"kernel", "wall", "cpu", "ref", "ref_cpu"} seconds (the ref ones None without one) and
    "redone" rounds. NOTE: the two go first in turn, and on CPU devices each rests SETTLE_S and
    runs untimed products for WARM_S first (steady): OpenBLAS's threads spin on for a while
    after a product and slowed whatever ran next (by up to 1.4x in CPU time on 2 cores; PoCL's
    products after numpy's ran at half their speed alone)."""
    settle = SETTLE_S if device.is_cpu else 0

    def ours():
        device.synchronize()
        # NOTE: the warm-up runs inside the same profile: its first launch moves the device to
        # a new queue with profiling, whose first product would otherwise be the timed one
        with cltensor.profile() as prof:
            others = steady(settle, lambda: (product(), device.synchronize()))
            first = len(prof.events)
            c0, t0 = time.process_time(), time.perf_counter()
            product()
            device.synchronize()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        recs = prof.records()[first:]
        k = (max(r["end_ns"] for r in recs) - min(r["start_ns"] for r in recs)) * 1e-9
        return (k, wall, cpu), others

    def theirs():
        others = steady(settle if ref_once else 0, ref_once)
        c0 = time.process_time()
        f = ref_once() if ref_once else None
        return (f, time.process_time() - c0), others

    got, redone = rounds(reps, [ours, theirs])
    runs = dict(zip(("kernel", "wall", "cpu", "ref", "ref_cpu"),
                    zip(*[mine + ref for mine, ref in got])))
    out = {key: float(np.median(v)) if ref_once or not key.startswith("ref") else None
           for key, v in runs.items()}
    return dict(out, redone=redone)


KERNEL_CALLS = 3


def kernel_split(product):
    """{kernel name: ms per call}, kernel times by OpenCL profiling events over KERNEL_CALLS
    calls of product."""
    with cltensor.profile() as prof:
        for _ in range(KERNEL_CALLS):
            product()
    return {name: ms / KERNEL_CALLS for name, _, ms, _ in prof.table()}


def kernel_names(prof):
    return {r["name"] for r in prof.records()}


def plugin_kernel(prof):
    """The name of the plug-in kernel (not one of cl_kernels/gemm_*.cl) a call ran, if any."""
    portable = ("xgemm", "gemm_", "pad_copy", "pack_panels", "pack_tf32_slices",
                "pack_half_slices")
    names = [r["name"] for r in prof.records() if not r["name"].startswith(portable)]
    return names[0] if names else None


def warm_up(device, ref, rng, seconds):
    """Keep the GPU busy for a while first: its clocks idle low and ramp up under load."""
    a, b = host_operands(rng, 4096, 4096, 4096, "nn", np.float32)
    ta, tb = cltensor.from_numpy(a, device=device), cltensor.from_numpy(b, device=device)
    tc = cltensor.empty(4096, 4096, device=device)
    ra, rb = ref.operands(a, b) if ref else (None, None)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        gm.gemm_into(ta, tb, tc)
        device.synchronize()
        if ref:
            ref.seconds(ra, rb, 1)


def mma_ceiling(device, reps):
    """GFLOP/s of mma.sync TF32 on registers alone (nvmma_peak), the median of reps launches of
    enough warps to fill every compute unit several times over."""
    from cltensor.plugins import nvidia
    from cltensor.program import get_kernel
    chains, iters, group = 8, 4096, 256
    kernel = get_kernel(device, nvidia.KERNEL_FILE, "nvmma_peak", {"NVMMA_PEAK": None,
                                                                     "CHAINS": chains})
    items = device.cl_device.max_compute_units * group * 8
    flops = items // 32 * iters * chains * 2 * 16 * 8 * 8
    return flops / _peak_seconds(device, kernel, items, group, iters, reps) / 1e9


def wgmma_ceiling(device, reps):
    """GFLOP/s of wgmma m64n256k8 TF32 with both operands in local memory (nvwg_peak: groups of
    4, one in flight while the next is issued), two warpgroups per work-group, two work-groups
    per compute unit; None where the device has no wgmma (compute capability 9.0 only)."""
    from cltensor.ops import gemm as gm
    from cltensor.plugins import nvidia
    if not nvidia.is_sm90(device):
        return None
    bn, per, iters, group = 256, 4, 2048, 256
    kernel = gm.get_kernel(device, nvidia.WGMMA_FILE, "nvwg_peak",
                           {"NVWG_PEAK": None, "BN": bn, "WGS_M": 2, "PER": per, "WG_WAIT": 1},
                           nvidia.to_sm90a)
    items = device.cl_device.max_compute_units * group * 2
    flops = items // 128 * iters * per * 2 * 64 * bn * 8
    return flops / _peak_seconds(device, kernel, items, group, iters, reps) / 1e9


def _peak_seconds(device, kernel, items, group, iters, reps):
    """The median time of reps launches of a peak kernel (iters, seed, dst), after one."""
    from cltensor.program import launch
    dst = cltensor.empty(items, device=device)
    secs = []
    for _ in range(reps + 1):
        with cltensor.profile() as prof:
            launch(device, kernel, (items,), (group,), np.int32(iters), np.float32(1e-3),
                   dst.storage.buf)
            device.synchronize()
        secs.append(prof.total_ms() * 1e-3)
    return float(np.median(secs[1:]))


def print_row(r):
    ref = (f"{r['ref_gflops']:10.1f} {r['ratio']:6.2f} {r['wall_ratio']:6.2f} "
           f"{r['cpu_ratio']:6.2f} {r['rel_diff_vs_ref']:8.1e}" if "ratio" in r
           else f"{'-':>10s} {'-':>6s} {'-':>6s} {'-':>6s}")
    fp32 = f" {r['ref_fp32_gflops']:10.1f}" if "ref_fp32_gflops" in r else ""
    print(f"{r['case']:20s} {r['dtype']:8s} {r['M']:6d} {r['N']:7d} {r['K']:6d} {r['layout']:2s} "
          f"{r['family']:7s} {r['cltensor_gflops']:10.1f} {ref}{fp32}"
          f"{' redone ' + str(r['redone']) if r.get('redone') else ''}", flush=True)


def side_by_side(devices, cases, reps):
    """CPU devices and numpy side by side in one process: per case, every device's product and
    numpy's once per round, the order rotated each round, each in its steady state (steady:
    a rest, then untimed products), after a warm-up round (rounds()); medians of the wall
    clock and of the process CPU time (all threads). Prints GFLOP/s by the wall clock, GFLOP per CPU second
    and both as ratios to numpy's; returns the rows."""
    rng, rows = np.random.default_rng(0), []
    print(f"{'case':20s} {'M':>6s} {'N':>7s} {'K':>6s} " + " ".join(
        f"{d.name[:14]:>14s} {'/cpu-s':>6s} {'x wall':>6s} {'x cpu':>6s}" for d in devices)
        + f" {'numpy':>7s} {'/cpu-s':>6s}")
    for name, m, n, k, layout, dtype in cases:
        a, b = host_operands(rng, m, n, k, layout, dtype)
        runs = []
        for d in devices:
            ta = cltensor.from_numpy(a, device=d)
            tb = (cltensor.from_numpy(np.ascontiguousarray(b.T), device=d).mT if layout == "nt"
                  else cltensor.from_numpy(b, device=d))
            tc = cltensor.empty(m, n, dtype=dtype, device=d)
            runs.append(lambda ta=ta, tb=tb, tc=tc, d=d: (gm.gemm_into(ta, tb, tc),
                                                          d.synchronize()))
        runs.append(lambda a=a, b=b: a @ b)
        def timed(run):
            others = steady(SETTLE_S, run)
            c0, t0 = time.process_time(), time.perf_counter()
            run()
            return (time.perf_counter() - t0, time.process_time() - c0), others
        got, redone = rounds(reps, [lambda run=run: timed(run) for run in runs])
        med = [np.median(np.array(t), axis=0) for t in zip(*got)]
        gf = 2e-9 * m * n * k
        (nw, nc) = med[-1]
        row = {"case": name, "M": m, "N": n, "K": k, "numpy_wall_s": nw, "numpy_cpu_s": nc,
               "redone": redone}
        cols = []
        for d, (w, c) in zip(devices, med):
            row[d.name] = {"wall_s": w, "cpu_s": c}
            cols.append(f"{gf / w:14.1f} {gf / c:6.1f} {nw / w:6.2f} {nc / c:6.2f}")
        print(f"{name:20s} {m:6d} {n:7d} {k:6d} " + " ".join(cols) +
              f" {gf / nw:7.1f} {gf / nc:6.1f}", flush=True)
        rows.append(row)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpus", nargs="+", metavar="DEVICE",
                        help="CPU devices (platform:device or name substrings) side by side "
                             "with numpy in one run, float32 (side_by_side)")
    parser.add_argument("--device", help="platform:device index or name substring")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="fewer sizes, no layers")
    parser.add_argument("--no-layers", action="store_true")
    parser.add_argument("--layers", help="comma-separated layer cases (alexnet.conv2,vgg.fc6): "
                                         "only these, and square sizes only where --sizes asks")
    parser.add_argument("--sizes", type=int, nargs="*")
    parser.add_argument("--fp64-sizes", type=int, nargs="*")
    parser.add_argument("--family", choices=gm.FAMILIES, help="force one GEMM family")
    parser.add_argument("--warmup", type=float, default=3.0,
                        help="seconds of GEMMs before timing, on GPUs (clocks ramp up)")
    parser.add_argument("--batch-scale", type=float, default=1.0,
                        help="scale the networks' batch sizes (at least 1)")
    parser.add_argument("--tf32", action="store_true",
                        help="cltensor.backends.allow_tf32 on; compare with cuBLAS TF32 (and fp32)")
    parser.add_argument("--bench-mode", action="store_true",
                        help="cltensor.backends.benchmark on: xgemm times its candidate sets "
                             "and K splits once per shape (in the warm-up call)")
    parser.add_argument("--half", choices=["bfloat16", "float16"],
                        help="A, B and C stored in this 16-bit type (float64 cases dropped)")
    parser.add_argument("--kernels", action="store_true",
                        help="print each row's kernel times per launch name (packs, product)")
    args = parser.parse_args(argv)
    gm.FORCE_FAMILY = args.family
    cltensor.backends.benchmark = args.bench_mode
    cltensor.backends.allow_tf32 = args.tf32
    if args.cpus:
        return run_side_by_side(args)
    device = cltensor.get_device(args.device)
    gpu = not device.is_cpu
    ref = ref_fp32 = None
    if gpu:
        try:
            ref = Torch(tf32=args.tf32, half=args.half)
            ref_fp32 = Torch() if args.tf32 else None
        except Exception as e:  # no torch or no CUDA: cltensor alone
            print(f"no PyTorch/CUDA reference: {e}")
    else:
        ref = Numpy()
    sizes = args.sizes or ([256, 512, 1024, 2048, 4096] if gpu else [512, 1024, 2048, 4096])
    fp64 = args.fp64_sizes if args.fp64_sizes is not None else ([1024, 4096] if gpu else [512, 1024])
    batches = ({"alexnet": 128, "overfeat": 128, "vgg": 64, "googlenet": 128} if gpu else
               {"alexnet": 8, "overfeat": 8, "vgg": 2, "googlenet": 8})
    batches = {k: max(1, int(v * args.batch_scale)) for k, v in batches.items()}
    if args.quick:
        sizes, fp64 = sizes[-2:], fp64[-1:]
    cases = [(f"square {s}", s, s, s, "nn", np.float32) for s in sizes]
    cases += [(f"square {s}", s, s, s, "nn", np.float64) for s in fp64
              if device.has_fp64 and not args.half]
    if not (args.quick or args.no_layers):
        cases += [c + (np.float32,) for c in layer_shapes(batches)]
    cases = chosen_layers(parser, args, cases, batches)
    print(f"device: {device.name} ({device.cl_device.driver_version}); reference: "
          f"{ref.name if ref else 'none'}")
    print(f"{'case':20s} {'dtype':8s} {'M':>6s} {'N':>7s} {'K':>6s} {'ly':2s} {'family':7s} "
          f"{'cl GF/s':>10s} {'ref GF/s':>10s} {'cl/ref':>6s} {'wall':>6s} {'cpu':>6s} {'rel diff':>8s}"
          f"{' fp32 GF/s' if ref_fp32 else ''}")
    rng = np.random.default_rng(0)
    if gpu:
        warm_up(device, ref, rng, args.warmup)
    ceiling = wg_ceiling = None
    if args.tf32 and any(p.name == "nvidia_tf32" for p in plugins_for(device)):
        ceiling = mma_ceiling(device, args.reps)
        print(f"mma.sync TF32 ceiling (registers only): {ceiling:.1f} GFLOP/s")
        wg_ceiling = wgmma_ceiling(device, args.reps)
        if wg_ceiling:
            print(f"wgmma TF32 ceiling (local memory operands): {wg_ceiling:.1f} GFLOP/s")
    rows = []
    for *case, dtype in cases:
        rows.append(run_case(device, ref, rng, tuple(case), dtype, args.reps, ref_fp32,
                             args.half))
        print_row(rows[-1])
        if args.kernels:
            print("    " + ", ".join(f"{n} {ms:.3f} ms" for n, ms in rows[-1]["kernels_ms"].items()))
    if ceiling:
        top = max((r for r in rows if r["case"].startswith("square") and r["dtype"] == "float32"),
                  key=lambda r: r["M"])
        print(f"{top['case']}: {top['cltensor_gflops'] / ceiling:.2f} of the mma.sync ceiling"
              + (f", {top['cltensor_gflops'] / wg_ceiling:.2f} of wgmma's" if wg_ceiling else ""))
    summary = {"device": device.name, "driver": device.cl_device.driver_version,
               "platform": device.cl_device.platform.version, "host": platform.node(),
               "reference": ref.name if ref else None, "tf32": args.tf32,
               "bench_mode": args.bench_mode, "half": args.half,
               "reference_fp32": ref_fp32.name if ref_fp32 else None, "batches": batches,
               "mma_ceiling_gflops": ceiling, "wgmma_ceiling_gflops": wg_ceiling,
               "numpy_blas": getattr(ref, "blas", None), "reps": args.reps,
               "params": {k: gm.entry_for(device, np.dtype(k))
                          for k in ("float32", "float64")}, "rows": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1, default=str))
    return 0


def chosen_layers(parser, args, cases, batches):
    """With --layers, the named layer cases (and the squares of an explicit --sizes) alone."""
    if not args.layers:
        return cases
    names = args.layers.split(",")
    layers = {c[0]: c + (np.float32,) for c in layer_shapes(batches)}
    unknown = [n for n in names if n not in layers]
    if unknown:
        message = f"unknown --layers {', '.join(unknown)}; expected some of {', '.join(layers)}"
        if parser is None:
            raise SystemExit(message)
        parser.error(message)
    squares = [c for c in cases if c[0].startswith("square")] if args.sizes else []
    return squares + [layers[n] for n in names]


def run_side_by_side(args):
    devices = [cltensor.get_device(spec) for spec in args.cpus]
    sizes = args.sizes or [512, 1024, 2048, 4096]
    cases = [(f"square {s}", s, s, s, "nn", np.float32) for s in sizes]
    batches = {"alexnet": 8, "overfeat": 8, "vgg": 2, "googlenet": 8}
    if not (args.quick or args.no_layers):
        cases += [c + (np.float32,) for c in layer_shapes(batches)]
    cases = chosen_layers(None, args, cases, batches)
    print("devices: " + ", ".join(f"{d.name} ({d.cl_device.driver_version})" for d in devices)
          + f"; reference: {Numpy().name}")
    rows = side_by_side(devices, cases, args.reps)
    if args.json:
        Path(args.json).write_text(json.dumps({"devices": [d.name for d in devices],
                                               "reps": args.reps, "rows": rows}, indent=1,
                                              default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
