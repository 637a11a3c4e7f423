"""``decompose_unsupported`` catches what tracing a decomposition raises, and nothing else."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from coreai_torch._table import qualified_name
from coreai_torch.decompositions import decompose_unsupported


@torch.library.custom_op("coreai_test_fallback_errors::triple", mutates_args=())
def triple(x: torch.Tensor) -> torch.Tensor:
    return x * 3


@triple.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


TRIPLE = torch.ops.coreai_test_fallback_errors.triple.default


class OurBug(Exception):
    """An error that is not one tracing a decomposition raises: a bug to report, not hide."""


def _unsupported(ep: torch.export.ExportedProgram):
    """The ops a converter without a lowering for ``triple`` cannot lower."""
    counts: Counter[str] = Counter()
    examples = {}
    for node in ep.graph.nodes:
        if node.op == "call_function" and node.target is TRIPLE:
            counts[qualified_name(TRIPLE)] += 1
            examples.setdefault(qualified_name(TRIPLE), node)
    return counts, examples


def _program() -> torch.export.ExportedProgram:
    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.ops.coreai_test_fallback_errors.triple(x) + 1

    return torch.export.export(M(), (torch.randn(2, 3),))


def _raising(error: Exception):
    def decomposition(x: torch.Tensor) -> torch.Tensor:
        raise error

    return lambda target: decomposition if target is TRIPLE else None


def test_a_trace_error_is_logged_with_its_type_and_message() -> None:
    log: list[str] = []
    ep = _program()
    out = decompose_unsupported(ep, _unsupported, entrypoint="main", log=log,
                                find=_raising(NotImplementedError("no rule for this layout")))
    assert out is ep  # left as it was: the op stays unsupported
    assert _unsupported(out)[0] == {qualified_name(TRIPLE): 1}
    assert log[-1] == ("main: torch's decomposition of coreai_test_fallback_errors::triple.default"
                       " failed to trace (NotImplementedError: no rule for this layout); the op "
                       "stays unsupported")


def test_an_error_that_is_not_a_trace_error_propagates() -> None:
    with pytest.raises(OurBug, match="a bug"):
        decompose_unsupported(_program(), _unsupported, entrypoint="main", log=[],
                              find=_raising(OurBug("a bug")))


def test_a_working_decomposition_computes_the_same() -> None:
    log: list[str] = []
    out = decompose_unsupported(_program(), _unsupported, entrypoint="main", log=log,
                                find=lambda t: (lambda x: x + x + x) if t is TRIPLE else None)
    assert _unsupported(out)[0] == {}
    x = torch.randn(2, 3)
    torch.testing.assert_close(out.module()(x), x * 3 + 1)
    assert log == ["main: decomposed coreai_test_fallback_errors::triple.default (1 node(s)) "
                   "on the fly: it has no lowering but torch has a decomposition"]
