"""Numerical verification of a converted program against torch.

- :func:`verify` compares final outputs and returns a :class:`VerifyReport`.
- :func:`find_first_divergence` compares every intermediate that maps to an FX node (op
  results remember their FX node name, also after ``optimize()``) and reports the first one
  beyond tolerance, with its FX node, target and source line.
- :func:`find_first_nonfinite` reports the first op whose result holds NaN or Inf.
- :func:`find_first_bad_rewrite` runs the optimizer on a copy with a check after each pass
  and names the first pass and rewrite that changed the results (translation validation).
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import torch
import torch.fx
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from coreai_core import Program, Value
from coreai_core.optimizer import (
    Check,
    InlineCompositesPass,
    Pass,
    ValidationReport,
    validate_optimization,
)
from coreai_core.runtime import run_graph_collect, to_array
from coreai_torch._locations import describe
from coreai_torch._table import qualified_name
from coreai_torch.externalize import CALL_MODULE, external_program

__all__ = [
    "DivergenceReport", "NodeError", "OutputError", "VerifyReport", "find_first_bad_rewrite",
    "compare", "find_first_divergence", "find_first_nonfinite", "torch_outputs", "verify",
]


@attrs.frozen
class OutputError:
    """Comparison of one output with torch."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    max_abs: float
    max_rel: float
    passed: bool
    problem: str = ""


@attrs.frozen
class VerifyReport:
    """Per-output errors against torch and the overall verdict."""

    outputs: list[OutputError]
    rtol: float
    atol: float

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs)

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        lines = [f"verification against torch (rtol={self.rtol:g}, atol={self.atol:g}): "
                 f"{'PASS' if self.passed else 'FAIL'}",
                 f"  {'output':<24} {'shape':<18} {'dtype':<9} {'max abs':>10} {'max rel':>10}"]
        for o in self.outputs:
            mark = "ok" if o.passed else f"FAIL {o.problem}"
            lines.append(f"  {o.name:<24} {list(o.shape)!s:<18} {o.dtype:<9} "
                         f"{o.max_abs:>10.3g} {o.max_rel:>10.3g}  {mark}")
        return "\n".join(lines)


def _to_numpy(t: Any) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu().resolve_conj().resolve_neg()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.numpy()
    return np.asarray(t)


def _flatten(out: Any) -> list[Any]:
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flatten(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in _flatten(o)]
    if hasattr(out, "to_tuple"):
        return _flatten(out.to_tuple())
    return [out]


