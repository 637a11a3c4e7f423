"""Drift guards: Core ATen coverage, the documented gaps, the kept list and the ops doc."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import torch

from coreai_torch.coverage import NOT_LOWERED, core_aten_ops, not_lowered, report
from coreai_torch.decompositions import kept_ops
from coreai_torch.lowerings import default_table

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import gen_supported_ops  # noqa: E402


def test_core_aten_ops_not_lowered_are_exactly_the_documented_list() -> None:
    assert sorted(not_lowered()) == sorted(NOT_LOWERED)


def _core_aten_from_the_dispatcher() -> set[str]:
    """Functional Core ATen overloads enumerated another way: from the dispatcher's list of
    registered operators rather than from the JIT schema list ``core_aten_ops`` reads."""
    out = set()
    for full in torch._C._dispatch_get_all_op_names():
        if not full.startswith("aten::"):
            continue
        base, _, overload = full.removeprefix("aten::").partition(".")
        overload = overload or "default"
        try:
            op = getattr(getattr(torch.ops.aten, base), overload)
        except (AttributeError, RuntimeError):
            continue
        schema = op._schema
        if torch.Tag.core in op.tags and not schema.is_mutable and not any(
                a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
            out.add(f"aten::{base}.{overload}")
    return out


def test_core_aten_ops_are_those_of_the_installed_torch() -> None:
    expected = _core_aten_from_the_dispatcher()
    assert len(expected) > 100  # the enumeration found the opset (about 190 in torch 2.13)
    assert core_aten_ops() == sorted(expected)


def test_library_code_does_not_import_the_tests() -> None:
    found = []
    for package in ("coreai_core", "coreai_torch"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                found += [f"{path.relative_to(ROOT)}:{node.lineno} imports {n}"
                          for n in names if n == "tests" or n.startswith("tests.")]
    assert found == []


def test_coverage_report_counts_the_verified_targets_it_is_given() -> None:
    lowered = sorted(default_table().names())
    text = report(verified=[*lowered[:3], "my_lib::not_a_lowering.default"],
                  tested_elsewhere=lowered[3:5])
    assert f"built-in lowerings: {len(lowered)}; verified by the op database: 3; " \
           "by dedicated tests: 2" in text
    core = core_aten_ops()
    assert f"lowered {len(core) - len(not_lowered())}/{len(core)}" in text
    assert "tools/coverage_report.py" in report()


def test_kept_composites_are_pinned() -> None:
    kept = set(kept_ops())
    for name in ("aten::scaled_dot_product_attention.default", "aten::silu.default",
                 "aten::hardswish.default", "aten::hardsigmoid.default",
                 "aten::pixel_shuffle.default", "aten::linear.default", "aten::matmul.default",
                 "aten::reflection_pad2d.default"):
        assert name in kept, name
    text = (ROOT / "docs" / "supported-ops.md").read_text()
    for name in kept:
        assert f"| `{name}` |" in text


def test_supported_ops_doc_is_in_sync() -> None:
    expected = gen_supported_ops.render()
    actual = (ROOT / "docs" / "supported-ops.md").read_text()
    assert actual == expected, (
        "docs/supported-ops.md is stale: run python tools/gen_supported_ops.py")
