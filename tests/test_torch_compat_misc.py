"""torch's smaller names that scripts use: backends.cudnn, Tensor.__format__, cltensor.onnx,
flatten_parameters, nn.modules.<file> paths, serialization.safe_globals, dropout2d on other
ranks, inference_mode, parameters_to_vector; each against torch CPU where torch has a value."""
import dataclasses
import importlib
import io
import warnings

import numpy as np
import pyopencl as cl
import pytest
import torch

import cltensor as ct
import cltensor.nn.functional as F
from cltensor import nn


def _t(arr, device, grad=False):
    t = ct.from_numpy(np.asarray(arr, dtype=np.float32), device=device)
    return t.requires_grad_() if grad else t


# ---- backends.cudnn ---------------------------------------------------------------------------
def test_cudnn_flags_are_the_backend_flags():
    import cltensor.backends.cudnn as cudnn
    assert cudnn is ct.backends.cudnn and cudnn.is_available()
    saved = ct.backends.benchmark, ct.backends.allow_tf32
    try:
        cudnn.benchmark = True
        assert ct.backends.benchmark is True
        ct.backends.benchmark = False
        assert cudnn.benchmark is False
        cudnn.allow_tf32 = True
        assert ct.backends.allow_tf32 is True
    finally:
        ct.backends.benchmark, ct.backends.allow_tf32 = saved
    cudnn.deterministic = True
    assert cudnn.deterministic is True
    cudnn.deterministic = False
    assert ct.backends.mps.is_available() is False


# ---- Tensor.__format__ ------------------------------------------------------------------------
@pytest.mark.parametrize("value,spec", [(1.23456, ".4f"), (3, "05d"), (True, ""), (-2.5, ""),
                                        (1e-5, ".3e"), (7, ">6")])
def test_format_of_a_0d_tensor_is_torchs(device, value, spec):
    ours = ct.tensor(value, device=device)
    assert format(ours, spec) == format(torch.tensor(value), spec)


def test_format_of_other_tensors(device):
    x = _t([1.5, 2.0], device, grad=True)
    loss = (x * x).sum()
    assert f"{loss:.2f}" == "6.25"
    assert f"{x}" == str(x)
    with pytest.raises(TypeError, match="0-d"):
        format(x, ".2f")
    with pytest.raises(TypeError):  # torch refuses it too
        format(torch.tensor([1.5]), ".2f")


# ---- cltensor.onnx, flatten_parameters, import paths ------------------------------------------
def test_onnx_export_says_what_to_do():
    import cltensor.onnx
    with pytest.raises(NotImplementedError, match="torch.onnx.export"):
        cltensor.onnx.export(nn.Linear(2, 2), ct.zeros(1, 2), "model.onnx")
    assert cltensor.onnx.is_in_onnx_export() is False


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
def test_flatten_parameters_changes_nothing(device, cls, rng):
    layer = cls(3, 4, num_layers=2).to(device)
    x = _t(rng.standard_normal((5, 2, 3)), device)
    before = layer(x)[0].numpy()
    assert layer.flatten_parameters() is None
    np.testing.assert_array_equal(layer(x)[0].numpy(), before)


def test_nn_modules_file_paths():
    from torch.nn.modules import utils as tu

    from cltensor.nn.modules.dropout import _DropoutNd
    from cltensor.nn.modules.loss import _Loss
    from cltensor.nn.modules.module import Module
    from cltensor.nn.modules.utils import _ntuple, _pair, _quadruple, _single, _triple
    from cltensor.nn.parameter import Parameter
    for ours, theirs in ((_single, tu._single), (_pair, tu._pair), (_triple, tu._triple),
                         (_quadruple, tu._quadruple)):
        for arg in (3, (1, 2), [4, 5, 6]):
            assert ours(arg) == theirs(arg)
    assert _ntuple(5)(0) == (0,) * 5
    assert Parameter is nn.Parameter and issubclass(_Loss, Module)
    assert isinstance(nn.Dropout2d(), _DropoutNd)


@pytest.mark.parametrize("path,base", [("pooling", "_MaxPoolNd"), ("pooling", "_AvgPoolNd"),
                                       ("pooling", "_AdaptiveAvgPoolNd"),
                                       ("pooling", "_AdaptiveMaxPoolNd"),
                                       ("batchnorm", "_NormBase"), ("batchnorm", "_BatchNorm"),
                                       ("conv", "_ConvNd"), ("conv", "_ConvTransposeNd")])
