"""The layout of cltensor.nn: nn.functional's public names (those of the single module it was),
the layers in the files torch names, no import cycle inside nn, functional never importing the
layers, and no file over 800 lines."""
import ast
import importlib
import pathlib
import types

import pytest

import cltensor.nn.functional as F
from cltensor import nn

NN = pathlib.Path(__file__).resolve().parents[1] / "cltensor" / "nn"

# nn.functional's __all__ when it was one module
FUNCTIONAL_ALL = """
adaptive_avg_pool1d adaptive_avg_pool2d adaptive_max_pool1d adaptive_max_pool1d_with_indices
adaptive_max_pool2d adaptive_max_pool2d_with_indices alpha_dropout avg_pool1d avg_pool2d
adaptive_avg_pool3d adaptive_max_pool3d adaptive_max_pool3d_with_indices avg_pool3d max_pool3d
max_pool3d_with_indices max_unpool3d
batch_norm bilinear binary_cross_entropy binary_cross_entropy_with_logits cat celu celu_
channel_shuffle conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d
cosine_embedding_loss
cosine_similarity cross_entropy ctc_loss dropout dropout1d dropout2d dropout3d elu elu_ embedding
embedding_bag feature_alpha_dropout flatten fold gaussian_nll_loss gelu glu group_norm
gumbel_softmax hardshrink hardsigmoid hardswish hardtanh hardtanh_ hinge_embedding_loss
huber_loss instance_norm interpolate kl_div l1_loss layer_norm leaky_relu leaky_relu_ linear
local_response_norm log_softmax logsigmoid lp_pool1d lp_pool2d margin_ranking_loss max_pool1d
max_pool1d_with_indices max_pool2d max_pool2d_with_indices max_unpool1d max_unpool2d mish
mse_loss multi_margin_loss multilabel_margin_loss multilabel_soft_margin_loss nll_loss
normalize pad pairwise_distance pdist pixel_shuffle pixel_unshuffle poisson_nll_loss prelu
relu relu6 relu_ rms_norm rrelu rrelu_ scaled_dot_product_attention selu selu_ sigmoid silu
smooth_l1_loss soft_margin_loss softmax softmin softplus softshrink softsign tanh tanhshrink
threshold threshold_ triplet_margin_loss triplet_margin_with_distance_loss unfold upsample
upsample_bilinear upsample_nearest
""".split()
# its other public names (the modules it merely imported aside), and a private one tests use
FUNCTIONAL_OTHERS = """
EMBEDDING_BAG_MODES GELU_C GELU_K GRADS INTERPOLATE_MODES INV_SQRT_2PI REDUCTIONS SELU_ALPHA
SELU_NEG SELU_SCALE SQRT_HALF one_hot _Adjoint
""".split()


def test_functional_keeps_its_public_names():
    assert sorted(F.__all__) == sorted(FUNCTIONAL_ALL)
    namespace = {}
    exec("from cltensor.nn.functional import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(FUNCTIONAL_ALL)
    for name in FUNCTIONAL_ALL + FUNCTIONAL_OTHERS:
        # NOTE: a submodule named as a function (dropout, linear) must not shadow it
        assert not isinstance(getattr(F, name), types.ModuleType), name
    assert callable(F.dropout) and callable(F.linear) and callable(F.one_hot)


def _module_name(path):
    parts = list(path.relative_to(NN.parent.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path, modules):
    """The cltensor.nn modules that `path` imports when it is loaded (module-level imports)."""
    name, out = _module_name(path), set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.parse(path.read_text()).body:
        nodes = ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node]
        for n in nodes:
            if isinstance(n, ast.ImportFrom):
                base = n.module or ""
                if n.level:
                    up = package[:len(package) - n.level + 1]
                    base = ".".join(up + ([n.module] if n.module else []))
                for alias in n.names:
                    sub = f"{base}.{alias.name}"
                    out.add(sub if sub in modules else base)
            elif isinstance(n, ast.Import):
                out.update(alias.name for alias in n.names)
    return {m for m in out if m in modules and m != name}


def _nn_graph():
    paths = {_module_name(p): p for p in NN.rglob("*.py")}
    return {name: _imports(p, paths) for name, p in paths.items()}


def test_no_import_cycle_in_nn():
    graph, done, path = _nn_graph(), set(), []

    def visit(v):
        assert v not in path, f"import cycle: {' -> '.join(path[path.index(v):] + [v])}"
        if v in done:
            return
        path.append(v)
        for w in sorted(graph[v]):
            visit(w)
        path.pop()
        done.add(v)

    for v in sorted(graph):
        visit(v)


def test_functional_never_imports_the_layers():
    for name, deps in _nn_graph().items():
        if name.startswith("cltensor.nn.functional"):
            assert not [d for d in deps if d.startswith("cltensor.nn.modules")], name


def test_no_file_in_nn_is_over_800_lines():
    long = {str(p.relative_to(NN)): n for p in NN.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 800}
    assert not long, long


def test_layers_are_where_torch_has_them():
    """cltensor.nn.modules.<file>.<Layer> for torch.nn.modules.<file>.<Layer>, for every layer
    both have (torch's Parameter is outside nn.modules)."""
    torch = pytest.importorskip("torch")
    for name in nn.__all__:
        home = getattr(torch.nn, name).__module__
        if home.startswith("torch.nn.modules."):
            module = importlib.import_module("cltensor.nn.modules." + home.rsplit(".", 1)[1])
            assert getattr(module, name) is getattr(nn, name), (name, home)
