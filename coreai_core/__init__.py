"""coreai_core: the Core AI tensor dialect, its IR, text form, optimizer and numpy runtime."""

from coreai_core._builder import current_graph, current_program, default_location
from coreai_core._dtypes import DType, promote_types
from coreai_core._ir import Composite, Dim, Graph, Location, Operation, TensorType, Value, WeightRef
from coreai_core._opdef import Floats, Ints, Range, defop
from coreai_core._program_api import Program, load, parse
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

__all__ = [
    "ArtifactError", "Composite", "CoreAIError", "DType", "Dim", "Floats", "Graph", "Ints",
    "Location", "MissingKernelError", "defop",
    "Operation", "ParseError", "Program", "Range", "RuntimeInputError", "TensorType",
    "TypeRuleError",
    "Value", "VerificationError", "WeightRef", "broadcast_shapes", "load", "parse",
    "promote_types",
    # the insertion context builders append to (for lowering and graph-building code)
    "current_graph", "current_program", "default_location",
]
