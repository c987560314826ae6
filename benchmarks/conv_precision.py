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

Usage:
    python benchmarks/conv_precision.py [--nets alexnet,resnet18] [--batch 1] [--device SPEC]
                                        [--json out.json]
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


def cropped(spec):
    """The layer with its input cut so that the output is at most CROP_OUT a side."""
    name, cin, cout, k, s, pad, size = spec
    return name, cin, cout, k, s, pad, min(size, (CROP_OUT - 1) * s + k - 2 * pad)


def layer_data(spec, batch, rng):
    """float64 numpy (x, w, gout) for one (cropped) layer, Kaiming-scaled weights."""
    _, cin, cout, k, s, pad, size = spec
    out = (size + 2 * pad - k) // s + 1
    x = rng.standard_normal((batch, cin, size, size))
    w = rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))
    g = rng.standard_normal((batch, cout, out, out))
    return x, w, g


def torch_passes(x, w, g, stride, pad, dtype):
    """{pass: numpy result} of torch's convolution in `dtype` on the CPU."""
    xt = torch.tensor(x, dtype=dtype, requires_grad=True)
    wt = torch.tensor(w, dtype=dtype, requires_grad=True)
    y = torch.nn.functional.conv2d(xt, wt, stride=stride, padding=pad)
    y.backward(torch.tensor(g, dtype=dtype))
    return {"forward": y.detach().numpy(), "backward_data": xt.grad.numpy(),
            "backward_weight": wt.grad.numpy()}


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


def measure_layer(net, spec, batch, device, rng):
    """One row per pass: torch's error, each eligible algorithm's, auto's picks."""
    name, cin, cout, k, s, pad, size = spec = cropped(spec)
    x, w, g = layer_data(spec, batch, rng)
    ref = torch_passes(x, w, g, s, pad, torch.float64)
    ours = torch_passes(x, w, g, s, pad, torch.float32)
    X, W, G = (cltensor.from_numpy(a.astype(np.float32), device=device) for a in (x, w, g))
    p = make_params(X, W, None, s, pad, 1, 1)
    rows = []
    for pass_ in dispatch.PASSES:
        errs = {n: rel_error(cl_pass(n, pass_, X, W, G, p), ref[pass_])
                for n in dispatch.eligible_names(p, pass_, device)}
        row = {"net": net, "layer": name, "shape": [batch, cin, size, size, cout, k, s, pad],
               "reduction": cin * k * k, "pass": pass_,
               "torch": rel_error(ours[pass_], ref[pass_]), "algos": errs}
        row["auto"] = {m: auto_choice(p, device, pass_, m) for m in MODES}
        rows.append(row)
    return rows


def _fmt_row(row):
    t = row["torch"]
    picks = " ".join(f"{m}={row['auto'][m]}({row['algos'][row['auto'][m]] / t:.1f}x)"
                     for m in MODES)
    algos = " ".join(f"{n}={e:.1e}" for n, e in row["algos"].items())
    return (f"{row['net']:<9} {row['layer']:<22} {row['pass']:<15} torch={t:.1e} {picks}  "
            f"{algos}")


def summary(rows):
    """Per network and mode: the worst ratio of auto's error to PyTorch's."""
    out = {}
    for row in rows:
        for m in MODES:
            ratio = row["algos"][row["auto"][m]] / row["torch"]
            key = f"{row['net']}/{m}"
            out[key] = max(out.get(key, 0.0), ratio)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nets", default=",".join(NETS))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--layers", default="", help="comma-separated layer names (default: all)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    device = cltensor.get_device(args.device)
    torch.set_num_threads(1)
    rng = np.random.default_rng(args.seed)
    wanted = set(filter(None, args.layers.split(",")))
    rows = []
    print(f"device: {device.name}; batch {args.batch}; torch {torch.__version__}")
    for net in args.nets.split(","):
        for spec in NETS[net]():
            if wanted and spec[0] not in wanted:
                continue
            for row in measure_layer(net, spec, args.batch, device, rng):
                print(_fmt_row(row), flush=True)
                rows.append(row)
    worst = summary(rows)
    for key, ratio in worst.items():
        print(f"worst auto / torch error: {key} {ratio:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device.name, "batch": args.batch,
                                               "crop_out": CROP_OUT, "rows": rows,
                                               "worst_ratio": worst}, indent=1))


if __name__ == "__main__":
    main()
