"""The convnet-benchmarks protocol for cltensor and, side by side, PyTorch and tinygrad.

One dry run, then timed iterations; the device is synchronised around the forward pass and the
backward pass (gradients w.r.t. the input of every layer but the first, and the parameters).
Times are wall-clock milliseconds per batch with a finished queue at both ends.
"""
import statistics
import sys
import time

import numpy as np

from .models import INPUTS, MODELS


def summarize(samples):
    """Median and spread (min, max) of a list of ms."""
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def progress(msg):
    """An overwritten status line on a terminal; nothing when stderr is a file or a pipe."""
    if sys.stderr.isatty():
        print(f"\r  {msg:70s}", end="", file=sys.stderr, flush=True)


class Result(dict):
    """One framework's figures for one model: forward/backward/total summaries and extras."""


def time_steps(forward, backward, sync, iterations, label):
    """The protocol: a dry run, then `iterations` of a synchronised forward and backward."""
    if not sys.stderr.isatty():
        print(f"  {label}: dry run, then {iterations} timed iterations", file=sys.stderr, flush=True)
    progress(f"{label}: dry run")
    out = forward()
    backward(out)
    sync()
    fwd, bwd = [], []
    for i in range(iterations):
        progress(f"{label}: iteration {i + 1}/{iterations}")
        sync()
        t0 = time.perf_counter()
        out = forward()
        sync()
        t1 = time.perf_counter()
        backward(out)
        sync()
        t2 = time.perf_counter()
        fwd.append((t1 - t0) * 1e3)
        bwd.append((t2 - t1) * 1e3)
    progress("")
    total = [f + b for f, b in zip(fwd, bwd)]
    return Result(forward=summarize(fwd), backward=summarize(bwd), total=summarize(total))


# ---- cltensor -----------------------------------------------------------------------------------

def build_cltensor(name, device, dtype, seed=0):
    import cltensor as ct
    ct.manual_seed(seed)
    model = MODELS[name](ct)
    return model.to(device=device, dtype=dtype) if hasattr(model, "to") else model


# --precision: the autocast dtype of the forward pass (fp32: none)
PRECISIONS = {"fp32": None, "bf16": "bfloat16", "fp16": "float16"}


def forward_at(model, x, precision):
    """model(x), under cltensor's autocast in the precision's 16-bit type (bf16, fp16)."""
    import cltensor as ct
    low = PRECISIONS[precision]
    with ct.autocast("opencl", dtype=getattr(ct, low or "float16"), enabled=low is not None):
        return model(x)


def run_cltensor(name, device, dtype, iterations, x_np, g_np, model=None, precision="fp32"):
    import cltensor as ct
    model = model or build_cltensor(name, device, dtype)
    x = ct.from_numpy(x_np, device=device, dtype=dtype)
    g = ct.from_numpy(g_np, device=device, dtype=dtype)
    low = PRECISIONS[precision]

    def forward():
        return forward_at(model, x, precision)

    def backward(out):
        model.zero_grad(set_to_none=True)
        out.backward(g if out.dtype == g.dtype else g.to(out.dtype))

    ct.reset_peak_memory_stats(device)
    res = time_steps(forward, backward, device.synchronize, iterations,
                     f"cltensor {name}{'' if low is None else ' ' + precision}")
    res["peak_memory_mb"] = ct.memory_stats(device)["peak"] / 2**20
    with ct.profile() as prof:
        backward(forward())
    res["kernels"] = [{"name": n, "calls": c, "ms": round(t, 3)} for n, c, t, _ in prof.table()[:12]]
    return res


