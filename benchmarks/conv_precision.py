"""Float32 error of every convolution algorithm per layer, against a float64 reference, beside
PyTorch CPU float32's on the same data: the conv layers of AlexNet, Overfeat, VGG-A, GoogLeNet
(benchmarks/conv.py's shapes) and ResNet-18 (RESNET18 below).

Protocol: per layer, x ~ N(0, 1) of `--batch` images, w ~ N(0, 2 / (C k k)) (Kaiming's normal
init, fan in), the output gradient ~ N(0, 1), no bias. Spatially large layers are cropped so
that the output is at most CROP_OUT a side (16: 16 F(4x4) tiles or 64 F(2x2) tiles per image;
same channels, kernel, stride and padding). The reference is torch's float64 convolution and
its autograd gradients; each error is ||y - ref|| / ||ref|| over the whole tensor, for the
forward pass (the output), backward_data (the input gradient) and backward_weight (the weight
gradient). Per pass and layer the table gives PyTorch's error, each eligible algorithm's, and
the algorithm auto picks under conv_precision "accurate" and "fast" with its ratio to PyTorch.

--speed times each named convnet-benchmarks network's training step (forward and backward at
its CPU batch) under both modes, alternating --rounds times in one process: medians.

Usage:
    python benchmarks/conv_precision.py [--nets alexnet,resnet18] [--batch 1] [--crop 16]
                                        [--device SPEC] [--json out.json] [--markdown out.md]
    python benchmarks/conv_precision.py --speed alexnet,vgg_a [--rounds 3] [--iters 3]
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import torch  # noqa: E402

import cltensor  # noqa: E402
from cltensor import backends  # noqa: E402
from cltensor.conv import dispatch, function  # noqa: E402
from cltensor.conv.common import empty, layout_of  # noqa: E402
from cltensor.conv.params import make_params  # noqa: E402
from conv import NETS as CONVNETS  # noqa: E402  (benchmarks/conv.py)
from convnet_benchmarks import bench  # noqa: E402
from convnet_benchmarks.models import INPUTS  # noqa: E402

CROP_OUT = 16
MODES = ("accurate", "fast")


def resnet18():
    """ResNet-18's convolutions (torchvision's layout at 224 x 224): (name, cin, cout, k,
    stride, pad, input size); the 1x1 stride-2 projections of each stage's first block."""
    layers = [("conv1", 3, 64, 7, 2, 3, 224)]
    for stage, (cin, cout, size) in enumerate([(64, 64, 56), (64, 128, 56), (128, 256, 28),
                                              (256, 512, 14)], start=1):
        s = 1 if stage == 1 else 2
        layers.append((f"layer{stage}.0.conv1", cin, cout, 3, s, 1, size))
        out = size // s
        layers.append((f"layer{stage}.0.conv2", cout, cout, 3, 1, 1, out))
        if s == 2:
            layers.append((f"layer{stage}.0.downsample", cin, cout, 1, 2, 0, size))
        layers += [(f"layer{stage}.1.conv1", cout, cout, 3, 1, 1, out),
                   (f"layer{stage}.1.conv2", cout, cout, 3, 1, 1, out)]
    return layers


NETS = {**CONVNETS, "resnet18": resnet18}


def cropped(spec, crop_out=CROP_OUT):
    """The layer with its input cut so that the output is at most crop_out a side (0: whole)."""
    name, cin, cout, k, s, pad, size = spec
    if not crop_out:
        return spec
    return name, cin, cout, k, s, pad, min(size, (crop_out - 1) * s + k - 2 * pad)


def layer_data(spec, batch, rng):
    """float64 numpy (x, w, gout) for one (cropped) layer, Kaiming-scaled weights."""
    _, cin, cout, k, s, pad, size = spec
    out = (size + 2 * pad - k) // s + 1
    x = rng.standard_normal((batch, cin, size, size))
    w = rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))
    g = rng.standard_normal((batch, cout, out, out))
    return x, w, g