def _errors(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    if got.size == 0:
        return 0.0, 0.0
    g, w = got.astype(np.float64), want.astype(np.float64)
    both_nan = np.isnan(g) & np.isnan(w)
    same_inf = np.isinf(g) & (g == w)
    # inf - inf, inf / x and the like are what the NaN and inf cases below stand for
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(both_nan | same_inf, 0.0, np.abs(g - w))
        diff = np.where(np.isnan(diff), np.inf, diff)
        rel = diff / np.maximum(np.abs(w), np.finfo(np.float64).tiny)
    rel = np.where(diff == 0, 0.0, rel)
    return float(diff.max()), float(rel.max())


def _parts(a: np.ndarray) -> np.ndarray:
    """A complex array as its (real, imag) pairs along a new last axis; others unchanged."""
    return np.stack([a.real, a.imag], axis=-1) if a.dtype.kind == "c" else a[..., None]


def dtype_kind(dtype: np.dtype) -> str:
    """``bool``, ``integer``, ``float`` or ``complex`` (ml_dtypes' bfloat16 and float8 types
    are floats); another dtype is its own kind."""
    if dtype.kind == "b":
        return "bool"
    if dtype.kind in "iu":
        return "integer"
    if dtype.kind == "c":
        return "complex"
    if dtype.kind == "f" or dtype.name.startswith(("bfloat", "float")):
        return "float"
    return dtype.name


def compare(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float,
            ) -> OutputError:
    """Shape, then dtype kind, then values (NaN matches NaN).

    Kinds are bool, integer, float and complex: an integer result where torch returns floats
    fails even if the values agree, while float32 against torch's bfloat16 (which is compared
    in float32) passes on its values.
    """
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return OutputError(name, got.shape, str(got.dtype), np.inf, np.inf, False,
                           f"shape {list(got.shape)} != torch {list(want.shape)}")
    if dtype_kind(got.dtype) != dtype_kind(want.dtype):
        abs_err, rel_err = _errors(_parts(got), _parts(want))
        return OutputError(name, got.shape, str(got.dtype), abs_err, rel_err, False,
                           f"dtype {got.dtype} ({dtype_kind(got.dtype)}) != torch "
                           f"{want.dtype} ({dtype_kind(want.dtype)})")
    shape, dtype = got.shape, str(got.dtype)
    if got.dtype.kind == "c":  # compare real and imaginary parts
        got, want = _parts(got), _parts(want)
    abs_err, rel_err = _errors(got, want)
    g, w = got.astype(np.float64), want.astype(np.float64)
    ok = bool(np.all((np.abs(g - w) <= atol + rtol * np.abs(w)) | (np.isnan(g) & np.isnan(w))
                     | (g == w)))
    return OutputError(name, shape, dtype, abs_err, rel_err, ok, "" if ok else "values differ")


def _inputs_for(program: Program, inputs: Any, entrypoint: str) -> dict[str, np.ndarray]:
    # to_array keeps each input's dtype (bfloat16 included), as the program expects it
    names = program.graphs[entrypoint].input_names
    if isinstance(inputs, Mapping):
        return {k: to_array(v) for k, v in inputs.items()}
    inputs = inputs if isinstance(inputs, (list, tuple)) else (inputs,)
    if len(inputs) != len(names):
        raise ValueError(f"got {len(inputs)} inputs, the program takes {names}")
    return {n: to_array(v) for n, v in zip(names, inputs, strict=True)}


def _torch_args(inputs: Any) -> tuple[Any, ...]:
    if isinstance(inputs, Mapping):
        return tuple(torch.as_tensor(v) for v in inputs.values())
    inputs = inputs if isinstance(inputs, (list, tuple)) else (inputs,)
    return tuple(torch.as_tensor(v) if isinstance(v, np.ndarray) else v for v in inputs)


def torch_outputs(model_or_ep: torch.nn.Module | ExportedProgram, inputs: Any,
                  ) -> list[np.ndarray]:
    """Torch eager's outputs on ``inputs``, flattened in order, as numpy arrays.

    ``inputs`` is a tensor or array, a sequence of them, or a mapping (its values in order).
    The model's buffers are not changed: it runs on a copy.
    """
    args = _torch_args(inputs)
    module: torch.nn.Module
    if isinstance(model_or_ep, ExportedProgram):
        module = model_or_ep.module()
    else:
        module = copy.deepcopy(model_or_ep)
    with torch.no_grad():
        return [_to_numpy(t) for t in _flatten(module(*args))]


def verify(model_or_ep: torch.nn.Module | ExportedProgram, program: Program, inputs: Any, *,
           rtol: float = 1e-3, atol: float = 1e-4, entrypoint: str = "main") -> VerifyReport:
    """Run ``program`` and torch on ``inputs`` and compare every user output.

    Neither the model's buffers nor the program's state are changed: both run on copies.
    """
    expected = torch_outputs(model_or_ep, inputs)
    state = {k: v.copy() for k, v in program.state.items()}
    got = program.run(_inputs_for(program, inputs, entrypoint), entrypoint=entrypoint,
                      state=state)
    if len(got) != len(expected):
        raise ValueError(f"program has {len(got)} outputs, torch returned {len(expected)}")
    return VerifyReport([compare(name, g, e, rtol, atol)
                         for (name, g), e in zip(got.items(), expected, strict=True)],
                        rtol, atol)


# -- intermediates -------------------------------------------------------------------------------

@attrs.frozen
class NodeError:
    """One FX node's intermediate compared with the runtime's value for it."""

    node: str
    target: str
    source: str | None
    op: str
    max_abs: float
    max_rel: float
    passed: bool


@attrs.frozen
class DivergenceReport:
    """Errors of every mapped intermediate, in graph order, and the first failing one.

    ``torch_values`` and ``runtime_named`` count what could have been paired (torch's
    intermediates, and runtime values that carry an FX node name); when no pair was found,
    ``nodes`` is empty and the text says that nothing was compared and why.
    """

    nodes: list[NodeError]
    rtol: float
    atol: float
    torch_values: int = 0
    runtime_named: int = 0

    @property
    def first(self) -> NodeError | None:
        return next((n for n in self.nodes if not n.passed), None)

    def __str__(self) -> str:
        if not self.nodes:
            if self.runtime_named == 0:
                why = ("no runtime value carries an FX node name: a program parsed or loaded "
                       "from text has none; compare the program the converter returned")
            else:
                why = (f"none of the {self.runtime_named} FX node names carried by runtime "
                       f"values is among torch's {self.torch_values} intermediates: was the "
                       "program converted from this exported program (after the same "
                       "decompositions)?")
            return f"compared nothing, so no divergence can be reported: {why}"
        first = self.first
        head = (f"compared {len(self.nodes)} intermediates (rtol={self.rtol:g}, "
                f"atol={self.atol:g}): ")
        if first is None:
            return head + "no divergence"
        where = f" at {first.source}" if first.source else ""
        return (head + f"first divergence at FX node {first.node!r} ({first.target}){where}, "
                f"lowered to {first.op}: max abs error {first.max_abs:.3g}, "
                f"max rel error {first.max_rel:.3g}")

    def plot(self, path: str) -> None:
        """Save a plot of the max abs error per intermediate along the graph (matplotlib)."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:  # pragma: no cover - depends on the optional extra
            raise ImportError("plotting needs matplotlib: pip install 'coreai-torch[docs]'") \
                from e
        fig, ax = plt.subplots(figsize=(10, 3.5))
        errs = [max(n.max_abs, 1e-12) for n in self.nodes]
        ax.semilogy(range(len(errs)), errs, marker=".", linewidth=0.8)
        ax.axhline(self.atol, color="grey", linestyle="--", linewidth=0.8, label="atol")
        if self.first is not None:
            i = self.nodes.index(self.first)
            ax.scatter([i], [errs[i]], color="red", zorder=3, label=f"first: {self.first.node}")
        ax.set_xlabel("FX node (graph order)")
        ax.set_ylabel("max abs error")
        ax.legend(loc="upper left")
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)


class _Recorder(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.values: dict[str, Any] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        out = super().run_node(n)
        if n.op == "call_function" and qualified_name(n.target) == CALL_MODULE:
            # an externalized module's call: record its own graph's values under the call,
            # ahead of the call's results (they are computed first)
            sub = external_program(str(n.args[1]))
            if sub is not None:
                args = [self.env[a] for a in n.args[0]]  # type: ignore[union-attr,index]
                for k, v in torch_intermediates(sub, args).items():
                    self.values[f"{n.name}/{k}"] = v
        if isinstance(out, torch.Tensor):
            self.values[n.name] = out.detach()
        elif isinstance(out, (list, tuple)):
            for i, o in enumerate(out):
                if isinstance(o, torch.Tensor):
                    self.values[f"{n.name}#{i}"] = o.detach()
        elif isinstance(out, (int, float, bool)) and n.op == "call_function":
            self.values[n.name] = torch.tensor(out)
        return out


def torch_intermediates(ep: ExportedProgram, inputs: Any) -> dict[str, torch.Tensor]:
    """Every tensor an exported program's graph computes, keyed by FX node name."""
    user = list(_torch_args(inputs))
    args = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            args.append(user.pop(0))
        elif spec.target in ep.state_dict:
            args.append(ep.state_dict[spec.target])
        else:
            args.append(ep.constants[spec.target])
    rec = _Recorder(ep.graph_module)
    with torch.no_grad():
        rec.run(*args)
    return rec.values


def _inlined(program: Program) -> Program:
    """``program`` itself when it has no composites, else a copy with every one inlined."""
    if not program.composites:
        return program
    flat = copy.deepcopy(program)
    InlineCompositesPass().run(flat)
    return flat


def find_first_divergence(ep: ExportedProgram, program: Program, inputs: Any, *,
                          rtol: float = 1e-3, atol: float = 1e-4, entrypoint: str = "main",
                          ) -> DivergenceReport:
    """Compare every runtime intermediate that maps to an FX node with torch's value.

    A node is paired with the runtime value that carries its name. A node whose lowering
    returned a value it did not create (an operand, possibly by mistake: a dropped write
    into a slice returns the tensor unchanged) carries no name of its own; it is paired with
    the one of its operands' values that matches torch's result best. Such a pairing is a
    guess (an optimized program may have fused the node away), so it is reported as a
    divergence only when a value computed from it (a named intermediate or an output)
    diverges too. Last, every user output is compared with torch's, so a wrong output is
    always reported, even when no intermediate could be paired with the op that made it wrong.

    Composites are looked into: the comparison runs on a copy with every composite inlined, so
    a composite's result is compared like any op's and its inner values are recorded (named
    ``<call>/<inner>``). An externalized module's call is compared inside too: its own
    exported program runs on the call's arguments and its values are paired by those names.
    """
    program = _inlined(program)
    expected = torch_intermediates(ep, inputs)
    feeds = _inputs_for(program, inputs, entrypoint)
    state = {k: v.copy() for k, v in program.initial_state.items()}
    outputs, record = run_graph_collect(program, feeds, entrypoint=entrypoint, state=state)
    by_name: dict[str, tuple[str, np.ndarray]] = {}
    value_of: dict[str, Value] = {}
    for value, array in record.items():
        if value.name is not None and value.name not in by_name:
            by_name[value.name] = (_op_name(value), array)
            value_of[value.name] = value
    named = len(by_name)
    nodes = {n.name: n for n in ep.graph.nodes}
    computed = {name: _to_numpy(t) for name, t in expected.items()
                if nodes.get(name.split("#")[0]) is None
                or nodes[name.split("#")[0]].op == "call_function"}

    def row(name: str, op: str, got: np.ndarray) -> NodeError:
        fx = nodes.get(name.split("#")[0])
        cmp = compare(name, got, computed[name], rtol, atol)
        return NodeError(name, qualified_name(fx.target) if fx is not None else "?",
                         describe(fx) if fx is not None else None, op,
                         cmp.max_abs, cmp.max_rel, cmp.passed)

    if not any(name in by_name for name in computed):
        # not converted from this exported program: nothing to pair by operands either
        return DivergenceReport([], rtol, atol, torch_values=len(expected),
                                runtime_named=named)
    _bind_user_inputs(ep, program, entrypoint, feeds, by_name, value_of)
    rows: list[NodeError] = []
    guessed: set[int] = set()  # rows paired with an operand's value
    for name in computed:
        if name in by_name:
            rows.append(row(name, *by_name[name]))
            continue
        fx = nodes.get(name.split("#")[0])
        operands = [o for o in (_operand_names(fx) if fx is not None else [])
                    if o in by_name and by_name[o][1].shape == computed[name].shape]
        # the operand whose value the node's users read is the one its lowering returned
        read = _read_by_users(fx, value_of) if fx is not None else set()
        used = [o for o in operands if o in value_of and value_of[o] in read] or operands
        best: NodeError | None = None
        for operand in used:
            candidate = row(name, f"(returned the value of its operand {operand!r})",
                            by_name[operand][1])
            if best is None or (candidate.passed, -candidate.max_abs) > (best.passed,
                                                                         -best.max_abs):
                best, got = candidate, by_name[operand][1]
                if operand in value_of:
                    value_of[name] = value_of[operand]
        if best is not None:
            guessed.add(len(rows))
            rows.append(best)
            by_name[name] = (best.op, got)
    rows += _output_rows(ep, program, entrypoint, outputs, computed, rows, row)
    return DivergenceReport(_confirmed(ep, rows, guessed), rtol, atol,
                            torch_values=len(expected), runtime_named=named)


def _confirmed(ep: ExportedProgram, rows: list[NodeError], guessed: set[int],
               ) -> list[NodeError]:
    """``rows`` without the failing guessed pairings that no failing paired value (or
    output) is computed from."""
    def node(r: NodeError) -> str:
        return r.node.split("#")[0]

    failed = {node(r) for i, r in enumerate(rows) if not r.passed and i not in guessed}
    bad_below: dict[str, bool] = {}
    for n in reversed(list(ep.graph.nodes)):
        bad_below[n.name] = any(u.name in failed or bad_below.get(u.name, False)
                                for u in n.users)
    return [r for i, r in enumerate(rows) if r.passed or i not in guessed
            or node(r) in failed or bad_below.get(node(r), False)]


def _op_name(value: Value) -> str:
    return value.owner.name if value.owner else "(a graph input)"


def _bind_user_inputs(ep: ExportedProgram, program: Program, entrypoint: str,
                      feeds: Mapping[str, np.ndarray],
                      by_name: dict[str, tuple[str, np.ndarray]],
                      value_of: dict[str, Value]) -> None:
    """The program's inputs under their FX placeholders' names, in order."""
    placeholders = [spec.arg.name for spec in ep.graph_signature.input_specs
                    if spec.kind == InputKind.USER_INPUT and hasattr(spec.arg, "name")]
    graph_inputs = list(program.graphs[entrypoint].inputs.values())
    if len(placeholders) == len(feeds) == len(graph_inputs):
        for placeholder, array, value in zip(placeholders, feeds.values(), graph_inputs,
                                             strict=True):
            if placeholder not in by_name:
                by_name[placeholder] = ("(a graph input)", np.asarray(array))
                value_of[placeholder] = value


def _operand_names(fx: torch.fx.Node) -> list[str]:
    """The names under which an FX node's operands' values are recorded (``node#i`` for an
    item of a multi-result node)."""
    if fx.op != "call_function":
        return []
    if fx.target is operator.getitem and isinstance(fx.args[0], torch.fx.Node):
        return [f"{fx.args[0].name}#{fx.args[1]}"]
    found: dict[str, None] = {}

    def note(a: torch.fx.Node) -> torch.fx.Node:
        found[a.name] = None
        return a

    torch.fx.node.map_arg((fx.args, fx.kwargs), note)
    return list(found)


def _read_by_users(fx: torch.fx.Node, value_of: Mapping[str, Value]) -> set[Value]:
    """The named values that the lowerings of ``fx``'s users read: the operands of their
    results' ops, followed back through the unnamed values each lowering made itself."""
    read: set[Value] = set()
    for user in fx.users:
        result = value_of.get(user.name) or value_of.get(f"{user.name}#0")
        todo = [result.owner] if result is not None and result.owner is not None else []
        seen: set[int] = set()
        while todo:
            op = todo.pop()
            if id(op) in seen or len(seen) > 64:
                continue
            seen.add(id(op))
            for v in op.operands:
                if v.name is not None:
                    read.add(v)
                elif v.owner is not None:
                    todo.append(v.owner)
    return read


def _output_rows(ep: ExportedProgram, program: Program, entrypoint: str,
                 outputs: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray],
                 rows: list[NodeError], row: Any) -> list[NodeError]:
    """A row for each user output that differs from torch's or was not compared yet."""
    user = list(ep.graph_signature.user_outputs)
    names = program.graphs[entrypoint].output_names
    if len(user) != len(names):
        return []
    last = {r.node: r for r in rows}
    out = []
    for fx_name, out_name in zip(user, names, strict=True):
        if not isinstance(fx_name, str) or fx_name not in expected or out_name not in outputs:
            continue
        r = row(fx_name, f"(the program's output {out_name!r})", np.asarray(outputs[out_name]))
        if fx_name not in last or not r.passed:
            out.append(r)
    return out


