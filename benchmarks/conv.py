"""Per-layer convolution times of AlexNet, Overfeat, VGG-A and GoogLeNet (convnet-benchmarks'
definitions, shared/ANCHORS.md), forward and backward, for cltensor's algorithms side by side
with PyTorch in the same run: torch on the CPU with the same number of threads when cltensor
runs on a CPU device (PoCL), cuDNN with TF32 off when a CUDA GPU is present. --tf32 sets
cltensor.backends.allow_tf32 (a plug-in's tensor-core algorithms, e.g. tf32_implicit, where auto
prefers them; or name them in --algos) and lets cuDNN use TF32 too.

Protocol (convnet-benchmarks'): one dry run and 0.5 s of untimed runs, then the median of
--iters timed runs, the device synchronised around each (with --rounds R, each layer's
algorithms and PyTorch are timed R times in turn and each time is the median over the rounds);
forward = the output with bias,
backward = the input (except for a network's first layer), weight and bias gradients. Also,
per algorithm, the time and peak device memory (cltensor.memory_stats) of the convolutions of
one training step of a network (every conv layer's forward, then every backward in reverse,
activations kept as a training step keeps them).

Usage:
    python benchmarks/conv.py [--nets alexnet,vgg_a] [--batch 8] [--algos auto,im2col,...]
                              [--iters 3] [--rounds 3] [--device SPEC] [--json out.json]
                              [--step alexnet] [--tf32]
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cltensor
from cltensor import backends
from cltensor.conv import dispatch
from cltensor.conv.common import empty, layout_of
from cltensor.conv.function import backward as conv_backward
from cltensor.conv.params import make_params

# auto_bench: algo="auto" in benchmark mode (cltensor.backends.benchmark = True)
ALGOS = ("auto", "auto_bench", "im2col", "implicit_gemm", "winograd", "gemm_1x1",
         "s2d_winograd")
CHECK_MAX_BYTES = 128 * 2**20  # --check skips layers with larger tensors (host copies)
TORCH_SPIN_PAUSE = 0.5  # seconds after PyTorch's CPU runs (see run_layers)
BATCH = {"alexnet": 128, "overfeat": 128, "vgg_a": 64, "googlenet": 128}


# ---- the networks' convolutions: (name, cin, cout, k, stride, pad, input size) ----------------

def alexnet():
    return [("conv1", 3, 64, 11, 4, 2, 224), ("conv2", 64, 192, 5, 1, 2, 27),
            ("conv3", 192, 384, 3, 1, 1, 13), ("conv4", 384, 256, 3, 1, 1, 13),
            ("conv5", 256, 256, 3, 1, 1, 13)]


def overfeat():
    return [("conv1", 3, 96, 11, 4, 0, 231), ("conv2", 96, 256, 5, 1, 0, 28),
            ("conv3", 256, 512, 3, 1, 1, 12), ("conv4", 512, 1024, 3, 1, 1, 12),
            ("conv5", 1024, 1024, 3, 1, 1, 12)]


def vgg_a():
    cfg = [(3, 64, 224), (64, 128, 112), (128, 256, 56), (256, 256, 56), (256, 512, 28),
           (512, 512, 28), (512, 512, 14), (512, 512, 14)]
    return [(f"conv{i + 1}", ci, co, 3, 1, 1, s) for i, (ci, co, s) in enumerate(cfg)]


INCEPTION = {  # name: (cin, c1, c3r, c3, c5r, c5, pool_proj, size)
    "3a": (192, 64, 96, 128, 16, 32, 32, 28), "3b": (256, 128, 128, 192, 32, 96, 64, 28),
    "4a": (480, 192, 96, 208, 16, 48, 64, 14), "4b": (512, 160, 112, 224, 24, 64, 64, 14),
    "4c": (512, 128, 128, 256, 24, 64, 64, 14), "4d": (512, 112, 144, 288, 32, 64, 64, 14),
    "4e": (528, 256, 160, 320, 32, 128, 128, 14), "5a": (832, 256, 160, 320, 32, 128, 128, 7),
    "5b": (832, 384, 192, 384, 48, 128, 128, 7)}


def googlenet():
    layers = [("conv1", 3, 64, 7, 2, 3, 224), ("conv2", 64, 64, 1, 1, 0, 56),
              ("conv3", 64, 192, 3, 1, 1, 56)]
    for name, (cin, c1, c3r, c3, c5r, c5, pp, s) in INCEPTION.items():
        layers += [(f"{name}/1x1", cin, c1, 1, 1, 0, s), (f"{name}/3x3r", cin, c3r, 1, 1, 0, s),
                   (f"{name}/3x3", c3r, c3, 3, 1, 1, s), (f"{name}/5x5r", cin, c5r, 1, 1, 0, s),
                   (f"{name}/5x5", c5r, c5, 5, 1, 2, s), (f"{name}/pool", cin, pp, 1, 1, 0, s)]
    return layers


NETS = {"alexnet": alexnet, "overfeat": overfeat, "vgg_a": vgg_a, "googlenet": googlenet}


class Layer:
    def __init__(self, net, spec, batch, first):
        self.net, (self.name, self.cin, self.cout, self.k, self.stride, self.pad, self.size) = \
            net, spec
        self.batch, self.first = batch, first

    @property
    def shapes(self):
        return ((self.batch, self.cin, self.size, self.size), (self.cout, self.cin, self.k, self.k))

    @property
    def out_size(self):
        return (self.size + 2 * self.pad - self.k) // self.stride + 1

    @property
    def flops(self):
        return 2 * self.batch * self.cout * self.cin * self.k ** 2 * self.out_size ** 2

    def key(self):
        return (self.shapes, self.stride, self.pad, self.first)


def layers_of(nets, batch):
    out = []
    for net in nets:
        for i, spec in enumerate(NETS[net]()):
            out.append(Layer(net, spec, batch or BATCH[net], i == 0))
    return out


# ---- timing -----------------------------------------------------------------------------------

WARMUP_SECONDS = 0.5  # untimed runs after the dry run (see timed)


def timed(fn, sync, iters):
    """Median milliseconds of fn over `iters` runs, synchronised around each, after one dry run
    and WARMUP_SECONDS of untimed runs (None for iters 0: the dry run alone).
    NOTE: the warm-up: a GPU left idle while the host made a layer's data ran its first calls
    at low clocks (H200: GoogLeNet's 1x1 layers timed first after the upload took 1.5-2x as
    long as the same algorithm timed next), and on PoCL a new shape's first ten or so calls
    run up to 3x slower (GoogLeNet 4a/3x3r forward at batch 8, call by call: 29, 3.3, 3.5, 2.0,
    1.5, ... then 1.2-1.3 ms), which 0.1 s did not cover: 27 of 57 layers read below half of
    PyTorch's speed with it, 15 with 0.5 s (2026-12-01, same machine, minutes apart)."""
    fn()
    sync()
    if iters == 0:
        return None
    end = time.perf_counter() + WARMUP_SECONDS
    while time.perf_counter() < end:
        fn()
        sync()
    times = []
    for _ in range(iters):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def _random(device, shape, rng):
    return cltensor.from_numpy(rng.uniform(-1, 1, shape).astype(np.float32), device=device)