def torch_passes(x, w, g, stride, pad, dtype, device="cpu"):
    """{pass: numpy result} of torch's convolution in `dtype` on `device` ("cuda": cuDNN with
    TF32 off, its default algorithm choice)."""
    xt = torch.tensor(x, dtype=dtype, device=device, requires_grad=True)
    wt = torch.tensor(w, dtype=dtype, device=device, requires_grad=True)
    y = torch.nn.functional.conv2d(xt, wt, stride=stride, padding=pad)
    y.backward(torch.tensor(g, dtype=dtype, device=device))
    return {"forward": y.detach().cpu().numpy(), "backward_data": xt.grad.cpu().numpy(),
            "backward_weight": wt.grad.cpu().numpy()}


def rel_error(a, ref):
    a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(a - ref) / max(np.linalg.norm(ref), 1e-300))


def cl_pass(name, pass_, x, w, g, p):
    """numpy float32 result of one pass of algorithm `name`."""
    mod = dispatch.algorithm(name, x.device)
    if pass_ == "forward":
        return function.forward(mod, x, w, None, p, empty(p.out_shape, x, layout_of(x))).numpy()
    need_x = pass_ == "backward_data"
    gx, gw, _ = function.backward(x, w, g, p, name, need_x, not need_x)
    return (gx if need_x else gw).numpy()


def auto_choice(p, device, pass_, mode):
    saved = backends.conv_precision
    backends.conv_precision = mode
    try:
        return dispatch.choose(p, device, pass_)
    finally:
        backends.conv_precision = saved


def measure_layer(net, spec, batch, device, rng, crop_out=CROP_OUT, cudnn=False):
    """One row per pass: torch's error (CPU; and cuDNN's, with cudnn), each eligible
    algorithm's, auto's picks."""
    name, cin, cout, k, s, pad, size = spec = cropped(spec, crop_out)
    x, w, g = layer_data(spec, batch, rng)
    ref = torch_passes(x, w, g, s, pad, torch.float64)
    ours = torch_passes(x, w, g, s, pad, torch.float32)
    gpu = torch_passes(x, w, g, s, pad, torch.float32, "cuda") if cudnn else None
    X, W, G = (cltensor.from_numpy(a.astype(np.float32), device=device) for a in (x, w, g))
    p = make_params(X, W, None, s, pad, 1, 1)
    rows = []
    for pass_ in dispatch.PASSES:
        errs = {n: rel_error(cl_pass(n, pass_, X, W, G, p), ref[pass_])
                for n in dispatch.eligible_names(p, pass_, device)}
        row = {"net": net, "layer": name, "shape": [batch, cin, size, size, cout, k, s, pad],
               "reduction": cin * k * k, "pass": pass_,
               "torch": rel_error(ours[pass_], ref[pass_]), "algos": errs}
        if gpu is not None:
            row["cudnn"] = rel_error(gpu[pass_], ref[pass_])
        row["auto"] = {m: auto_choice(p, device, pass_, m) for m in MODES}
        rows.append(row)
    return rows


def anchor(row):
    """The error auto is judged against: cuDNN's where measured (the PyTorch a GPU user runs),
    else PyTorch CPU's."""
    return row.get("cudnn", row["torch"])


def _fmt_row(row):
    t = anchor(row)
    picks = " ".join(f"{m}={row['auto'][m]}({row['algos'][row['auto'][m]] / t:.1f}x)"
                     for m in MODES)
    algos = " ".join(f"{n}={e:.1e}" for n, e in row["algos"].items())
    gpu = f" cudnn={row['cudnn']:.1e}" if "cudnn" in row else ""
    return (f"{row['net']:<9} {row['layer']:<22} {row['pass']:<15} torch={row['torch']:.1e}{gpu} "
            f"{picks}  "
            f"{algos}")


def summary(rows):
    """Per network and mode: the worst ratio of auto's error to PyTorch's."""
    out = {}
    for row in rows:
        for m in MODES:
            ratio = row["algos"][row["auto"][m]] / anchor(row)
            key = f"{row['net']}/{m}"
            out[key] = max(out.get(key, 0.0), ratio)
    return out


