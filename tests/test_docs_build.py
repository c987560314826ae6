"""scripts/build_docs.py: which modules it documents, and its docstring check (an Args entry
that is malformed or names a parameter the function does not take fails the build). The build
itself runs in .ci/run after ruff: it imports and renders 185 modules, 40-65 s on two cores,
too slow for the suite."""
import importlib.util
import itertools
import pathlib
import sys

import pytest

pytest.importorskip("pdoc", reason="the API docs build needs pdoc (the dev extra)")
import pdoc.doc  # noqa: E402

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "scripts" / "build_docs.py"
spec = importlib.util.spec_from_file_location("build_docs", SCRIPT)
build_docs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build_docs)
SAMPLES = itertools.count()


@pytest.fixture
def problems(tmp_path, monkeypatch):
    """A function that writes source as a new module and returns what bad_args and
    bad_references report for it, each line without the module's name (pdoc caches modules by
    name, so each gets its own)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    names = []

    def check(source):
        names.append(f"docs_sample_{next(SAMPLES)}")
        (tmp_path / f"{names[-1]}.py").write_text(source)
        module = pdoc.doc.Module.from_name(names[-1])
        found = build_docs.bad_args(module) + build_docs.bad_references(module)
        return [line.split(".", 1)[1] for line in found]
    yield check
    for name in names:
        sys.modules.pop(name, None)


GOOD = '''
def f(x, stride=1, dilation=1, *, out=None):
    """Sum, as cltensor.sum does; see cltensor.conv.conv2d and `cltensor.nn.functional`.

    Args:
        x (ClTensor): the input; a long description that goes on
            over a second line: with a colon in it.
        stride, dilation: ints.
        out: where to write.

    Returns:
        a tensor.
    """

class C:
    def m(self, a):
        """Method.

        Args:
            a: a number.
        """
'''


def test_well_formed_args_pass(problems):
    assert problems(GOOD) == []


def test_args_naming_a_missing_parameter_fail(problems):
    bad = GOOD.replace("a: a number", "b: a number").replace("stride, dilation:", "stride, padding:")
    assert problems(bad) == ["f: Args names 'padding', which it does not take",
                             "C.m: Args names 'b', which it does not take"]


def test_malformed_args_entry_fails(problems):
    bad = GOOD.replace("out: where to write.", "out where to write.")
    assert problems(bad) == ["f: malformed Args entry 'out where to write.'"]


def test_entries_of_a_section_end_at_its_indent():
    doc = "Args:\n    a: one.\n        more: of a.\n    b: two.\nReturns:\n    x: not an arg.\n"
    assert build_docs.args_entries(doc) == [(["a"], "a: one."), (["b"], "b: two.")]


def test_every_public_module_is_documented_but_the_torch_device():
    names = build_docs.public_modules()
    assert {"cltensor", "cltensor.nn.functional", "cltensor.nn.functional.pooling",
            "cltensor.conv.dispatch", "cltensor.optim.sgd"} <= set(names)
    assert not [n for n in names if n.startswith("cltensor.torch") or "._" in n]
    assert len(names) == len(set(names))


def test_docstring_naming_a_missing_object_fails(problems):
    bad = GOOD.replace("cltensor.conv.conv2d", "cltensor.conv.conv3d")
    assert problems(bad) == ["f: docstring names cltensor.conv.conv3d, which does not exist"]
