"""What translation validation found: per-output differences, per-pass checks, the culprit.

The classes here are plain data with a readable ``str``; :mod:`coreai_core.optimizer.validate`
fills them. ``OptimizationMismatchError`` carries a :class:`ValidationReport`.
"""

from __future__ import annotations

import attrs
import ml_dtypes
import numpy as np

from coreai_core._dtypes import DType
from coreai_core.errors import CoreAIError

__all__ = ["Culprit", "OptimizationMismatchError", "OutputDiff", "PassCheck",
           "ValidationReport", "compare_arrays"]


@attrs.frozen
class OutputDiff:
    """One output (or state) of one entrypoint after a pass, compared with the unoptimized run.

    ``max_rel`` is ``max_abs`` relative to the largest magnitude of the reference output
    (see :func:`~coreai_core.optimizer.validate_report.compare_arrays`); ``problem`` says why it
    failed when it did.
    """

    name: str
    max_abs: float
    max_rel: float
    passed: bool
    problem: str = ""

    def __str__(self) -> str:
        text = f"{self.name}: max abs error {self.max_abs:.3g}, max rel error {self.max_rel:.3g}"
        return text + (f" ({self.problem})" if self.problem else "")


def _finite_max(a: np.ndarray) -> float:
    finite = a[np.isfinite(a)]
    return float(finite.max()) if finite.size else 0.0


def compare_arrays(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float,
                   ) -> OutputDiff:
    """Compare ``got`` with the reference ``want``.

    Float and complex results pass when ``max|got - want| <= atol + rtol' * max|want|``,
    where ``rtol' = max(rtol, 8 * eps)`` of the element type: a rewrite may round once more
    than the original program did (a folded weight is rounded to its element type), and one
    ulp of a 16-bit float is larger than a float32 tolerance; the bound is relative to the
    output's scale because rounding errors grow with the magnitude of what is summed, not of
    each element. NaN matches NaN and an infinity matches itself. Integer and bool results
    must be equal.
    """
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return OutputDiff(name, np.inf, np.inf, False,
                          f"{got.dtype}{list(got.shape)} where the unoptimized program gives "
                          f"{want.dtype}{list(want.shape)}")
    if got.size == 0:
        return OutputDiff(name, 0.0, 0.0, True)
    dtype = DType.of(got.dtype)
    complex_ = dtype.is_complex
    g = got.astype(np.complex128 if complex_ else np.float64)
    w = want.astype(np.complex128 if complex_ else np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, made inf below
        diff = np.where((g == w) | (np.isnan(g) & np.isnan(w)), 0.0, np.abs(g - w))
    diff = np.where(np.isnan(diff), np.inf, diff)
    max_abs = float(diff.max())
    scale = _finite_max(np.abs(w))
    max_rel = 0.0 if max_abs == 0 else max_abs / scale if scale > 0 else np.inf
    if dtype.is_float or complex_:
        eps = float(ml_dtypes.finfo(dtype.real_dtype.numpy).eps)
        passed = max_abs <= atol + max(rtol, 8 * eps) * scale
    else:
        passed = max_abs == 0
    return OutputDiff(name, max_abs, max_rel, passed, "" if passed else "beyond tolerance")


@attrs.frozen
class PassCheck:
    """The check after one run of one pass: its place in the pipeline (``pass_index`` from
    0, ``iteration`` of the fixed-point loop from 1), every output, and whether the pass
    reported a change (``changed``)."""

    pass_name: str
    pass_index: int
    iteration: int
    outputs: tuple[OutputDiff, ...] = ()
    changed: bool = True

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs)

    @property
    def worst(self) -> OutputDiff | None:
        """The first failing output, else the one with the largest relative error."""
        failing = [o for o in self.outputs if not o.passed]
        if failing:
            return failing[0]
        return max(self.outputs, key=lambda o: o.max_rel, default=None)

    @property
    def label(self) -> str:
        return f"{self.pass_name} (pipeline entry {self.pass_index + 1}, iteration " \
               f"{self.iteration})"


@attrs.frozen
class Culprit:
    """The first pass run (and, when found, rewrite) that changed the results.

    ``rewrite_index`` counts the replacements that pass run made, from 1, and ``visit_index``
    the ops it visited; both are None when the pass was checked as a whole (``note`` says
    why). ``op`` and ``location`` are those of the op whose rewrite changed the results,
    ``outputs`` the differences that rewrite alone (with the pass's earlier ones) makes;
    ``before`` and ``after`` show the program text around it (the op marked ``>>``).
    """

    check: PassCheck
    outputs: tuple[OutputDiff, ...] = ()
    rewrite_index: int | None = None
    visit_index: int | None = None
    op: str | None = None
    location: str | None = None
    graph: str | None = None
    before: str = ""
    after: str = ""
    note: str = ""

    @property
    def pass_name(self) -> str:
        return self.check.pass_name

    @property
    def output(self) -> OutputDiff:
        """The first output the culprit's rewrite (else the whole pass run) changed."""
        worst = next((o for o in self.outputs if not o.passed), None) or self.check.worst
        assert worst is not None  # a failing check compared at least one output
        return worst

    def __str__(self) -> str:
        out = self.output
        lines = [f"pass {self.check.label} changed the results: {out}"]
        others = [o for o in (self.outputs or self.check.outputs)
                  if not o.passed and o is not out]
        lines += [f"  also {o}" for o in others]
        if self.op is not None:
            which = (f"rewrite #{self.rewrite_index}" if self.rewrite_index is not None
                     else "a visit that returned no replacement")
            where = f" at {self.location}" if self.location else " (location unknown)"
            lines.append(f"first bad rewrite: {which} of {self.pass_name!r} (op visit "
                         f"#{self.visit_index}), on {self.op}{where} in graph @{self.graph}")
        if self.note:
            lines.append(self.note)
        if self.before:
            lines += ["program before the rewrite:", self.before]
        if self.after:
            lines += ["after it:", self.after]
        return "\n".join(lines)


@attrs.frozen
class ValidationReport:
    """Every pass check of a checked optimization and the culprit, if one was found.

    ``str(report)`` prints one line per pass run and the culprit in detail.
    """

    checks: tuple[PassCheck, ...]
    culprit: Culprit | None
    rtol: float
    atol: float
    inputs: str = ""

    @property
    def passed(self) -> bool:
        return self.culprit is None

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        lines = [f"optimizer check on {self.inputs or 'the given inputs'} "
                 f"(rtol={self.rtol:g}, atol={self.atol:g}): {verdict}"]
        for c in self.checks:
            worst = c.worst
            if not c.changed and c.passed:
                continue
            detail = ("nothing to compare" if worst is None else
                      f"max abs {worst.max_abs:.3g}, max rel {worst.max_rel:.3g} ({worst.name})")
            mark = "ok" if c.passed else "FAIL"
            lines.append(f"  {c.pass_name:<20} iteration {c.iteration}  {mark:<4}  {detail}")
        unchanged = sum(1 for c in self.checks if not c.changed and c.passed)
        if unchanged:
            lines.append(f"  (and {unchanged} pass run(s) that reported no change: ok)")
        if self.culprit is not None:
            lines.append(str(self.culprit))
        return "\n".join(lines)


class OptimizationMismatchError(CoreAIError):
    """A pass changed a program's results beyond tolerance (raised by a checked ``optimize``).

    ``report`` is the :class:`ValidationReport`; ``report.culprit`` names the pass, the
    rewrite, the op and its location.
    """

    def __init__(self, report: ValidationReport) -> None:
        self.report = report
        super().__init__(str(report))
