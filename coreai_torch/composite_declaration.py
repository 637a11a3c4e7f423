"""Apple's ``generate_composite_decl``: the declaration a lowering gives ``coreai.graph`` to
build a composite op (see docs/composites.md, "A composite from a lowering")."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from coreai_core import Composite
from coreai_core.dialects import coreai

__all__ = ["generate_composite_decl"]


def generate_composite_decl(context: Any, composite_name: str, input_names: Sequence[str],
                            output_names: Sequence[str], op_attributes: dict[str, Any],
                            version: int = 1) -> coreai.CompositeDeclaration:
    """The declaration of composite ``composite_name`` with these input and output names and
    attributes, for ``@coreai.graph(no_inline=True, composite_decl=...)`` (Apple's signature).

    ``context`` is Apple's MLIR context (``value.context``); there is none here and it is
    ignored. ``version`` is the composite's API version (1, the current one, by default), as in
    Apple's package. ``op_attributes`` may hold it under ``"version"`` instead, the form this
    package took before it adopted Apple's signature: deprecated (a ``DeprecationWarning``;
    pass ``version=`` instead); that entry is used when ``version`` is left at 1, and any
    other ``version`` must equal it. ``op_attributes`` is not modified (Apple's writes
    ``"version"`` into it).
    """
    if not isinstance(composite_name, str) or not composite_name:
        raise TypeError(f"generate_composite_decl: composite_name must be a non-empty str, "
                        f"got {composite_name!r}")
    for arg, names in (("input_names", input_names), ("output_names", output_names)):
        if isinstance(names, str) or not all(isinstance(n, str) for n in names):
            raise TypeError(f"generate_composite_decl({composite_name!r}): {arg} must be a "
                            f"sequence of str, got {names!r}")
    attributes = dict(op_attributes)
    given = attributes.pop("version", version)
    if "version" in op_attributes:
        warnings.warn(f"generate_composite_decl({composite_name!r}): a 'version' entry in "
                      "op_attributes is deprecated; pass version=... (Apple's signature)",
                      DeprecationWarning, stacklevel=2)
    if int(given) != int(version) and version != 1:
        raise ValueError(f"generate_composite_decl({composite_name!r}): version={version} "
                         f"but op_attributes['version'] is {given}; give the version once")
    composite = Composite(composite_name, int(given), attributes)
    return coreai.CompositeDeclaration(composite, input_names, output_names)
