"""ctc_loss (cltensor/nn/functional/ctc.py on cltensor/ops/ctc.py, cl_kernels/ctc.cl) and the
opencl device's _ctc_loss / _ctc_loss_backward (cltensor/torch/ctc_ops.py): losses, log_alpha
and gradients against CPU torch in float64 over a table of cases (padded and concatenated
targets, repeated labels, empty targets and inputs, impossible alignments, blank other than 0,
varying input lengths), each reduction, outputs NaN-poisoned; finite differences on one tiny
case; the errors of bad input."""
from dataclasses import dataclass

import numpy as np
import pytest

import cltensor
import cltensor.nn.functional as F
from cltensor.testing import assert_close, gradcheck

from test_fusion import poisoned  # noqa: F401  (every new float tensor starts as NaN)
from test_torch_device import ct, device_only, ocl, torch  # noqa: F401
from torch.nn import functional as TF  # noqa: E402

REDUCTIONS = ("none", "sum", "mean")


@dataclass
class Case:
    """T steps, C classes; one target per element of `labels` (a list of label lists), its
    input length in `inputs`; `pad` extra columns of padded targets (None: concatenated), held
    in a `layout` of the device's (a transposed or offset view) as `tdtype`."""
    name: str
    labels: list
    inputs: list
    T: int = 8
    C: int = 5
    blank: int = 0
    zero_infinity: bool = False
    pad: int = 1
    layout: str = "contiguous"
    tdtype: str = "int64"


CASES = [
    Case("padded", [[1, 2, 3], [4], [2, 1, 4, 3]], [8, 8, 8], layout="transposed"),
    Case("concatenated", [[1, 2, 3], [4], [2, 1, 4, 3]], [8, 7, 8], pad=None, layout="offset"),
    Case("repeats", [[2, 2, 3, 3], [1, 1, 1], [3, 4, 3]], [8, 5, 6], layout="offset"),
    Case("empty", [[], [1, 2], [], [3]], [8, 6, 0, 4]),
    Case("impossible", [[1, 1, 1], [2, 3], [1, 2, 1, 2]], [4, 8, 3], zero_infinity=False),
    Case("impossible_zeroed", [[1, 1, 1], [2, 3], [1, 2, 1, 2]], [4, 8, 3], zero_infinity=True),
    Case("empty_input", [[2], [], [1, 3]], [0, 0, 5], zero_infinity=True),
    Case("blank_last", [[0, 1, 0], [3, 2], [1]], [7, 3, 2], blank=4, pad=None),
    Case("blank_inner", [[0, 1, 3], [3, 3], [4, 0]], [8, 5, 3], C=6, blank=2, tdtype="int32"),
    Case("varying", [[1], [2, 3], [3, 1, 3], [4, 4], [1, 2, 3, 4, 1]], [1, 3, 8, 6, 11], T=11),
    Case("label_is_blank", [[1, 0, 0, 2], [0, 3, 3, 1]], [9, 8], T=9),  # torch does not refuse
    # more positions and classes than a CPU work-group has work-items (GROUP)
    Case("long", [[5, 5, 17, 2, 9, 9, 9, 1, 14, 3, 3, 12], [7, 1, 18, 4, 4, 11, 6, 2, 15]],
         [30, 26], T=30, C=19, pad=None),
]


def _targets(case):
    """(targets as numpy int64, target lengths)."""
    lengths = [len(t) for t in case.labels]
    if case.pad is None:
        return np.array([v for t in case.labels for v in t], np.int64), lengths
    width = max(lengths) + case.pad
    padded = np.full((len(lengths), width), case.blank, np.int64)
    for row, t in zip(padded, case.labels):
        row[:len(t)] = t
    return padded, lengths


def _device_targets(targets, case, device):
    """targets on the device in the case's layout and dtype."""
    t = targets.astype(case.tdtype)
    if case.layout == "transposed":
        return cltensor.tensor(np.ascontiguousarray(t.T), device=device).T
    if case.layout == "offset":
        whole = cltensor.tensor(np.concatenate([[-5], t.ravel()]), device=device)
        return whole[1:].reshape(t.shape)
    return cltensor.tensor(t, device=device)


