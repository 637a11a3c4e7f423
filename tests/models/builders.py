"""Helpers shared by the model tests (the zoo and the optimizer corpus): model builders that
return ``(module, example_inputs)`` in eval mode, a wrapper that makes a Hugging Face model
return one plain tensor, and seeded example inputs. Nothing is downloaded: models are built
from config classes with random weights."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

Built = tuple[nn.Module, tuple[Any, ...]]
Builder = Callable[[], Built]


class HF(nn.Module):
    """Calls a transformers model with keyword inputs and returns one tensor field."""

    def __init__(self, model: nn.Module, field: str, names: tuple[str, ...],
                 **fixed: Any) -> None:
        super().__init__()
        self.model = model
        self.field = field
        self.names = names
        self.fixed = fixed

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        out = self.model(**dict(zip(self.names, inputs, strict=True)), **self.fixed)
        return getattr(out, self.field)


def hf_model(model_cls: Any, config: Any, inputs: tuple[torch.Tensor, ...],
             names: tuple[str, ...], field: str = "last_hidden_state", **fixed: Any) -> Built:
    """``model_cls(config)`` with seeded random weights, wrapped by :class:`HF`."""
    torch.manual_seed(0)
    return HF(model_cls(config).eval(), field, names, **fixed).eval(), inputs


def token_ids(vocab: int = 96, batch: int = 2, length: int = 11) -> torch.Tensor:
    """Seeded random token ids, [batch, length]."""
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(1))


def pixels(size: int = 32, channels: int = 3) -> torch.Tensor:
    """A seeded random image batch, [1, channels, size, size]."""
    return torch.randn(1, channels, size, size, generator=torch.Generator().manual_seed(2))


def plain(fn: Callable[[], nn.Module], *inputs: torch.Tensor) -> Builder:
    """A builder for a plain torch module: ``fn()`` under seed 0, in eval mode."""
    def build() -> Built:
        torch.manual_seed(0)
        return fn().eval(), inputs

    return build


def randomized(model: nn.Module, reinit_convs: bool = False) -> nn.Module:
    """``model`` in eval mode with every batch norm's running mean and variance, weight and
    bias drawn at random (seeded), so that a wrong batch-norm fold changes the numbers.

    ``reinit_convs`` redraws convolution weights He-normal: Hugging Face initializes them
    with a small normal (std 0.02), under which a deep CNN's output vanishes (~1e-30) and any
    error would pass unnoticed.
    """
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
                n = m.num_features
                m.running_mean.copy_(torch.rand(n, generator=g) * 2 - 1)
                m.running_var.copy_(torch.rand(n, generator=g) * 1.5 + 0.5)
                if m.affine:
                    m.weight.copy_(torch.rand(n, generator=g) * 1.5 + 0.5)
                    m.bias.copy_(torch.rand(n, generator=g) * 2 - 1)
            elif reinit_convs and isinstance(m, nn.Conv2d):
                fan_in = m.weight[0].numel()
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) * (2 / fan_in) ** 0.5)
    return model.eval()