def layer_data(layer, rng):
    """numpy (x, w, b, gout) for one layer."""
    xs, ws = layer.shapes
    shapes = (xs, ws, (ws[0],), (xs[0], ws[0], layer.out_size, layer.out_size))
    return [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]


def _rel(a, ref):
    a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(a - ref) / max(np.linalg.norm(ref), 1e-30))


def cl_layer(layer, device, algo, iters, data, ref=None):
    """{fwd_ms, bwd_ms} of one layer with one algorithm (and its relative errors against the
    reference's outputs `ref` when given), or None if the algorithm is not eligible."""
    backends.benchmark = algo == "auto_bench"
    algo = "auto" if algo == "auto_bench" else algo
    try:
        return _cl_layer(layer, device, algo, iters, data, ref)
    finally:
        backends.benchmark = False


def _cl_layer(layer, device, algo, iters, data, ref):
    x, w, b, g = (cltensor.from_numpy(a, device=device) for a in data)
    p = make_params(x, w, b, layer.stride, layer.pad, 1, 1)
    if algo != "auto" and not dispatch.eligible(algo, p, "forward", device)[0]:
        return None
    res = {}

    def fwd():
        res["out"] = empty(p.out_shape, x, layout_of(x))
        name = dispatch.choose(p, device, "forward", algo, (x, w, b))
        dispatch.algorithm(name, x.device).forward(x, w, b, p, res["out"])

    def bwd():
        res["gx"], res["gw"], res["gb"] = conv_backward(x, w, g, p, algo, not layer.first,
                                                        True, True)
    row = {"fwd_ms": timed(fwd, device.synchronize, iters),
           "bwd_ms": timed(bwd, device.synchronize, iters)}
    if ref is not None:
        row["rel_err"] = {k: _rel(res[k].numpy(), ref[k]) for k in ref if res.get(k) is not None}
    return row


