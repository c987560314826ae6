"""The package's import structure: plug-ins register from above, nothing portable imports them."""
import ast
from pathlib import Path

import cltensor

PACKAGE = Path(cltensor.__file__).parent
# the package root re-exports the plug-in registry; the CLI lists plug-ins
ALLOWED = {"__init__.py", "__main__.py"}


def _imported_modules(path):
    """The absolute module names a file imports (relative imports resolved), anywhere in it."""
    parts = ["cltensor", *path.relative_to(PACKAGE).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    else:
        parts.pop()  # a module's package
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = parts[:len(parts) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)
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


MAX_LINES = 800


def _function_local_imports(source):
    """The line numbers of the imports written inside a function of that source."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.update(n.lineno for n in ast.walk(node)
                         if isinstance(n, (ast.Import, ast.ImportFrom)))
    return sorted(found)


def test_no_autograd_file_is_over_800_lines():
    """Gradients sit in one module per ops module, each of a size one can read."""
    long = {}
    for path in sorted((PACKAGE / "autograd").rglob("*.py")):
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


def test_the_local_import_finder_sees_imports_in_methods():
    """The check above finds an import in a method's body (a check that could not fail is none)."""
    source = "import math\n\nclass A:\n    def f(self):\n        from . import x\n        import y\n"
    assert _function_local_imports(source) == [5, 6]
