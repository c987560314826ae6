"""python -m convnet_benchmarks: AlexNet, Overfeat, VGG-A and GoogLeNet, forward and backward,
timed with cltensor and side by side with PyTorch (and tinygrad) on the same machine.

Example:
    python -m convnet_benchmarks --model alexnet --batch-size 8 --compare torch,tinygrad
"""
import argparse
import datetime
import importlib
import importlib.metadata
import json
import os
import sys

import numpy as np

from . import bench, distributed, torch_opencl
from .models import INPUTS, MODELS

# framework beside cltensor -> the pip requirement that installs the version we measure with
COMPARE = {"torch": "torch", "tinygrad": "tinygrad==0.14.0"}
# result columns, in table and plot order
FRAMEWORKS = ("cltensor", "cltensor_graphs", "cltensor_fast", "cltensor_bench", "cltensor_tf32",
              "cltensor_tf32_fast", "torch_opencl", "torch", "torch_tf32", "tinygrad")


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m convnet_benchmarks", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="alexnet", choices=sorted(MODELS) + ["all"])
    p.add_argument("--batch-size", type=int, default=None,
                   help="default: 128/128/64/128 on GPUs, 8/4/2/4 on CPU devices")
    p.add_argument("--device", default=None, help="cltensor device (index or name); default device if unset")
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--precision", default="fp32", choices=sorted(bench.PRECISIONS),
                   help="bf16/fp16: the forward pass under autocast in that dtype (parameters "
                   "stay --dtype), for cltensor and the --compare torch rows alike")
    p.add_argument("--compare", default="", help="comma-separated frameworks to run beside "
                   "cltensor: torch, tinygrad (tinygrad on OpenCL, the first platform only)")
    p.add_argument("--framework", default="", choices=["", "torch-opencl"],
                   help="torch-opencl: also run the networks written in torch.nn on cltensor's "
                   "PyTorch device (cltensor.torch), row torch_opencl; implies --compare torch")
    p.add_argument("--json", default="convnet_results.json", help="results file (JSON)")
    p.add_argument("--markdown", default=None, help="also write a markdown table here")
    p.add_argument("--plot", default=None, help="also write a bar plot (PNG, needs matplotlib)")
    p.add_argument("--no-layers", action="store_true",
                   help="skip the per-layer convolution report (algorithms and times)")
    p.add_argument("--allow-tf32", action="store_true",
                   help="also run cltensor with cltensor.backends.allow_tf32 = True (tensor "
                   "cores through a plug-in where one serves the device), row cltensor_tf32")
    p.add_argument("--bench-mode", action="store_true",
                   help="also run cltensor with cltensor.backends.benchmark = True (each conv "
                   "pass and GEMM shape timed once, the fastest kept; torch runs with "
                   "cudnn.benchmark), row cltensor_bench")
    p.add_argument("--fast-conv", action="store_true",
                   help="also run cltensor with cltensor.backends.conv_precision = 'fast' (auto "
                   "may pick algorithms above twice PyTorch's float32 error), row cltensor_fast")
    p.add_argument("--tf32-fast", action="store_true",
                   help="also run cltensor in float32 whatever --precision says, with "
                   "allow_tf32 and conv_precision = 'fast' (its fastest float32 path, which a "
                   "16-bit run is held against), row cltensor_tf32_fast")
    p.add_argument("--graphs", action="store_true",
                   help="also run cltensor with the forward and the backward each captured "
                   "once in a graph and replayed (cltensor.graphs), row cltensor_graphs")
    p.add_argument("--tolerance", type=float, default=1e-3,
                   help="largest norm-relative output difference accepted against torch "
                   "and tinygrad")
    p.add_argument("--distributed", action="store_true",
                   help="under mpirun: data-parallel training (DistributedDataParallel), "
                   "per-rank and aggregate images/s and the scaling efficiency")
    return p.parse_args(argv)


def check_compare(compare, device):
    """Refuse unknown or missing frameworks before anything runs; tinygrad's device name."""
    unknown = sorted(set(compare) - set(COMPARE))
    if unknown:
        raise SystemExit(f"--compare: {', '.join(unknown)} not supported "
                         f"(choose from {', '.join(COMPARE)})")
    for fw in compare:
        try:
            importlib.import_module(fw)
        except ImportError as e:
            raise SystemExit(f"--compare {fw}: the {fw} package is not installed ({e}); "
                             f"install it with `pip install {COMPARE[fw]}`") from None
    if "tinygrad" not in compare:
        return None
    _check_tinygrad_version()
    try:
        return bench.tinygrad_device(device)
    except LookupError as e:
        raise SystemExit(f"--compare tinygrad: {e}") from None


