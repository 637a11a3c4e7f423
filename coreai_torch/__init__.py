"""coreai_torch: convert ``torch.export`` programs to the Core AI dialect.

::

    ep = torch.export.export(model, args).run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep).to_coreai()

Apple's documented names are here too (docs/coreai-interop.md, "Apple's API here"):
``ExternalizeSpec``, ``TorchConverter``, ``get_decomp_table``, ``coreai_torch.composite_ops``,
``TorchMetalKernel`` and ``MetalParameter`` (Metal needs a Mac: a clear error here).
"""

from importlib import metadata as _metadata
from typing import Any

from coreai_core.assets import register_asset_writer as _register_asset_writer
from coreai_core.assets import register_program_converter as _register_program_converter
from coreai_torch import compression  # registers the torch.ops.coreai compression ops
from coreai_torch._aiprogram import aiprogram_of as _aiprogram_of
from coreai_torch._asset import save_aimodel_asset as _save_aimodel_asset
from coreai_torch.composite_declaration import generate_composite_decl
from coreai_torch.converter import TorchConverter
from coreai_torch.decompositions import get_decomp_table
from coreai_torch.errors import (
    ConversionError,
    LoweringError,
    MetalUnavailableError,
    UnsupportedOpsError,
)
from coreai_torch.externalize import ExternalizeSpec
from coreai_torch.metal import TorchMetalKernel
from coreai_torch.precision import PrecisionReport, precision_report
from coreai_torch.verify import (
    find_first_bad_rewrite,
    find_first_divergence,
    find_first_nonfinite,
    verify,
)

# Program.save_asset("x.aimodel") writes through coreai_torch.aimodel (see coreai_core.assets)
_register_asset_writer(".aimodel", _save_aimodel_asset)
# program.to_aiprogram() builds Apple's AIProgram through coreai_torch.aimodel (same seam)
_register_program_converter("aiprogram", _aiprogram_of)

try:
    __version__ = _metadata.version("coreai-torch")
except _metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "ConversionError", "ExternalizeSpec", "LoweringError", "MetalParameter",
    "MetalUnavailableError", "PrecisionReport", "TorchConverter", "TorchMetalKernel",
    "UnsupportedOpsError", "__version__", "compression",
    "find_first_bad_rewrite", "find_first_divergence", "find_first_nonfinite",
    "generate_composite_decl", "get_decomp_table", "precision_report", "verify",
]


def __getattr__(name: str) -> Any:
    # Apple re-exports coreai.authoring.MetalParameter; it comes with the coreai extra
    if name == "MetalParameter":
        from coreai_torch.errors import MissingExtraError

        try:
            from coreai_torch.aimodel._apple import ca
        except MissingExtraError as e:
            raise MissingExtraError("coreai_torch.MetalParameter is Apple's "
                                    "coreai.authoring.MetalParameter: pip install "
                                    "'coreai-torch[coreai]' (Metal kernels also need macOS)"
                                    ) from e
        return ca.MetalParameter
    raise AttributeError(f"module 'coreai_torch' has no attribute {name!r}")
