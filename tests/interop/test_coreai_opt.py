"""Apple's compression library (coreai-opt 0.4.0, and 0.3.0 in CI's second run) with this
converter, and ``.pt2`` files that move between this package and Apple's ``coreai-torch``.

- coreai-opt's ``finalize(backend=CoreAI)`` output (every compression of
  ``coreai_opt_cases.py``) exports, converts, runs on the numpy runtime like the finalized torch
  model, stays compressed, and exports to an ``.aimodel`` that Apple's interpreter runs alike.
- ``fixtures/apple_*.pt2`` were written by Apple's package (``fixtures/make_apple_pt2.py``):
  they load here, compute here what Apple's kernels computed, and convert; the five ops'
  schemas registered here equal the ones Apple's package registered
  (``fixtures/apple_schemas.json``).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch.aimodel import export_aimodel, run_aimodel
from tests.interop.coreai_opt_cases import CASES, compressed
from tests.interop.fixtures.make_apple_pt2 import OPS, models

FIXTURES = Path(__file__).parent / "fixtures"
# float32 matmuls, convolutions and attention accumulate in different orders in numpy and
# torch: a few ulps of the output's magnitude
RTOL, ATOL = 1e-5, 1e-5



def _decompression(compression: str) -> str:
    """The dialect op that must rebuild the weights (they stay compressed in the program)."""
    if compression.startswith("palettize"):
        return "coreai.lut_to_dense"
    if compression.startswith("prune"):
        return "coreai.sparse_to_dense"
    return "coreai.constexpr_blockwise_shift_scale"


def _convert(ep: torch.export.ExportedProgram) -> object:
    ep = ep.run_decompositions(get_decomp_table())
    return TorchConverter().add_exported_program(ep).to_coreai()


def _ops(program: object) -> set[str]:
    return {op.name for op in program.graphs["main"].ops}  # type: ignore[attr-defined]


# -- coreai-opt's finalized models -------------------------------------------------------------

def _output_step(m: torch.nn.Module) -> float | None:
    """The step (scale) of the activation quantizer that produces the model's output, if its
    output is a dequantized activation (coreai-opt quantizes every layer's output)."""
    graph = getattr(m, "graph", None)
    if graph is None:
        return None
    out = next(n for n in graph.nodes if n.op == "output").args[0]
    node = out[0] if isinstance(out, (tuple, list)) and len(out) == 1 else out
    # the target is the op packet (``coreai.dequantize``) or its overload
    if not (isinstance(node, torch.fx.Node)
            and str(node.target).split(".")[:2] == ["coreai", "dequantize"]
            and node.args[1].op == "get_attr"):
        return None
    return float(getattr(m, node.args[1].target).max())


def _tolerance(m: torch.nn.Module, got: np.ndarray, want: np.ndarray) -> float:
    """The allowed difference between our runtime and torch for a finalized model.

    float32 alone: a few ulps of the output's magnitude. With quantized activations the
    output comes out of a quantizer of step ``s``, so both results lie on its grid and differ
    by whole steps (checked here: a broken model is off the grid or many steps away). One step
    is a summation-order difference of one ulp that crosses a rounding boundary of that last
    quantize; one more allows for such a crossing in an earlier quantize, carried to the output
    (measured on the Llama: 30% of the logits differ, by one or two steps, never more). So: two
    steps of the output quantizer (the Llama's: 0.003 on logits up to 0.38), not two of the
    largest activation scale anywhere in the model (0.90, which would pass a broken model).
    """
    atol = ATOL * float(np.abs(want).max())
    step = _output_step(m)
    if step is None:
        return atol
    steps = np.abs(got.astype(np.float64) - want) / step
    np.testing.assert_allclose(steps, np.round(steps), atol=1e-3,
                               err_msg="outputs off the output quantizer's grid")
    return max(atol, 2 * step * (1 + 1e-5))  # 1e-5: the step itself is a float32 value

def _case(model_name: str, compression: str, tmp_path: Path) -> None:
    m, inputs = compressed(model_name, compression)
    must_have = {_decompression(compression)}
    if "activations" in compression:
        must_have.add("coreai.dequantize")
    check_finalized(m, inputs, compression, tmp_path, must_have)


def check_finalized(m: torch.nn.Module, inputs: tuple[torch.Tensor, ...], compression: str,
                    tmp_path: Path, must_have: set[str], must_lack: frozenset[str] = frozenset(),
                    ) -> None:
    """``m`` (finalized by coreai-opt) exports, converts, runs on our runtime like torch,
    holds the ops ``must_have`` (its weights stay compressed) and none of ``must_lack``, and
    its ``.aimodel`` runs on Apple's interpreter like our runtime."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = _convert(torch.export.export(m, inputs))
    feed = {n: t.numpy() for n, t in zip(program.input_names, inputs)}  # type: ignore[attr-defined]
    want = m(*inputs).detach().numpy()
    got = next(iter(program.run(feed).values()))  # type: ignore[attr-defined]
    assert got.shape == want.shape and got.dtype == want.dtype
    atol = _tolerance(m, got, want)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=atol)

    ops = _ops(program)
    assert must_have <= ops and not must_lack & ops, sorted(ops)
    if compression.startswith("int4"):  # int4 held in int8 by torch: 4-bit in the program
        assert any(str(t.element_type) == "int4"
                   for t in program.weight_types.values()), program.weight_types  # type: ignore[attr-defined]
    # Apple's interpreter against our runtime, with the same allowance for quantized activations
    path = tmp_path / "model.aimodel"
    export_aimodel(program, path)  # type: ignore[arg-type]
    apple = next(iter(run_aimodel(path, feed).values()))
    np.testing.assert_allclose(apple, got, rtol=RTOL, atol=atol)


# one case of each kind runs in the quick suite; the rest of the matrix is marked slow
QUICK = ("palettize_4bit_grouped", "int4_per_block", "int8_weights_activations", "fp4_weights",
         "prune_magnitude")
FAST = [c for c in CASES if c[0] == "mlp" and c[1] in QUICK]
SLOW = [c for c in CASES if c not in FAST]


@pytest.mark.parametrize(("model_name", "compression"), FAST, ids=lambda v: v)
def test_coreai_opt_finalized_model_converts_and_runs(model_name: str, compression: str,
                                                      tmp_path: Path) -> None:
    _case(model_name, compression, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(("model_name", "compression"), SLOW, ids=lambda v: v)
def test_coreai_opt_finalized_model_converts_and_runs_slow(model_name: str, compression: str,
                                                           tmp_path: Path) -> None:
    _case(model_name, compression, tmp_path)


def test_cast_to_16_bit_precision_output_converts() -> None:
    """coreai-opt's float16 cast of an exported (compressed) program converts and runs like
    the cast torch program."""
    from coreai_opt.casting import cast_to_16_bit_precision

    m, inputs = compressed("mlp", "palettize_4bit_grouped")
    ep = cast_to_16_bit_precision(torch.export.export(m, inputs))
    program = _convert(ep)
    x = inputs[0].half()  # the cast program takes float16 inputs
    got = next(iter(program.run({program.input_names[0]: x.numpy()}).values()))  # type: ignore[attr-defined]
    want = ep.module()(x).detach().numpy()
    assert got.dtype == want.dtype
    # float16 rounding of each op, summed in different orders: a few float16 ulps
    np.testing.assert_allclose(got, want, rtol=4e-3, atol=4e-3 * float(np.abs(want).max()))


# -- .pt2 files between the two packages -------------------------------------------------------

def test_registered_schemas_equal_apples() -> None:
    recorded = json.loads((FIXTURES / "apple_schemas.json").read_text())
    assert set(recorded) == set(OPS)
    for op in OPS:
        assert str(getattr(torch.ops.coreai, op).default._schema) == recorded[op], op


APPLE_PT2 = sorted(p.stem.removeprefix("apple_") for p in FIXTURES.glob("apple_*.pt2"))


def test_fixtures_cover_every_op() -> None:
    seen: set[str] = set()
    for name in APPLE_PT2:
        ep = torch.export.load(FIXTURES / f"apple_{name}.pt2")
        seen |= {n.target.__name__.split(".")[0] for n in ep.graph.nodes
                 if n.op == "call_function" and str(n.target).startswith("coreai.")}
    assert seen == set(OPS), seen


@pytest.mark.parametrize("name", APPLE_PT2)
def test_apple_pt2_loads_computes_alike_and_converts(name: str) -> None:
    recorded = np.load(FIXTURES / "apple_outputs.npz")
    x = torch.from_numpy(recorded["x"])
    ep = torch.export.load(FIXTURES / f"apple_{name}.pt2")
    # this package's eager kernels give what Apple's gave, bit for bit
    np.testing.assert_array_equal(ep.module()(x).detach().numpy(), recorded[name])
    program = _convert(ep)
    got = next(iter(program.run({program.input_names[0]: x.numpy()}).values()))  # type: ignore[attr-defined]
    want = recorded[name]
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL * float(np.abs(want).max()))


@pytest.mark.parametrize("name", sorted(models()))
def test_pt2_made_here_round_trips_and_matches_apples_eager(name: str, tmp_path: Path) -> None:
    """The fixture models built with this package's modules compute what Apple's computed and
    survive ``torch.export.save``/``load`` (the reverse direction, loading in Apple's package,
    is ``fixtures/check_in_apple.py``)."""
    recorded = np.load(FIXTURES / "apple_outputs.npz")
    x = torch.from_numpy(recorded["x"])
    model = models()[name].eval()
    np.testing.assert_array_equal(model(x).detach().numpy(), recorded[name])
    torch.export.save(torch.export.export(model, (x,)), tmp_path / "m.pt2")
    ep = torch.export.load(tmp_path / "m.pt2")
    np.testing.assert_array_equal(ep.module()(x).detach().numpy(), recorded[name])
    program = _convert(ep)
    got = next(iter(program.run({program.input_names[0]: x.numpy()}).values()))  # type: ignore[attr-defined]
    np.testing.assert_allclose(got, recorded[name], rtol=RTOL,
                               atol=ATOL * float(np.abs(recorded[name]).max()))


def test_the_quantized_output_tolerance_rejects_a_broken_model() -> None:
    """The allowance of ``_tolerance`` (two output steps, outputs on the grid) is tight enough
    that a lowering bug fails it: a program whose first bias has the wrong sign."""
    m, inputs = compressed("mlp", "int8_weights_activations")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = _convert(torch.export.export(m, inputs))
    feed = {program.input_names[0]: inputs[0].numpy()}  # type: ignore[attr-defined]
    want = m(*inputs).detach().numpy()
    got = next(iter(program.run(feed).values()))  # type: ignore[attr-defined]
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=_tolerance(m, got, want))
    weights = program.weights  # type: ignore[attr-defined]
    weights["fc1.bias"] = -np.asarray(weights["fc1.bias"])
    broken = next(iter(program.run(feed).values()))  # type: ignore[attr-defined]
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(broken, want, rtol=RTOL, atol=_tolerance(m, broken, want))
