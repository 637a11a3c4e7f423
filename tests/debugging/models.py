"""Small models for the debugging tools' tests, with the FX node where a failure starts."""

from __future__ import annotations

import torch
from torch import nn

from coreai_core import Program
from coreai_torch import TorchConverter, get_decomp_table


class Chain(nn.Module):
    """``steps`` elementwise ops; op ``bad_at`` (if any) turns every value into NaN (sqrt of
    a negative) or infinity (exp of a large value)."""

    def __init__(self, steps: int, bad_at: int | None, kind: str = "nan") -> None:
        super().__init__()
        self.steps, self.bad_at, self.kind = steps, bad_at, kind

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(x)  # in (-1, 1): every step below stays finite
        for i in range(self.steps):
            if i == self.bad_at:
                h = torch.sqrt(h - 3.0) if self.kind == "nan" else torch.exp(h + 1000.0)
            else:
                h = torch.sin(h) * 0.5 + 0.25
        return h


def exported(model: nn.Module, *args: torch.Tensor) -> torch.export.ExportedProgram:
    return torch.export.export(model.eval(), args).run_decompositions(get_decomp_table())


def converted(ep: torch.export.ExportedProgram,
              converter: TorchConverter | None = None) -> Program:
    return (converter or TorchConverter()).add_exported_program(ep).to_coreai()


class Mlp(nn.Module):
    def __init__(self, features: int = 5, hidden: int = 7) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(features, hidden), nn.Linear(hidden, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x))) + x
