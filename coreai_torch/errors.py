"""Errors raised by the converter; each says what failed, where, and how to fix it."""

from __future__ import annotations

from collections.abc import Sequence

import attrs


class ConversionError(Exception):
    """Base class of every coreai_torch conversion error."""


@attrs.frozen
class UnsupportedOp:
    qualified_name: str
    count: int
    example_node: str
    source: str | None


def lowering_stub(qualified_name: str) -> str:
    fn = "lower_" + qualified_name.replace("::", "_").replace(".", "_")
    return (
        f'@converter.register_torch_lowering("{qualified_name}")\n'
        f"def {fn}(values_map, node, loc):\n"
        f"    x = get_operand(values_map, node, 0, loc)\n"
        f"    return coreai.<op>(x, loc=loc)  # build the result with coreai builders\n"
    )


class UnsupportedOpsError(ConversionError):
    """The program calls ops with no lowering; all of them are listed, before any lowering."""

    def __init__(self, ops: Sequence[UnsupportedOp]) -> None:
        self.ops = list(ops)
        lines = [f"{len(self.ops)} op(s) in the exported program have no lowering:"]
        for op in self.ops:
            where = f" at {op.source}" if op.source else ""
            lines.append(f"  {op.qualified_name}: {op.count} node(s), e.g. {op.example_node!r}"
                         f"{where}")
        lines.append("Register a lowering on your converter, for example:")
        lines.append("")
        lines.append(lowering_stub(self.ops[0].qualified_name))
        lines.append("(see docs/custom-op-lowering.md)")
        super().__init__("\n".join(lines))


class LoweringError(ConversionError):
    """A lowering raised or returned something of the wrong type for its FX node."""

    def __init__(self, message: str, *, node: str, target: str, source: str | None,
                 lowering: str | None) -> None:
        self.node = node
        self.target = target
        self.source = source
        self.lowering = lowering
        where = f"FX node {node!r} ({target})"
        if source:
            where += f" at {source}"
        by = f" in lowering {lowering}" if lowering else ""
        super().__init__(f"{where}{by}: {message}")


class AimodelExportError(ConversionError):
    """A program cannot be exported as an ``.aimodel`` (nothing was written)."""


class MissingExtraError(ImportError):
    """An optional dependency of the feature being used is not installed."""


class MetalUnavailableError(NotImplementedError):
    """A custom Metal kernel (Apple's ``TorchMetalKernel``) was used: it needs macOS with
    Metal and Apple's toolchain; see :mod:`coreai_torch.metal`."""


@attrs.frozen
class UnexportableOp:
    """One kind of op (or graph feature) the ``.aimodel`` exporter refuses, with why."""

    op: str
    reason: str
    count: int
    location: str


class UnexportableOpsError(AimodelExportError):
    """Ops with no exact Core AI form: all of them are listed, before anything is written."""

    def __init__(self, ops: Sequence[UnexportableOp]) -> None:
        self.ops = list(ops)
        lines = [f"{len(self.ops)} kind(s) of op cannot be exported to an .aimodel "
                 f"(nothing was written):"]
        for op in self.ops:
            lines.append(f"  {op.op}: {op.count} op(s), e.g. at {op.location}: {op.reason}")
        lines.append("Change the model so that these ops are not needed, or keep running the "
                     "program with coreai_core's runtime (see docs/coreai-interop.md for what "
                     "maps and why the rest does not).")
        super().__init__("\n".join(lines))