def test_private_bases_classify_layers_as_torchs(path, base):
    """isinstance(layer, nn.modules.<path>.<base>) as torch answers it, for every layer here
    that torch also has."""
    ours = getattr(importlib.import_module(f"cltensor.nn.modules.{path}"), base)
    theirs = getattr(importlib.import_module(f"torch.nn.modules.{path}"), base)
    layers = {"MaxPool1d": (2,), "MaxPool2d": (2,), "AvgPool1d": (2,), "AvgPool2d": (2,),
              "AdaptiveAvgPool1d": (2,), "AdaptiveAvgPool2d": (2,), "AdaptiveMaxPool1d": (2,),
              "AdaptiveMaxPool2d": (2,), "BatchNorm1d": (3,), "BatchNorm2d": (3,),
              "Conv1d": (1, 1, 1), "Conv2d": (1, 1, 1), "ConvTranspose1d": (1, 1, 1),
              "ConvTranspose2d": (1, 1, 1), "Linear": (1, 1)}
    for name, args in layers.items():
        assert isinstance(getattr(nn, name)(*args), ours) == \
            isinstance(getattr(torch.nn, name)(*args), theirs), name


# ---- serialization.safe_globals ---------------------------------------------------------------
@dataclasses.dataclass
class RunConfig:
    lr: float
    name: str


def _checkpoint_with_config():
    buf = io.BytesIO()
    torch.save({"config": RunConfig(0.1, "adam"), "w": torch.arange(3.0)}, buf)
    return buf.getvalue()


def test_safe_globals_lets_a_trusted_class_load(device):
    data = _checkpoint_with_config()
    with pytest.raises(ValueError, match="add_safe_globals"):
        ct.load(io.BytesIO(data), map_location=device)
    with ct.serialization.safe_globals([RunConfig]):
        got = ct.load(io.BytesIO(data), map_location=device)
        assert ct.serialization.get_safe_globals() == [RunConfig]
    assert got["config"] == RunConfig(0.1, "adam")
    np.testing.assert_array_equal(got["w"].numpy(), [0.0, 1.0, 2.0])
    assert ct.serialization.get_safe_globals() == []
    with pytest.raises(ValueError, match="RunConfig"):
        ct.load(io.BytesIO(data))


def test_add_safe_globals_and_clear():
    data = _checkpoint_with_config()
    try:
        ct.serialization.add_safe_globals([(RunConfig, f"{__name__}.RunConfig")])
        assert ct.load(io.BytesIO(data))["config"].name == "adam"
    finally:
        ct.serialization.clear_safe_globals()
    assert ct.serialization.get_safe_globals() == []
    with pytest.raises(TypeError, match="add_safe_globals"):
        ct.serialization.add_safe_globals(RunConfig)
    with pytest.raises(TypeError, match="module.name"):
        ct.serialization.add_safe_globals([3])


# ---- dropout2d on inputs of other ranks -------------------------------------------------------
def _warning_of(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    # NOTE: an OpenCL compiler's build log (pyopencl's CompilerWarning, Intel's runtime) is
    # not the op's warning
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning)
            and not issubclass(w.category, cl.CompilerWarning)]


def test_dropout2d_on_a_2d_input_warns_and_drops_elements_as_torch(device):
    x = ct.ones(64, 64, device=device)
    ours = _warning_of(lambda: F.dropout2d(x, 0.5))
    theirs = _warning_of(lambda: torch.nn.functional.dropout2d(torch.ones(64, 64), 0.5))
    assert len(ours) == len(theirs) == 1 and "2-d input" in ours[0]
    ct.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = nn.Dropout2d(0.5)(x).numpy()
    assert set(np.unique(y)) == {0.0, 2.0}
    assert (y.min(1) != y.max(1)).any()  # elementwise: rows are not all kept or all dropped
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert F.dropout2d(ct.ones(2, 3, 4, device=device), 0.5, training=False) is not None


def test_dropout2d_on_a_5d_input_drops_per_channel(device):
    x = ct.ones(4, 8, 2, 2, 2, device=device)
    assert len(_warning_of(lambda: F.dropout2d(x, 0.5))) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = F.dropout2d(x, 0.5).numpy().reshape(4, 8, -1)
    assert (y.min(-1) == y.max(-1)).all() and set(np.unique(y)) == {0.0, 2.0}
    with pytest.raises(ValueError, match="at least 2 dims"):
        F.dropout2d(ct.ones(5, device=device), 0.5)
    with pytest.raises(ValueError, match="dropout1d"):
        F.dropout1d(ct.ones(2, 2, 2, 2, device=device), 0.5)


# ---- inference_mode ---------------------------------------------------------------------------
def test_inference_mode_as_context_and_decorator(device):
    w = _t([1.0, 2.0], device, grad=True)
    with ct.inference_mode():
        assert ct.is_inference_mode_enabled() and not ct.is_grad_enabled()
        assert not (w * 2).requires_grad
        with ct.inference_mode(False):
            assert (w * 2).requires_grad and not ct.is_inference_mode_enabled()
        assert ct.is_inference_mode_enabled()
    assert (w * 2).requires_grad and not ct.is_inference_mode_enabled()

    @ct.inference_mode
    def bare(a):
        return a * 2

    @ct.inference_mode()
    def called(a):
        return a * 2

    assert not bare(w).requires_grad and not called(w).requires_grad
    assert bare.__name__ == "bare" and ct.is_grad_enabled()
    with pytest.raises(TypeError, match="bool"):
        ct.inference_mode("yes")


