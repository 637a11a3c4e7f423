"""Apple's custom Metal kernels (``TorchMetalKernel``, ``MetalParameter``,
``TorchConverter.register_custom_kernels``): named here, not supported.

A Metal kernel is GPU source that only Apple's toolchain compiles and only a Mac runs; the
Core AI dialect here has no op holding Metal source and the numpy runtime could not execute
one, so a converted program could be neither run nor verified. Constructing a kernel or
registering kernels raises :class:`~coreai_torch.errors.MetalUnavailableError` saying so, so
that code written for Apple's package fails at the first line that needs Metal, with the
reason, rather than at an unknown name. Use Apple's ``coreai-torch`` on macOS for Metal
kernels, or write the operation as a torch custom op with a lowering
(docs/custom-op-lowering.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from coreai_torch.errors import MetalUnavailableError

__all__ = ["TorchMetalKernel", "metal_unavailable"]


def metal_unavailable(what: str) -> MetalUnavailableError:
    return MetalUnavailableError(
        f"{what}: custom Metal kernels need macOS with Metal and Apple's coreai-torch; this "
        "converter targets the Core AI dialect and its numpy runtime on any machine, which "
        "cannot hold or run Metal source. Convert models with Metal kernels with Apple's "
        "package on a Mac, or express the operation as a torch custom op with a lowering "
        "(see docs/custom-op-lowering.md).")


class TorchMetalKernel:
    """Apple's Metal kernel wrapper (``TorchMetalKernel(name, input_names, result_names, src,
    torch_defn, metal_params=None, helper_src=None, template_dtypes=None)``); constructing
    one raises :class:`~coreai_torch.errors.MetalUnavailableError` (see the module doc)."""

    metal_type_mappings: ClassVar[dict[str, str]] = {
        "bf16": "bfloat", "f16": "half", "f32": "float", "i1": "bool",
        "si8": "int8_t", "ui8": "uint8_t", "si16": "int16_t", "ui16": "uint16_t",
        "si32": "int", "ui32": "uint", "si64": "int64_t", "ui64": "uint64_t",
    }
    """Core AI element type -> the Metal Shading Language type a kernel sees (as Apple's)."""

    def __init__(self, name: str, input_names: Sequence[str], result_names: Sequence[str],
                 src: str, torch_defn: Callable[..., Any],
                 metal_params: Sequence[Any] | None = None, helper_src: str | None = None,
                 template_dtypes: dict[str, str] | None = None) -> None:
        raise metal_unavailable(f"TorchMetalKernel({name!r})")

    @property
    def result_shape_params(self) -> list[str]:
        """Apple's names of the kernel's result-shape parameters; needs Metal (raises)."""
        raise metal_unavailable("TorchMetalKernel.result_shape_params")

    def validate_and_set_dtype_templates(self, templates: dict[str, str],
                                         input_names: list[str]) -> None:
        """Apple's check of a kernel's dtype templates; needs Metal (raises)."""
        raise metal_unavailable("TorchMetalKernel.validate_and_set_dtype_templates")

    def template_kernel_src(self, kernel_id: str, input_metadata: list[Any],
                            result_metadata: list[Any]) -> str:
        """Apple's Metal source of the kernel templated for its inputs' and results' types
        (``input_metadata``/``result_metadata`` are Apple's ``coreai.authoring.metal
        .TensorMeta``). Raises :class:`~coreai_torch.errors.MetalUnavailableError`: no kernel
        exists here to template (see the module doc)."""
        raise metal_unavailable(f"TorchMetalKernel.template_kernel_src({kernel_id!r})")