def run_cltensor_graphs(name, device, dtype, iterations, x_np, g_np, model, precision="fp32"):
    """The protocol with the forward and the backward each captured once in a graph
    (cltensor.graphs, after an eager warm-up step) and replayed; `output` is the replayed
    forward's, `launches` the kernels one step enqueues, `peak_memory_mb` the peak from the
    capture on."""
    import cltensor as ct
    x = ct.from_numpy(x_np, device=device, dtype=dtype)
    g = ct.from_numpy(g_np, device=device, dtype=dtype)
    def forward_pass():
        return forward_at(model, x, precision)

    out = forward_pass()
    out.backward(g.to(out.dtype))  # warm-up: kernels built, auto choices made
    model.zero_grad(set_to_none=True)
    ct.reset_peak_memory_stats(device)
    forward, backward = ct.Graph(), ct.Graph()
    with ct.graph(forward):
        out = forward_pass()
    g = g.to(out.dtype)
    with ct.graph(backward, pool=forward.pool()):  # reuses the activations it frees
        out.backward(g)
    res = time_steps(forward.replay, lambda _: backward.replay(), device.synchronize,
                     iterations, f"cltensor {name} graphs")
    forward.replay()
    res["output"] = out.float().numpy()
    res["launches"] = forward.launches() + backward.launches()
    # NOTE: the graphs keep every buffer of their captures: no reuse within a step
    res["peak_memory_mb"] = ct.memory_stats(device)["peak"] / 2**20
    return res


# ---- PyTorch ------------------------------------------------------------------------------------

def torch_device(ct_device):
    """The torch device matching a cltensor device: CUDA for an NVIDIA GPU, else the CPU."""
    import torch
    if ct_device.is_gpu and "nvidia" in ct_device.platform_name.lower() and torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


def build_torch(name, state_dict, tdev, dtype):
    import torch
    model = MODELS[name](torch)
    model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state_dict.items()})
    return model.to(device=tdev, dtype=getattr(torch, str(np.dtype(dtype))))


def run_torch(name, state_dict, x_np, g_np, tdev, dtype, iterations, tf32=False, threads=None,
              precision="fp32"):
    import torch
    if threads:
        torch.set_num_threads(threads)
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    model = build_torch(name, state_dict, tdev, dtype)
    x = torch.from_numpy(x_np).to(tdev)
    g = torch.from_numpy(g_np).to(tdev)

    low = PRECISIONS[precision]

    def forward():
        with torch.autocast(tdev.type, dtype=getattr(torch, low or "bfloat16"),
                            enabled=low is not None):
            return model(x)

    def backward(out):
        model.zero_grad(set_to_none=True)
        out.backward(g.to(out.dtype))

    def sync():
        if tdev.type == "cuda":
            torch.cuda.synchronize()

    if tdev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    label = f"torch {name}{' tf32' if tf32 else ''}{'' if low is None else ' ' + precision}"
    res = time_steps(forward, backward, sync, iterations, label)
    if tdev.type == "cuda":
        res["peak_memory_mb"] = torch.cuda.max_memory_allocated() / 2**20
    with torch.no_grad():
        res["output"] = forward().float().cpu().numpy()
    return res


# ---- tinygrad -----------------------------------------------------------------------------------

def tinygrad_device(ct_device):
    """tinygrad's name ("CL:n") for a cltensor device.

    tinygrad's OpenCL backend sees only the first OpenCL platform, and on it the GPUs (or the
    default devices when there is no GPU), in OpenCL's order; LookupError for any other device.
    """
    import pyopencl as cl
    platform = cl.get_platforms()[0]
    try:
        devs = platform.get_devices(cl.device_type.GPU)
    except cl.Error:
        devs = []
    devs = devs or platform.get_devices(cl.device_type.DEFAULT)
    for i, d in enumerate(devs):
        if d == ct_device.cl_device:
            return f"CL:{i}"
    seen = ", ".join(d.name.strip() for d in devs)
    raise LookupError(f"tinygrad's OpenCL backend only sees the first platform's devices "
                      f"({platform.name.strip()}: {seen}), not {ct_device.name} "
                      f"({ct_device.platform_name}); point OCL_ICD_VENDORS at the ICD of "
                      f"{ct_device.platform_name} alone to compare there")


