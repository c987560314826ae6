"""Property-based fuzzing of conv2d and pooling parameters against the float64 references of
test_conv.py and test_nn_pooling.py: forward and gradients where the parameters are valid,
a ValueError naming the problem where they are not. A fixed budget (max_examples) per test."""
import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from test_conv import ref_conv
from test_nn_pooling import ref_avg_pool, ref_pool_size

import cltensor
import cltensor.nn.functional as F
from cltensor.conv import conv2d, dispatch, winograd
from cltensor.conv.params import make_params
from cltensor.testing import random_array, rel_error

RTOL = 1e-5


def T(a, device):
    return cltensor.from_numpy(np.ascontiguousarray(a), device=device)


def view_of(a, device, view):
    """The array as a device tensor in one of three layouts with the same values."""
    if view == "channels_last":
        return T(a, device).contiguous(memory_format=cltensor.channels_last)
    if view == "transposed":
        return T(a.transpose(0, 1, 3, 2), device).transpose(2, 3)
    return T(a, device)


# ---- conv2d -----------------------------------------------------------------------------------

@st.composite
def conv_case(draw):
    pair = lambda lo, hi: (draw(st.integers(lo, hi)), draw(st.integers(lo, hi)))
    groups = draw(st.integers(1, 3))
    return dict(n=draw(st.integers(1, 2)), groups=groups, cg=draw(st.integers(1, 3)),
                cog=draw(st.integers(1, 3)), k=pair(1, 4), hw=pair(1, 9), stride=pair(1, 3),
                padding=pair(0, 2), dilation=pair(1, 2),
                algo=draw(st.sampled_from(["auto", "im2col", "implicit_gemm", "winograd",
                                           "winograd_4x4"])),
                view=draw(st.sampled_from(["plain", "channels_last", "transposed"])),
                seed=draw(st.integers(0, 2**31)))


def fits(c):
    """Whether the dilated kernel fits the padded input in both dims."""
    return all(c["hw"][i] + 2 * c["padding"][i] >= c["dilation"][i] * (c["k"][i] - 1) + 1
               for i in range(2))


@settings(max_examples=40, deadline=None)
@given(c=conv_case())
def test_conv2d_parameters(device, c):
    rng = np.random.default_rng(c["seed"])
    g = c["groups"]
    x = random_array(rng, (c["n"], g * c["cg"]) + c["hw"])
    w = random_array(rng, (g * c["cog"], c["cg"]) + c["k"])
    b = random_array(rng, (g * c["cog"],))
    X, W, B = view_of(x, device, c["view"]), T(w, device), T(b, device)
    args = dict(stride=c["stride"], padding=c["padding"], dilation=c["dilation"], groups=g)
    if not fits(c):
        event("kernel larger than the padded input")
        with pytest.raises(ValueError, match="larger than the padded input"):
            conv2d(X, W, B, **args, algo=c["algo"])
        return
    if c["algo"] != "auto":
        ok, _ = dispatch.eligible(c["algo"], make_params(X, W, B, c["stride"], c["padding"],
                                                          c["dilation"], g))
        if not ok:
            event("algorithm not eligible")
            with pytest.raises(ValueError, match="cannot run this convolution"):
                conv2d(X, W, B, **args, algo=c["algo"])
            return
    X.requires_grad_(), W.requires_grad_(), B.requires_grad_()
    y = conv2d(X, W, B, **args, algo=c["algo"])
    grad = random_array(rng, y.shape)
    want, gx, gw = ref_conv(x, w, b, c["stride"], c["padding"], c["dilation"], g, grad=grad)
    tol = winograd.WINOGRAD_RTOL if c["algo"].startswith("winograd") else RTOL
    assert rel_error(y, want) <= tol
    y.backward(T(grad, device))
    assert rel_error(X.grad, gx) <= tol and rel_error(W.grad, gw) <= tol
    assert rel_error(B.grad, grad.astype(np.float64).sum((0, 2, 3))) <= RTOL


# ---- pooling ----------------------------------------------------------------------------------