def _log_probs(case, rng, N=None):
    x = rng.standard_normal((case.T, N or len(case.labels), case.C))
    return x - np.log(np.exp(x).sum(2, keepdims=True))


def _torch_reference(lp, targets, inputs, lengths, case, reduction, weights):
    """(loss, gradient) of CPU torch's ctc_loss in float64, the loss weighted by `weights`."""
    x = torch.from_numpy(lp).requires_grad_()
    loss = TF.ctc_loss(x, torch.from_numpy(targets), inputs, lengths, case.blank, reduction,
                       case.zero_infinity)
    loss.backward(torch.from_numpy(weights) if reduction == "none" else None)
    return loss.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_ctc_loss_matches_torch(device, rng, poisoned, case, reduction):  # noqa: F811
    targets, lengths = _targets(case)
    lp = _log_probs(case, rng)
    weights = rng.uniform(0.5, 2, len(lengths))
    want, want_grad = _torch_reference(lp, targets, case.inputs, lengths, case, reduction,
                                       weights)
    # the offset layout also reads the log-probabilities from an offset view
    first = 1 if case.layout == "offset" else 0
    x = cltensor.tensor(np.concatenate([lp[:first], lp]), device=device, requires_grad=True)
    t = _device_targets(targets, case, device)
    assert case.layout == "contiguous" or (t.offset, t.is_contiguous()) != (0, True)
    loss = F.ctc_loss(x[first:], t, case.inputs, lengths, case.blank, reduction,
                      case.zero_infinity)
    loss.backward(cltensor.tensor(weights, device=device) if reduction == "none" else None)
    assert_close(loss, want, rtol=1e-10, atol=1e-12)
    assert_close(x.grad[first:], want_grad, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_ctc_loss_single_and_half(device, rng, dtype):
    """float32 computes in float32, float16 in float32 from the 16-bit values; lengths as
    tensors; CTCLoss gives F.ctc_loss's value."""
    case = CASES[2]
    targets, lengths = _targets(case)
    lp = _log_probs(case, rng).astype(dtype)
    want, want_grad = _torch_reference(lp.astype(np.float64), targets, case.inputs, lengths,
                                       case, "mean", None)
    x = cltensor.tensor(lp, device=device, requires_grad=True)
    lengths_t = [cltensor.tensor(np.array(v, np.int32), device=device)
                 for v in (case.inputs, lengths)]
    loss = cltensor.nn.CTCLoss()(x, cltensor.tensor(targets, device=device), *lengths_t)
    loss.backward()
    tol = {"float32": 1e-5, "float16": 2e-3}[dtype]
    assert loss.dtype == x.dtype and x.grad.dtype == x.dtype
    assert_close(loss.to("float32"), want.astype(np.float32), rtol=tol, atol=tol,
                 check_dtype=False)
    assert_close(x.grad.to("float32"), want_grad.astype(np.float32), rtol=tol, atol=tol,
                 check_dtype=False)


def test_ctc_loss_unbatched(device, rng):
    lp = _log_probs(Case("one", [[1, 3, 3]], [6], T=6), rng)[:, 0]
    want = TF.ctc_loss(torch.from_numpy(lp), torch.tensor([1, 3, 3]), [6], [3], reduction="none")
    got = F.ctc_loss(cltensor.tensor(lp, device=device), cltensor.tensor([1, 3, 3], device=device),
                     6, 3, reduction="none")
    assert got.shape == ()
    assert_close(got, want.numpy(), rtol=1e-10, atol=1e-12)


def test_ctc_loss_finite_differences(device, rng):
    """The gradient through log_softmax (torch's formula is the logits' gradient) by central
    differences: repeated labels, an empty target and an input one step short."""
    case = Case("tiny", [[1, 1], [], [2, 1]], [4, 2, 2], T=4, C=3)
    targets, lengths = _targets(case)
    z = cltensor.tensor(rng.standard_normal((4, 3, 3)), device=device, requires_grad=True)
    t = cltensor.tensor(targets, device=device)
    loss = lambda z: F.ctc_loss(z.log_softmax(2), t, case.inputs, lengths, reduction="none",
                                zero_infinity=True)
    assert gradcheck(loss, [z])


@pytest.mark.parametrize("bad, message", [
    (dict(inputs=[9, 8, 8]), "input_lengths to have value at most 8"),
    (dict(inputs=[8, -1, 8]), "input_lengths to have value at least 0"),
    (dict(inputs=[8, 8]), "input_lengths must be of size batch_size"),
    (dict(lengths=[3, 1, 6]), "S at least the longest target length 6"),
    (dict(lengths=[3, 1, 3], concatenated=True), "the target lengths sum to 7"),
    (dict(blank=5), "blank must be in label range"),
    (dict(blank=-1), "blank must be in label range"),
    (dict(targets_dtype=np.float64), "targets must be an integer tensor"),
    (dict(length_dtype=np.float32), "input_lengths must be integral"),
    (dict(steps=0, inputs=[0, 0, 0]), "log_probs tensor must not be empty"),
])
def test_ctc_loss_bad_input(device, rng, bad, message):
    targets, lengths = _targets(CASES[0])
    if bad.get("concatenated"):
        targets, lengths = _targets(CASES[1])
    targets = cltensor.tensor(targets.astype(bad.get("targets_dtype", np.int64)), device=device)
    inputs = bad.get("inputs", [8, 8, 8])
    if "length_dtype" in bad:
        inputs = cltensor.tensor(np.array(inputs, bad["length_dtype"]), device=device)
    lp = cltensor.tensor(_log_probs(CASES[0], rng)[:bad.get("steps")], device=device)
    with pytest.raises(ValueError, match=message):
        F.ctc_loss(lp, targets, inputs, bad.get("lengths", lengths), bad.get("blank", 0))


# ---- the opencl device -------------------------------------------------------------------------

@pytest.mark.parametrize("case", [CASES[i] for i in (1, 2, 4, 5, 7, 9)], ids=lambda c: c.name)
def test_torch_device_ctc_loss(ocl, device_only, poisoned, rng, case):  # noqa: F811
    """F.ctc_loss and its backward on the device, each reduction, lengths as lists and as
    tensors (both reach the IntList overloads: torch reads tensor lengths on the host)."""
    targets, lengths = _targets(case)
    lp = torch.from_numpy(_log_probs(case, rng))
    for reduction, tensors in zip(REDUCTIONS * 2, [False] * 3 + [True] * 3):
        sides = []
        for dev in ("cpu", ocl):
            x = lp.detach().to(dev).requires_grad_()
            il, tl = ((torch.tensor(v, device=dev) for v in (case.inputs, lengths)) if tensors
                      else (case.inputs, lengths))
            with ct._backend.traced() as ran:
                loss = TF.ctc_loss(x, torch.from_numpy(targets).to(dev), il, tl, case.blank,
                                   reduction, case.zero_infinity)
                loss.sum().backward()
            sides.append((loss.detach().cpu(), x.grad.cpu(), ran))
        (want, want_grad, _), (got, got_grad, ran) = sides
        assert {"_ctc_loss", "_ctc_loss_backward"} <= ran
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12, equal_nan=True)
        torch.testing.assert_close(got_grad, want_grad, rtol=1e-9, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("overload", ["default", "Tensor"])
@pytest.mark.parametrize("case", [CASES[i] for i in (0, 3, 4, 8)], ids=lambda c: c.name)
def test_torch_device_ctc_overloads(ocl, device_only, poisoned, rng, case,  # noqa: F811
                                    overload):
    """_ctc_loss and _ctc_loss_backward called directly (lengths as int lists or tensors):
    the losses, the gradient for a random output gradient, and log_alpha over each element's
    valid rows and columns (torch leaves the rest unwritten; cltensor writes -inf there); the
    log-probabilities an offset view."""
    targets, lengths = _targets(case)
    lp = torch.from_numpy(_log_probs(case, rng))
    grad = torch.from_numpy(rng.uniform(0.5, 2, len(lengths)))
    sides = []
    for dev in ("cpu", ocl):
        il, tl = ((torch.tensor(v, device=dev) for v in (case.inputs, lengths))
                  if overload == "Tensor" else (case.inputs, lengths))
        offset_view = torch.cat([lp[:1], lp]).to(dev)[1:]
        args = (offset_view, torch.from_numpy(targets).to(dev), il, tl)
        with ct._backend.traced() as ran:
            nll, alpha = getattr(torch.ops.aten._ctc_loss, overload)(*args, case.blank)
            gx = getattr(torch.ops.aten._ctc_loss_backward, overload)(
                grad.to(dev), *args, nll, alpha, case.blank, case.zero_infinity)
        sides.append((nll.cpu(), alpha.cpu(), gx.cpu(), ran))
    (want_nll, want_alpha, want_gx, _), (nll, alpha, gx, ran) = sides
    suffix = "" if overload == "default" else ".Tensor"
    assert {f"_ctc_loss{suffix}", f"_ctc_loss_backward{suffix}"} <= ran
    torch.testing.assert_close(nll, want_nll, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(gx, want_gx, rtol=1e-9, atol=1e-12, equal_nan=True)
    for b, (n_in, n_tg) in enumerate(zip(case.inputs, lengths)):
        valid = (slice(0, n_in), slice(0, 2 * n_tg + 1))
        torch.testing.assert_close(alpha[b][valid], want_alpha[b][valid], rtol=1e-10, atol=1e-12)
        rest = alpha[b].clone()
        rest[valid] = -float("inf")
        assert bool((rest == -float("inf")).all()), "log_alpha outside the valid corner"


def test_torch_device_ctc_loss_half_and_errors(ocl, device_only, rng):  # noqa: F811
    """float16 log-probabilities run in float32 (torch's CPU kernel refuses them); bad lengths
    and blank raise torch's RuntimeError."""
    case = CASES[0]
    targets, lengths = _targets(case)
    lp = torch.from_numpy(_log_probs(case, rng)).half()
    # reduction="none": torch's mean makes a float16 tensor of the lengths, which it cannot
    ref = lp.double().requires_grad_()
    want = TF.ctc_loss(ref, torch.from_numpy(targets), case.inputs, lengths, reduction="none")
    want.sum().backward()
    x = lp.detach().to(ocl).requires_grad_()
    got = TF.ctc_loss(x, torch.from_numpy(targets).to(ocl), case.inputs, lengths,
                      reduction="none")
    got.sum().backward()
    assert got.dtype == x.grad.dtype == torch.float16
    torch.testing.assert_close(got.cpu().double(), want.detach(), rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(x.grad.cpu().double(), ref.grad, rtol=2e-3, atol=2e-3)
    t = torch.from_numpy(targets).to(ocl)
    with pytest.raises(RuntimeError, match="blank must be in label range"):
        TF.ctc_loss(x.double(), t, case.inputs, lengths, blank=5)
    with pytest.raises(RuntimeError, match="input_lengths to have value at most 8"):
        TF.ctc_loss(x.double(), t, [9, 8, 8], lengths)
    with pytest.raises(RuntimeError, match="input_lengths must be integral"):
        TF.ctc_loss(x.double(), t, torch.tensor([8.0, 8, 8], device=ocl),
                    torch.tensor(lengths, device=ocl))


def test_ctc_loss_double_backward_raises(device, rng):
    """create_graph=True records the gradient; differentiating it raises, as in torch."""
    case = CASES[0]
    targets, lengths = _targets(case)
    x = cltensor.tensor(_log_probs(case, rng), device=device, requires_grad=True)
    loss = F.ctc_loss(x, cltensor.tensor(targets, device=device), case.inputs, lengths)
    (gx,) = cltensor.autograd.grad(loss, [x], create_graph=True)
    assert gx.requires_grad
    with pytest.raises(RuntimeError, match="double backward is not implemented"):
        gx.sum().backward()
