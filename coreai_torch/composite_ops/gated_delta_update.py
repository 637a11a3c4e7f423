"""The gated delta rule recurrence, Apple's ``GatedDeltaUpdate`` composite."""

from __future__ import annotations

import torch

from coreai_torch.composite_ops._base import CompositeModule

__all__ = ["GatedDeltaUpdate"]


class GatedDeltaUpdate(CompositeModule):
    """Gated delta network recurrence (Qwen3-Next's linear attention): the
    ``gated_delta_update`` composite.

    ``GatedDeltaUpdate(use_qk_l2_norm=True)``; ``forward(query, key, value, g, beta,
    initial_state) -> (output, final_state)`` with ``query``/``key`` ``[B, Hk, S, Dk]``,
    ``value`` ``[B, Hv, S, Dv]``, ``g``/``beta`` ``[B, Hv, S]``, ``initial_state``
    ``[B, Hv, Dk, Dv]``; ``Hv`` a multiple of ``Hk`` (each query/key head serves ``Hv / Hk``
    consecutive value heads). Returns ``output`` ``[B, S, Hv, Dv]`` and the final state, in
    the query's dtype.

    Optionally L2-normalized (``x * rsqrt(sum(x**2) + 1e-6)``), query and key are then cast to
    float32 and the query scaled by ``Dk ** -0.5``. For each step ``t``, with the state ``S``
    (``[Dk, Dv]`` per head): ``S = exp(g_t) * S``;
    ``S = S + k_t^T (beta_t * (v_t - k_t S))``; ``output_t = q_t S``. The steps run in a
    ``while_loop``, so an exported program keeps one loop for any sequence length.
    """

    composite_name = "gated_delta_update"
    composite_attrs = ("use_qk_l2_norm",)

    def __init__(self, use_qk_l2_norm: bool = True) -> None:
        super().__init__()
        self.use_qk_l2_norm = use_qk_l2_norm
        self.version = 1

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                g: torch.Tensor, beta: torch.Tensor, initial_state: torch.Tensor,
                ) -> tuple[torch.Tensor, torch.Tensor]:
        dtype = query.dtype
        if self.use_qk_l2_norm:
            query, key = _l2_normalize(query), _l2_normalize(key)
        heads = value.shape[1]
        query, key = _repeat_heads(query, heads), _repeat_heads(key, heads)
        query, key, value, g, beta = (t.to(torch.float32) for t in (query, key, value, g, beta))
        query = query * query.shape[-1] ** -0.5
        decay = g.exp()
        b, h, s = value.shape[:3]
        output = torch.zeros(b, h, s, value.shape[-1], dtype=torch.float32,
                             device=query.device)
        state = initial_state.to(torch.float32)

        def more(t: torch.Tensor, state: torch.Tensor, output: torch.Tensor,
                 *steps: torch.Tensor) -> torch.Tensor:
            return t < key.shape[2]

        def step(t: torch.Tensor, state: torch.Tensor, output: torch.Tensor,
                 q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: torch.Tensor,
                 beta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            at = t.reshape(1)
            q_t = torch.index_select(q, 2, at).transpose(2, 3)          # [b, h, dk, 1]
            k_t = torch.index_select(k, 2, at).transpose(2, 3)          # [b, h, dk, 1]
            v_t = torch.index_select(v, 2, at)                          # [b, h, 1, dv]
            state = state * torch.index_select(decay, 2, at).unsqueeze(-1)
            remembered = (state * k_t).sum(dim=-2, keepdim=True)        # [b, h, 1, dv]
            delta = (v_t - remembered) * torch.index_select(beta, 2, at).unsqueeze(-1)
            state = state + k_t * delta
            read = (state * q_t).sum(dim=-2, keepdim=True)              # [b, h, 1, dv]
            return t + 1, state, output.index_copy(2, at, read)

        _, state, output = torch.ops.higher_order.while_loop(
            more, step, (torch.tensor(0), state, output),
            (query, key, value, decay, beta))
        return output.transpose(1, 2).to(dtype), state.to(dtype)


def _l2_normalize(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + 1e-6)


def _repeat_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    if x.shape[1] in (1, heads):  # one head broadcasts
        return x
    if heads % x.shape[1]:
        raise ValueError(f"GatedDeltaUpdate: {heads} value heads are not a multiple of "
                         f"{x.shape[1]} query/key heads")
    return torch.repeat_interleave(x, heads // x.shape[1], dim=1)
