"""coreai_core: the Core AI tensor dialect, its IR, text form, optimizer and numpy runtime."""

from coreai_core._dtypes import DType, promote_types
from coreai_core._ir import Dim, Graph, Location, Operation, Program, TensorType, Value, WeightRef
from coreai_core._opdef import Floats, Ints, defop
from coreai_core._shapes import broadcast_shapes
from coreai_core.errors import (
    ArtifactError,
    CoreAIError,
    MissingKernelError,
    ParseError,
    RuntimeInputError,
    TypeRuleError,
    VerificationError,
)


def parse(text: str, weights=None) -> Program:
    """Parse the text form back into a Program (``weights`` binds elided weight data)."""
    from coreai_core.text import parse_program

    return parse_program(text, weights=weights)


def load(path) -> Program:
    """Load a program saved with ``Program.save`` (never unpickles; verifies checksums)."""
    from coreai_core.serialization import load as _load

    return _load(path)


__all__ = [
    "ArtifactError", "CoreAIError", "DType", "Dim", "Floats", "Graph", "Ints", "Location",
    "MissingKernelError", "defop",
    "Operation", "ParseError", "Program", "RuntimeInputError", "TensorType", "TypeRuleError",
    "Value", "VerificationError", "WeightRef", "broadcast_shapes", "load", "parse",
    "promote_types",
]