def torch_layer(layer, torch, dev, iters, data, check):
    """{fwd_ms, bwd_ms} of PyTorch, and its outputs as numpy (for --check) or None."""
    x, w, b, g = (torch.from_numpy(a).to(dev) for a in data)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    s, p = [layer.stride] * 2, [layer.pad] * 2
    fwd = lambda: torch.nn.functional.conv2d(x, w, b, layer.stride, layer.pad)
    mask = [not layer.first, True, True]
    bwd = lambda: torch.ops.aten.convolution_backward(g, x, w, [w.shape[0]], s, p, [1, 1],
                                                      False, [0, 0], 1, mask)
    with torch.no_grad():
        row = {"fwd_ms": timed(fwd, sync, iters), "bwd_ms": timed(bwd, sync, iters)}
        if not check:
            return row, None
        gx, gw, gb = bwd()
        ref = {"out": fwd(), "gx": gx, "gw": gw, "gb": gb}
        return row, {k: v.double().cpu().numpy() for k, v in ref.items() if v is not None}


# ---- a training step's convolutions: time and peak memory -------------------------------------

def training_step(layers, device, algo, iters, rng):
    """Every conv layer's forward then every backward in reverse; (ms, peak bytes)."""
    backends.benchmark = algo == "auto_bench"
    try:
        return _training_step(layers, device, "auto" if backends.benchmark else algo, iters, rng)
    finally:
        backends.benchmark = False


def _training_step(layers, device, algo, iters, rng):
    params, tensors = [], []
    for layer in layers:
        xs, ws = layer.shapes
        x, w, b = _random(device, xs, rng), _random(device, ws, rng), _random(device, (ws[0],), rng)
        p = make_params(x, w, b, layer.stride, layer.pad, 1, 1)
        if algo != "auto" and not dispatch.eligible(algo, p, "forward", device)[0]:
            return None
        params.append(p)
        tensors.append((x, w, b, _random(device, p.out_shape, rng)))
    outs = []

    def step():
        outs.clear()
        for p, (x, w, b, _) in zip(params, tensors):
            out = empty(p.out_shape, x, layout_of(x))
            name = dispatch.choose(p, device, "forward", algo, (x, w, b))
            dispatch.algorithm(name, x.device).forward(x, w, b, p, out)
            outs.append(out)
        for layer, p, (x, w, _, g) in reversed(list(zip(layers, params, tensors))):
            conv_backward(x, w, g, p, algo, not layer.first, True, True)
            outs.pop()
    ms = timed(step, device.synchronize, iters)
    cltensor.reset_peak_memory_stats(device)
    step()
    device.synchronize()
    return ms, cltensor.memory_stats(device)["peak"]


# ---- the run ----------------------------------------------------------------------------------

def _torch(device, tf32=False):
    """(torch module, its device string, a description) or (None, None, why); on a GPU, TF32
    as asked."""
    try:
        import torch
    except ImportError:
        return None, None, "PyTorch is not installed"
    if device.is_gpu and torch.cuda.is_available():
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.benchmark = True
        return torch, "cuda", (f"torch {torch.__version__} cuDNN {torch.backends.cudnn.version()} "
                               f"(TF32 {'on' if tf32 else 'off'})")
    if device.is_cpu:
        threads = device.cl_device.max_compute_units
        torch.set_num_threads(threads)
        return torch, "cpu", f"torch {torch.__version__} CPU, {threads} threads"
    return None, None, "no matching PyTorch device"


def _fmt(v):
    return "-" if v is None else f"{v:8.2f}"


def _over_rounds(runs):
    """One result from a layer's rounds: each time the median over the rounds, with the
    rounds' own (fwd_ms, bwd_ms) kept when there were several; the first round's other
    fields (errors against the reference)."""
    out = dict(runs[0])
    if len(runs) > 1 and "fwd_ms" in out:
        for key in ("fwd_ms", "bwd_ms"):
            out[key] = statistics.median(r[key] for r in runs)
        out["rounds_ms"] = [[r["fwd_ms"], r["bwd_ms"]] for r in runs]
    return out