def find_first_bad_rewrite(program: Program, inputs: Any = None,
                           passes: Sequence[str | Pass] | None = None, *, rtol: float = 1e-4,
                           atol: float = 1e-5, entrypoint: str = "main", seed: int = 0,
                           ) -> ValidationReport:
    """Optimize a copy of ``program`` with a check after every pass; report the first pass
    and rewrite that changed the results (``report.culprit``), or that none did.

    ``inputs`` are the entrypoint's inputs as for :func:`verify` (tensors, arrays, a tuple or
    a dict), or None for random inputs drawn from the input types. ``passes`` defaults to the
    default pipeline. Run it on the program the converter returned, before ``optimize()``:
    ``program`` itself is not changed. See :mod:`coreai_core.optimizer.validate`.
    """
    given = None if inputs is None else _inputs_for(program, inputs, entrypoint)
    check = Check(inputs=given, rtol=rtol, atol=atol, seed=seed, entrypoints=[entrypoint],
                  entrypoint=entrypoint)
    return validate_optimization(program, passes, check)


@attrs.frozen
class NonFinite:
    """The first op whose result is not finite: its name, FX node, source line and count."""

    op: str
    fx_node: str | None
    location: str
    count: int


def find_first_nonfinite(program: Program, inputs: Any, *, entrypoint: str = "main",
                         ) -> NonFinite | None:
    """The first op (in execution order) whose result contains NaN or Inf, or None.

    Composites are inlined first (in a copy), so the op found may be one inside a composite.
    """
    program = _inlined(program)
    state = {k: v.copy() for k, v in program.initial_state.items()}
    _, record = run_graph_collect(program, _inputs_for(program, inputs, entrypoint),
                                  entrypoint=entrypoint, state=state)
    for value, array in record.items():
        a = np.asarray(array)
        if a.dtype.kind in "fc" or a.dtype.name == "bfloat16":
            bad = ~np.isfinite(a if a.dtype.kind == "c" else a.astype(np.float64))
            if bad.any():
                op = value.owner
                return NonFinite(op.name if op else "?", value.name,
                                 str(op.location) if op else "", int(bad.sum()))
    return None


