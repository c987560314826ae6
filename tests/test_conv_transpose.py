"""conv_transpose2d and nn.ConvTranspose2d: against a direct float64 numpy reference through
every algorithm that serves the transposed convolution's passes, gradients by finite
differences and against torch, layouts, empty inputs and bad arguments."""
import math

import numpy as np
import pytest

import cltensor
import cltensor.nn.functional as F
from cltensor import nn
from cltensor.conv import dispatch
from cltensor.conv.transposed import transposed_params
from cltensor.testing import assert_close, gradcheck, random_array, rel_error

# (input shape, weight shape, kwargs): strided with output padding, stride 1 (Winograd's
# problem), groups with dilation and uneven pairs, 1x1, DCGAN's 4x4 stride 2, output_padding
# of at least the stride
CASES = [
    ((2, 4, 5, 6), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((2, 4, 5, 6), (4, 3, 3, 3), dict(padding=1)),
    ((2, 6, 4, 5), (6, 2, 3, 2), dict(stride=(2, 1), padding=(1, 0), output_padding=(1, 0),
                                      groups=2, dilation=(1, 2))),
    ((2, 4, 5, 6), (4, 3, 1, 1), dict()),
    ((2, 3, 4, 4), (3, 2, 4, 4), dict(stride=2, padding=1)),
    # output_padding at least the stride (below the dilation): the convolution it transposes
    # has a larger output than the input
    ((1, 6, 3, 4), (6, 1, 3, 2), dict(stride=(1, 2), groups=3, dilation=(2, 3),
                                      output_padding=(1, 2))),
]
FP32_RTOL = {"winograd": 1e-4, "winograd_4x4": 1e-4}


def _pair(v):
    return tuple(v) if isinstance(v, tuple) else (v, v)


def reference(x, w, b, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The transposed convolution in float64: each input element scatters its weight taps."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    s, p, op, d = (_pair(v) for v in (stride, padding, output_padding, dilation))
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    cig = cin // groups
    size = [(m - 1) * si - 2 * pi + di * (k - 1) + e + 1
            for m, si, pi, di, k, e in zip((h, wd), s, p, d, (kh, kw), op)]
    full = np.zeros((n, cog * groups, (h - 1) * s[0] + d[0] * (kh - 1) + 1 + op[0],
                     (wd - 1) * s[1] + d[1] * (kw - 1) + 1 + op[1]))
    for g in range(groups):
        for a in range(kh):
            for c in range(kw):
                taps = np.einsum("nchw,co->nohw", x[:, g * cig:(g + 1) * cig],
                                 w[g * cig:(g + 1) * cig, :, a, c])
                full[:, g * cog:(g + 1) * cog, a * d[0]:a * d[0] + (h - 1) * s[0] + 1:s[0],
                     c * d[1]:c * d[1] + (wd - 1) * s[1] + 1:s[1]] += taps
    y = full[:, :, p[0]:p[0] + size[0], p[1]:p[1] + size[1]]
    return y if b is None else y + b[None, :, None, None]


def _algos(device, xshape, wshape, kwargs):
    """auto and every portable algorithm eligible for the transposed problem's convolution."""
    x = cltensor.zeros(*xshape, device=device)
    w = cltensor.zeros(*wshape, device=device)
    p = transposed_params(x, w, None, *(kwargs.get(k, v) for k, v in (
        ("stride", 1), ("padding", 0), ("output_padding", 0), ("groups", 1), ("dilation", 1))))
    return ["auto"] + [a for a in dispatch.ALGORITHMS if dispatch.eligible(a, p, "forward")[0]]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_against_reference_every_algorithm(device, rng, case):
    xshape, wshape, kwargs = CASES[case]
    x, w = random_array(rng, xshape), random_array(rng, wshape)
    b = random_array(rng, (wshape[1] * kwargs.get("groups", 1),))
    want = reference(x, w, b, **kwargs)
    T = lambda a: cltensor.from_numpy(a, device=device)  # noqa: E731
    algos = _algos(device, xshape, wshape, kwargs)
    assert len(algos) >= 3, algos
    for algo in algos:
        X, W, B = (T(a).requires_grad_() for a in (x, w, b))
        y = F.conv_transpose2d(X, W, B, algo=algo, **kwargs)
        assert y.shape == want.shape, (algo, y.shape, want.shape)
        err = rel_error(y, want)
        assert err <= FP32_RTOL.get(algo, 1e-5), (algo, err)
        y.backward(T(random_array(rng, want.shape)))  # every gradient pass runs
        assert all(np.isfinite(t.grad.numpy()).all() for t in (X, W, B)), algo


@pytest.mark.parametrize("case", [0, 2])
def test_gradients_by_finite_differences(device, rng, case):
    if not device.has_fp64:
        pytest.skip(f"{device} has no float64")
    xshape, wshape, kwargs = CASES[case]
    x, w = rng.standard_normal((1,) + xshape[1:]), rng.standard_normal(wshape)
    b = rng.standard_normal(wshape[1] * kwargs.get("groups", 1))
    X, W, B = (cltensor.from_numpy(a, device=device).requires_grad_() for a in (x, w, b))
    assert gradcheck(lambda *t: F.conv_transpose2d(*t, **kwargs), [X, W, B])


def test_against_torch(device, rng):
    torch = pytest.importorskip("torch")
    if not device.has_fp64:
        pytest.skip(f"{device} has no float64")
    for xshape, wshape, kwargs in CASES:
        arrays = [rng.standard_normal(s) for s in
                  (xshape, wshape, (wshape[1] * kwargs.get("groups", 1),))]
        ours = [cltensor.from_numpy(a, device=device).requires_grad_() for a in arrays]
        theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
        y = F.conv_transpose2d(*ours, **kwargs)
        ty = torch.nn.functional.conv_transpose2d(*theirs, **kwargs)
        assert_close(y, ty.detach().numpy(), rtol=1e-10, atol=1e-10)
        g = rng.standard_normal(ty.shape)
        y.backward(cltensor.from_numpy(g, device=device))
        ty.backward(torch.tensor(g))
        for a, t in zip(ours, theirs):
            assert_close(a.grad, t.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_layouts_unbatched_and_empty(device, rng):
    xshape, wshape, kwargs = CASES[0]
    x, w = random_array(rng, xshape), random_array(rng, wshape)
    want = reference(x, w, None, **kwargs)
    X, W = (cltensor.from_numpy(a, device=device) for a in (x, w))
    last = X.contiguous(memory_format=cltensor.channels_last)
    y = F.conv_transpose2d(last, W, **kwargs)
    assert y.is_contiguous(memory_format=cltensor.channels_last) and not y.is_contiguous()
    assert rel_error(y, want) <= 1e-5
    assert rel_error(F.conv_transpose2d(X.transpose(2, 3).contiguous().transpose(2, 3), W,
                                        **kwargs), want) <= 1e-5
    assert rel_error(F.conv_transpose2d(X[0], W, **kwargs), want[0]) <= 1e-5
    b = cltensor.from_numpy(random_array(rng, (3,)), device=device)
    empty = F.conv_transpose2d(cltensor.zeros(0, 4, 5, 6, device=device), W, b, **kwargs)
    assert empty.shape == (0, 3, 10, 12)
    with pytest.raises(ValueError, match="dims without zeros"):
        F.conv_transpose2d(cltensor.zeros(2, 0, 5, 6, device=device),
                           cltensor.zeros(0, 3, 3, 3, device=device), b, **kwargs)


def test_bad_arguments(device):
    x = cltensor.zeros(1, 4, 5, 5, device=device)
    w = cltensor.zeros(4, 3, 3, 3, device=device)
    cases = [
        (dict(weight=cltensor.zeros(5, 3, 3, 3, device=device)),
         ValueError, "input has 4 channels, weight of shape"),
        (dict(stride=2, output_padding=2), ValueError, "output_padding .* must be smaller"),
        (dict(padding=4), ValueError, "output size .* is not positive"),
        (dict(bias=cltensor.zeros(4, device=device)), ValueError, r"bias must have shape \(3,\)"),
        (dict(groups=3), ValueError, "divisible by groups=3"),
        (dict(weight=cltensor.zeros(4, 3, 3, device=device)), ValueError, "4-d weight"),
        (dict(stride=0), ValueError, "stride must be positive"),
    ]
    if device.has_fp64:
        cases.append((dict(bias=cltensor.zeros(3, dtype=cltensor.float64, device=device)),
                      TypeError, "input is float32 but bias is float64"))
    for kwargs, exc, match in cases:
        args = dict(dict(input=x, weight=w), **kwargs)
        with pytest.raises(exc, match=match):
            F.conv_transpose2d(args.pop("input"), args.pop("weight"), **args)


# ---- the module -------------------------------------------------------------------------------

def test_module(device, rng):
    m = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2,
                           device=device)
    assert m.weight.shape == (4, 3, 3, 3) and m.bias.shape == (6,)
    bound = 1 / math.sqrt(3 * 3 * 3)  # torch's fan-in: weight dim 1 times the kernel area
    assert np.abs(m.bias.numpy()).max() <= bound
    assert np.abs(m.weight.numpy()).max() <= bound
    assert repr(m) == ("ConvTranspose2d(4, 6, kernel_size=(3, 3), stride=(2, 2), "
                       "padding=(1, 1), output_padding=(1, 1), groups=2)")
    x = random_array(rng, (2, 4, 5, 6))
    y = m(cltensor.from_numpy(x, device=device))
    assert rel_error(y, reference(x, m.weight.numpy(), m.bias.numpy(), 2, 1, 1, 2)) <= 1e-5
    # output_size picks the output padding, as torch's
    m2 = nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, bias=False, device=device)
    X = cltensor.from_numpy(x, device=device)
    assert m2(X).shape == (2, 3, 9, 11)
    assert m2(X, output_size=(10, 12)).shape == (2, 3, 10, 12)
    assert m2(X, output_size=[2, 3, 10, 11]).shape == (2, 3, 10, 11)
    with pytest.raises(ValueError, match=r"output_size \(12, 12\) is not between"):
        m2(X, output_size=(12, 12))
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.ConvTranspose2d(4, 5, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode"):
        nn.ConvTranspose2d(4, 5, 3, padding_mode="reflect")
