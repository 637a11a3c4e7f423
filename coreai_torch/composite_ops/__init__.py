"""nn.Modules that stand for composite ops, ready to be externalized (Apple's names and
signatures: ``GatherMM``, ``GatedDeltaUpdate``, ``RMSNorm``, ``RMSNormImpl``, ``RoPE``,
``SDPA``; and ``ExpertLinear``, a weight-owning layer over ``GatherMM``).

Each module computes its op in plain torch (so the model runs and exports as usual) and
declares ``composite_name`` (Apple's documented composite name) and ``composite_attrs``.
Externalized, each becomes a composite graph of that name carrying those attributes::

    converter.add_pytorch_module(model, export_fn, externalize_modules=[
        ExternalizeSpec(RMSNormImpl, composite_op_name="rms_norm",
                        composite_attrs=["axes", "eps"])])

One module per concept; see docs/composites.md.
"""

from coreai_torch.composite_ops.gated_delta_update import GatedDeltaUpdate
from coreai_torch.composite_ops.gather_mm import ExpertLinear, GatherMM
from coreai_torch.composite_ops.rms_norm import RMSNorm, RMSNormImpl
from coreai_torch.composite_ops.rope import RoPE
from coreai_torch.composite_ops.sdpa import SDPA

__all__ = ["SDPA", "ExpertLinear", "GatedDeltaUpdate", "GatherMM", "RMSNorm", "RMSNormImpl",
           "RoPE"]
