"""The Core AI dialect: every op's builder, grouped by family.

Each builder *is* its op's definition (see ``coreai_core._opdef``): calling it inside an
insertion context appends the op to the current graph and returns its result Value(s).
``coreai.OPS`` maps op names to their definitions. Type checkers read the builders' exact
signatures from ``coreai.pyi``, generated from the op definitions by
``tools/gen_dialect_stub.py``.
"""

from types import ModuleType

from coreai_core._opdef import OPS
from coreai_core.dialects import (
    _complex,
    _compression,
    _control,
    _elementwise,
    _fft,
    _linalg,
    _nn,
    _random,
    _special,
    _tensor,
    graph_decorator,
)

# The family modules, in the order their names are listed; each one's ``__all__`` is derived
# from its op definitions (``builder_names``), so a new op is exported by its definition alone.
_FAMILIES: tuple[ModuleType, ...] = (
    _control, _elementwise, _nn, _tensor, _compression, _random, _special, _complex, _fft,
    _linalg,
)


def _exports(families: tuple[ModuleType, ...]) -> dict[str, object]:
    """Every family's public names; a name two families export is an error naming both."""
    found: dict[str, object] = {}
    home: dict[str, str] = {}
    for family in families:
        for name in family.__all__:
            if name in found:
                raise ImportError(f"coreai.{name} is exported by both {home[name]} and "
                                  f"{family.__name__}; rename one of them")
            found[name] = getattr(family, name)
            home[name] = family.__name__
    return found


# the graph decorator (Apple's form of a composite built in a lowering) builds no op of its own
_EXPORTED = (*_FAMILIES, graph_decorator)
globals().update(_exports(_EXPORTED))
__all__ = ["OPS", *_exports(_EXPORTED)]