def run_layers(layers, device, algos, iters, torch, tdev, check, deadline, save, rounds=1):
    """Each layer timed with every algorithm, then PyTorch, `rounds` times in turn (a slow
    spell of a shared machine then falls on both sides), each time the median over rounds."""
    rng = np.random.default_rng(0)
    rows, seen = [], {}
    for layer in layers:
        if time.time() > deadline:
            print(f"# time limit reached: {layer.net} {layer.name} and later layers not run")
            break
        if layer.key() in seen:  # identical problems (GoogLeNet) are timed once
            rows.append(dict(seen[layer.key()], net=layer.net, layer=layer.name))
            continue
        row = {"net": layer.net, "layer": layer.name, "batch": layer.batch,
               "input": layer.shapes[0], "weight": layer.shapes[1], "stride": layer.stride,
               "pad": layer.pad, "gflop": layer.flops / 1e9, "first": layer.first, "algos": {}}
        data, ref = layer_data(layer, rng), None
        small = max(a.nbytes for a in data) <= CHECK_MAX_BYTES
        if torch is not None and check and small:
            ref = torch_layer(layer, torch, tdev, 0, data, True)[1]
            time.sleep(TORCH_SPIN_PAUSE if tdev == "cpu" else 0)
        runs, torch_runs, failed = {}, [], set()
        for r in range(rounds):
            for algo in algos:
                if algo in failed:
                    continue
                try:
                    res = cl_layer(layer, device, algo, iters, data, ref if r == 0 else None)
                except Exception as e:  # noqa: BLE001 - one failing algorithm must not end the run
                    res = {"error": f"{type(e).__name__}: {e}"[:2000]}
                    print(f"# {layer.net} {layer.name} {algo} failed: {res['error'][:300]}")
                    failed.add(algo)
                    runs[algo] = []  # its error alone is reported, not earlier rounds' times
                if res is not None:
                    runs.setdefault(algo, []).append(res)
            if torch is not None:
                # NOTE: PyTorch last, then a pause: its OpenMP threads spin for a while after
                # each call and would slow whatever runs next on the same cores
                torch_runs.append(torch_layer(layer, torch, tdev, iters, data, False)[0])
                time.sleep(TORCH_SPIN_PAUSE if tdev == "cpu" else 0)
        row["algos"] = {algo: _over_rounds(rs) for algo, rs in runs.items()}
        if torch_runs:
            row["torch"] = _over_rounds(torch_runs)
            for res in row["algos"].values():
                if "fwd_ms" in res:
                    res["vs_torch_fwd"] = row["torch"]["fwd_ms"] / res["fwd_ms"]
                    res["vs_torch_bwd"] = row["torch"]["bwd_ms"] / res["bwd_ms"]
        x = cltensor.empty(*layer.shapes[0], device=device)
        w = cltensor.empty(*layer.shapes[1], device=device)
        p = make_params(x, w, None, layer.stride, layer.pad, 1, 1)
        row["auto_choice"] = {ps: dispatch.choose(p, device, ps) for ps in dispatch.PASSES}
        backends.benchmark = True
        row["auto_bench_choice"] = {ps: dispatch.choose(p, device, ps) for ps in dispatch.PASSES}
        backends.benchmark = False
        seen[layer.key()] = row
        rows.append(row)
        _print_row(row, algos)
        save(rows)
    return rows


def _print_row(row, algos):
    t = row.get("torch", {})
    cells = [_fmt(t.get("fwd_ms")), _fmt(t.get("bwd_ms"))]
    errs = []
    for a in algos:
        r = row["algos"].get(a) or {}
        cells += [_fmt(r.get("fwd_ms")), _fmt(r.get("bwd_ms"))]
        if r and "rel_err" in r:
            errs.append(max(r["rel_err"].values()))
    err = f"  max rel err {max(errs):.1e}" if errs else ""
    print(f"{row['net'][:9]:9} {row['layer'][:9]:9} {row['gflop']:7.2f} " + " ".join(cells) + err,
          flush=True)


