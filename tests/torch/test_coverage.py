"""Drift guards: Core ATen coverage, the documented gaps, the kept list and the ops doc."""

from __future__ import annotations

import sys
from pathlib import Path

from coreai_torch.coverage import NOT_LOWERED, core_aten_ops, not_lowered
from coreai_torch.decompositions import kept_ops

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import gen_supported_ops  # noqa: E402


def test_core_aten_ops_not_lowered_are_exactly_the_documented_list() -> None:
    assert sorted(not_lowered()) == sorted(NOT_LOWERED)


def test_core_aten_count_matches_the_installed_torch() -> None:
    # torch 2.13: 188 functional Core ATen overloads by the usual count, plus avg_pool1d and
    # sym_is_contiguous, which are tagged core too once every schema is enumerated
    assert len(core_aten_ops()) == 190


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