@st.composite
def pool_case(draw):
    pair = lambda lo, hi: (draw(st.integers(lo, hi)), draw(st.integers(lo, hi)))
    k = pair(1, 4)
    bad_pad = draw(st.integers(0, 9)) == 0          # one case in ten pads over half the window
    padding = tuple(ki // 2 + 1 if bad_pad else draw(st.integers(0, ki // 2)) for ki in k)
    return dict(k=k, stride=pair(1, 3), padding=padding, dilation=pair(1, 2),
                hw=pair(1, 9), ceil=draw(st.booleans()), include_pad=draw(st.booleans()),
                divisor=draw(st.sampled_from([None, 1, 3])),
                view=draw(st.sampled_from(["plain", "channels_last", "transposed"])),
                seed=draw(st.integers(0, 2**31)))


def pool_error(c, dilation):
    """The ValueError torch gives for these pooling parameters, or None when they are valid."""
    if any(2 * p > k for p, k in zip(c["padding"], c["k"])):
        return "pad should be at most half"
    sizes = [ref_pool_size(n, k, s, p, d, c["ceil"]) for n, k, s, p, d in
             zip(c["hw"], c["k"], c["stride"], c["padding"], dilation)]
    return "too small" if min(sizes) < 1 else None


def ref_max_pool(x, k, s, p, d, ceil):
    """Max pooling in float64 and its argmax (flat h * W + w). A window that holds only padding
    (possible with dilation) gives -inf and no argmax (-1): its output does not depend on x, so
    it sends x no gradient (torch's CPU backward sends it to the index it returns there)."""
    n, ch, h, w = x.shape
    oh, ow = (ref_pool_size(size, k[i], s[i], p[i], d[i], ceil) for i, size in enumerate((h, w)))
    y, idx = np.full((n, ch, oh, ow), -np.inf), np.full((n, ch, oh, ow), -1)
    for i in range(oh):
        for j in range(ow):
            rows = [r for r in range(i * s[0] - p[0], i * s[0] - p[0] + k[0] * d[0], d[0])
                    if 0 <= r < h]
            cols = [c for c in range(j * s[1] - p[1], j * s[1] - p[1] + k[1] * d[1], d[1])
                    if 0 <= c < w]
            if rows and cols:
                win = x[:, :, rows][:, :, :, cols].reshape(n, ch, -1)
                flat = np.array([r * w + c for r in rows for c in cols])
                y[:, :, i, j], idx[:, :, i, j] = win.max(-1), flat[win.argmax(-1)]
    return y, idx


def max_pool_grad(a, idx, grad):
    """dL/dx of max pooling: each output's gradient goes to its argmax."""
    n, ch, h, w = a.shape
    gx = np.zeros((n, ch, h * w))
    for i in range(n):
        for j in range(ch):
            hit = idx[i, j] >= 0
            np.add.at(gx[i, j], idx[i, j][hit], grad[i, j][hit].astype(np.float64))
    return gx.reshape(a.shape)


@settings(max_examples=40, deadline=None)
@given(c=pool_case())
def test_max_pool2d_parameters(device, c):
    rng = np.random.default_rng(c["seed"])
    a = random_array(rng, (2, 3) + c["hw"])
    x = view_of(a, device, c["view"]).requires_grad_()
    args = (c["k"], c["stride"], c["padding"], c["dilation"], c["ceil"])
    error = pool_error(c, c["dilation"])
    event(error or "valid")
    if error:
        with pytest.raises(ValueError, match=error):
            F.max_pool2d(x, *args)
        return
    y = F.max_pool2d(x, *args)
    want, idx = ref_max_pool(a, c["k"], c["stride"], c["padding"], c["dilation"], c["ceil"])
    np.testing.assert_array_equal(y.numpy(), want.astype(np.float32))
    grad = random_array(rng, y.shape)
    y.backward(T(grad, device))
    assert rel_error(x.grad, max_pool_grad(a, idx, grad)) <= RTOL


@settings(max_examples=40, deadline=None)
@given(c=pool_case())
def test_avg_pool2d_parameters(device, c):
    rng = np.random.default_rng(c["seed"])
    a = random_array(rng, (2, 3) + c["hw"])
    x = view_of(a, device, c["view"]).requires_grad_()
    args = (c["k"], c["stride"], c["padding"], c["ceil"], c["include_pad"], c["divisor"])
    error = pool_error(c, (1, 1))
    event(error or "valid")
    if error:
        with pytest.raises(ValueError, match=error):
            F.avg_pool2d(x, *args)
        return
    y = F.avg_pool2d(x, *args)
    want = ref_avg_pool(a, c["k"], c["stride"], c["padding"], c["ceil"], c["include_pad"],
                        c["divisor"])
    assert rel_error(y, want) <= RTOL
    # average pooling is linear, so its gradient is the adjoint: <y, g> = <x, dL/dx>
    grad = random_array(rng, y.shape)
    y.backward(T(grad, device))
    lhs = float((want * grad).sum())
    rhs = float((a.astype(np.float64) * x.grad.numpy()).sum())
    assert abs(lhs - rhs) <= 1e-5 * (np.abs(want * grad).sum() + 1e-30)
