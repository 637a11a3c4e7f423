"""The precision report: does a float32 program survive float16 (or bfloat16) compute?

:func:`precision_report` runs ``program`` in float32 and ``program.to_precision(precision)``
side by side on the same inputs, compares every op's result, names the first op that goes
wrong, and finds a small set of ops to keep in float32 with which the outputs pass (the
arithmetic model is that of :mod:`coreai_core.precision`; see docs/float16.md).

What an op's result is flagged for, per element, against the float32 program's value:

- ``nan``: NaN where float32 was not;
- ``overflow``: ±inf where float32 was finite;
- ``underflow``: zero or subnormal in the reduced type where float32 was a normal float32;
- ``error``: finite, but further from float32 than ``atol + rtol * |float32|``.

The keep set is found by bisection over the ops in execution order (the shortest prefix of
ops that, kept in float32, makes the outputs pass), then minimised by removing ops that are not
needed (delta debugging); every step runs the program once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import ml_dtypes
import numpy as np

from coreai_core import DType, Location, Program, Value
from coreai_core.precision import keep_name, reduce_precision
from coreai_core.runtime import Runtime, default_runtime, to_array

__all__ = ["OpFigures", "OutputFigures", "PrecisionReport", "precision_report"]

KINDS = ("nan", "overflow", "underflow", "error")  # most severe first
Problems = tuple[str | None, int, float, float, int]  # kind, elements, abs, budgets, zeros
_MAX_ROWS = 30  # str(report) lists the ops with problems, the kept ops and the worst others


@attrs.frozen
class OpFigures:
    """One op's result in the reduced program compared with the float32 program.

    ``error`` is the largest ``|reduced - float32| / (atol + rtol * |float32|)`` over the
    finite elements (above 1: outside the budget); ``growth`` is ``error`` over the largest
    ``error`` of its operands (how much this op amplified what it received; inf when its
    operands were exact). ``kind`` is the most severe problem found (None: none) and
    ``elements`` how many elements have it.
    """

    name: str
    op: str
    location: Location
    kind: str | None
    elements: int
    max_abs_error: float
    error: float
    growth: float
    kept: bool = False
    zeros: int = 0  # elements that are 0 where float32 was a normal number (in ``underflow``)

    @property
    def where(self) -> str:
        """``file:line in module.path`` (empty when unknown)."""
        loc = self.location
        parts = []
        if loc.file is not None:
            parts.append(loc.file + (f":{loc.line}" if loc.line is not None else ""))
        if loc.module_path:
            parts.append(f"in {loc.module_path}")
        return " ".join(parts)

    def describe(self) -> str:
        what = f"{self.name} {self.op}"
        if self.kind is not None:
            what += f" ({self.kind}, {self.elements} element{'s' * (self.elements != 1)})"
        return what + (f" at {self.where}" if self.where else "")


@attrs.frozen
class OutputFigures:
    """One output of the reduced program against the float32 program's."""

    name: str
    passed: bool
    max_abs_error: float
    error: float


