"""Built-in lowerings: reduction."""

from coreai_torch._table import LoweringSet

LOWERINGS = LoweringSet("reduction")
