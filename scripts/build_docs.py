"""Builds the API reference from the docstrings with pdoc into build/apidocs (git-ignored).

    python scripts/build_docs.py [--out DIR]

Every public module gets a page (cltensor.torch is left out: it imports torch and registers a
device in it on import; docs/torch_device.md documents it). Warnings are errors: the build
fails if pdoc warns (a module that cannot be imported, an annotation it cannot read, ...) or if
a Google-style `Args:` section has an entry that is not `name: text` or that names a parameter
the function does not take, or if a docstring names a cltensor.* object that does not exist.
"""
import argparse
import importlib
import pathlib
import re
import sys
import warnings

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # document this tree's cltensor, not an installed copy

import pdoc  # noqa: E402
import pdoc.doc  # noqa: E402
import pdoc.render  # noqa: E402

SKIP = ("cltensor.torch",)  # leave out, with its submodules
SECTION = re.compile(r"^(\s*)(Args|Arguments|Parameters):\s*$")
NAME = r"\*{0,2}[A-Za-z_]\w*"
ENTRY = re.compile(rf"^({NAME}(?:,\s*{NAME})*)(\s*\(.*?\))?:")  # `a:`, `a (int):`, `a, b:`
REFERENCE = re.compile(r"(?<![\w.])cltensor(?:\.[A-Za-z_]\w*)+")  # cltensor.nn.functional.relu


def public_modules():
    """Every public module of the package by name, found on disk: pdoc itself only follows the
    submodules that a package's __all__ lists (so it would leave out nn.functional)."""
    names = []
    for path in sorted((ROOT / "cltensor").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        if any(p.startswith("_") for p in parts) or name.startswith(SKIP):
            continue
        names.append(name)
    return names


def args_entries(docstring):
    """(names, line) for each entry of the docstring's Args sections; names is None where the
    line at an entry's indent is not `name: text`, `name (type): text` or `a, b: text`."""
    entries, base, indent = [], None, None
    for line in docstring.splitlines():
        head = SECTION.match(line)
        if head:
            base, indent = len(head.group(1)), None
            continue
        if base is None or not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if depth <= base:
            base = None  # the section ended
            continue
        indent = depth if indent is None else indent
        if depth == indent:
            entry = ENTRY.match(line.strip())
            names = [n.strip().lstrip("*") for n in entry.group(1).split(",")] if entry else None
            entries.append((names, line.strip()))
    return entries


def _functions(namespace):
    """Every public function and method pdoc documents in a module or class, recursively."""
    for member in namespace.own_members:
        if isinstance(member, pdoc.doc.Function):
            yield member
        elif isinstance(member, pdoc.doc.Class):
            yield from _functions(member)


def bad_args(module):
    """A line for each Args entry that is malformed or names a parameter the function lacks."""
    problems = []
    for fn in _functions(module):
        try:
            params = set(fn.signature.parameters)
        except (TypeError, ValueError):
            continue
        takes_kwargs = any(p.kind == p.VAR_KEYWORD for p in fn.signature.parameters.values())
        for names, line in args_entries(fn.docstring):
            if names is None:
                problems.append(f"{fn.fullname}: malformed Args entry {line!r}")
                continue
            for name in names:
                if name not in params and not takes_kwargs:
                    problems.append(f"{fn.fullname}: Args names {name!r}, which it does not take")
    return problems


def resolves(name):
    """Whether a dotted name such as cltensor.conv.conv2d names a module or an attribute."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _docstrings(namespace):
    """(name, docstring) of a module or class and of everything pdoc documents in it."""
    yield namespace.fullname, namespace.docstring
    for member in namespace.own_members:
        if isinstance(member, pdoc.doc.Class):
            yield from _docstrings(member)
        else:
            yield member.fullname, member.docstring


def bad_references(module):
    """A line for each cltensor.* name in a docstring that names nothing (a renamed or moved
    function); the torch device's names are not checked, as it is not imported."""
    problems = []
    for where, text in _docstrings(module):
        for name in sorted(set(REFERENCE.findall(text or ""))):
            if not name.startswith(SKIP) and not resolves(name):
                problems.append(f"{where}: docstring names {name}, which does not exist")
    return problems


def write(modules, out):
    """Each module's page, the index and the search data, as pdoc.pdoc writes them (which would
    walk each package again and find every submodule twice)."""
    for module in modules.values():
        page = out / f"{module.fullname.replace('.', '/')}.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(pdoc.render.html_module(module, modules))
    (out / "index.html").write_text(pdoc.render.html_index(modules))
    (out / "search.js").write_text(pdoc.render.search_index(modules))


def build(out):
    """Writes the reference into out; returns the warnings and docstring problems."""
    pdoc.render.configure(docformat="google", show_source=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        modules = {name: pdoc.doc.Module.from_name(name) for name in public_modules()}
        write(modules, out)
    problems = [f"{w.category.__name__}: {w.message}" for w in caught]
    for module in modules.values():
        problems += bad_args(module) + bad_references(module)
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "build" / "apidocs")
    args = parser.parse_args(argv)
    problems = build(args.out)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"build_docs: {len(problems)} warning(s), treated as errors", file=sys.stderr)
        return 1
    print(f"build_docs: API reference in {args.out}/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
