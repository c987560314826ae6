"""The package's import structure: plug-ins register from above, nothing portable imports them."""
import ast
from pathlib import Path

import cltensor

PACKAGE = Path(cltensor.__file__).parent
# the package root re-exports the plug-in registry; the CLI lists plug-ins
ALLOWED = {"__init__.py", "__main__.py"}


def _imports(path):
    """(module, names) for every import in a file, anywhere in it, relative imports made
    absolute; names is () for a plain `import module`."""
    parts = ["cltensor", *path.relative_to(PACKAGE).with_suffix("").parts]
    parts.pop()  # __init__ stands for its package; a module's imports are relative to its package
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((a.name, ()) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = parts[:len(parts) - node.level + 1] if node.level else []
            yield ".".join(base + ([node.module] if node.module else [])), \
                tuple(a.name for a in node.names)


def _imported_modules(path):
    """The absolute module names a file imports, each `from X import name` as X and X.name."""
    found = set()
    for module, names in _imports(path):
        found.add(module)
        found.update(f"{module}.{name}" for name in names)
    return found


def test_nothing_portable_imports_the_plugins():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "plugins" or str(rel) in ALLOWED:
            continue
        if any(m == "cltensor.plugins" or m.startswith("cltensor.plugins.")
               for m in _imported_modules(path)):
            offenders.append(str(rel))
    assert offenders == []


def test_the_import_resolver_sees_relative_imports():
    """The check above reads relative imports right (a check that could not fail is none)."""
    mods = _imported_modules(PACKAGE / "plugins" / "nvidia.py")
    assert "cltensor.conv.dispatch" in mods and "cltensor.plugins.Plugin" in mods
    assert "cltensor.ops.gemm" in _imported_modules(PACKAGE / "plugins" / "__init__.py")


# what the kernel ops (cltensor/ops/) sit below: autograd and every layer above it
ABOVE_THE_OPS = ("autograd", "composed", "composed_methods", "linalg", "conv", "nn", "optim",
                 "torch", "amp", "special", "distributions")


def _imports_from_above_the_ops(path):
    """The modules of autograd or a layer above it that a file imports."""
    above = tuple(f"cltensor.{name}" for name in ABOVE_THE_OPS)
    return sorted(m for m in _imported_modules(path)
                  if any(m == a or m.startswith(a + ".") for a in above))


def test_the_kernel_ops_import_nothing_of_autograd_or_above():
    """cltensor/ops/ is one floor, below autograd: an op written with differentiable ops
    belongs in cltensor/composed/ (this holds whatever LAYERS says of the modules)."""
    offenders = {}
    for path in sorted((PACKAGE / "ops").rglob("*.py")):
        found = _imports_from_above_the_ops(path)
        if found:
            offenders[str(path.relative_to(PACKAGE))] = found
    assert offenders == {}


def test_the_floor_check_sees_imports_of_autograd():
    """The check above flags a composed op's imports and not a kernel op's (a check that could
    not fail is none)."""
    assert "cltensor.autograd.namespace" in _imports_from_above_the_ops(
        PACKAGE / "composed" / "arrange.py")
    assert _imports_from_above_the_ops(PACKAGE / "ops" / "reduce.py") == []


MAX_LINES = 800


def _function_local_imports(source, path=None):
    """The line numbers of the imports written inside a function of that source; with the
    file's path, only those of cltensor's own modules (an optional dependency, such as mpi4py,
    may load lazily)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.update(n.lineno for n in ast.walk(node)
                         if isinstance(n, (ast.Import, ast.ImportFrom))
                         and (path is None or _imports_the_package(n)))
    return sorted(found)


def _imports_the_package(node):
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "cltensor"
    return any(a.name.split(".")[0] == "cltensor" for a in node.names)


def test_no_package_file_is_over_800_lines():
    """Modules are split by what things are (gradients in one module per ops module, the GEMM
    engine by kernel family), each of a size one can read."""
    long = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        n = len(path.read_text().splitlines())
        if n > MAX_LINES:
            long[str(path.relative_to(PACKAGE))] = n
    assert long == {}


def test_autograd_imports_at_module_top():
    """autograd has no optional dependency to load lazily, so every import is at a module's top."""
    offenders = {}
    for path in sorted((PACKAGE / "autograd").rglob("*.py")):
        lines = _function_local_imports(path.read_text())
        if lines:
            offenders[str(path.relative_to(PACKAGE))] = lines
    assert offenders == {}


def test_no_module_imports_the_package_inside_a_function():
    """cltensor's own modules are imported at a module's top: an import hidden in a function
    would hide a cycle or an upward import from the checks below."""
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = _function_local_imports(path.read_text(), path)
        if lines:
            offenders[str(path.relative_to(PACKAGE))] = lines
    assert offenders == {}


def test_the_local_import_finder_sees_imports_in_methods():
    """The check above finds an import in a method's body (a check that could not fail is none)."""
    source = "import math\n\nclass A:\n    def f(self):\n        from . import x\n        import y\n"
    assert _function_local_imports(source) == [5, 6]
    assert _function_local_imports(source, PACKAGE / "a.py") == [5]


# The layers, lowest first: a module may import its own layer's modules and those below, never
# one above (CONTRIBUTING.md draws them). A module is placed by its longest listed prefix.
LAYERS = (
    ("runtime", {"device", "program", "profiler", "dtypes", "backends", "caches", "diskfiles",
                 "pocl_cache", "pocl_threads", "hooks", "shapes", "tunedb", "size", "graphs", "defaults"}),
    ("tensor", {"tensor", "operators", "methods"}),
    ("kernel ops", {"ops", "creation", "interop", "random", "ops.elementwise", "ops.pointwise",
                    "ops.reduce", "ops.shape", "ops.indexing", "ops.ranges", "ops.sort",
                    "ops.activation", "ops.pool", "ops.softmax", "ops.norm", "ops.loss",
                    "ops.resample", "ops.linalg"}),
    ("gemm", {"ops.gemm", "ops.matmul"}),
    ("autograd", {"autograd"}),
    ("composed ops", {"composed", "linalg", "composed_methods"}),
    ("conv", {"conv"}),
    ("nn and optim", {"nn", "optim", "distributions", "utils", "serialization", "distributed",
                      "special", "testing", "plugins", "cuda", "accelerator", "amp"}),
    ("top", {"", "__main__", "torch", "demo", "compiler", "onnx", "tune", "tune_conv"}),
)


def _layer_of(module):
    """The index in LAYERS of a module's layer (its longest listed prefix), None if unlisted."""
    best, found = -1, None
    for level, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".") or p == "") and len(p) > best:
                best, found = len(p), level
    return found if best > 0 or module == "" else None


