"""Complex tensors end to end where the op database cannot reach: programs exported without
``run_decompositions`` (torch's own conjugate ops), complex weights and buffers, and
Python complex scalars."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_core import load
from tests.torch.harness import FnModule, assert_matches, convert, to_numpy
from tests.torch.op_db._entry import DEFAULT_TOL, shapes, tensors

COMPLEX = st.sampled_from((torch.complex64, torch.complex128))


@settings(max_examples=6)
@given(data=st.data(), dtype=COMPLEX,
       fn=st.sampled_from((torch.conj_physical, torch.ops.aten.resolve_conj,
                           lambda z: torch.conj(z).resolve_conj())))
def test_undecomposed_conjugates_match_torch(data, dtype, fn):
    z = data.draw(tensors(data.draw(shapes()), dtype, special=True))
    module = FnModule(fn, [z], {})
    ep = torch.export.export(module, (z,))  # no run_decompositions: the ops stay as written
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert targets & {"aten.conj_physical.default", "aten.resolve_conj.default"}, targets
    program = convert(ep)
    got = list(program.run([to_numpy(z)]).values())
    assert_matches([module(z)], got, atol=0.0, rtol=0.0, what="conjugate")


class ComplexFilter(torch.nn.Module):
    """A complex weight (parameter) and a complex buffer, as in spectral filters."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.weight = torch.nn.Parameter(torch.randn(47, dtype=torch.complex64, generator=g))
        self.register_buffer("phase", torch.polar(torch.ones(47), torch.linspace(0, 3, 47))
                             .conj())  # a buffer with torch's lazy conjugate bit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spectrum = torch.fft.fft(x) * self.weight * self.phase * (0.5 - 1j)
        return torch.fft.ifft(spectrum).real


def test_complex_weights_and_buffers_convert_save_and_load(tmp_path: Path):
    model = ComplexFilter().eval()
    x = torch.randn(3, 47)
    ep = torch.export.export(model, (x,))
    from coreai_torch import get_decomp_table

    program = convert(ep.run_decompositions(get_decomp_table()))
    with torch.no_grad():
        want = model(x)
    got = list(program.run([x.numpy()]).values())
    atol, rtol = DEFAULT_TOL[torch.float32]
    assert_matches([want], got, atol=atol * 10, rtol=rtol * 10, what="complex filter")
    program.save(tmp_path / "filter.coreai")
    again = load(tmp_path / "filter.coreai")
    (again_out,) = again.run([x.numpy()]).values()
    np.testing.assert_array_equal(again_out, got[0])
    assert "xc64>" in str(program)  # the complex weight is declared with its complex type


def test_verify_compares_both_parts_of_complex_outputs():
    from coreai_core.dialects import coreai
    from coreai_torch.verify import compare, find_first_nonfinite, verify

    z = torch.tensor([1 + 2j, -3 - 0.5j], dtype=torch.complex64)
    module = FnModule(lambda v: torch.conj(v) * 2, [z], {})
    ep = torch.export.export(module, (z,))
    from coreai_torch import get_decomp_table

    program = convert(ep.run_decompositions(get_decomp_table()))
    assert verify(module, program, [z.numpy()]).passed
    want = np.array([1 + 2j], np.complex64)
    assert compare("y", want, want, 0, 0).passed
    assert not compare("y", np.conj(want), want, 1e-3, 1e-3).passed  # the imaginary parts differ
    from coreai_core import Program, TensorType

    p = Program()
    with p.graph("main", inputs={"x": TensorType((1,), "complex64")}) as g:
        g.outputs({"y": coreai.reciprocal(g["x"])})
    bad = find_first_nonfinite(p, [np.zeros(1, np.complex64)])
    assert bad is not None and bad.op == "coreai.reciprocal"
