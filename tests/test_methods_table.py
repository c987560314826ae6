"""ClTensor's surface is declared in one place: every public attribute is written on the class
(tensor.py, operators.py) or listed in cltensor/methods.py, whose tables match the ops'."""
import ast
import inspect
from pathlib import Path

import cltensor
from cltensor import interop, linalg, methods, random
from cltensor import autograd as ag
from cltensor.composed import arrange, composed, contract, inplace, searching
from cltensor.nn import methods as nn_methods
from cltensor.ops import elementwise, indexing, matmul, pointwise, reduce, shape, sort
from cltensor.ops import ranges
from cltensor.tensor import ClTensor

PACKAGE = Path(cltensor.__file__).parent
MODULES = {"ops.elementwise": elementwise, "ops.pointwise": pointwise, "ops.reduce": reduce,
           "ops.shape": shape, "ops.indexing": indexing, "ops.matmul": matmul,
           "ops.ranges": ranges, "random": random, "ops.sort": sort, "interop": interop,
           "autograd": ag, "composed.composed": composed, "composed.inplace": inplace,
           "composed.searching": searching, "composed.arrange": arrange,
           "composed.contract": contract, "linalg": linalg, "nn.methods": nn_methods}
TABLES = (methods.KERNEL_OPS, methods.COMPOSED_OPS, methods.NN)


def _class_body_names(path, class_name):
    """The names a class statement defines in its body (defs and assignments)."""
    tree = ast.parse(path.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    names = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                elts = t.elts if isinstance(t, ast.Tuple) else [t]
                names.update(e.id for e in elts if isinstance(e, ast.Name))
    return names


def _declared():
    """Every name cltensor/methods.py gives ClTensor, aliases (and their in-place forms) too."""
    names = {n for table in TABLES for listed in table.values() for n in listed}
    names |= set(methods.IN_PLACE_ALIASES)
    names |= {a + s for a, t in methods.ALIASES.items() for s in ("", "_")
              if hasattr(ClTensor, t + s)}
    return names


def _undeclared(cls):
    """cls's public attributes that neither tensor.py's ClTensor nor operators.py's
    TensorOperators writes and methods.py does not list."""
    written = (_class_body_names(PACKAGE / "tensor.py", "ClTensor")
               | _class_body_names(PACKAGE / "operators.py", "TensorOperators"))
    return sorted(n for n in dir(cls) if not n.startswith("_")
                  and n not in written and n not in _declared())


def test_every_public_attribute_is_written_on_the_class_or_declared():
    assert _undeclared(ClTensor) == []


def test_the_finder_reports_an_undeclared_method():
    """A method set on the class from elsewhere is reported (a check that could not fail is
    none)."""
    class Planted(ClTensor):
        pass
    Planted.nonesuch_method = lambda self: self
    assert _undeclared(Planted) == ["nonesuch_method"]


def test_each_table_lists_exactly_its_modules_methods():
    for table in TABLES:
        for module, names in table.items():
            assert len(set(names)) == len(names), module
            assert set(names) == set(MODULES[module].TENSOR_METHODS), module


def _misnamed():
    """Declared methods whose function is named neither as the method nor as NAMED_OTHERWISE
    says (a lambda must be listed there, with the call it makes)."""
    found = []
    for table in TABLES:
        for module, names in table.items():
            for name in names:
                fn_name = MODULES[module].TENSOR_METHODS[name].__name__
                if fn_name == "<lambda>":
                    if name not in methods.NAMED_OTHERWISE:
                        found.append(name)
                elif fn_name != methods.NAMED_OTHERWISE.get(name, name):
                    found.append(name)
    return found


def test_each_method_names_its_function(monkeypatch):
    assert _misnamed() == []
    monkeypatch.setitem(reduce.TENSOR_METHODS, "sum", reduce.mean)
    assert _misnamed() == ["sum"]  # a check that could not fail is none


def test_no_name_is_in_two_tables():
    listed = [n for table in TABLES for names in table.values() for n in names]
    assert len(listed) == len(set(listed))


def test_every_declared_name_is_installed():
    assert sorted(n for n in _declared() if not hasattr(ClTensor, n)) == []


def test_declared_methods_are_the_tables_functions_or_their_wrappers(device):
    """x.sum is reduce.sum wrapped by autograd and autocast (functools.wraps keeps the
    function's name); x.clone is elementwise's, x[...] indexing's: the table says where each
    comes from."""
    x = cltensor.ones(2, 3, device=device)
    assert inspect.unwrap(ClTensor.sum) is reduce.sum
    assert x.sum().item() == 6.0
    assert ClTensor.clone.__wrapped__ is elementwise.clone
    assert x[1:, :2].clone().shape == (1, 2)