@attrs.frozen
class PrecisionReport:
    """What :func:`precision_report` found.

    ``passed``: the reduced program's outputs are within ``atol + rtol * |float32|`` of the
    float32 program's. ``first_bad``: the op where it goes wrong (None when passed): the first
    op, in execution order, with a problem among the ops that had to be kept (when no keep set
    was found: the first with the most severe problem). ``ops``: figures for every op with a
    float32 result. ``keep``: printed names of ops to keep in float32 (pass them to
    ``program.to_precision(precision, keep=report.keep)``); ``keep_passes`` says whether the
    outputs pass with them (False when even float32 everywhere does not, e.g. a random op).
    ``checks`` counts the program runs the search took.
    """

    precision: str
    rtol: float
    atol: float
    passed: bool
    outputs: tuple[OutputFigures, ...]
    ops: tuple[OpFigures, ...]
    first_bad: OpFigures | None
    keep: tuple[str, ...]
    keep_passes: bool
    checks: int

    def __str__(self) -> str:
        head = (f"{self.precision} precision report (rtol={self.rtol:g}, atol={self.atol:g}): "
                f"{'passed' if self.passed else 'FAILED'}")
        lines = [head]
        for o in self.outputs:
            lines.append(f"  output {o.name}: max abs error {o.max_abs_error:.3g}, "
                         f"{o.error:.3g}x the budget{'' if o.passed else '  FAIL'}")
        if self.first_bad is not None:
            lines.append(f"  first bad op: {self.first_bad.describe()}")
        if not self.passed:
            if self.keep_passes:
                lines.append(f"  keep in float32 ({len(self.keep)} op"
                             f"{'s' * (len(self.keep) != 1)}; the outputs then pass): "
                             f"{list(self.keep)}")
            else:
                lines.append("  no keep set makes the outputs pass (they differ in float32 "
                             "too: random ops or inputs the program does not use?)")
        lines.append(self.table())
        return "\n".join(lines)

    def table(self) -> str:
        """The per-op figures: ops with a problem, kept ops, then the largest errors."""
        rows = list(self.ops)
        shown = {id(r) for r in rows if r.kind is not None or r.kept}
        for r in sorted(rows, key=lambda r: -r.error):
            if len(shown) >= _MAX_ROWS:
                break
            shown.add(id(r))
        picked = [r for r in rows if id(r) in shown][:_MAX_ROWS]
        header = ("  op      kind                        problem     elements  max abs err  "
                  "err/budget  growth  location")
        lines = [header]
        for r in picked:
            growth = "new" if r.growth == float("inf") else f"{r.growth:.3g}"
            lines.append(f"  {r.name + ('*' if r.kept else ''):7} {r.op:27} {r.kind or '-':11} "
                         f"{r.elements:8}  {r.max_abs_error:11.3g}  {r.error:10.3g}  "
                         f"{growth:>6}  {r.where}")
        hidden = len(rows) - len(picked)
        if hidden:
            lines.append(f"  ... {hidden} more op{'s' * (hidden != 1)} with smaller errors")
        if any(r.kept for r in picked):
            lines.append("  (* kept in float32)")
        return "\n".join(lines)


def precision_report(program: Program, inputs: Mapping[str, Any] | Sequence[Any],
                     precision: Any = "float16", *, rtol: float = 1e-2, atol: float = 1e-2,
                     keep: str | Iterable[str] | None = None, entrypoint: str = "main",
                     runtime: Runtime | None = None, seed: int = 0,
                     max_checks: int = 200) -> PrecisionReport:
    """Run ``program`` in float32 and in ``precision`` side by side and report per op.

    ``inputs`` are the entrypoint's inputs (by name or in order; arrays or tensors), used by
    both runs; random ops draw from ``seed`` in both. ``rtol``/``atol`` set the error budget
    of the outputs and of each op's result: ``|reduced - float32| <= atol + rtol *
    |float32|``. ``keep`` names ops already kept in float32 (as ``to_precision`` takes them);
    the report then judges that program and its keep set includes them. ``max_checks`` bounds
    the program runs the keep-set search may take (it stops minimising, with a keep set that
    passes, when they run out). See the module docstring for what each problem means.
    """
    dtype = DType.of(precision)
    runtime = runtime or default_runtime()
    _check_tolerance("rtol", rtol)
    _check_tolerance("atol", atol)
    given = _keep_entries(keep)
    entrypoints = [n for n, g in program.graphs.items() if g.composite is None]
    if entrypoint not in entrypoints:
        raise KeyError(f"precision_report: the program has no entrypoint {entrypoint!r}; "
                       f"its entrypoints are {entrypoints}")
    arrays = _input_arrays(program, inputs, entrypoint)
    ref_outputs, ref_values = runtime.run_collect(program, arrays, entrypoint,
                                                  state=_state(program), seed=seed)
    reduced = reduce_precision(program, dtype, given)
    outputs, values = runtime.run_collect(reduced.program, arrays, entrypoint,
                                          state=_state(reduced.program), seed=seed)
    check = _Check(program, dtype, arrays, ref_outputs, rtol, atol, entrypoint, runtime, seed,
                   max_checks)
    output_figures = check.outputs(outputs)
    passed = all(o.passed for o in output_figures)
    graph = program.graphs[entrypoint]
    def qualified(name: str) -> str:
        return keep_name(program, entrypoint, name)

    figures = _op_figures(graph, arrays, reduced.names, reduced.values, ref_values, values, dtype,
                          rtol, atol)
    keep_set, keep_passes = tuple(reduced.kept), passed
    if not passed:
        candidates = [qualified(n) for n in _candidates(graph, reduced.names)]
        keep_set, keep_passes = check.search(
            tuple(reduced.kept), [c for c in candidates if c not in set(reduced.kept)])
    kept = {f.name for f in figures if qualified(f.name) in set(keep_set)}
    figures = [attrs.evolve(f, kept=f.name in kept) for f in figures]
    first_bad = None if passed else _first_bad(figures, kept if keep_passes else set())
    return PrecisionReport(dtype.value, rtol, atol, passed, tuple(output_figures),
                           tuple(figures), first_bad, keep_set, keep_passes, check.runs)


