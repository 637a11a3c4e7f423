"""The optimizer: pipeline API, report, pass details and properties on random programs.

Golden before/after text for each rule lives in test_optimizer_golden.py.
"""

from __future__ import annotations

import attrs
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coreai_core import Program, TensorType, Value, WeightRef, parse
from coreai_core._opdef import OPS
from coreai_core.dialects import coreai
from coreai_core.optimizer import (
    CanonicalizePass,
    ConstantFoldingPass,
    CSEPass,
    DCEPass,
    FoldAffinePass,
    OptimizeReport,
    PassManager,
    PassStats,
    default_passes,
    optimize,
    pass_names,
)
from coreai_core.optimizer.canonicalize import exact_cast
from coreai_core.optimizer.fold_affine import channel_vector
from coreai_core.runtime import default_runtime
from tests.core.strategies import programs_with_inputs

F = "float32"


def build(body, **inputs) -> Program:
    p = Program()
    with p.graph("main", inputs={k: TensorType(*v) for k, v in inputs.items()}) as g:
        out = body(*[g[k] for k in inputs])
        g.outputs(out if isinstance(out, dict) else {"y": out})
    return p


def run_fresh(p: Program, inputs: dict) -> tuple[dict, dict]:
    """Run from the initial state (explicitly, so the program's own state is untouched)."""
    state = {k: np.array(v) for k, v in p.initial_state.items()}
    return p.run(inputs, state=state), state


def assert_close(a: dict, b: dict, tol: float = 1e-4) -> None:
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        np.testing.assert_allclose(a[k], b[k], rtol=tol, atol=tol, err_msg=k)


def chain() -> Program:
    """x*1 (canonicalize), const+const (fold), a duplicate (cse) and a dead op (dce)."""
    def body(x: Value) -> Value:
        coreai.exp(x)  # dead
        a = coreai.broadcasting_mul(x, 1.0)
        c = coreai.broadcasting_add(coreai.constant([1.0, 2.0]), coreai.constant([3.0, 4.0]))
        return coreai.broadcasting_add(coreai.relu(coreai.broadcasting_add(a, c)),
                                       coreai.relu(coreai.broadcasting_add(a, c)))
    return build(body, x=((2,), F))


# -- pipeline and report -----------------------------------------------------------------------

def test_default_pipeline_is_named_and_fresh() -> None:
    names = ["canonicalize", "constant_folding", "fold_affine", "cse", "dce"]
    assert pass_names() == names
    first, second = default_passes(), default_passes()
    assert [p.name for p in first] == names
    assert all(a is not b for a, b in zip(first, second))
    assert [type(p) for p in first] == [CanonicalizePass, ConstantFoldingPass, FoldAffinePass,
                                        CSEPass, DCEPass]


def test_report_counts_what_each_pass_did() -> None:
    p = chain()
    report = p.optimize()
    assert isinstance(report, OptimizeReport)
    assert report.converged and report.iterations == 2  # the second finds nothing to do
    assert report["canonicalize"] == PassStats(removed=2, rewritten=1)  # mul and its 1.0
    assert report["constant_folding"] == PassStats(removed=3, added=1, rewritten=1)
    assert report["cse"] == PassStats(removed=2, rewritten=2)  # add and relu duplicates
    assert report["dce"] == PassStats(removed=1)  # the dead exp
    assert report.totals == PassStats(removed=8, added=1, rewritten=4)
    assert (report.ops_before, report.ops_after) == (11, 4)
    text = str(report)
    lines = text.splitlines()
    assert lines[0].split() == ["pass", "runs", "removed", "added", "rewritten", "weights",
                                "-/+", "time"]
    assert lines[3].split()[:6] == ["constant_folding", "2", "3", "1", "1", "0/0"]
    assert lines[-2].split()[:5] == ["total", "8", "1", "4", "0/0"]
    assert lines[-1] == "ops 11 -> 4 in 2 iteration(s), converged"


def test_second_optimize_changes_nothing() -> None:
    p = chain()
    p.optimize()
    text = str(p)
    again = p.optimize()
    assert not again.changed and again.iterations == 1 and str(p) == text


