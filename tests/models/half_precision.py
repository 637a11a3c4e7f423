"""A zoo model converted in float16 (or bfloat16) against torch's own half-precision eager run,
both judged against the float32 result: shared by ``test_fp16_accuracy.py`` and
``benchmarks/bench_fp16_accuracy.py``.

The model is run in float32 by torch (the reference), then ``model.to(dtype)`` with its
floating inputs cast to ``dtype`` by torch eager on the CPU and by the converted program. The
error of an output is normwise: ``max|y - y32| / max|y32|`` (the largest deviation relative to
the output's scale; elementwise relative errors are meaningless near the zeros of a hidden
state). A non-finite value where float32 is finite is an infinite error.
"""

from __future__ import annotations

import copy
from typing import Any

import attrs
import numpy as np
import torch

from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch.utils import to_numpy
from tests.models.builders import Builder, Built, randomized
from tests.models.zoo import all_models


def _he_initialized(name: str) -> Builder:
    def build() -> Built:
        model, inputs = all_models()[name]()
        return randomized(model, reinit_convs=True), inputs

    return build


# Zoo models whose float32 output no half type can represent, and why; each is measured
# again in a variant that can (``MODELS`` has both).
OUTLIERS: dict[str, str] = {
    "mobilenet_v2": "Hugging Face's small-normal convolution init makes the float32 output "
                    "~7e-25, below float16's smallest subnormal (6e-8): torch's float16 and "
                    "ours are both 0 (error 1); mobilenet_v2[he-init] measures the network "
                    "with He-normal convolutions and random batch-norm statistics",
}


def half_models() -> dict[str, Builder]:
    """The zoo, plus the He-initialized variant of each outlier."""
    models = dict(all_models())
    models.update({f"{name}[he-init]": _he_initialized(name) for name in OUTLIERS})
    return models


@attrs.frozen
class HalfErrors:
    """One model's errors against its float32 result: torch's half eager and ours."""

    name: str
    torch_err: float
    ours_err: float

    @property
    def ratio(self) -> float:
        if self.ours_err == 0:
            return 0.0
        return self.ours_err / self.torch_err if self.torch_err else float("inf")


def normwise_error(got: np.ndarray, want: np.ndarray) -> float:
    """``max|got - want| / max|want|`` in float64; inf where ``got`` is not finite but
    ``want`` is."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if np.any(~np.isfinite(got) & np.isfinite(want)):
        return float("inf")
    both = np.isfinite(want)
    scale = np.abs(want[both]).max(initial=0.0)
    diff = np.abs(got[both] - want[both]).max(initial=0.0)
    return float(diff / scale) if scale else float(diff)


def _outputs(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    return [t for o in out for t in _outputs(o)]


def _cast_inputs(inputs: tuple[Any, ...], dtype: torch.dtype) -> tuple[Any, ...]:
    return tuple(t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                 for t in inputs)


def half_errors(name: str, dtype: torch.dtype = torch.float16) -> HalfErrors:
    """Converts model ``name`` of :func:`half_models` in ``dtype`` and measures both errors
    (the largest over the model's outputs)."""
    model, inputs = half_models()[name]()
    with torch.no_grad():
        reference = [o.double().numpy() for o in _outputs(model(*inputs))]
        half_model = copy.deepcopy(model).to(dtype)
        half_inputs = _cast_inputs(inputs, dtype)
        theirs = [o.double().numpy() for o in _outputs(half_model(*half_inputs))]
        ep = torch.export.export(half_model, half_inputs).run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep).to_coreai()
    program.optimize()
    ours = list(program.run([to_numpy(t) for t in half_inputs]).values())
    return HalfErrors(
        name,
        max(normwise_error(t, r) for t, r in zip(theirs, reference, strict=True)),
        max(normwise_error(o, r) for o, r in zip(ours, reference, strict=True)))