def _check_tinygrad_version():
    wanted = COMPARE["tinygrad"].split("==")[1]
    found = importlib.metadata.version("tinygrad")
    if found != wanted:
        print(f"note: measured with tinygrad {wanted}; tinygrad {found} is installed and its API "
              f"may differ (pip install {COMPARE['tinygrad']})", file=sys.stderr)


def run_model(name, args, device, compare, tiny_device=None, later=None):
    """One network's row; with --framework torch-opencl its torch_opencl run is appended to
    `later` (main runs them once every network's torch rows are done)."""
    import cltensor as ct
    c, hw, gpu_batch, cpu_batch = INPUTS[name]
    batch = args.batch_size or (gpu_batch if device.is_gpu else cpu_batch)
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((batch, c, hw, hw)).astype(args.dtype)
    model = bench.build_cltensor(name, device, args.dtype)
    out_shape = model(ct.from_numpy(x_np[:1], device=device, dtype=args.dtype)).shape
    g_np = rng.standard_normal((batch,) + tuple(out_shape[1:])).astype(args.dtype)
    row = {"model": name, "batch": batch, "device": device.name, "dtype": args.dtype,
           "precision": args.precision}
    row["cltensor"] = bench.run_cltensor(name, device, args.dtype, args.iterations, x_np, g_np,
                                         model, precision=args.precision)
    if args.graphs:
        row["cltensor_graphs"] = _graphs_row(name, model, device, args, x_np, g_np)
    flag_rows = (("cltensor_fast", args.fast_conv, {"conv_precision": "fast"}, None),
                 ("cltensor_bench", args.bench_mode, {"benchmark": True}, None),
                 ("cltensor_tf32", args.allow_tf32, {"allow_tf32": True}, None),
                 ("cltensor_tf32_fast", args.tf32_fast,
                  {"allow_tf32": True, "conv_precision": "fast"}, "fp32"))
    for label, asked, flags, precision in flag_rows:
        if asked:
            row[label] = _flag_row(flags, name, model, device, args, x_np, g_np, precision)
    if compare:
        ours = model(ct.from_numpy(x_np, device=device, dtype=args.dtype)).numpy()
        state = {k: v.numpy() for k, v in model.state_dict().items()}
    if "torch" in compare:
        ct.empty_cache(device)  # cltensor's pool keeps freed buffers: give them to torch
        row.update(_torch_rows(name, state, ours, x_np, g_np, device, args))
    if args.framework == "torch-opencl":
        later.append(lambda: _torch_opencl_row(row, name, state, ours, x_np, g_np, device,
                                               args))
    if "tinygrad" in compare:
        res = bench.run_tinygrad(name, state, x_np, g_np, tiny_device, args.iterations)
        res["output_rel_error"] = _agreement(name, "tinygrad", ours, res.pop("output"),
                                             args.tolerance)
        print(f"{name}: tinygrad realizes output and gradients together in "
              f"{res['step']['median']:.2f} ms (its backward alone recomputes activations)")
        row["tinygrad"] = res
    if not args.no_layers:
        row["conv_layers"] = bench.conv_layer_report(
            model, ct.from_numpy(x_np, device=device, dtype=args.dtype), device)
        print(f"{name} (batch {batch}), convolutions alone:")
        bench.print_layers(row["conv_layers"])
    return row


def _flag_row(flags, name, model, device, args, x_np, g_np, precision=None):
    """cltensor with cltensor.backends' flags set ({name: value}: allow_tf32, benchmark,
    conv_precision) and its forward in `precision` (default --precision): its times, and how
    far its output is from the default run's."""
    import cltensor as ct
    x = ct.from_numpy(x_np, device=device, dtype=args.dtype)
    exact = model(x).numpy()
    before = {flag: getattr(ct.backends, flag) for flag in flags}
    try:
        for flag, value in flags.items():
            setattr(ct.backends, flag, value)
        res = bench.run_cltensor(name, device, args.dtype, args.iterations, x_np, g_np, model,
                                 precision=precision or args.precision)
        # TF32 changes the arithmetic, other algorithms the rounding: reported, not checked
        res["output_rel_error"] = _agreement(name, "cltensor (default)", model(x).numpy(),
                                             exact, float("inf"))
    finally:
        for flag, value in before.items():
            setattr(ct.backends, flag, value)
    return res


def _graphs_row(name, model, device, args, x_np, g_np):
    """cltensor's step replayed from captured graphs; its output must be the eager one's."""
    import cltensor as ct
    x = ct.from_numpy(x_np, device=device, dtype=args.dtype)
    exact = bench.forward_at(model, x, args.precision).float().numpy()
    res = bench.run_cltensor_graphs(name, device, args.dtype, args.iterations, x_np, g_np, model,
                                    precision=args.precision)
    res["output_rel_error"] = _agreement(name, "cltensor (eager)", res.pop("output"), exact, 0.0)
    return res