def test_passes_by_name_or_instance_and_editable_list() -> None:
    p = chain()
    report = optimize(p, ["cse", DCEPass()])
    assert [r.name for r in report.records] == ["cse", "dce"]
    assert "coreai.exp" not in str(p) and str(p).count("coreai.relu") == 1
    pm = PassManager()
    pm.passes.remove(next(x for x in pm.passes if x.name == "cse"))
    report = pm.run(chain())
    assert "cse" not in [r.name for r in report.records]
    with pytest.raises(ValueError, match=r"unknown optimizer pass 'fold'.*'fold_affine'"):
        optimize(chain(), ["fold"])
    with pytest.raises(TypeError, match=r"\.name and \.run\(program\)"):
        optimize(chain(), [object()])


def test_iteration_cap_and_custom_pass() -> None:
    class Restless:
        name = "restless"

        def run(self, program: Program) -> PassStats:
            return PassStats(rewritten=1)

    report = optimize(chain(), [Restless()], max_iterations=3)
    assert report.iterations == 3 and not report.converged
    assert report.records[0].runs == 3 and report["restless"].rewritten == 3
    assert str(report).endswith("stopped at the iteration cap")
    with pytest.raises(ValueError, match="max_iterations"):
        PassManager(max_iterations=0)


def test_optimize_drops_cached_plans() -> None:
    p = chain()
    x = {"x": np.array([1.0, -5.0], np.float32)}
    before = p.run(x)
    plan = default_runtime().plan(p)
    assert default_runtime().plan(p) is plan  # the plan is cached
    p.optimize()
    assert default_runtime().plan(p) is not plan
    assert_close(p.run(x), before)


# -- constant folding --------------------------------------------------------------------------

def test_folding_uses_the_runtime_kernels_and_stores_large_results_as_weights() -> None:
    data = np.arange(24, dtype=np.float32).reshape(4, 6)
    p = build(lambda x: coreai.broadcasting_add(
        x, coreai.reduce_sum(coreai.broadcasting_mul(coreai.constant(data, name="w"), 2.0),
                             axes=[0])), x=((6,), F))
    report = optimize(p, ["constant_folding"])
    assert report["constant_folding"].weights_removed == 1  # @w is no longer read
    const = [op for op in p.graphs["main"].ops if op.name == "coreai.constant"]
    assert len(const) == 1
    np.testing.assert_array_equal(const[0].attributes["value"], (data * 2).sum(0))
    q = build(lambda x: coreai.broadcasting_add(
        x, coreai.transpose(coreai.constant(data, name="w"), perm=[1, 0])), x=((6, 4), F))
    optimize(q, ["constant_folding"])
    assert list(q.weights) == ["w.transpose"]  # 24 elements > INLINE_LIMIT: a weight
    np.testing.assert_array_equal(q.weights["w.transpose"], data.T)


def test_folding_does_not_duplicate_shared_weights() -> None:
    data = np.ones((8, 8), np.float32)

    def body(x: Value) -> dict:
        w = coreai.constant(data, name="w")
        return {"a": coreai.batch_matmul(x, coreai.transpose(w, perm=[1, 0])),
                "b": coreai.batch_matmul(x, w)}

    p = build(body, x=((2, 8), F))
    optimize(p, [ConstantFoldingPass(max_elements=16)])
    assert list(p.weights) == ["w"] and "coreai.transpose" in str(p)  # 64 > 16, @w shared
    optimize(p, [ConstantFoldingPass(max_elements=64)])
    assert sorted(p.weights) == ["w", "w.transpose"]


def test_folding_leaves_failing_kernels_to_run_time() -> None:
    p = build(lambda x: coreai.broadcasting_add(x, coreai.broadcasting_divide(
        coreai.constant(np.array([1, 2], np.int32)), coreai.constant(np.array([0, 1], np.int32)))),
        x=((2,), "int32"))
    report = optimize(p, ["constant_folding"])
    assert not report.changed and "coreai.broadcasting_divide" in str(p)


def test_folding_reads_state_and_unbound_weights_as_unknown() -> None:
    p = Program()
    p.add_weight("u", None, TensorType((2,), F))
    with p.graph("main", inputs={"x": TensorType((2,), F)},
                 state={"s": np.ones(2, np.float32)}) as g:
        y = coreai.broadcasting_add(coreai.exp(coreai.constant(WeightRef("u"))), g["s"])
        g.outputs({"y": coreai.broadcasting_add(g["x"], y)}, state={"s": y})
    text = str(p)
    assert not optimize(p, ["constant_folding"]).changed and str(p) == text


# -- canonicalization, cse, dce, affine details ------------------------------------------------

