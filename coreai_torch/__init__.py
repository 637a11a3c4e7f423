"""coreai_torch: convert ``torch.export`` programs to the Core AI dialect.

::

    ep = torch.export.export(model, args).run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep).to_coreai()
"""

from coreai_torch import compression  # registers the torch.ops.coreai compression ops
from coreai_torch.converter import TorchConverter
from coreai_torch.decompositions import get_decomp_table
from coreai_torch.errors import ConversionError, LoweringError, UnsupportedOpsError
from coreai_torch.externalize import ExternalizeSpec
from coreai_torch.precision import PrecisionReport, precision_report
from coreai_torch.verify import (
    find_first_bad_rewrite,
    find_first_divergence,
    find_first_nonfinite,
    verify,
)

__all__ = [
    "ConversionError", "ExternalizeSpec", "LoweringError", "PrecisionReport", "TorchConverter",
    "UnsupportedOpsError", "compression",
    "find_first_bad_rewrite", "find_first_divergence", "find_first_nonfinite",
    "get_decomp_table", "precision_report", "verify",
]
