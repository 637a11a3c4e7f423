"""coreai-opt's second workflow: compress an already converted program with its
``coreai_utils`` passes, which work on Apple's ``AIProgram`` (``program.to_aiprogram()``).

Each case gives the model weights that the pass stores *exactly* (values on the pass's own
grid: a per-row int8 grid, 16 distinct values for a 4-bit table, half the entries zero), so the
compressed asset must compute on Apple's interpreter what the uncompressed program computes on
our runtime, to float32 rounding. A wrong index order, table, scale axis or bit packing
anywhere on the way (our lowering, coreai-opt's rewrite, Apple's compiler) changes the
results far beyond that; the decompression op present in the asset shows the weights were
compressed.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch.aimodel import run_aimodel
from tests.interop.coreai_opt_cases import model

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from coreai_opt.coreai_utils import (
        CompressionGranularity,
        DType,
        palettize_weights,
        quantize_weights,
        sparsify_weights,
    )

# every Linear / Conv2d weight of the three models has at least 64 entries; biases and norms
# are not consumed by the ops coreai-opt compresses, so they stay dense
THRESHOLD = 16
RTOL, ATOL = 1e-5, 1e-5


def _int8_rows(w: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Per-output-channel scale times integers in [-127, 127], each row reaching 127: the
    symmetric int8 per-channel grid, which quantize_weights stores exactly."""
    k = torch.randint(-127, 128, w.shape, generator=g).float()
    k.view(w.shape[0], -1)[:, 0] = 127.0
    scale = torch.rand((w.shape[0],) + (1,) * (w.dim() - 1), generator=g) * 0.01 + 0.001
    return k * scale


def _sixteen_values(w: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Multiples of 1/16 in [-0.5, 0.4375], each of the 16 present: a 4-bit table holds them
    exactly (k-means++ seeds one centroid on each distinct value)."""
    k = torch.randint(0, 16, (w.numel(),), generator=g)
    k[:16] = torch.arange(16)
    return ((k[torch.randperm(w.numel(), generator=g)] - 8) / 16.0).reshape(w.shape).float()


def _sixty_percent_zeros(w: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Normal values with 60% of them zero: 50% magnitude sparsity removes zeros only."""
    keep = torch.rand(w.shape, generator=g) >= 0.6
    return torch.randn(w.shape, generator=g) * keep


Shape = Callable[[torch.Tensor, torch.Generator], torch.Tensor]
PASSES: dict[str, tuple[Shape, Callable[[Any], Any], str]] = {
    "quantize_int8_per_channel": (
        _int8_rows,
        lambda p: quantize_weights(p, DType.INT8, granularity=CompressionGranularity.PER_CHANNEL,
                                   weight_num_threshold=THRESHOLD),
        "coreai.blockwise_shift_scale"),
    "palettize_4bit": (
        _sixteen_values,
        lambda p: palettize_weights(p, None, n_bits=4, weight_num_threshold=THRESHOLD,
                                    num_kmeans_workers=1),
        "coreai.lut_to_dense"),
    "sparsify_half": (
        _sixty_percent_zeros,
        lambda p: sparsify_weights(p, target_sparsity=0.5, weight_num_threshold=THRESHOLD),
        "coreai.sparse_with_bitmask_to_dense"),
}


def _weights_on_grid(m: torch.nn.Module, shape: Shape) -> None:
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, (torch.nn.Linear, torch.nn.Conv2d)):
                mod.weight.copy_(shape(mod.weight, g))


@pytest.mark.parametrize("pass_name", sorted(PASSES))
@pytest.mark.parametrize("model_name", ["mlp", "conv", "block"])
def test_coreai_utils_pass_on_to_aiprogram_runs_on_apples_interpreter_like_our_runtime(
        model_name: str, pass_name: str, tmp_path: Path) -> None:
    shape, compress, decompression = PASSES[pass_name]
    m, inputs = model(model_name)
    _weights_on_grid(m, shape)
    ep = torch.export.export(m, inputs).run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep).to_coreai()
    feed = {n: t.numpy() for n, t in zip(program.input_names, inputs)}
    want = next(iter(program.run(feed).values()))
    np.testing.assert_allclose(want, m(*inputs).detach().numpy(), rtol=RTOL,
                               atol=ATOL * float(np.abs(want).max()))

    aiprogram = program.to_aiprogram()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compressed = compress(aiprogram)
    asm = compressed._module._mlir_module.operation.get_asm()
    assert decompression in asm, f"{pass_name} compressed nothing in {model_name}"
    compressed.save_asset(tmp_path / "compressed.aimodel")  # Apple's compiler takes it
    got = next(iter(run_aimodel(tmp_path / "compressed.aimodel", feed).values()))
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL * float(np.abs(want).max()))
