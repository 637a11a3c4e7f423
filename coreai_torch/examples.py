"""Built-in example models (random weights, no downloads) for the demo and tutorials."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["EXAMPLES", "TinyConvNet", "TinyTransformer", "example"]


class TinyConvNet(nn.Module):
    """Conv + batch norm + pooling + a linear head: the shape of an image classifier."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1, groups=2), nn.BatchNorm2d(32), nn.SiLU(),
        )
        self.head = nn.Linear(32, classes)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.features(image)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return torch.softmax(self.head(x), dim=-1)


class TinyTransformer(nn.Module):
    """Token embedding, two pre-norm attention blocks (sdpa, causal) and an LM head."""

    def __init__(self, vocab: int = 64, dim: int = 32, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, batch_first=True,
                                       norm_first=True, activation="gelu")
            for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1])
        for block in self.blocks:
            x = block(x, src_mask=mask, is_causal=True)
        return self.head(self.norm(x))


def _conv() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return TinyConvNet().eval(), (torch.randn(2, 3, 32, 32),)


def _transformer() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return TinyTransformer().eval(), (torch.randint(0, 64, (2, 12)),)


EXAMPLES: dict[str, Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]] = {
    "convnet": _conv,
    "transformer": _transformer,
}


def example(name: str = "convnet", seed: int = 0) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A built-in example model (eval mode, seeded random weights) and example inputs."""
    if name not in EXAMPLES:
        raise KeyError(f"unknown example {name!r}; choose from {sorted(EXAMPLES)}")
    torch.manual_seed(seed)
    return EXAMPLES[name]()
