"""Translation validation: the optimizer checked after each pass, and bisected to one rewrite.

``program.optimize(check=...)`` runs the pipeline as usual and, after every pass run (also one that
reports no change), runs the program on the check's inputs and compares every output and every state
update with those of the unoptimized program (see
:func:`~coreai_core.optimizer.validate_report.compare_arrays` for the tolerance). The first pass run
beyond tolerance is narrowed down to one rewrite: a :class:`~coreai_core.optimizer.RewritePass` is
re-run on a copy of the program as it was before that run, stopped after ``k`` op visits by a
:class:`~coreai_core.optimizer.RewriteObserver`, and ``k`` is bisected to the first visit whose
rewrite changes the results. The report names the pass, the rewrite, the op, its location, the
output and the error, and shows the program text around the op. Passes that are not a
``RewritePass`` (``dce``, ``inline_composites``, custom passes) are checked as a whole, and the
report says so.

``check`` is ``True`` (random inputs drawn from the input types:
:func:`~coreai_core.optimizer.random_inputs`), a dict of inputs of the default entrypoint, or a
:class:`~coreai_core.optimizer.Check` (inputs, tolerances, seed, sizes of dynamic dimensions).
On a mismatch, the program is restored to what it was before the failing pass run (every
earlier run passed the check) and :class:`~coreai_core.optimizer.OptimizationMismatchError` is
raised; its ``report`` is a :class:`~coreai_core.optimizer.ValidationReport`.
``validate_optimization`` runs the same on a copy and returns the report instead of raising.

Limits: the check proves the passes on the inputs it ran, not on all inputs. A program with
random ops runs with a fixed seed; a pass that removes a dead random op shifts the stream of
draws and is reported. Copies share weight arrays with the original: passes put new data
in a new array, never write into a weight's array.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import attrs
import numpy as np

from coreai_core._ir import Location, Operation, ProgramData, TensorType, Value
from coreai_core.errors import RuntimeInputError
from coreai_core.optimizer._pass import Pass, PassStats
from coreai_core.optimizer._program_walk import all_graphs
from coreai_core.optimizer._rewriter import RewritePass
from coreai_core.optimizer.validate_report import (
    Culprit,
    OptimizationMismatchError,
    OutputDiff,
    PassCheck,
    ValidationReport,
    compare_arrays,
)
from coreai_core.runtime import Runtime, run_program
from coreai_core.text import print_program

__all__ = ["Check", "PassChecker", "copy_program", "random_inputs"]

P = TypeVar("P", bound=ProgramData)

# Random integer inputs are drawn from [0, INT_HIGH): valid indices into most dimensions.
INT_HIGH = 4
EXCERPT_LINES = 4
EXCERPT_WIDTH = 160
_MARK = "__coreai_validate_culprit__"


@attrs.frozen(eq=False)  # holds arrays: compared by identity
class Check:
    """How a checked ``optimize`` checks each pass.

    - ``inputs``: the inputs of ``entrypoint`` (the default entrypoint when None) by name;
      None draws random inputs from the input types
      (:func:`~coreai_core.optimizer.random_inputs`). Other entrypoints run on random inputs.
    - ``rtol``, ``atol``: an output passes when its max abs error is at most
      ``atol + rtol * max|reference|`` (see ``compare_arrays``).
    - ``seed``: seeds the random inputs and the program's random ops.
    - ``dims``: sizes of named dynamic dimensions, for random inputs (``{"batch": 2}``).
    - ``entrypoints``: the entrypoints run (None: every entrypoint that is not a composite).
    - ``bisect``: narrow a failing pass down to one rewrite (re-runs the pass ~log2(ops) times).
    """

    inputs: Mapping[str, Any] | None = None
    rtol: float = 1e-4
    atol: float = 1e-5
    seed: int = 0
    dims: Mapping[str, int] = attrs.field(factory=dict)
    entrypoints: Sequence[str] | None = None
    bisect: bool = True
    entrypoint: str | None = None

    @classmethod
    def of(cls, check: Check | bool | Mapping[str, Any]) -> Check:
        """``True`` -> random inputs, a mapping -> those inputs, a ``Check`` -> itself."""
        if isinstance(check, Check):
            return check
        if check is True:
            return cls()
        if isinstance(check, Mapping):
            return cls(inputs=check)
        raise TypeError(f"check must be True, a dict of inputs or a Check, got {check!r}")


# -- inputs ------------------------------------------------------------------------------------

def _default_entrypoint(program: ProgramData) -> str:
    if "main" in program.graphs:
        return "main"
    return next((k for k, g in program.graphs.items() if g.composite is None),
                next(iter(program.graphs)))


def _static_shape(t: TensorType, what: str, dims: Mapping[str, int]) -> tuple[int, ...]:
    shape = []
    for d in t.shape:
        if isinstance(d, int):
            shape.append(d)
            continue
        size = dims.get(d.name) if d.name != "?" else None
        if size is None:
            how = (f"give its size with Check(dims={{{d.name!r}: ...}}) or " if d.name != "?"
                   else "")
            raise RuntimeInputError(
                f"random inputs: {what} has the dynamic type {t}; {how}pass the inputs "
                f"(program.optimize(check={{name: array, ...}}) or Check(inputs=...))")
        if not d.admits(size):
            raise RuntimeInputError(f"random inputs: size {size} given for dimension "
                                    f"{d.name!r} of {what} is outside its bounds ({d})")
        shape.append(size)
    return tuple(shape)


def random_array(t: TensorType, rng: np.random.Generator, what: str = "a value",
                 dims: Mapping[str, int] | None = None) -> np.ndarray:
    """A random array of type ``t``: floats standard normal (complex: both parts), integers
    uniform in ``[0, INT_HIGH)`` (valid indices into most dimensions), bools fair coins."""
    shape = _static_shape(t, what, dims or {})
    dtype = t.element_type
    if dtype.is_complex:
        parts = rng.standard_normal((2, *shape))
        return (parts[0] + 1j * parts[1]).astype(dtype.numpy)
    if dtype.is_float:
        return rng.standard_normal(shape).astype(dtype.numpy)
    if dtype.is_int:
        return rng.integers(0, INT_HIGH, shape).astype(dtype.numpy)
    return rng.random(shape) < 0.5


def random_inputs(program: ProgramData, entrypoint: str | None = None, *, seed: int = 0,
                  dims: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
    """Random inputs for ``entrypoint`` (the default one when None), drawn from the input
    types (see ``random_array`` in this module). A dynamic dimension needs its size in ``dims`` (by
    symbol name); an unnamed one cannot be drawn: pass inputs instead."""
    name = _default_entrypoint(program) if entrypoint is None else entrypoint
    if name not in program.graphs:
        raise KeyError(f"program has no entrypoint {name!r}; it has {list(program.graphs)}")
    rng = np.random.default_rng(seed)
    return {k: random_array(v.type, rng, f"input {k!r} of @{name}", dims)
            for k, v in program.graphs[name].inputs.items()}


# -- copies ------------------------------------------------------------------------------------

def copy_program(program: P, memo: dict[int, Any] | None = None) -> P:
    """An independent copy of ``program`` (graphs, regions, ops, weights dict, state) that
    shares the weight and initial-state arrays with it. ``memo`` receives the
    ``copy.deepcopy`` memo (original id -> copy)."""
    memo = {} if memo is None else memo
    for data in (*program.weights.values(), *program.initial_state.values()):
        if data is not None:
            memo[id(data)] = data
    return copy.deepcopy(program, memo)


def _restore(program: ProgramData, source: ProgramData) -> None:
    """Make ``program`` hold what ``source`` (a copy it no longer needs) holds."""
    program.graphs = source.graphs
    program.weights = source.weights
    program.weight_types = source.weight_types
    program.initial_state = source.initial_state
    for g in all_graphs(program):
        if g.program is source:
            g.program = program
    program.invalidate()


# -- the checker -------------------------------------------------------------------------------

@attrs.define
class _Budget:
    """A RewriteObserver that lets a pass visit ``budget`` ops (all when None)."""

    budget: int | None
    visits: int = 0
    rewrites: int = 0
    last_op: Operation | None = None
    last_rewrote: bool = False
    replacement: list[Value] = attrs.field(factory=list)

    def visiting(self, op: Operation) -> bool:
        if self.budget is not None and self.visits >= self.budget:
            return False
        self.visits += 1
        self.last_op, self.last_rewrote = op, False
        return True

    def rewrote(self, op: Operation, new: list[Value]) -> None:
        self.rewrites += 1
        self.last_rewrote, self.replacement = True, new


@attrs.define
class _Probe:
    outputs: tuple[OutputDiff, ...]
    observer: _Budget
    program: ProgramData
    memo: dict[int, Any]

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs)


def _observable(p: Pass) -> bool:
    """True for a RewritePass whose ``run`` takes the observer (not overridden without it)."""
    return isinstance(p, RewritePass) and "observer" in inspect.signature(p.run).parameters


class PassChecker:
    """Checks a pipeline pass run by pass run; :class:`PassManager` calls ``before`` and
    ``after`` around each run. Creating it runs the unoptimized program once (the reference).
    ``runtime`` runs the programs (the default runtime when None).
    """

    def __init__(self, program: ProgramData, check: Check, runtime: Runtime | None = None,
                 ) -> None:
        self.program = program
        self.check = check
        self.runtime = runtime
        names = (list(check.entrypoints) if check.entrypoints is not None
                 else [k for k, g in program.graphs.items() if g.composite is None])
        unknown = [n for n in names if n not in program.graphs]
        if unknown:
            raise RuntimeInputError(f"check: no entrypoint {unknown}; the program has "
                                    f"{list(program.graphs)}")
        default = check.entrypoint or _default_entrypoint(program)
        if check.inputs is not None and default not in names:
            raise RuntimeInputError(f"check: the inputs are for entrypoint {default!r}, which "
                                    f"is not among the entrypoints checked, {names}")
        self.inputs = {
            n: (dict(check.inputs) if n == default and check.inputs is not None
                else random_inputs(program, n, seed=check.seed, dims=check.dims))
            for n in names}
        self.described = ("the given inputs" if check.inputs is not None
                          else f"random inputs (seed {check.seed})")
        self.state = {k: np.array(v) for k, v in program.state.items()}
        try:
            self.reference = self._run(program)
        except Exception as e:
            raise RuntimeInputError(
                f"cannot check the optimizer: the unoptimized program fails on "
                f"{self.described}: {type(e).__name__}: {e}; pass inputs it runs on "
                f"(check={{name: array, ...}})") from e
        self.checks: list[PassCheck] = []
        self._snapshot: ProgramData | None = None
        self._generation = program.generation

    def _run(self, program: ProgramData) -> dict[str, np.ndarray]:
        results: dict[str, np.ndarray] = {}
        for entry, inputs in self.inputs.items():
            state = {k: np.array(v) for k, v in self.state.items()}
            prefix = "" if len(self.inputs) == 1 else f"@{entry} "
            outputs = run_program(program, inputs, entrypoint=entry, state=state,
                                  runtime=self.runtime, seed=self.check.seed)
            results.update({prefix + k: v for k, v in outputs.items()})
            results.update({f"{prefix}state {k}": state[k]
                            for k in program.graphs[entry].state_outputs})
        return results

    def _compare(self, program: ProgramData) -> tuple[OutputDiff, ...]:
        try:
            got = self._run(program)
        except Exception as e:
            return (OutputDiff("(run)", np.inf, np.inf, False,
                               f"the optimized program fails: {type(e).__name__}: {e}"),)
        if list(got) != list(self.reference):
            return (OutputDiff("(outputs)", np.inf, np.inf, False,
                               f"outputs {list(got)} where the unoptimized program has "
                               f"{list(self.reference)}"),)
        return tuple(compare_arrays(k, got[k], want, self.check.rtol, self.check.atol)
                     for k, want in self.reference.items())

    def before(self, p: Pass) -> None:
        """Snapshot the program (unless the last snapshot is still current)."""
        if self._snapshot is None:
            self._snapshot = copy_program(self.program)
        self._generation = self.program.generation

    def after(self, p: Pass, index: int, iteration: int, stats: PassStats) -> None:
        """Check the program after pass ``p`` (entry ``index`` of the pipeline) ran.

        Raises :class:`OptimizationMismatchError` (after restoring the program to the
        snapshot taken before ``p``) when an output moved beyond tolerance.
        """
        # Checked even when the pass reports no change (a wrong pass may edit silently), on a
        # fresh run plan (one that forgot to invalidate() must not be run on a stale plan).
        changed = stats.changed or self.program.generation != self._generation
        self.program.invalidate()
        check = PassCheck(p.name, index, iteration, self._compare(self.program), changed)
        self.checks.append(check)
        if check.passed:
            if changed:
                self._snapshot = None
            return
        snapshot = self._snapshot
        assert snapshot is not None  # before() always runs first
        culprit = self._find_culprit(p, check, snapshot)
        _restore(self.program, snapshot)
        self._snapshot = None
        raise OptimizationMismatchError(self.report(culprit))

    def report(self, culprit: Culprit | None = None) -> ValidationReport:
        return ValidationReport(tuple(self.checks), culprit, self.check.rtol, self.check.atol,
                                self.described)

    # -- bisection -------------------------------------------------------------------------
    def _probe(self, p: Pass, snapshot: ProgramData, budget: int | None) -> _Probe:
        memo: dict[int, Any] = {}
        probe = copy_program(snapshot, memo)
        observer = _Budget(budget)
        assert isinstance(p, RewritePass)  # _observable(p) was checked
        p.run(probe, observer=observer)
        return _Probe(self._compare(probe), observer, probe, memo)

    def _find_culprit(self, p: Pass, check: PassCheck, snapshot: ProgramData) -> Culprit:
        if not self.check.bisect:
            return Culprit(check, note="not narrowed down to a rewrite: Check(bisect=False)")
        if not _observable(p):
            return Culprit(check, note=f"{p.name!r} is not a RewritePass: it was checked as a "
                                       "whole, not rewrite by rewrite")
        full = self._probe(p, snapshot, None)
        if full.passed:
            return Culprit(check, note="re-running the pass on a copy of the program before it "
                                       "did not reproduce the mismatch (is the pass "
                                       "deterministic?)")
        if not self._probe(p, snapshot, 0).passed:
            return Culprit(check, note="the pass changed the results before visiting any op "
                                       "(in its begin() hook?)")
        lo, hi, failing = 0, full.observer.visits, full
        while hi - lo > 1:  # invariant: a budget of lo visits passes, of hi fails
            mid = (lo + hi) // 2
            probe = self._probe(p, snapshot, mid)
            if probe.passed:
                lo = mid
            else:
                hi, failing = mid, probe
        return self._describe(check, failing, snapshot)

    def _describe(self, check: PassCheck, probe: _Probe, snapshot: ProgramData) -> Culprit:
        obs = probe.observer
        op = obs.last_op
        assert op is not None  # a failing probe visited at least one op
        original = next((o for g in all_graphs(snapshot) for o in g.ops
                         if probe.memo.get(id(o)) is op), None)
        graph = next((name for name, g in snapshot.graphs.items()
                      if original is not None and any(o is original for o in g.walk())), None)
        new_owner = next((v.owner for v in obs.replacement if v.owner is not None), None)
        note = "" if obs.last_rewrote else (
            "the visit of this op edited the program without returning a replacement "
            "(a rewrite with a side effect, e.g. on a weight, whose replacement failed)")
        return Culprit(
            check, outputs=probe.outputs,
            rewrite_index=obs.rewrites if obs.last_rewrote else None,
            visit_index=obs.visits, op=op.name,
            location=str(op.location) if op.location.is_known else None, graph=graph,
            before="" if original is None else excerpt(snapshot, original),
            after=excerpt(probe.program, new_owner) if obs.last_rewrote and new_owner else "",
            note=note)


def excerpt(program: ProgramData, op: Operation, context: int = EXCERPT_LINES) -> str:
    """The text form (with locations) of ``op`` and ``context`` lines around it, the op's
    line marked ``>>``; empty if ``op`` is not in ``program``."""
    saved = op.location
    marker = Location(module_path=_MARK)
    op.location = marker
    try:
        lines = print_program(program, locations=True).splitlines()
    finally:
        op.location = saved
    at = next((i for i, line in enumerate(lines) if _MARK in line), None)
    if at is None:
        return ""
    lines[at] = lines[at].replace(f"  {marker}", f"  {saved}" if saved.is_known else "")
    out = []
    for i in range(max(0, at - context), min(len(lines), at + context + 1)):
        line = lines[i]
        if len(line) > EXCERPT_WIDTH:
            line = line[:EXCERPT_WIDTH - 3] + "..."
        out.append((">> " if i == at else "   ") + line)
    return "\n".join(out)
