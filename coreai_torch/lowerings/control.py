"""Built-in lowerings: control."""

from coreai_torch._table import LoweringSet

LOWERINGS = LoweringSet("control")
