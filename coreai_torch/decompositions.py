"""The decomposition table to run before conversion: decompose only what we cannot lower.

And the converter's fallback for what is left (:func:`decompose_unsupported`): an op with no
lowering but a torch decomposition is decomposed at conversion time.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

import attrs
import torch
import torch.fx
from torch.export import ExportedProgram

from coreai_torch._table import qualified_name

__all__ = ["get_decomp_table", "kept_ops", "CANONICAL_REWRITES", "decompose_unsupported",
           "torch_decomposition"]

aten = torch.ops.aten


def _adaptive_avg_pool1d(x: torch.Tensor, output_size: Any) -> torch.Tensor:
    return aten._adaptive_avg_pool2d(x.unsqueeze(-2), [1, *list(output_size)]).squeeze(-2)


def _adaptive_avg_pool2d(x: torch.Tensor, output_size: Any) -> torch.Tensor:
    return aten._adaptive_avg_pool2d(x, output_size)


def _adaptive_avg_pool3d(x: torch.Tensor, output_size: Any) -> torch.Tensor:
    return aten._adaptive_avg_pool3d(x, output_size)


# Composite wrappers that torch's default table expands *around* a Core ATen op we lower
# (adaptive_avg_pool2d with output 1x1 becomes mean, bypassing any override of
# _adaptive_avg_pool2d). We rewrite them to that Core ATen op instead.
CANONICAL_REWRITES = {
    aten.adaptive_avg_pool1d.default: _adaptive_avg_pool1d,
    aten.adaptive_avg_pool2d.default: _adaptive_avg_pool2d,
    aten.adaptive_avg_pool3d.default: _adaptive_avg_pool3d,
}


def _lowered_names(converter: Any) -> set[str]:
    if converter is not None:
        return set(converter.supported_ops())
    from coreai_torch.lowerings import default_table

    return set(default_table().names())


def get_decomp_table(converter: Any = None) -> Any:
    """torch.export's default decompositions minus every op we lower natively.

    Pass the ``converter`` whose lowerings (built-in and user) should be kept; by default the
    built-in table is used. Composites such as ``scaled_dot_product_attention``, ``silu`` or
    ``pixel_shuffle`` therefore reach the converter intact, and the adaptive average pools
    are rewritten to ``_adaptive_avg_pool{2,3}d`` (see ``CANONICAL_REWRITES``).
    """
    return _table_for(frozenset(_lowered_names(converter))).copy()


@functools.lru_cache(maxsize=8)
def _table_for(lowered: frozenset[str]) -> Any:
    # Building torch's default table is slow (hundreds of ms); callers get a copy.
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if op in CANONICAL_REWRITES:
            continue
        if qualified_name(op) in lowered:
            table.pop(op)
    for op, fn in CANONICAL_REWRITES.items():
        table[op] = fn
    return table


def kept_ops(converter: Any = None) -> list[str]:
    """Qualified names torch's default table would decompose but we keep (sorted)."""
    lowered = _lowered_names(converter)
    table = torch.export.default_decompositions()
    return sorted(qualified_name(op) for op in table.keys()  # noqa: SIM118 (not a dict)
                  if qualified_name(op) in lowered and op not in CANONICAL_REWRITES)


# -- the conversion-time fallback -----------------------------------------------------------------

# How the converter finds the ops it cannot lower in a program: (node count, first node) by
# qualified name.
FindUnsupported = Callable[[ExportedProgram], tuple[Counter[str], dict[str, torch.fx.Node]]]
FindDecomposition = Callable[[Any], Callable | None]

# A decomposition produces further decomposable ops; this bounds the rounds.
MAX_ROUNDS = 8

# What tracing a torch decomposition under export raises when it does not apply to the op at
# hand: torch's tracing errors are RuntimeErrors (functionalization rejecting an in-place write,
# fake tensors meeting a data-dependent or unsupported op, dynamo's Unsupported), and the
# decomposition's own Python raises the rest: its asserts (aten.complex's writes into
# ``new_empty``), argument checks and unimplemented cases. Anything else is a bug of ours and
# propagates.
TRACE_ERRORS: tuple[type[Exception], ...] = (
    RuntimeError, AssertionError, TypeError, ValueError, NotImplementedError, IndexError,
    KeyError, AttributeError)

_LOG = logging.getLogger("coreai_torch")


