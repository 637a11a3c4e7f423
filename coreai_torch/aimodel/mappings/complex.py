"""Op mappings (complex family): building, taking apart and viewing complex tensors.

Complex values inside a graph are Core AI ``complex<f32>`` tensors (complex128 is narrowed to
complex64 like float64 to float32); Apple's interpreter builds, takes apart and computes
with them. A graph's inputs and outputs cannot be complex (the exporter refuses them: Apple's
runtime reports them as ``cfloat32``, which ``run_aimodel`` does not bind); pass the parts
(``view_as_real``) instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from coreai_core import Operation
from coreai_torch.aimodel._apple import ca, constant
from coreai_torch.aimodel._context import ExportContext
from coreai_torch.aimodel._emit import complex_parts, i32, slice_axis
from coreai_torch.aimodel.mappings._registry import mapping_decorator, mapping_registry

__all__ = ["MAPPINGS"]

MAPPINGS = mapping_registry(__name__)
mapping = mapping_decorator(MAPPINGS)


@mapping("coreai.complex", "create_complex (+ broadcast_to)")
def complex_(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    shape = i32(ctx.result_shape(op))
    re, im = (ca.broadcast_to(x, shape) if tuple(x.type.shape) != tuple(shape) else x
              for x in xs)
    return [ca.create_complex(re, im)]


@mapping("coreai.real", "real_part")
def real(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return [ca.real_part(xs[0])]


@mapping("coreai.imag", "imaginary_part")
def imag(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return [ca.imaginary_part(xs[0])]


@mapping("coreai.conj", "create_complex(real_part, imaginary_part * -1)")
def conj(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    re, im = complex_parts(xs[0])
    return [ca.create_complex(re, ca.broadcasting_mul(im, constant(np.float32(-1))))]


def _last(x: Any) -> Any:  # x with a trailing axis of size 1
    return ca.reshape(x, i32([*x.type.shape, 1]))


@mapping("coreai.view_as_real", "concat of real_part and imaginary_part on a new axis")
def view_as_real(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    re, im = complex_parts(xs[0])
    return [ca.concat(np.int32(len(re.type.shape)), [_last(re), _last(im)])]


@mapping("coreai.view_as_complex", "create_complex of two slices")
def view_as_complex(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    x = xs[0]
    axis = len(x.type.shape) - 1
    shape = i32(ctx.result_shape(op))
    re, im = (ca.reshape(slice_axis(x, axis, k, k + 1), shape) for k in (0, 1))
    return [ca.create_complex(re, im)]
