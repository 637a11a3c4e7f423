"""The pass pipeline: a named, editable list of passes run to a fixed point, and its report."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from coreai_core._ir import ProgramData
from coreai_core.optimizer._pass import Pass, PassStats
from coreai_core.optimizer._program_walk import count_ops
from coreai_core.optimizer.canonicalize import CanonicalizePass
from coreai_core.optimizer.constant_folding import ConstantFoldingPass
from coreai_core.optimizer.cse import CSEPass
from coreai_core.optimizer.dce import DCEPass
from coreai_core.optimizer.fold_affine import FoldAffinePass
from coreai_core.optimizer.validate import Check, PassChecker, copy_program
from coreai_core.optimizer.validate_report import OptimizationMismatchError, ValidationReport
from coreai_core.runtime import Runtime

DEFAULT_MAX_ITERATIONS = 8

# What ``check=`` accepts: see :class:`coreai_core.optimizer.validate.Check`.
CheckArg = Check | bool | Mapping[str, Any] | None


def _registry() -> dict[str, Callable[[Runtime | None], Pass]]:
    """Pass name -> factory taking the runtime that passes evaluating ops use."""
    def folding(runtime: Runtime | None) -> Pass:
        return ConstantFoldingPass(runtime=runtime)

    def plain(cls: Callable[[], Pass]) -> Callable[[Runtime | None], Pass]:
        return lambda runtime: cls()

    return {CanonicalizePass.name: plain(CanonicalizePass), ConstantFoldingPass.name: folding,
            FoldAffinePass.name: plain(FoldAffinePass), CSEPass.name: plain(CSEPass),
            DCEPass.name: plain(DCEPass)}


def pass_names() -> list[str]:
    """Names accepted by :func:`optimize` and :class:`PassManager` (the default order)."""
    return list(_registry())


def default_passes(runtime: Runtime | None = None) -> list[Pass]:
    """Fresh instances of the default pipeline, in order; edit the list freely. ``runtime``
    is what constant folding evaluates ops with (the default runtime when None)."""
    return [factory(runtime) for factory in _registry().values()]


def resolve_pass(p: str | Pass, runtime: Runtime | None = None) -> Pass:
    """A pass instance for a pass or a pass name (made with ``runtime``, see
    :func:`default_passes`); an instance is returned as it is."""
    if isinstance(p, str):
        registry = _registry()
        if p not in registry:
            raise ValueError(f"unknown optimizer pass {p!r}; known passes: {list(registry)}")
        return registry[p](runtime)
    if not isinstance(p, Pass):
        raise TypeError(f"expected a pass name or an object with .name and .run(program), "
                        f"got {p!r}")
    return p


@attrs.define
class PassRecord:
    """Statistics of one pipeline entry, summed over every iteration it ran in."""

    name: str
    stats: PassStats = attrs.field(factory=PassStats)
    runs: int = 0
    seconds: float = 0.0


@attrs.define
class OptimizeReport:
    """What :func:`optimize` did: per-pass statistics, totals, iterations and op counts."""

    records: list[PassRecord]
    iterations: int = 0
    converged: bool = False
    ops_before: int = 0
    ops_after: int = 0
    validation: ValidationReport | None = None

    @property
    def totals(self) -> PassStats:
        total = PassStats()
        for r in self.records:
            total += r.stats
        return total

    @property
    def changed(self) -> bool:
        """True when some pass changed the program."""
        return self.totals.changed

    def __getitem__(self, name: str) -> PassStats:
        """The summed statistics of the pass(es) called ``name``."""
        found = [r.stats for r in self.records if r.name == name]
        if not found:
            raise KeyError(f"no pass named {name!r} ran; passes: {[r.name for r in self.records]}")
        total = PassStats()
        for s in found:
            total += s
        return total

    def __str__(self) -> str:
        header = ("pass", "runs", "removed", "added", "rewritten", "weights -/+", "time")
        rows = [header]
        total_seconds = sum(r.seconds for r in self.records)
        for r in [*self.records, None]:
            s = self.totals if r is None else r.stats
            seconds = total_seconds if r is None else r.seconds
            rows.append((
                "total" if r is None else r.name,
                "" if r is None else str(r.runs),
                str(s.removed), str(s.added), str(s.rewritten),
                f"{s.weights_removed}/{s.weights_added}",
                f"{seconds * 1e3:.1f} ms",
            ))
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = []
        for i, row in enumerate(rows):
            cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
            lines.append("  ".join(cells).rstrip())
            if i == 0 or i == len(rows) - 2:
                lines.append("  ".join("-" * w for w in widths))
        state = "converged" if self.converged else "stopped at the iteration cap"
        lines.append(f"ops {self.ops_before} -> {self.ops_after} in {self.iterations} "
                     f"iteration(s), {state}")
        if self.validation is not None:
            lines.append(f"checked after each of the {len(self.validation.checks)} pass "
                         f"runs, on {self.validation.inputs}: PASS")
        return "\n".join(lines)


class PassManager:
    """Runs a list of passes in order, repeating the whole list until nothing changes.

    ``passes`` holds pass names or instances (default: :func:`default_passes`); it is a plain
    list, so ``pm.passes.insert(...)`` / ``remove`` edit the pipeline. ``max_iterations`` caps
    the repetitions. ``runtime`` is the runtime the program will run with: constant folding
    evaluates ops with its kernels and a checked run compares results computed with it (the
    default runtime when None).
    """

    def __init__(self, passes: Iterable[str | Pass] | None = None,
                 max_iterations: int = DEFAULT_MAX_ITERATIONS, *,
                 runtime: Runtime | None = None) -> None:
        if max_iterations < 1:
            raise ValueError(f"max_iterations must be >= 1, got {max_iterations}")
        self.runtime = runtime
        self.passes: list[Pass] = (default_passes(runtime) if passes is None
                                   else [resolve_pass(p, runtime) for p in passes])
        self.max_iterations = max_iterations

    def run(self, program: ProgramData, check: CheckArg = None) -> OptimizeReport:
        """Optimize ``program`` in place and return the report.

        With ``check`` (not None or False), the program is checked after each pass run (see
        :mod:`coreai_core.optimizer.validate`): on a mismatch it is restored to what it was
        before that run and :class:`OptimizationMismatchError` is raised.
        """
        passes = [resolve_pass(p, self.runtime) for p in self.passes]
        checker = None if check is None or check is False else PassChecker(
            program, Check.of(check), self.runtime)
        report = OptimizeReport([PassRecord(p.name) for p in passes],
                                ops_before=count_ops(program))
        for _ in range(self.max_iterations):
            report.iterations += 1
            changed = False
            for index, (p, record) in enumerate(zip(passes, report.records)):
                if checker is not None:
                    checker.before(p)
                start = time.perf_counter()
                stats = p.run(program)
                record.seconds += time.perf_counter() - start
                record.runs += 1
                record.stats += stats
                changed = changed or stats.changed
                if checker is not None:
                    checker.after(p, index, report.iterations, stats)
            if not changed:
                report.converged = True
                break
        report.ops_after = count_ops(program)
        if checker is not None:
            report.validation = checker.report()
        return report


def optimize(program: ProgramData, passes: Sequence[str | Pass] | None = None, *,
             max_iterations: int = DEFAULT_MAX_ITERATIONS, check: CheckArg = None,
             runtime: Runtime | None = None) -> OptimizeReport:
    """Optimize ``program`` in place with ``passes`` (names or instances; default pipeline
    when None), repeating them until nothing changes, and return the per-pass report.

    ``check`` checks the results after every pass run: ``True`` on random inputs, a dict of
    inputs, or a :class:`~coreai_core.optimizer.validate.Check`. A pass run that changes them
    beyond tolerance raises :class:`OptimizationMismatchError` naming the pass, the rewrite,
    the op and its location; the program is left as it was before that run.

    ``runtime`` is the runtime the program will run with (default: the default runtime):
    constant folding computes with its kernels, so a kernel registered on it is what folds.

    >>> report = program.optimize()                    # doctest: +SKIP
    >>> program.optimize(["canonicalize", "dce"])      # doctest: +SKIP
    >>> program.optimize(check=True)                   # doctest: +SKIP
    """
    return PassManager(passes, max_iterations=max_iterations, runtime=runtime).run(program,
                                                                                     check)


def validate_optimization(program: ProgramData, passes: Sequence[str | Pass] | None = None,
                          check: Check | bool | Mapping[str, Any] = True, *,
                          max_iterations: int = DEFAULT_MAX_ITERATIONS,
                          runtime: Runtime | None = None) -> ValidationReport:
    """Run a checked :func:`optimize` on a copy of ``program`` and return the report.

    ``program`` is not changed. ``report.passed`` tells whether every pass run kept the
    results; otherwise ``report.culprit`` names the first pass, rewrite, op and location.
    ``runtime`` is as for :func:`optimize`.
    """
    work = copy_program(program)
    try:
        report = PassManager(passes, max_iterations=max_iterations, runtime=runtime).run(
            work, check)
    except OptimizationMismatchError as e:
        return e.report
    assert report.validation is not None  # a checked run always has one
    return report.validation