@pytest.mark.parametrize(("src", "mid", "exact"), [
    ("float32", "float64", True), ("float16", "float32", True), ("bfloat16", "float32", True),
    ("float32", "float16", False), ("float16", "bfloat16", False), ("bfloat16", "float16", False),
    ("int8", "bfloat16", True), ("uint8", "float16", True), ("int16", "float16", False),
    ("int32", "float64", True), ("int32", "float32", False), ("int64", "float64", False),
    ("int8", "uint8", False), ("uint16", "int32", True), ("bool", "float16", True),
    ("float32", "bool", False), ("float32", "int64", False), ("uint64", "int64", False),
])
def test_exact_cast_table(src: str, mid: str, exact: bool) -> None:
    from coreai_core import DType

    assert exact_cast(DType.of(src), DType.of(mid)) is exact


def test_exact_cast_table_agrees_with_numpy_round_trips() -> None:
    from coreai_core import DType

    for src in DType:
        for mid in DType:
            if not exact_cast(src, mid) or src is DType.bool:
                continue
            if src.is_float or src.is_complex:
                info = ml_dtypes.finfo(src.real_dtype.numpy)
                values = np.array([info.max, -info.max, info.tiny, info.smallest_subnormal,
                                   1 / 3, np.inf, -0.0], dtype=src.numpy)
                if src.is_complex:
                    values.imag = values.real[::-1]
            else:
                info = ml_dtypes.iinfo(src.numpy)
                values = np.array([info.min, info.max, info.min + 1, 0], dtype=src.numpy)
            there = values.astype(mid.numpy)
            back = (there.real if mid.is_complex and not src.is_complex else there
                    ).astype(src.numpy)
            # compared widened: numpy's NaN-aware comparison does not know ml_dtypes types
            wide = np.complex128 if src.is_complex else np.float64
            np.testing.assert_array_equal(back.astype(wide), values.astype(wide),
                                          err_msg=f"{src} -> {mid}")


def test_cse_never_merges_impure_ops() -> None:
    opdef = OPS["coreai.exp"]
    OPS.register("coreai.exp", attrs.evolve(opdef, traits=opdef.traits | {"side_effects"}),
                 allow_override=True)
    try:
        p = build(lambda x: {"a": coreai.exp(x), "b": coreai.exp(x)}, x=((2,), F))
        with p.graph("aux") as g:
            coreai.exp(coreai.constant(1.0))  # unused, but impure: dce keeps it
            g.outputs({})
        report = optimize(p, ["cse", "constant_folding", "dce"])
    finally:
        OPS.register("coreai.exp", opdef, allow_override=True)
    assert not report.changed
    assert str(p).count("coreai.exp") == 3


def test_dce_keeps_state_updates_and_inputs() -> None:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((2,), F), "unused": TensorType((1,), F)},
                 state={"s": np.zeros(2, np.float32)}) as g:
        g.outputs({"y": g["x"]}, state={"s": coreai.broadcasting_add(g["s"], g["x"])})
    text = str(p)
    assert not optimize(p, ["dce"]).changed and str(p) == text


def test_affine_folds_into_shared_weights_without_touching_the_other_user() -> None:
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)

    def body(x: Value) -> dict:
        wv = coreai.constant(w, name="conv.weight")
        return {"a": coreai.broadcasting_mul(coreai.conv(x, wv), 2.0),
                "b": coreai.conv(x, wv, strides=[2, 2])}

    p = build(body, x=((1, 3, 7, 7), F))
    x = {"x": np.random.default_rng(1).standard_normal((1, 3, 7, 7)).astype(np.float32)}
    before = p.run(x)
    optimize(p, ["fold_affine", "dce"])
    assert sorted(p.weights) == ["conv.weight", "conv.weight.folded"]
    np.testing.assert_array_equal(p.weights["conv.weight"], w)
    np.testing.assert_allclose(p.weights["conv.weight.folded"], w * 2, rtol=1e-6)
    assert_close(p.run(x), before, tol=1e-5)


def test_affine_skips_zero_and_infinite_scales() -> None:
    w = np.ones((2, 2), np.float32)
    for scale in (0.0, np.inf):
        p = build(lambda t, s=scale: coreai.broadcasting_divide(
            coreai.batch_matmul(t, coreai.constant(w)), s), t=((1, 2), F))
        assert not optimize(p, ["fold_affine"]).changed


