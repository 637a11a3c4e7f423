"""Built-in lowerings: nn."""

from coreai_torch._table import LoweringSet

LOWERINGS = LoweringSet("nn")
