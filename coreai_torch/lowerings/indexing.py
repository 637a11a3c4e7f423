"""Built-in lowerings: indexing."""

from coreai_torch._table import LoweringSet

LOWERINGS = LoweringSet("indexing")