def test_channel_vector() -> None:
    v = channel_vector(np.arange(3.0).reshape(3, 1, 1), rank=4, axis=1, size=3)
    np.testing.assert_array_equal(v, [0, 1, 2])
    np.testing.assert_array_equal(channel_vector(np.array(2.0), 4, 1, 3), [2, 2, 2])
    assert channel_vector(np.arange(3.0), rank=4, axis=1, size=3) is None  # varies on width
    assert channel_vector(np.ones((2, 3, 1, 1)), rank=4, axis=1, size=3) is None
    assert channel_vector(np.ones((1, 1, 1, 1, 3)), rank=4, axis=3, size=3) is None


# -- properties on random programs --------------------------------------------------------------

def _check_optimize_keeps_results(case: tuple[Program, dict]) -> None:
    p, inputs = case
    before, state_before = run_fresh(p, inputs)
    report = p.optimize()
    p.verify()
    assert report.converged
    after, state_after = run_fresh(p, inputs)
    assert_close(after, before)
    assert_close(state_after, state_before)
    text = str(p)
    assert parse(text, weights=p.weights) == p  # the result prints and parses back
    again = p.optimize()
    assert not again.changed, str(again)
    assert str(p) == text


@given(programs_with_inputs(max_steps=8))
def test_optimize_keeps_results_on_random_programs(case: tuple[Program, dict]) -> None:
    _check_optimize_keeps_results(case)


@given(programs_with_inputs(max_steps=6, dynamic=True))
def test_optimize_keeps_results_on_random_dynamic_programs(case: tuple[Program, dict]) -> None:
    _check_optimize_keeps_results(case)


@st.composite
def affine_chains(draw) -> tuple[Program, dict]:
    """conv or linear followed by per-channel scale/shift steps drawn at random."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    use_conv = draw(st.booleans())
    channels = draw(st.integers(1, 4))
    steps = draw(st.lists(st.sampled_from(["mul", "div", "add", "sub", "relu"]), max_size=5))
    shape = (2, 3, 4, 4) if use_conv else (2, 3)
    p = Program()
    with p.graph("main", inputs={"x": TensorType(shape, F)}) as g:
        if use_conv:
            y = coreai.conv(g["x"], coreai.constant(rng.standard_normal((channels, 3, 3, 3))
                                                    .astype(np.float32), name="w"),
                            coreai.constant(rng.standard_normal(channels).astype(np.float32))
                            if draw(st.booleans()) else None, pads=[1, 1])
            cshape = draw(st.sampled_from([(channels, 1, 1), (1, channels, 1, 1), ()]))
        else:
            y = coreai.batch_matmul(g["x"], coreai.constant(
                rng.standard_normal((3, channels)).astype(np.float32), name="w"))
            cshape = draw(st.sampled_from([(channels,), (1, channels), ()]))
        for step in steps:
            c = coreai.constant((rng.random(cshape) + 0.5).astype(np.float32))
            y = coreai.relu(y) if step == "relu" else getattr(coreai, f"broadcasting_{step}"
                                                              if step != "div" else
                                                              "broadcasting_divide")(y, c)
        g.outputs({"y": y})
    x = rng.standard_normal(shape).astype(np.float32)
    return p, {"x": x}


@given(affine_chains())
def test_affine_folding_keeps_results(case: tuple[Program, dict]) -> None:
    _check_optimize_keeps_results(case)


def test_cse_reads_whole_weights_only_when_fingerprints_collide(monkeypatch) -> None:
    # Reading a strided (e.g. folded transpose) weight in full copies it: with a 1.1B model
    # that made cse take seconds per run. Only weights whose samples collide are compared.
    from coreai_core.optimizer import cse

    rng = np.random.default_rng(0)
    weights = {"a": rng.standard_normal((300, 200)).T, "b": rng.standard_normal((300, 200)).T}
    weights["c"] = np.array(weights["a"])  # a true duplicate of a, laid out differently
    program = Program()
    program.weights.update(weights)
    read: list[np.ndarray] = []
    real = cse._bytes
    monkeypatch.setattr(cse, "_bytes", lambda a: read.append(a) or real(a))
    assert cse.duplicate_weights(program) == {"c": "a"}
    whole = [a for a in read if a.size > cse._SAMPLES]
    assert whole and not any(np.shares_memory(a, weights["b"]) for a in whole)
