"""The package's layering: the IR is plain data, imports go one way, caches do not leak."""

from __future__ import annotations

import ast
import copy
import gc
import pickle
import weakref
from pathlib import Path

import numpy as np

import coreai_core
from coreai_core import Program, TensorType, load, parse
from coreai_core._ir import ProgramData
from coreai_core.dialects import coreai
from coreai_core.runtime import Runtime
from tests.import_graph import import_cycles

PACKAGE = Path(coreai_core.__file__).parent


def _imports(tree: ast.AST) -> list[tuple[ast.AST, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            out.append((node, node.module or ""))
    return out


def test_ir_imports_only_the_modules_below_it() -> None:
    tree = ast.parse((PACKAGE / "_ir.py").read_text())
    own = {name for _, name in _imports(tree) if name.startswith("coreai_core")}
    assert own == {"coreai_core._dtypes", "coreai_core._syntax", "coreai_core._tracked",
                   "coreai_core._types"}


def test_no_function_local_imports_except_lazy_torch() -> None:
    """A function-local import is how a cycle is hidden; only torch (heavy, loaded when a
    torch object is at hand) is imported late."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                found += [f"{path.relative_to(PACKAGE)}:{node.lineno} {name}"
                          for node, name in _imports(fn) if name != "torch"]
    assert found == []


def _program() -> Program:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((2,), "float32")}) as g:
        g.outputs({"y": coreai.relu(coreai.broadcasting_add(g["x"], 1.0))})
    return p


def test_runtime_plan_cache_does_not_keep_programs_alive() -> None:
    rt = Runtime()
    p = _program()
    rt.run(p, {"x": np.ones(2, np.float32)})
    assert rt.plan(p) is rt.plan(p)
    ref = weakref.ref(p)
    del p
    gc.collect()
    assert ref() is None
    assert len(rt._plans) == 0


def test_programs_users_get_have_the_user_methods(tmp_path: Path) -> None:
    p = _program()
    q = parse(str(p))
    p.save(tmp_path / "m.coreai")
    r = load(tmp_path / "m.coreai")
    for program in (p, q, r):
        assert type(program) is Program and isinstance(program, ProgramData)
        np.testing.assert_array_equal(program.run({"x": np.zeros(2, np.float32)})["y"],
                                      np.ones(2, np.float32))
    assert q == p == r


def test_copied_and_pickled_programs_own_their_graphs() -> None:
    """Graphs point to their program weakly; a copy's graphs (regions too) point to the copy."""
    p = Program()
    with p.graph("main", inputs={"x": TensorType((2,), "float32")}) as g:
        (y,) = coreai.if_(coreai.constant(True), [g["x"]], then_branch=coreai.neg,
                          else_branch=lambda a: a)
        g.outputs({"y": y})
    x = np.array([1.0, -2.0], np.float32)
    for q in (copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert q == p and q is not p
        graphs = [gr for top in q.graphs.values()
                  for gr in (top, *(r for op in top.walk() for r in op.regions.values()))]
        assert len(graphs) == 3 and all(gr.program is q for gr in graphs)
        np.testing.assert_array_equal(q.run({"x": x})["y"], -x)


def test_no_import_cycle_not_even_for_type_checking() -> None:
    """No two modules import each other, directly or through others, ``TYPE_CHECKING``
    imports included: modules pass values or share a protocol instead of reaching in."""
    assert import_cycles(PACKAGE) == []


def test_the_cycle_check_sees_type_checking_and_relative_imports(tmp_path: Path) -> None:
    """Guards the guard: a cycle closed only under ``TYPE_CHECKING`` or through a relative
    import is reported."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\n"
                                      "if TYPE_CHECKING:\n    from pkg import a\n")
    (pkg / "c.py").write_text("from . import d\n")
    (pkg / "d.py").write_text("from .c import x\n")
    (pkg / "e.py").write_text("import pkg.a\n")
    assert import_cycles(pkg) == [["pkg.a", "pkg.sub.b"], ["pkg.c", "pkg.d"]]


def _private_names_imported(path: Path, module: str) -> list[str]:
    """``from M import _x`` where ``_x`` is a name of module M (not a private submodule of a
    package on ``module``'s own path: a package's ``_`` modules serve the package)."""
    found = []
    for node, imported in _imports(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom) or not imported.startswith("coreai_core"):
            continue
        for alias in node.names:
            if not alias.name.startswith("_") or alias.name.startswith("__"):
                continue
            submodule = PACKAGE.parent / imported.replace(".", "/") / alias.name
            is_module = submodule.with_suffix(".py").exists() or submodule.is_dir()
            if is_module and (module + ".").startswith(imported + "."):
                continue
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {imported}.{alias.name}")
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    """A ``_`` name is its module's own; what other modules need has a public name in the
    module that owns it (``coreai_core._shapes.per_axis``, not ``dialects._nn._fill``)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found += _private_names_imported(path, module)
    assert found == []