def _check_tolerance(name: str, value: Any) -> None:
    """A tolerance is a finite real number >= 0: NaN would make every comparison pass."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"precision_report: {name} must be a number >= 0, got "
                        f"{type(value).__name__} {value!r}")
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"precision_report: {name} must be a finite number >= 0 (the error "
                         f"budget is atol + rtol * |float32|), got {value!r}")


def _keep_entries(keep: Any) -> list[str]:
    """``keep`` as a list of entries, each a non-empty string (what ``to_precision`` takes)."""
    if keep is None:
        return []
    if isinstance(keep, str):
        keep = [keep]
    elif not isinstance(keep, Iterable):
        raise TypeError(f"precision_report: keep must be a string or an iterable of strings, "
                        f"got {type(keep).__name__} {keep!r}")
    entries = list(keep)
    for i, entry in enumerate(entries):
        if not isinstance(entry, str) or not entry:
            raise TypeError(
                f"precision_report: keep entry {i} is {type(entry).__name__} {entry!r}; an "
                "entry is a non-empty string: a result name as printed ('%12'), an op kind "
                "('coreai.softmax'), a source location ('model.py:12') or a module path "
                "('encoder.layers.0')")
    return entries


def _input_arrays(program: Program, inputs: Any, entrypoint: str) -> dict[str, np.ndarray]:
    names = program.graphs[entrypoint].input_names
    if not isinstance(inputs, Mapping):
        inputs = dict(zip(names, inputs, strict=True))
    return {k: to_array(v) for k, v in inputs.items()}


def _state(program: Any) -> dict[str, np.ndarray]:
    """A copy of the program's current state: the report's runs leave the program's alone."""
    return {k: np.array(v, copy=True) for k, v in program.state.items()}


def _candidates(graph: Any, names: Mapping[Value, str]) -> list[str]:
    """The ops ``to_precision`` reduces (those on float32 values but constants and control
    flow; composite calls included), by printed name in execution order."""
    out = []
    for op in graph.ops:
        if not op.results or op.name == "coreai.constant" or op.regions:
            continue
        name = names[op.results[0]]
        if any(v.type.element_type is DType.float32
                                    for v in [*op.operands, *op.results]):
            out.append(name)
    return out