def _import_graph():
    """{module: the package's modules it imports} (names relative to cltensor; "" the root);
    `from X import name` counts X.name where that is a module, else X."""
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in names.items():
        found = set()
        for mod, imported in _imports(path):
            subs = [f"{mod}.{a}" for a in imported
                    if f"{mod}.{a}".removeprefix("cltensor").lstrip(".") in names]
            found.update(subs)
            if len(subs) < len(imported) or not imported:
                found.add(mod)
        graph[name] = set()
        for mod in found:
            if mod != "cltensor" and not mod.startswith("cltensor."):
                continue
            rel = mod.removeprefix("cltensor").lstrip(".")
            while rel not in names:
                rel = rel.rpartition(".")[0]
            if rel != name:
                graph[name].add(rel)
    return graph


def _in_cycles(graph):
    """The modules that lie on some import cycle (members of strongly connected components of
    more than one module), by Tarjan's algorithm without recursion."""
    index, low, on, stack, found, counter = {}, {}, set(), [], set(), [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.update(comp)
    return found


def test_no_module_is_on_an_import_cycle():
    assert _in_cycles(_import_graph()) == set()


def test_every_module_has_a_layer():
    assert [m for m in _import_graph() if _layer_of(m) is None] == []


def test_no_module_imports_a_layer_above_its_own():
    graph = _import_graph()
    upward = {(m, d) for m, deps in graph.items() for d in deps
              if _layer_of(d) is not None and _layer_of(m) is not None
              and _layer_of(d) > _layer_of(m)}
    assert upward == set()


def test_the_layer_map_places_modules_by_their_longest_prefix():
    """ops.gemm.api sits in gemm though ops is a kernel-op prefix; an unknown module has no
    layer (a check that could not fail is none)."""
    names = [name for name, _ in LAYERS]
    assert names[_layer_of("ops.gemm.api")] == "gemm"
    assert names[_layer_of("ops.reduce")] == "kernel ops"
    assert names[_layer_of("")] == "top" and _layer_of("nonesuch") is None


def test_the_cycle_finder_sees_cycles():
    """The finder reports a planted cycle and nothing of a chain (a check that could not fail
    is none); the package's own graph resolves `from . import x` to the module x."""
    assert _in_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {"a", "b", "c"}
    assert _in_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == set()
    graph = _import_graph()
    assert "conv.dispatch" in graph["plugins"] and "ops.gemm" in graph["plugins"]
    assert "" not in graph["conv.dispatch"]


# the top layer, which the package root never imports: it may use the public API as users do
ROOT_USERS = {"demo", "torch.math_ops", "torch.nn_ops", "torch.norm_ops",
              "torch.optim_ops", "torch.random_ops", "torch.reduce_ops", "torch.select_ops"}


def test_no_module_imports_the_package_root():
    """The layers reach the differentiable functions through autograd.namespace, not through
    `import cltensor` or `from .. import where` (the root imports them all: a cycle)."""
    graph = _import_graph()
    assert {m for m, deps in graph.items() if "" in deps and m} <= ROOT_USERS


def test_the_graph_sees_imports_of_the_package_root():
    """`import cltensor` counts as the root, `from .. import dtypes` as the module dtypes (a
    check that could not fail is none)."""
    graph = _import_graph()
    assert "" in graph["demo"] and "dtypes" in graph["composed.composed"]
    assert "" not in graph["composed.composed"]


def _statements_beyond_reexports(source):
    """The line numbers of a module's top-level statements other than its docstring, imports
    and plain assignments of names (Tensor = ClTensor, __version__ = ...)."""
    found = []
    for i, node in enumerate(ast.parse(source).body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets) \
                and isinstance(node.value, (ast.Name, ast.Constant)):
            continue
        found.append(node.lineno)
    return found


def test_the_package_root_only_reexports():
    """ClTensor's methods are installed where their tables are (autograd/namespace.py,
    composed_methods.py, nn/methods.py, as cltensor/methods.py declares them), not by loops in
    cltensor/__init__.py."""
    assert _statements_beyond_reexports((PACKAGE / "__init__.py").read_text()) == []


def test_the_reexport_finder_sees_loops_and_setattr():
    """The check above flags a loop and an attribute set (a check that could not fail is none)."""
    source = '"""doc"""\nimport a\nT = a.T\nfor n in a.N:\n    setattr(T, n, 1)\nT.x = 2\nv = "1"\n'
    assert _statements_beyond_reexports(source) == [3, 4, 6]