def decompose_unsupported(ep: ExportedProgram, unsupported: FindUnsupported, *, entrypoint: str,
                          log: list[str], find: FindDecomposition | None = None,
                          ) -> ExportedProgram:
    """``ep`` with every op that has no lowering but a torch decomposition decomposed.

    ``unsupported(ep)`` names the ops the converter cannot lower. A program calling in-place
    ops is functionalized first (torch.export keeps ``copy_`` into a view until the program is
    decomposed). Decomposing repeats (at most ``MAX_ROUNDS`` rounds), as a decomposition may
    produce further such ops. A decomposition is left out, and its op stays unsupported (the
    converter then reports it under the name the user called), when it does not trace or when
    it produces ops with neither a lowering nor a decomposition. Each step is appended to
    ``log`` (and logged on ``coreai_torch``), naming ``entrypoint``. ``find`` looks up torch's
    decomposition of an op (default :func:`torch_decomposition`).
    """
    return _Fallback(unsupported, find or torch_decomposition, entrypoint, log).run(ep)


@attrs.define
class _Fallback:
    """One entrypoint's fallback: the lookups, its log, and the decompositions that failed."""

    unsupported: FindUnsupported
    find: FindDecomposition
    entrypoint: str
    log: list[str]
    failed: set[Any] = attrs.field(factory=set)

    def note(self, line: str) -> None:
        self.log.append(f"{self.entrypoint}: {line}")
        _LOG.info(self.log[-1])

    def run(self, ep: ExportedProgram) -> ExportedProgram:
        counts, examples = self.unsupported(ep)
        mutating = sorted(qn for qn, node in examples.items() if _mutates(node.target))
        if mutating:
            # torch.export keeps in-place ops (copy_ into a select view, x[:, 1] = y) until the
            # program is decomposed; an empty table functionalizes it and decomposes nothing
            ep = ep.run_decompositions({})
            self.note(f"functionalized the program on the fly: it calls the in-place op(s) "
                      f"{', '.join(mutating)}, which become functional writes")
        for _ in range(MAX_ROUNDS):
            counts, examples = self.unsupported(ep)
            table = {}
            for qn, node in examples.items():
                if node.target in self.failed:
                    continue
                decomposition = self.find(node.target)
                if decomposition is not None:
                    table[node.target] = decomposition
                    self.note(f"decomposed {qn} ({counts[qn]} node(s)) on the fly: it has no "
                              "lowering but torch has a decomposition")
            if not table:
                break
            ep = self.apply(ep, table)
        return ep

    def apply(self, ep: ExportedProgram, table: dict[Any, Callable]) -> ExportedProgram:
        """``ep`` decomposed by ``table``, without the decompositions that fail (see
        :func:`decompose_unsupported`): all at once when they all work, else one at a time."""
        if len(table) > 1:
            try:
                out = ep.run_decompositions(table)
            except TRACE_ERRORS:
                out = None  # one of them does not trace: the loop below finds which
            if out is not None and not self.introduced(ep, out):
                return out
            for target, fn in table.items():  # find the failing ones, keep the rest
                ep = self.apply(ep, {target: fn})
            return ep
        target = next(iter(table))
        try:
            out = ep.run_decompositions(table)
        except TRACE_ERRORS as e:
            why = f"failed to trace ({type(e).__name__}: {_first_line(e)})"
        else:
            introduced = self.introduced(ep, out)
            if not introduced:
                return out
            why = f"produces {', '.join(sorted(introduced))}, which have no lowering"
        self.failed.add(target)
        self.note(f"torch's decomposition of {qualified_name(target)} {why}; the op stays "
                  "unsupported")
        return ep

    def introduced(self, before: ExportedProgram, after: ExportedProgram) -> set[str]:
        """Unsupported ops in ``after`` that ``before`` lacks and no decomposition removes."""
        old = set(self.unsupported(before)[0])
        return {qn for qn, node in self.unsupported(after)[1].items()
                if qn not in old and self.find(node.target) is None}


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:200] if text else "no message"


def _mutates(target: Any) -> bool:
    """Whether ``target`` is an aten op that writes into one of its arguments."""
    return isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable


def torch_decomposition(target: Any) -> Callable | None:
    """torch's decomposition of an aten OpOverload (its decomposition table's entry, or its
    CompositeImplicitAutograd kernel), or None."""
    if not isinstance(target, torch._ops.OpOverload):
        return None
    from torch._decomp import decomposition_table

    fn = decomposition_table.get(target)
    if fn is not None:
        return fn
    composite = torch._C.DispatchKey.CompositeImplicitAutograd
    if not target.has_kernel_for_dispatch_key(composite):
        return None
    kernel = target.py_kernels.get(composite)
    if kernel is not None and not isinstance(kernel, torch._C.DispatchKey):
        return kernel
    return functools.partial(_run_composite_kernel, target)


def _run_composite_kernel(op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> Any:
    # Not ``op.decompose``: run_decompositions installs each table entry as the op's Python
    # CompositeImplicitAutograd kernel, and ``decompose`` calls that kernel, i.e. itself again
    # (RecursionError, e.g. on aten::instance_norm). The C++ composite kernel is what we want.
    return op._op_dk(torch._C.DispatchKey.CompositeImplicitAutograd, *args, **kwargs)
