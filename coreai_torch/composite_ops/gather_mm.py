"""Gather then matmul: Apple's ``GatherMM`` composite, and ``ExpertLinear``, a layer owning
the stacked expert weights that calls it (mixture of experts)."""

from __future__ import annotations

import torch

from coreai_torch.composite_ops._base import CompositeModule

__all__ = ["ExpertLinear", "GatherMM", "gather"]


def gather(x: torch.Tensor, indices: torch.Tensor, axis: int) -> torch.Tensor:
    """``x`` indexed along ``axis`` by ``indices``: that axis is replaced by ``indices``'s
    shape (``x.shape[:axis] + indices.shape + x.shape[axis + 1:]``)."""
    picked = torch.index_select(x, axis, indices.flatten().to(torch.int64))
    return picked.reshape(*x.shape[:axis], *indices.shape, *x.shape[axis + 1:])


class GatherMM(CompositeModule):
    """``matmul(gather(lhs, lhs_indices), gather(rhs, rhs_indices))``: the ``gather_mm``
    composite.

    ``GatherMM(num_batch_axes=0)``; ``forward(lhs, rhs, lhs_indices=None, rhs_indices=None)``.
    An operand with indices is gathered along axis ``num_batch_axes`` (that axis is replaced
    by the indices' shape); one without is used as is; then ``torch.matmul`` (which
    broadcasts batch dimensions). Without indices it is a plain matmul. In a mixture of
    experts, ``rhs`` is the stack of expert matrices ``[E, D, H]`` and ``rhs_indices`` the
    chosen experts.
    """

    composite_name = "gather_mm"
    composite_attrs = ("num_batch_axes",)

    def __init__(self, num_batch_axes: int = 0) -> None:
        super().__init__()
        self.num_batch_axes = int(num_batch_axes)
        self.version = 1

    def forward(self, lhs: torch.Tensor, rhs: torch.Tensor,
                lhs_indices: torch.Tensor | None = None,
                rhs_indices: torch.Tensor | None = None) -> torch.Tensor:
        if lhs_indices is not None:
            lhs = gather(lhs, lhs_indices, self.num_batch_axes)
        if rhs_indices is not None:
            rhs = gather(rhs, rhs_indices, self.num_batch_axes)
        return torch.matmul(lhs, rhs)


class ExpertLinear(CompositeModule):
    """``x @ weight[index]``: each row of ``x`` (``[n, in_features]``) times the matrix its
    ``index`` (``[n]``) picks from ``weight`` (``[num_experts, in_features, out_features]``).

    Owns the expert weights and calls :class:`GatherMM` with them (as ``RMSNorm`` owns its
    scale and calls ``RMSNormImpl``): externalize ``GatherMM`` for Apple's ``gather_mm``
    composite with the weights as an input.
    """

    composite_name = "expert_linear"

    def __init__(self, num_experts: int, in_features: int, out_features: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(num_experts, in_features, out_features)
                                         / in_features ** 0.5)
        self.gather_mm = GatherMM()

    def forward(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return self.gather_mm(x.unsqueeze(1), self.weight, rhs_indices=index).squeeze(1)
