"""Models and coreai-opt compressions for the interop tests and the size benchmark.

Each compression is configured as a user of Apple's ``coreai-opt`` would (its presets where it
has them, its documented specs otherwise) and finalized for Core AI with
``finalize(backend=ExportBackend.CoreAI)``, which swaps in ``coreai_torch._compression``'s
modules (here: :mod:`coreai_torch.compression.modules`). :data:`COMPRESSIONS` works with
coreai-opt 0.3.0 and 0.4.0; :data:`COMPRESSIONS_04` uses what 0.4.0 added (empty with 0.3.0).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from torch import nn

with warnings.catch_warnings():  # coreai-opt warns about untested torch/torchao versions
    warnings.simplefilter("ignore")
    import coreai_opt
    from coreai_opt.palettization import (
        KMeansPalettizer,
        KMeansPalettizerConfig,
        ModuleKMeansPalettizerConfig,
        PalettizationSpec,
    )
    from coreai_opt.pruning import MagnitudePruner, MagnitudePrunerConfig
    from coreai_opt.quantization import (
        ModuleQuantizerConfig,
        QuantizationSpec,
        Quantizer,
        QuantizerConfig,
    )
    from coreai_opt.quantization.spec.granularity import PerBlockGranularity

Inputs = tuple[torch.Tensor, ...]


# -- models ------------------------------------------------------------------------------------

class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(32, 64), nn.Linear(64, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(16, 16, 3), nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.fc(y.mean((2, 3)))


class Block(nn.Module):
    """A pre-norm transformer block: causal self-attention and a GELU MLP."""

    def __init__(self, dim: int = 32, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.up, self.down = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, t, 3, self.heads, -1).permute(
            2, 0, 3, 1, 4)
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(nn.functional.gelu(self.up(self.norm2(x))))


class TinyLlama(nn.Module):
    """transformers' Llama with random weights (1 layer, hidden size 32): logits of ids."""

    def __init__(self) -> None:
        super().__init__()
        from transformers import LlamaConfig, LlamaForCausalLM

        config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                             num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                             max_position_embeddings=32, use_cache=False)
        self.llm = LlamaForCausalLM(config)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.llm(input_ids=ids, use_cache=False).logits


def model(name: str) -> tuple[nn.Module, Inputs]:
    """A freshly seeded model and its example inputs."""
    torch.manual_seed(0)
    if name == "mlp":
        return MLP().eval(), (torch.randn(4, 32),)
    if name == "conv":
        return ConvNet().eval(), (torch.randn(2, 16, 9, 9),)
    if name == "block":
        return Block().eval(), (torch.randn(2, 6, 32),)
    if name == "llama":
        return TinyLlama().eval(), (torch.randint(0, 64, (1, 7)),)
    raise KeyError(name)


MODELS = ("mlp", "conv", "block", "llama")


# -- compressions ------------------------------------------------------------------------------

CoreAI = coreai_opt.ExportBackend.CoreAI


def _palettize(config: KMeansPalettizerConfig) -> Callable[[nn.Module, Inputs], nn.Module]:
    def run(m: nn.Module, inputs: Inputs) -> nn.Module:
        palettizer = KMeansPalettizer(m, config)
        palettizer.prepare(example_inputs=inputs)
        return palettizer.finalize(backend=CoreAI)
    return run


def _palettize_spec(**spec: object) -> Callable[[nn.Module, Inputs], nn.Module]:
    fast = spec.get("cluster_dim", 1) == 1  # coreai-opt's fast k-means is scalar only
    return _palettize(KMeansPalettizerConfig(global_config=ModuleKMeansPalettizerConfig(
        op_state_spec={"weight": PalettizationSpec(**spec)},  # type: ignore[arg-type]
        enable_fast_kmeans_mode=fast)))


