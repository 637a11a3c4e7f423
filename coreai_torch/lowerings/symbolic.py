"""Built-in lowerings: symbolic."""

from coreai_torch._table import LoweringSet

LOWERINGS = LoweringSet("symbolic")
