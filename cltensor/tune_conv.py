"""Convolution tuning: `python -m cltensor.tune conv` (and `tune all`) times every algorithm that
may run each pass of the benchmark networks' convolutions on a device, at the networks' batch
sizes there, and records the fastest in benchmark mode's per-user file, marked as tuned
(conv/dispatch.py measure()). algo="auto" then follows those choices for exactly those problems
(shapes, batch, dtype; under conv_precision "accurate" only among the admitted algorithms) and
its rules elsewhere. A layer of another network or batch is tuned the same way by running it
once with `cltensor.backends.benchmark = True`, which auto follows only while that flag is on.
"""
import numpy as np

from .conv import dispatch
from .conv.params import make_params
from .creation import from_numpy, zeros

# the distinct convolutions of convnet_benchmarks' networks:
# (in channels, input side, out channels, kernel side, stride, padding)
LAYERS = {
    "alexnet": ((3, 224, 64, 11, 4, 2), (64, 27, 192, 5, 1, 2), (192, 13, 384, 3, 1, 1),
                (384, 13, 256, 3, 1, 1), (256, 13, 256, 3, 1, 1)),
    "overfeat": ((3, 231, 96, 11, 4, 0), (96, 28, 256, 5, 1, 0), (256, 12, 512, 3, 1, 1),
                 (512, 12, 1024, 3, 1, 1), (1024, 12, 1024, 3, 1, 1)),
    "vgg_a": ((3, 224, 64, 3, 1, 1), (64, 112, 128, 3, 1, 1), (128, 56, 256, 3, 1, 1),
              (256, 56, 256, 3, 1, 1), (256, 28, 512, 3, 1, 1), (512, 28, 512, 3, 1, 1),
              (512, 14, 512, 3, 1, 1)),
    "googlenet": tuple(
        (c, s, co, k, 1 if k < 7 else 2, k // 2) for c, s, co, k in (
            (3, 224, 64, 7), (64, 56, 64, 1), (64, 56, 192, 3), (192, 28, 64, 1),
            (192, 28, 96, 1), (96, 28, 128, 3), (192, 28, 16, 1), (16, 28, 32, 5),
            (192, 28, 32, 1), (256, 28, 128, 1), (128, 28, 192, 3), (256, 28, 32, 1),
            (32, 28, 96, 5), (256, 28, 64, 1), (480, 14, 192, 1), (480, 14, 96, 1),
            (96, 14, 208, 3), (480, 14, 16, 1), (16, 14, 48, 5), (480, 14, 64, 1),
            (512, 14, 160, 1), (512, 14, 112, 1), (112, 14, 224, 3), (512, 14, 24, 1),
            (24, 14, 64, 5), (512, 14, 64, 1), (512, 14, 128, 1), (128, 14, 256, 3),
            (512, 14, 144, 1), (144, 14, 288, 3), (512, 14, 32, 1), (32, 14, 64, 5),
            (528, 14, 256, 1), (528, 14, 160, 1), (160, 14, 320, 3), (528, 14, 32, 1),
            (32, 14, 128, 5), (528, 14, 128, 1), (832, 7, 256, 1), (832, 7, 160, 1),
            (160, 7, 320, 3), (832, 7, 32, 1), (32, 7, 128, 5), (832, 7, 128, 1),
            (832, 7, 384, 1), (832, 7, 192, 1), (192, 7, 384, 3), (832, 7, 48, 1),
            (48, 7, 128, 5))),
}
# the networks' batch sizes (convnet_benchmarks' defaults): (on CPU devices, on GPUs)
BATCHES = {"alexnet": (8, 128), "overfeat": (4, 128), "vgg_a": (2, 64), "googlenet": (4, 128)}
QUICK = ("alexnet",)  # --quick and tuning on first use: AlexNet's layers alone


def problems(device, quick=False, batch=None):
    """(network, layer, batch) of every convolution to tune on `device`."""
    nets = QUICK if quick else tuple(LAYERS)
    return [(net, layer, batch or BATCHES[net][0 if device.is_cpu else 1])
            for net in nets for layer in LAYERS[net]]


def planned_steps(device, quick=False):
    return len(problems(device, quick)) * len(dispatch.PASSES)


def _operands(device, layer, batch, dtype, rng):
    c, side, co, k, stride, pad = layer
    x = from_numpy(rng.standard_normal((batch, c, side, side), dtype=dtype), device=device)
    w = rng.standard_normal((co, c, k, k), dtype=dtype) / (c * k * k) ** 0.5
    w = from_numpy(w.astype(dtype), device=device)
    b = zeros(co, dtype=dtype, device=device)
    p = make_params(x, w, b, stride, pad, 1, 1)
    g = from_numpy(rng.standard_normal(p.out_shape, dtype=dtype), device=device)
    return p, x, w, b, g


def tune_conv(device, dtype="float32", quick=False, batch=None, record=True, log=print,
              progress=None):
    """Tune every pass of the networks' convolutions on `device`, recording each choice (unless
    not `record`); returns (a summary entry: problems tuned and how often each algorithm won,
    the per-problem measurements)."""
    rng, results, wins = np.random.default_rng(0), [], {}
    dtype = np.dtype(dtype)
    todo = problems(device, quick, batch)
    log(f"tuning conv {dtype} on {device}: {len(todo)} layers x {len(dispatch.PASSES)} passes")
    for net, layer, n in todo:
        p, x, w, b, g = _operands(device, layer, n, dtype, rng)
        for pass_ in dispatch.PASSES:
            times = dispatch.measure(p, pass_, (x, w, b) if pass_ == "forward" else (x, w, g),
                                     record)
            best = min(times, key=times.get)
            wins[best] = wins.get(best, 0) + 1
            results.append({"network": net, "layer": list(layer), "batch": n, "pass": pass_,
                            "algo": best, "times_ms": times})
            if progress is not None:
                progress.step(f"conv {net}")
    return {"problems": len(results), "wins": wins}, results