def _torch_rows(name, state, ours, x_np, g_np, device, args):
    tdev = bench.torch_device(device)
    threads = os.cpu_count() if tdev.type == "cpu" else None
    rows = {}
    variants = [("torch", False)] + ([("torch_tf32", True)] if tdev.type == "cuda" else [])
    for label, tf32 in variants:
        res = bench.run_torch(name, state, x_np, g_np, tdev, args.dtype, args.iterations,
                              tf32=tf32, threads=threads, precision=args.precision)
        # TF32 and autocast change the arithmetic, so only IEEE fp32 has to agree
        tolerance = float("inf") if tf32 or args.precision != "fp32" else args.tolerance
        res["output_rel_error"] = _agreement(name, "torch", ours, res.pop("output"), tolerance)
        res["device"] = str(tdev)
        rows[label] = res
    return rows


def _agreement(name, framework, ours, ref, tolerance):
    """Norm-relative difference of the two outputs; SystemExit when above tolerance."""
    err = float(np.linalg.norm(ours - ref) / max(np.linalg.norm(ref), 1e-30))
    if err > tolerance:
        raise SystemExit(f"{name}: cltensor and {framework} disagree (relative error {err:.2e} > "
                         f"{tolerance}): they are not measuring the same work")
    return err


def table(rows):
    lines = ["| model | batch | framework | forward ms | backward ms | total ms | img/s | peak MB |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        for fw in FRAMEWORKS:
            if fw not in r:
                continue
            res = r[fw]
            tot = res["total"]["median"]
            lines.append(f"| {r['model']} | {r['batch']} | {fw} | {res['forward']['median']:.2f} | "
                         f"{res['backward']['median']:.2f} | {tot:.2f} | "
                         f"{r['batch'] / tot * 1e3:.1f} | {res.get('peak_memory_mb', float('nan')):.0f} |")
    return "\n".join(lines)


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot: matplotlib is not installed; skipping", file=sys.stderr)
        return
    fws = [fw for fw in FRAMEWORKS if any(fw in r for r in rows)]
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(fws)
    for i, fw in enumerate(fws):
        vals = [r[fw]["total"]["median"] if fw in r else 0 for r in rows]
        ax.bar(np.arange(len(rows)) + i * width, vals, width, label=fw)
    ax.set_xticks(np.arange(len(rows)) + width * (len(fws) - 1) / 2)
    ax.set_xticklabels([f"{r['model']} (b{r['batch']})" for r in rows])
    ax.set_ylabel("ms per batch (forward + backward)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def _torch_opencl_row(row, name, state, ours, x_np, g_np, device, args):
    """The torch_opencl row of a network (run_model leaves it for after every network's torch
    rows: see main)."""
    res = torch_opencl.run(name, state, x_np, g_np, device, args.dtype, args.iterations)
    res["output_rel_error"] = _agreement(name, "torch-opencl", ours, res.pop("output"),
                                         args.tolerance)
    row["torch_opencl"] = res
    print(f"{name}: torch-opencl / cltensor native, step time "
          f"{res['total']['median'] / row['cltensor']['total']['median']:.3f}x")


def main(argv=None):
    import cltensor as ct
    args = parse_args(argv)
    if args.distributed:
        return distributed.main(args)
    device = ct.get_device(args.device)
    compare = [c.strip() for c in args.compare.split(",") if c.strip()]
    if args.framework == "torch-opencl":
        compare += [] if "torch" in compare else ["torch"]
    tiny_device = check_compare(compare, device)
    names = sorted(MODELS) if args.model == "all" else [args.model]
    print(f"convnet benchmarks on {device} ({device.platform_name}), {args.dtype}, "
          f"{args.iterations} iterations")
    later = []
    rows = [run_model(n, args, device, compare, tiny_device, later) for n in names]
    if later:
        # NOTE: after the device is registered torch's autograd engine takes it for the
        # process's accelerator and CUDA backwards trip an internal assertion (torch 2.11,
        # docs/torch_device.md): every network's torch rows run first
        torch_opencl.register()
        for run in later:
            run()
    text = table(rows)
    print(text)
    meta = {"date": datetime.date.today().isoformat(), "device": device.name,
            "platform": device.platform_name, "rows": rows}
    with open(args.json, "w") as f:
        json.dump(meta, f, indent=1, default=float)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(f"{meta['date']}, {device.name}\n\n{text}\n")
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
