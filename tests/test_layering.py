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