def run_tinygrad(name, state_dict, x_np, g_np, tdev, iterations):
    """The protocol in tinygrad on OpenCL device `tdev`, the network from models.py (via the
    tiny adapter) with cltensor's weights.

    tinygrad is lazy and a realized tensor keeps no graph, so the forward realizes a copy of the
    output and the backward realizes the parameter gradients, recomputing the activations it
    needs; `step` also times tinygrad's own way, output and gradients realized together.
    """
    from tinygrad import Device, Tensor

    from . import tiny
    model = MODELS[name](tiny.library(tdev))
    model.load_state_dict(state_dict)
    params = model.parameters()
    x = Tensor(x_np, device=tdev).realize()
    g = Tensor(g_np, device=tdev).realize()

    def forward():
        out = model(x)
        out.contiguous().realize()
        return out

    def backward(out):
        Tensor.realize(*out.gradient(*params, gradient=g))

    def step(out):
        Tensor.realize(out.contiguous(), *out.gradient(*params, gradient=g))

    sync = Device[tdev].synchronize
    res = time_steps(forward, backward, sync, iterations, f"tinygrad {name}")
    # NOTE: here the "forward" only builds the lazy graph; its total is one whole step.
    fused = time_steps(lambda: model(x), step, sync, iterations, f"tinygrad {name} step")
    res["step"] = fused["total"]
    res["output"] = model(x).numpy()
    res["device"] = f"{tdev} ({Device[tdev].device_name})"
    return res


def input_shape(name, batch):
    c, hw, _, _ = INPUTS[name]
    return (batch, c, hw, hw)


# ---- per-layer convolution report --------------------------------------------------------------

def trace_convs(model, x):
    """(name, module, input shape) of every Conv2d that a forward of x runs through."""
    import cltensor as ct
    found = []
    convs = [(n, m) for n, m in model.named_modules() if isinstance(m, ct.nn.Conv2d)]
    for name, m in convs:
        def traced(inp, name=name, m=m, forward=m.forward):
            found.append((name, m, tuple(inp.shape)))
            return forward(inp)
        m.forward = traced
    try:
        with ct.no_grad():
            model(x)
    finally:
        for _, m in convs:
            del m.forward  # back to the class's forward
    return found


def conv_layer_report(model, x, device):
    """Per conv layer: the algorithms auto picks for each pass and the layer's forward and
    backward kernel time (ms, from cltensor.profile), run alone on random data of its shape."""
    import cltensor as ct
    rows = []
    for i, (name, m, shape) in enumerate(trace_convs(model, x)):
        kw = dict(stride=m.stride, padding=m.padding, dilation=m.dilation, groups=m.groups)
        picks = {r["pass"]: r["algo"] for r in ct.conv_algorithms(shape, m.weight, m.bias, **kw)
                 if r["chosen"]}
        inp = ct.randn(*shape, device=device, dtype=m.weight.dtype).requires_grad_(i > 0)
        times = _time_layer(m, inp, kw)
        rows.append({"layer": name, "input": list(shape), "weight": list(m.weight.shape),
                     "algo": picks, **times})
    return rows


def _time_layer(m, inp, kw):
    import cltensor as ct
    import cltensor.nn.functional as F

    def step():
        y = F.conv2d(inp, m.weight, m.bias, **kw)
        return y, ct.ones(y.shape, device=y.device, dtype=y.dtype)

    y, g = step()
    y.backward(g)  # warm-up: kernels built, auto choices made
    with ct.profile() as fwd:
        y, g = step()
    with ct.profile() as bwd:
        y.backward(g)
    return {"forward_ms": round(fwd.total_ms(), 3), "backward_ms": round(bwd.total_ms(), 3)}


def print_layers(rows):
    print(f"  {'layer':14s} {'input':>20s} {'forward':>10s} {'backward':>10s}  algorithms "
          f"(forward / data grad / weight grad)")
    for r in rows:
        a = r["algo"]
        algos = " / ".join(a.get(k, "-") for k in ("forward", "backward_data", "backward_weight"))
        print(f"  {r['layer']:14s} {str(tuple(r['input'])):>20s} {r['forward_ms']:8.2f}ms "
              f"{r['backward_ms']:8.2f}ms  {algos}")
