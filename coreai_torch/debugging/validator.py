"""Find the first node whose values fail a check (NaN, infinity, or one of yours).

A :class:`Validator` reads values through an inspector (:mod:`.inspector`) in the batches a
search strategy asks for (:mod:`.search_strategy`, bisection over depth levels for deep
graphs by default) and reports the failing nodes where the failure starts:
``result.failed_nodes[0]`` is the first. Bisection assumes a failure reaches every later
level, as NaN does; for a check of yours that does not hold, pass
``LevelOrderStrategy.top_down(graph)`` or ``ExhaustiveStrategy(graph)``.

:func:`create_validator_for_exported_program` checks an exported program in torch, node by
node; :func:`create_validator_for_coreai_program` a converted program on this project's
runtime.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np
import torch

from coreai_core import Program
from coreai_torch.debugging.graph import (
    ComputationGraph,
    create_graph_from_coreai_program,
    create_graph_from_exported_program,
)
from coreai_torch.debugging.inspector import (
    CachingInspector,
    Inspector,
    RuntimeInspector,
    TorchFXInspector,
)
from coreai_torch.debugging.search_strategy import LevelOrderStrategy, SearchStrategy
from coreai_torch.debugging.utils import needs_device_runtime

__all__ = ["TGraph", "TNode", "Validator", "create_validator_for_coreai_program",
           "create_validator_for_exported_program"]

logger = logging.getLogger(__name__)

TNode = TypeVar("TNode")
TGraph = TypeVar("TGraph")
Arrays = list[np.ndarray | None]


def _floats(values: Arrays) -> list[np.ndarray]:
    return [a for a in values if a is not None and a.dtype.kind in "fc"]


def has_nan(values: Arrays) -> bool:
    return any(np.isnan(a).any() for a in _floats(values))


def has_inf(values: Arrays) -> bool:
    return any(np.isinf(a).any() for a in _floats(values))


def has_nonfinite(values: Arrays) -> bool:
    return any((~np.isfinite(a)).any() for a in _floats(values))


class Validator(Generic[TNode, TGraph]):
    """Checks a graph's node values with a search strategy; see the module docstring."""

    @dataclass
    class Result:
        """The failing nodes where a failure starts (graph order), the nodes whose values
        could not be read, and the nodes left out."""

        failed_nodes: list[Any]
        unknown_nodes: list[Any]
        excluded_nodes: list[Any] = field(default_factory=list)

    def __init__(self, graph: ComputationGraph[TNode, TGraph], inspector: Inspector,
                 strategy: SearchStrategy[TNode, TGraph] | None = None,
                 show_progress: bool = True):
        self.graph = graph
        self.inspector = inspector
        self.strategy = strategy if strategy is not None else LevelOrderStrategy.auto(graph)
        self.show_progress = show_progress

    async def check(self, check_fn: Callable[[Arrays], bool], inputs: Any) -> Validator.Result:
        """Search for the first nodes whose values make ``check_fn`` return True."""
        strategy = self.strategy
        strategy.reset()
        verdict = SearchStrategy.ValidationResult
        batches = 0
        while batch := strategy.next_batch():
            values = await self.inspector.get_intermediates_for_ops(
                [n.op_id for n in batch], inputs)
            results = []
            for node in batch:
                found = values.get(node.op_id)
                if found is None:
                    results.append((node, verdict.UNKNOWN))
                else:
                    results.append((node, verdict.FAIL if check_fn(found) else verdict.PASS))
            await strategy.update(results)
            batches += 1
            if self.show_progress:
                logger.info("checked batch %d (%d nodes)", batches, len(batch))
        return Validator.Result(strategy.get_problematic_operations(),
                                strategy.get_unknown_operations())

    async def check_for_nans(self, inputs: Any) -> Validator.Result:
        return await self.check(has_nan, inputs)

    async def check_for_infs(self, inputs: Any) -> Validator.Result:
        """The first nodes holding infinity. An infinity rarely stays one (``sin(inf)``
        and ``inf - inf`` are NaN), so the search follows every non-finite value, and
        reports the nodes where that starts which hold an infinity."""
        found = await self.check(has_nonfinite, inputs)
        values = await self.inspector.get_intermediates_for_ops(
            [n.op_id for n in found.failed_nodes], inputs)
        infs = [n for n in found.failed_nodes if has_inf(values.get(n.op_id) or [])]
        return Validator.Result(infs, found.unknown_nodes, found.excluded_nodes)


def create_validator_for_exported_program(
        program: torch.export.ExportedProgram, strategy: SearchStrategy[Any, Any] | None = None,
        use_caching: bool = True) -> Validator[Any, Any]:
    """A validator running ``program`` in torch, node by node (ids: FX node names)."""
    graph = create_graph_from_exported_program(program)
    inspector: Inspector = TorchFXInspector(program)
    if use_caching:
        inspector = CachingInspector(inspector)
    return Validator(graph, inspector, strategy)


async def create_validator_for_coreai_program(
        program: Program, entry_point: str, strategy: SearchStrategy[Any, Any] | None = None,
        use_caching: bool = True, specialization_options: Any = None) -> Validator[Any, Any]:
    """A validator running ``program`` (this project's ``Program``) on the numpy runtime
    (ids: op positions in ``entry_point``'s graph)."""
    if specialization_options is not None:
        raise needs_device_runtime("create_validator_for_coreai_program(specialization_options"
                                   "=...) (compiling for a device)")
    if not isinstance(program, Program):
        raise TypeError("create_validator_for_coreai_program takes this project's Program "
                        f"(TorchConverter().to_coreai()), got {type(program).__name__}")
    graph = create_graph_from_coreai_program(program, entry_point)
    inspector: Inspector = RuntimeInspector(program, entry_point)
    if use_caching:
        inspector = CachingInspector(inspector)
    return Validator(graph, inspector, strategy)
