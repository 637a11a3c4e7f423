"""``nn.LSTM`` and ``nn.GRU`` converted and run against torch eager over their sizes.

``torch.export`` unrolls the recurrence: the input projection of every time step is one
matmul of the whole sequence by the weight (a stack sharing its right operand), and each
step multiplies the hidden state (batch rows) by the transposed hidden weight, the layouts
``coreai_core/runtime/kernels/_matmul.py`` arranges for BLAS. Sizes include 1 and 47, and
a hidden size whose gate weight is large enough for the swapped layout.
"""

from __future__ import annotations

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from tests.torch.harness import assert_matches, convert, export, to_numpy


class Recurrent(torch.nn.Module):
    def __init__(self, rnn: torch.nn.Module) -> None:
        super().__init__()
        self.rnn = rnn

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out, state = self.rnn(x)
        return (out, *state) if isinstance(state, tuple) else (out, state)


@given(kind=st.sampled_from(["LSTM", "GRU"]), batch=st.sampled_from([1, 2, 47]),
       features=st.sampled_from([1, 47]), hidden=st.sampled_from([1, 47, 300]),
       seq=st.sampled_from([1, 3]), layers=st.sampled_from([1, 2]), seed=st.integers(0, 99))
@example(kind="LSTM", batch=2, features=47, hidden=300, seq=3, layers=2, seed=0)  # swapped
@example(kind="GRU", batch=47, features=47, hidden=47, seq=3, layers=2, seed=1)
def test_recurrent_matches_eager(kind: str, batch: int, features: int, hidden: int, seq: int,
                                 layers: int, seed: int) -> None:
    torch.manual_seed(seed)
    rnn = getattr(torch.nn, kind)(features, hidden, layers, batch_first=True)
    module = Recurrent(rnn).eval()
    x = torch.randn(batch, seq, features)
    program = convert(export(module, [x]))
    program.optimize()
    with torch.no_grad():
        expected = list(module(x))
    got = list(program.run([to_numpy(x)]).values())
    # float32; the matmuls sum in another order than torch's kernels (BLAS vs oneDNN), on
    # values bounded by the gates (|h| < 1) over at most 300 terms
    assert_matches(expected, got, atol=1e-5, rtol=1e-5, what=f"{kind} {tuple(x.shape)}")