class _Check:
    """Runs ``program`` reduced with a keep set and judges its outputs; counts the runs."""

    def __init__(self, program: Program, dtype: DType, inputs: dict[str, np.ndarray],
                 reference: dict[str, np.ndarray], rtol: float, atol: float, entrypoint: str,
                 runtime: Runtime, seed: int, max_checks: int) -> None:
        self.program, self.dtype, self.inputs, self.reference = program, dtype, inputs, reference
        self.rtol, self.atol, self.entrypoint = rtol, atol, entrypoint
        self.runtime, self.seed, self.max_checks = runtime, seed, max_checks
        self.runs = 0
        self.cache: dict[frozenset[str], bool] = {}

    def outputs(self, got: dict[str, np.ndarray]) -> list[OutputFigures]:
        out = []
        for name, want in self.reference.items():
            abs_err, err, bad = _compare(got[name], want, self.rtol, self.atol)
            out.append(OutputFigures(name, not bad, abs_err, err))
        return out

    def passes(self, keep: Iterable[str]) -> bool:
        key = frozenset(keep)
        if key not in self.cache:
            self.runs += 1
            reduced = reduce_precision(self.program, self.dtype, sorted(key)).program
            got = self.runtime.run(reduced, self.inputs, self.entrypoint, state=_state(reduced),
                                   seed=self.seed)
            self.cache[key] = all(o.passed for o in self.outputs(got))
        return self.cache[key]

    def search(self, given: tuple[str, ...], candidates: list[str]) -> tuple[tuple[str, ...],
                                                                              bool]:
        """A small keep set (``given`` plus some ``candidates``, in execution order) with which
        the outputs pass, and whether one was found."""
        if not self.passes([*given, *candidates]):
            return given, False
        lo, hi = 0, len(candidates)  # keeping candidates[:hi] passes; [:lo] is not known to
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.passes([*given, *candidates[:mid]]):
                hi = mid
            else:
                lo = mid
        chosen = self._minimise(list(given), candidates[:hi])
        order = {n: i for i, n in enumerate(candidates)}
        return (*given, *sorted(chosen, key=order.__getitem__)), True

    def _minimise(self, given: list[str], chosen: list[str]) -> list[str]:
        """Delta debugging: drop chunks (halves, quarters, ... single ops) that are not needed
        while the outputs still pass."""
        chunks = 2
        while chosen and self.runs < self.max_checks:
            size = max(1, len(chosen) // chunks)
            for start in range(0, len(chosen), size):
                rest = chosen[:start] + chosen[start + size:]
                if self.runs >= self.max_checks:
                    return chosen
                if self.passes([*given, *rest]):
                    chosen = rest
                    chunks = max(chunks - 1, 2)
                    break
            else:
                if size == 1:
                    return chosen
                chunks = min(chunks * 2, len(chosen))
        return chosen


def _compare(got: np.ndarray, want: np.ndarray, rtol: float, atol: float,
             ) -> tuple[float, float, bool]:
    """Max abs error, max error in budgets, and whether any element is outside the budget."""
    if want.dtype.kind not in "fc" and want.dtype != ml_dtypes.bfloat16:
        same = bool(np.array_equal(got, want))
        return (0.0 if same else float("inf")), (0.0 if same else float("inf")), not same
    g = np.asarray(got, np.float64)
    w = np.asarray(want, np.float64)
    both_nan = np.isnan(g) & np.isnan(w)
    same_inf = np.isinf(g) & (g == w)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = np.where(both_nan | same_inf, 0.0, np.abs(g - w))
        budget = atol + rtol * np.abs(np.where(np.isfinite(w), w, 0.0))
        # a zero budget (rtol = atol = 0) admits exact results only
        ratio = np.where(np.isnan(diff), np.inf, np.where(diff == 0, 0.0, diff / budget))
    finite = np.isfinite(diff)
    abs_err = float(diff[finite].max()) if finite.any() else 0.0
    if not finite.all():
        abs_err = float("inf")
    err = float(ratio.max()) if ratio.size else 0.0
    return abs_err, err, bool(err > 1.0)


def _problems(got: np.ndarray, want: np.ndarray, dtype: DType, rtol: float, atol: float,
              ) -> tuple[str | None, int, float, float, int]:
    """The most severe problem of ``got`` (a reduced result) against ``want`` (float32), how
    many elements have it, the max abs error, the max error in budgets, and how many normal
    float32 values became zero."""
    g = np.asarray(got).astype(np.float64)
    w = np.asarray(want).astype(np.float64)
    abs_err, err, _ = _compare(g, w, rtol, atol)
    smallest = float(ml_dtypes.finfo(dtype.numpy).smallest_normal)
    with np.errstate(invalid="ignore", over="ignore"):
        masks = {
            "nan": np.isnan(g) & ~np.isnan(w),
            "overflow": np.isinf(g) & np.isfinite(w),
            "underflow": (np.abs(g) < smallest) & (np.abs(w) >= np.finfo(np.float32).tiny)
            & np.isfinite(w),
            "error": np.isfinite(g) & np.isfinite(w)
            & (np.abs(g - w) > atol + rtol * np.abs(w)),
        }
    zeros = int((masks["underflow"] & (g == 0)).sum())
    for kind in KINDS:
        count = int(masks[kind].sum())
        if count:
            return kind, count, abs_err, err, zeros
    return None, 0, abs_err, err, zeros


def _op_figures(graph: Any, inputs: Mapping[str, np.ndarray], names: Mapping[Value, str],
                values: Mapping[Value, Value], ref_values: Mapping[Value, np.ndarray],
                got_values: Mapping[Value, np.ndarray], dtype: DType, rtol: float, atol: float,
                ) -> list[OpFigures]:
    """Figures for the float32 inputs, then each op of ``graph`` with a float32 result, in
    execution order."""
    errors: dict[Value, float] = {}
    out = _input_figures(graph, inputs, dtype, rtol, atol, errors)
    for op in graph.ops:
        results = [r for r in op.results if r.type.element_type is DType.float32
                   and r in values and r in ref_values and values[r] in got_values]
        if not results:
            continue
        worst: Problems = (None, 0, 0.0, 0.0, 0)
        for r in results:
            found = _problems(got_values[values[r]], ref_values[r], dtype, rtol, atol)
            errors[r] = found[3]
            worst = _worse(worst, found)
        kind, count, abs_err, err, zeros = worst
        before = max((errors.get(v, 0.0) for v in op.operands), default=0.0)
        name = names[op.results[0]]
        out.append(OpFigures(name, op.name, op.location, kind, count, abs_err, err,
                             _growth(err, before), zeros=zeros))
    return out


def _growth(err: float, before: float) -> float:
    if before == 0:
        return float("inf") if err > 0 else 1.0
    if np.isinf(before):
        return 1.0 if np.isinf(err) else 0.0
    return err / before


def _input_figures(graph: Any, arrays: Mapping[str, np.ndarray], dtype: DType, rtol: float,
                   atol: float, errors: dict[Value, float]) -> list[OpFigures]:
    """Rows for the float32 inputs: what rounding them to ``dtype`` does (an input beyond the
    type's range is inf wherever an op that is not kept reads it)."""
    out = []
    for name, v in graph.inputs.items():
        if v.type.element_type is not DType.float32 or name not in arrays:
            continue
        want = np.asarray(arrays[name], np.float32)
        with np.errstate(over="ignore"):
            got = want.astype(dtype.numpy)
        kind, count, abs_err, err, zeros = _problems(got, want, dtype, rtol, atol)
        errors[v] = err
        out.append(OpFigures(f"%{name}", "input", Location(), kind, count, abs_err, err,
                             1.0 if err == 0 else float("inf"), zeros=zeros))
    return out


def _worse(a: Problems, b: Problems) -> Problems:
    rank = {k: i for i, k in enumerate(KINDS)}
    ra = rank.get(a[0], len(KINDS)) if a[0] else len(KINDS)
    rb = rank.get(b[0], len(KINDS)) if b[0] else len(KINDS)
    kind, count = (a[0], a[1]) if ra <= rb else (b[0], b[1])
    return kind, count, max(a[2], b[2]), max(a[3], b[3]), a[4] + b[4]


def _first_bad(figures: list[OpFigures], kept: set[str]) -> OpFigures | None:
    """Where it goes wrong: an input beyond the type's range; else the first kept op with a
    decisive problem (NaN, overflow, out of budget, or normal values flushed to zero: a
    subnormal that keeps most of the value is no cause); else the first op with the most
    severe problem (constants only for overflow); else the first computed underflow."""
    for f in figures:
        if f.op == "input" and f.kind in ("nan", "overflow"):
            return f  # beyond the type's range before any op runs
    for f in figures:
        if f.name in kept and (f.kind in ("nan", "overflow", "error")
                               or (f.kind == "underflow" and f.zeros > 0)):
            return f
    for kind in ("nan", "overflow", "error"):
        for f in figures:
            if f.kind == kind and (f.op != "coreai.constant" or kind == "overflow"):
                return f
    for f in figures:
        if f.kind == "underflow" and f.op not in ("coreai.constant", "input"):
            return f
    return None