def _quantize(config: QuantizerConfig, calibrate: bool = False,
              ) -> Callable[[nn.Module, Inputs], nn.Module]:
    def run(m: nn.Module, inputs: Inputs) -> nn.Module:
        quantizer = Quantizer(m, config)
        prepared = quantizer.prepare(example_inputs=inputs)
        if calibrate:
            with quantizer.calibration_mode(prepared):
                g = torch.Generator().manual_seed(1)
                for _ in range(4):
                    prepared(*(_like(t, g) for t in inputs))
        return quantizer.finalize(backend=CoreAI)
    return run


def _like(t: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    if t.is_floating_point():
        return torch.randn(t.shape, generator=g)
    return torch.randint(0, int(t.max()) + 1, t.shape, generator=g)


def _weights_only(spec: QuantizationSpec) -> QuantizerConfig:
    return QuantizerConfig(global_config=ModuleQuantizerConfig(
        op_input_spec=None, op_output_spec=None, op_state_spec={"weight": spec}))


def _prune(m: nn.Module, inputs: Inputs) -> nn.Module:
    pruner = MagnitudePruner(m, MagnitudePrunerConfig())  # 50% of each weight
    pruner.prepare(example_inputs=inputs)
    return pruner.finalize(backend=CoreAI)


COMPRESSIONS: dict[str, Callable[[nn.Module, Inputs], nn.Module]] = {
    # k-means palettization: the 4-bit preset (tables per 16 output channels), vectors of 2
    # entries, per-channel scales, int8 tables. fp4: coreai-opt exports blocks of 32 only
    "palettize_4bit_grouped": _palettize(KMeansPalettizerConfig.presets.w4(group_size=16)),
    "palettize_2bit_vector": _palettize_spec(n_bits=2, cluster_dim=2),
    "palettize_4bit_channel_scale": _palettize_spec(n_bits=4, enable_per_channel_scale=True),
    "palettize_4bit_int8_lut": _palettize_spec(n_bits=4,
                                               lut_qspec=QuantizationSpec(dtype=torch.int8)),
    # blocks of 16 input channels of Linear and Conv2d weights (the global preset would also
    # take the Llama's 1-d RMSNorm weights, which have no block axis)
    "int4_per_block": _quantize(QuantizerConfig(module_type_configs={
        t: ModuleQuantizerConfig.presets.w4_per_block(block_size=16, axis=1)
        for t in (nn.Linear, nn.Conv2d)})),
    "int8_weights": _quantize(QuantizerConfig.presets.w8()),
    "int8_weights_activations": _quantize(QuantizerConfig(), calibrate=True),
    "uint8_minval_weights": _quantize(_weights_only(QuantizationSpec(
        dtype=torch.uint8, qscheme="asymmetric", qformulation="minval"))),
    "fp8_weights": _quantize(_weights_only(QuantizationSpec(dtype=torch.float8_e4m3fn))),
    "fp4_weights": _quantize(_weights_only(QuantizationSpec(
        dtype=torch.float4_e2m1fn_x2, granularity=PerBlockGranularity(block_size=32),
        scale_dtype=torch.float8_e8m0fnu))),
    "prune_magnitude": _prune,
}

# The full matrix on the MLP and the transformer block; the conv net and the LLM take a subset
# (one of each kind) to keep the suite's time.
SUBSET = ("palettize_4bit_grouped", "int4_per_block", "int8_weights_activations",
          "prune_magnitude")
CASES = [(m, c) for m in ("mlp", "block") for c in COMPRESSIONS] + \
        [(m, c) for m in ("conv", "llama") for c in SUBSET]


def compressed(model_name: str, compression: str) -> tuple[nn.Module, Inputs]:
    """The model finalized for Core AI by ``compression``, and its inputs."""
    m, inputs = model(model_name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return COMPRESSIONS[compression](m, inputs), inputs


# -- new in coreai-opt 0.4.0 -------------------------------------------------------------------

OPT_VERSION = tuple(int(part) for part in coreai_opt.__version__.split(".")[:2])
HAS_04 = OPT_VERSION >= (0, 4)
Torch = coreai_opt.ExportBackend.Torch if HAS_04 else None


def _palettize_to(spec: dict[str, object], backend: object = CoreAI,
                  ) -> Callable[[nn.Module, Inputs], nn.Module]:
    def run(m: nn.Module, inputs: Inputs) -> nn.Module:
        palettizer = KMeansPalettizer(m, KMeansPalettizerConfig(
            global_config=ModuleKMeansPalettizerConfig(
                op_state_spec={"weight": PalettizationSpec(**spec)})))  # type: ignore[arg-type]
        palettizer.prepare(example_inputs=inputs)
        return palettizer.finalize(backend=backend)
    return run


def _pruned_dense(m: nn.Module, inputs: Inputs) -> nn.Module:
    """Magnitude pruning finalized for torch (0.4.0's ``ExportBackend.Torch``): a plain model
    whose weights are half zeros."""
    pruner = MagnitudePruner(m, MagnitudePrunerConfig())
    pruner.prepare(example_inputs=inputs)
    return pruner.finalize(backend=Torch)


def _activations_int8(m: nn.Module, inputs: Inputs) -> nn.Module:
    """int8 activations (calibrated) on a model whose weights are already compressed:
    coreai-opt leaves the palettized weights as they are (its joint PxA8 schemes)."""
    return _quantize(QuantizerConfig(global_config=ModuleQuantizerConfig(op_state_spec=None)),
                     calibrate=True)(m, inputs)


def _then(*steps: Callable[[nn.Module, Inputs], nn.Module],
          ) -> Callable[[nn.Module, Inputs], nn.Module]:
    def run(m: nn.Module, inputs: Inputs) -> nn.Module:
        for step in steps:
            m = step(m, inputs)
        return m
    return run


# name -> (compression, dialect ops the program must hold, ops it must not hold)
COMPRESSIONS_04: dict[str, tuple[Callable[[nn.Module, Inputs], nn.Module], set[str], set[str]]]
COMPRESSIONS_04 = {} if not HAS_04 else {
    # a pruned model palettized with its zeros kept: indices of the nonzeros only
    "sparse_palettize_4bit": (
        _then(_pruned_dense, _palettize_to({"n_bits": 4, "sparsity_detection_threshold": 0.3})),
        {"coreai.lut_to_dense", "coreai.sparse_to_dense"}, set()),
    # an 8-bit table quantized to int8 / fp8 is exported as 8-bit weights, without the table
    "palettize_8bit_int8_lut_as_int8": (
        _palettize_to({"n_bits": 8, "lut_qspec": QuantizationSpec(dtype=torch.int8)}),
        {"coreai.constexpr_blockwise_shift_scale"}, {"coreai.lut_to_dense"}),
    "palettize_8bit_fp8_lut_as_fp8": (
        _palettize_to({"n_bits": 8, "lut_qspec": QuantizationSpec(dtype=torch.float8_e4m3fn)}),
        {"coreai.constexpr_blockwise_shift_scale"}, {"coreai.lut_to_dense"}),
    # joint palettized weights and int8 activations
    "p4a8": (_then(_palettize_to({"n_bits": 4}), _activations_int8),
             {"coreai.lut_to_dense", "coreai.dequantize"}, set()),
    "p8a8": (_then(_palettize_to({"n_bits": 8}), _activations_int8),
             {"coreai.lut_to_dense", "coreai.dequantize"}, set()),
    # ExportBackend.Torch: compression folded into dense weights, nothing to decompress
    "torch_backend_palettize_4bit": (
        _palettize_to({"n_bits": 4}, backend=Torch), set(),
        {"coreai.lut_to_dense", "coreai.constexpr_blockwise_shift_scale"}),
}


def compressed_04(model_name: str, compression: str) -> tuple[nn.Module, Inputs]:
    """The model compressed by ``COMPRESSIONS_04[compression]``, and its inputs."""
    m, inputs = model(model_name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return COMPRESSIONS_04[compression][0](m, inputs), inputs
