"""Built-in lowerings: shape."""

from coreai_torch._table import LoweringSet

LOWERINGS = LoweringSet("shape")