def by_algorithm(rows):
    """Markdown: per network, algorithm (auto's two modes included) and pass, the median and
    the largest ratio of its error to PyTorch's over the layers it runs."""
    ratios = {}
    for row in rows:
        picks = {f"auto ({m})": row["auto"][m] for m in MODES}
        for algo, name in {**{n: n for n in row["algos"]}, **picks}.items():
            key = (row["net"], algo)
            ratios.setdefault(key, {}).setdefault(row["pass"], []).append(
                row["algos"][name] / anchor(row))
    lines = ["| network | algorithm | " + " | ".join(dispatch.PASSES) + " |",
             "| --- | --- |" + " --- |" * len(dispatch.PASSES)]
    order = [*dispatch.ALGORITHMS, *(f"auto ({m})" for m in MODES)]
    for (net, algo), per in sorted(ratios.items(), key=lambda kv: (list(NETS).index(kv[0][0]),
                                                                    order.index(kv[0][1]))):
        cells = [f"{np.median(per[ps]):.1f} / {max(per[ps]):.1f}" if ps in per else "-"
                 for ps in dispatch.PASSES]
        lines.append(f"| {net} | {algo} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def speed(nets, device, rounds, iterations, rng):
    """{net: {mode: median ms of forward, backward and total}}: each network's training step at
    its CPU batch (convnet_benchmarks' protocol), the two modes alternating `rounds` times in
    one process on the same model and data, so that both see the same machine load."""
    out = {}
    for net in nets:
        batch = INPUTS[net][3]
        model = bench.build_cltensor(net, device, cltensor.float32)
        x = cltensor.from_numpy(rng.standard_normal(bench.input_shape(net, batch)).astype(
            np.float32), device=device)
        g = cltensor.ones(batch, 1000, device=device)
        samples = {m: {"forward": [], "backward": [], "total": []} for m in MODES}

        def backward(y, model=model, g=g):
            model.zero_grad(set_to_none=True)
            y.backward(g)
        for _ in range(rounds):
            for m in MODES:
                backends.conv_precision = m
                res = bench.time_steps(lambda model=model, x=x: model(x), backward,
                                       device.synchronize, iterations, f"{net} {m}")
                for k in samples[m]:
                    samples[m][k].append(res[k]["median"])
        backends.conv_precision = "accurate"
        out[net] = {m: {k: float(np.median(v)) for k, v in per.items()}
                    for m, per in samples.items()}
        fast, acc = out[net]["fast"]["total"], out[net]["accurate"]["total"]
        print(f"speed {net} batch {batch}: fast {fast:.1f} ms, accurate {acc:.1f} ms "
              f"({acc / fast:.2f}x)", flush=True)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nets", default=",".join(NETS))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--layers", default="", help="comma-separated layer names (default: all)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--speed", default="", help="comma-separated convnet-benchmarks networks "
                    "whose training step to time in both modes (instead of the error table)")
    ap.add_argument("--rounds", type=int, default=3, help="--speed: rounds of both modes")
    ap.add_argument("--iters", type=int, default=3, help="--speed: timed steps per round")
    ap.add_argument("--crop", type=int, default=CROP_OUT,
                    help="largest output side measured (0: the whole layer)")
    ap.add_argument("--cudnn", action="store_true",
                    help="also measure torch float32 on CUDA (cuDNN, TF32 off) and judge against it")
    ap.add_argument("--json", default=None)
    ap.add_argument("--markdown", default=None,
                    help="also write the per-network table of error ratios (median / max)")
    args = ap.parse_args(argv)
    device = cltensor.get_device(args.device)
    torch.set_num_threads(1)
    if args.cudnn:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    rng = np.random.default_rng(args.seed)
    if args.speed:
        result = speed(args.speed.split(","), device, args.rounds, args.iters, rng)
        if args.json:
            Path(args.json).write_text(json.dumps({"device": device.name, "speed": result},
                                                  indent=1))
        return
    wanted = set(filter(None, args.layers.split(",")))
    rows = []
    print(f"device: {device.name}; batch {args.batch}; torch {torch.__version__}")
    for net in args.nets.split(","):
        for spec in NETS[net]():
            if wanted and spec[0] not in wanted:
                continue
            for row in measure_layer(net, spec, args.batch, device, rng, args.crop, args.cudnn):
                print(_fmt_row(row), flush=True)
                rows.append(row)
    worst = summary(rows)
    for key, ratio in worst.items():
        print(f"worst auto / torch error: {key} {ratio:.2f}x")
    if args.markdown:
        Path(args.markdown).write_text(by_algorithm(rows) + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device.name, "batch": args.batch,
                                               "crop_out": args.crop, "rows": rows,
                                               "worst_ratio": worst}, indent=1))


if __name__ == "__main__":
    main()
