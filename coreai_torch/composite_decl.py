"""Apple's ``generate_composite_decl``: the declaration a lowering gives ``coreai.graph`` to
build a composite op (see docs/composites.md, "A composite from a lowering")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from coreai_core import Composite
from coreai_core.dialects import coreai

__all__ = ["generate_composite_decl"]


def generate_composite_decl(context: Any, op_name: str, input_names: Sequence[str],
                            output_names: Sequence[str], op_attributes: dict[str, Any],
                            ) -> coreai.CompositeDeclaration:
    """The declaration of composite ``op_name`` with these input and output names and
    attributes, for ``@coreai.graph(no_inline=True, composite_decl=...)``.

    ``context`` is Apple's MLIR context (``value.context``); there is none here and it is
    ignored. ``op_attributes`` must hold ``"version"`` (Apple's rule; 1 is the current API
    version): it becomes the declaration's version, the other entries its attributes.
    """
    if "version" not in op_attributes:
        raise ValueError(f"generate_composite_decl({op_name!r}): op_attributes needs a "
                         "'version' entry (1 for the current API version)")
    attributes = {k: v for k, v in op_attributes.items() if k != "version"}
    composite = Composite(op_name, int(op_attributes["version"]), attributes)
    return coreai.CompositeDeclaration(composite, input_names, output_names)