def summary(rows, algos):
    """Totals per network: ms and the torch / cltensor throughput ratio, per algorithm."""
    out = {}
    for net in dict.fromkeys(r["net"] for r in rows):
        nr = [r for r in rows if r["net"] == net]
        s = {"torch_fwd_ms": sum(r.get("torch", {}).get("fwd_ms", 0) for r in nr),
             "torch_bwd_ms": sum(r.get("torch", {}).get("bwd_ms", 0) for r in nr)}
        for a in algos:
            if all("fwd_ms" in r["algos"].get(a, {}) for r in nr):
                f = sum(r["algos"][a]["fwd_ms"] for r in nr)
                b = sum(r["algos"][a]["bwd_ms"] for r in nr)
                s[a] = {"fwd_ms": f, "bwd_ms": b}
                if s["torch_fwd_ms"]:
                    s[a]["speed_vs_torch_fwd"] = s["torch_fwd_ms"] / f
                    s[a]["speed_vs_torch_bwd"] = s["torch_bwd_ms"] / b
        out[net] = s
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="alexnet,overfeat,vgg_a,googlenet")
    ap.add_argument("--layers", default="",
                    help="comma-separated layer names (e.g. 3a/5x5,conv2) to run alone")
    ap.add_argument("--batch", type=int, default=0, help="0: the networks' own batch sizes")
    ap.add_argument("--algos", default=",".join(ALGOS))
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=1,
                    help="time each layer's algorithms and PyTorch this many times in turn, "
                         "reporting medians over the rounds")
    ap.add_argument("--device", default=None)
    ap.add_argument("--step", default="alexnet", help="network of the training-step run ('' for none)")
    ap.add_argument("--step-algos", default="auto,auto_bench,im2col,implicit_gemm")
    ap.add_argument("--json", default="conv_benchmark.json")
    ap.add_argument("--check", action="store_true",
                    help="also compare every output and gradient with PyTorch's")
    ap.add_argument("--time-limit", type=float, default=1e9,
                    help="seconds after which no new layer starts (the JSON keeps what ran)")
    ap.add_argument("--tf32", action="store_true",
                    help="cltensor.backends.allow_tf32 on, and cuDNN with TF32 on")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error(f"--rounds must be at least 1, got {args.rounds}")
    device = cltensor.get_device(args.device)
    algos = args.algos.split(",")
    for algo in algos:
        if algo != "auto_bench":
            dispatch.check_algo(algo, device)  # NOTE: a misspelt name fails before any timing
    backends.allow_tf32 = args.tf32
    torch, tdev, tdesc = _torch(device, args.tf32)
    print(f"# cltensor on {device}; reference: {tdesc}; batch {args.batch or 'per network'}")
    print("# ms per batch: torch fwd bwd, then fwd bwd per algorithm: " + " ".join(algos))
    result = {"device": str(device), "reference": tdesc, "iters": args.iters,
              "rounds": args.rounds, "allow_tf32": args.tf32}
    save = lambda rows: Path(args.json).write_text(json.dumps(dict(result, layers=rows), indent=1))
    deadline = time.time() + args.time_limit
    layers = layers_of(args.nets.split(","), args.batch)
    if args.layers:
        names = args.layers.split(",")
        unknown = set(names) - {layer.name for layer in layers}
        if unknown:
            ap.error(f"--layers: no layer {', '.join(sorted(unknown))} in {args.nets}")
        layers = [layer for layer in layers if layer.name in names]
    rows = run_layers(layers, device, algos, args.iters, torch, tdev, args.check, deadline,
                      save, args.rounds)
    result.update(layers=rows, summary=summary(rows, algos))
    for net, s in result["summary"].items():
        print(f"# {net}: " + json.dumps(s, default=lambda v: round(v, 3)))
    if args.step and time.time() < deadline:
        rng = np.random.default_rng(1)
        step_layers = layers_of([args.step], args.batch)
        result["training_step"] = {"net": args.step}
        for algo in args.step_algos.split(","):
            try:
                res = training_step(step_layers, device, algo, max(1, args.iters // 2), rng)
            except Exception as e:  # noqa: BLE001
                print(f"# training step with {algo} failed: {type(e).__name__}: {e}"[:500])
                continue
            if res is not None:
                result["training_step"][algo] = {"ms": res[0], "peak_bytes": res[1]}
                print(f"# {args.step} conv training step, {algo}: {res[0]:.1f} ms, "
                      f"peak {res[1] / 2**20:.0f} MiB", flush=True)
    Path(args.json).write_text(json.dumps(result, indent=1))
    print(f"# wrote {os.path.abspath(args.json)}")


if __name__ == "__main__":
    main()