# ---- parameters_to_vector / vector_to_parameters ----------------------------------------------
def test_parameters_to_vector_and_back_as_torch(device):
    ours, theirs = nn.Linear(3, 2).to(device), torch.nn.Linear(3, 2)
    theirs.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in
                            ours.state_dict().items()})
    vec = nn.utils.parameters_to_vector(ours.parameters())
    np.testing.assert_array_equal(
        vec.numpy(), torch.nn.utils.parameters_to_vector(theirs.parameters()).detach().numpy())
    vec.sum().backward()
    np.testing.assert_array_equal(ours.weight.grad.numpy(), np.ones((2, 3)))
    new = ct.arange(8.0, device=device)
    nn.utils.vector_to_parameters(new, ours.parameters())
    np.testing.assert_array_equal(ours.weight.numpy(), np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(ours.bias.numpy(), [6.0, 7.0])
    with pytest.raises(ValueError, match="8 elements"):
        nn.utils.vector_to_parameters(ct.zeros(7, device=device), ours.parameters())
    with pytest.raises(TypeError, match="tensor"):
        nn.utils.vector_to_parameters(np.zeros(8), ours.parameters())


# ---- nn.DataParallel --------------------------------------------------------------------------
def test_data_parallel_wraps_as_torch(device, rng):
    inner = nn.Linear(3, 2).to(device)
    net = nn.DataParallel(inner)
    # NOTE: torch's own wrapper is not built here: on a CPU-only torch it moves the module to,
    # and scatters over, the "opencl" device once another test of this process imported
    # cltensor.torch. Its state_dict names are the module's under "module."
    theirs = torch.nn.Linear(3, 2)
    assert list(net.state_dict()) == ["module." + k for k in theirs.state_dict()]
    theirs.load_state_dict({k.removeprefix("module."): torch.from_numpy(v.numpy())
                            for k, v in net.state_dict().items()})
    x = rng.standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(net(_t(x, device)).numpy(),
                               theirs(torch.from_numpy(x)).detach().numpy(), rtol=1e-6, atol=1e-6)
    assert net.module is inner and list(net.parameters()) == list(inner.parameters())
    with pytest.raises(TypeError, match="Module"):
        nn.DataParallel(lambda x: x)


# ---- compile, matmul precision, determinism, thread counts ------------------------------------
def test_compile_hands_the_model_back(device, rng):
    model = nn.Linear(3, 2).to(device)
    assert ct.compile(model) is model
    assert ct.compile(model, mode="max-autotune", fullgraph=True) is model

    @ct.compile(dynamic=True)
    def f(x):
        return x * 2

    x = _t(rng.standard_normal(4), device)
    np.testing.assert_array_equal(f(x).numpy(), x.numpy() * 2)
    assert ct.compiler.is_compiling() is False and ct.compiler.disable(f) is f
    with pytest.raises(ValueError, match="unknown mode"):
        ct.compile(model, mode="fastest")
    with pytest.raises(TypeError, match="Module or a function"):
        ct.compile(3)


def test_matmul_precision_is_allow_tf32():
    saved = ct.backends.allow_tf32
    try:
        for precision, tf32 in (("high", True), ("highest", False), ("medium", True)):
            ct.set_float32_matmul_precision(precision)
            assert ct.backends.allow_tf32 is tf32 and ct.backends.cuda.matmul.allow_tf32 is tf32
        assert ct.get_float32_matmul_precision() == "high"
        ct.backends.cuda.matmul.allow_tf32 = False
        assert ct.get_float32_matmul_precision() == "highest" and not ct.backends.allow_tf32
        with pytest.raises(ValueError, match="highest"):
            ct.set_float32_matmul_precision("low")
    finally:
        ct.backends.allow_tf32 = saved


def test_deterministic_algorithms_and_thread_counts():
    assert not ct.are_deterministic_algorithms_enabled()
    try:
        ct.use_deterministic_algorithms(True, warn_only=True)
        assert ct.are_deterministic_algorithms_enabled()
        assert ct.is_deterministic_algorithms_warn_only_enabled()
    finally:
        ct.use_deterministic_algorithms(False)
    with pytest.raises(TypeError, match="bools"):
        ct.use_deterministic_algorithms(1)
    saved = ct.get_num_threads()
    try:
        ct.set_num_threads(1)
        assert ct.get_num_threads() == 1
    finally:
        ct.set_num_threads(saved)
    with pytest.raises(ValueError, match="positive int"):
        ct.set_num_threads(0)
    assert ct.get_num_interop_threads() >= 1
