"""The optimizer: a named, editable pipeline of rewrite passes run to a fixed point.

``optimize(program)`` (or ``program.optimize()``) runs :func:`default_passes` in place, in
this order, repeating the list until no pass changes anything (at most ``max_iterations``):

- ``canonicalize`` -- local algebraic rewrites (identity reshapes/casts, ``x*1``, ...),
  rules registered by name, each naming its ops (:data:`coreai_core.optimizer.canonicalize.RULES`);
- ``constant_folding`` -- ops whose operands are all constants are evaluated with the
  runtime's own kernels (with a size limit so weights are not duplicated);
- ``fold_affine`` -- a constant per-channel scale/shift after a convolution or a matmul with
  constant weights is folded into its weights and bias;
- ``cse`` -- identical ops, constants and weights are merged;
- ``dce`` -- dead ops (also inside regions) and unreferenced weights are removed.

Composite graphs are optimized inside but kept; :class:`InlineCompositesPass` (not in the
default pipeline) dissolves them into their callers, all or all but those named in ``keep``.

No pass changes a value's type, and results stay equal up to float rounding. The returned
:class:`OptimizeReport` prints a per-pass table (ops removed, added, rewritten; weights).

Translation validation: ``optimize(p, check=True)`` (or a dict of inputs, or a
:class:`Check`) runs the program after every pass and compares it with the unoptimized one;
the first pass run that changes the results is bisected to one rewrite and reported with its op,
location and error (:class:`OptimizationMismatchError`); :func:`validate_optimization` returns
that report without changing the program. See :mod:`coreai_core.optimizer.validate`.

Custom pipelines: pass names or instances, e.g. ``optimize(p, ["cse", "dce"])`` or
``optimize(p, [*default_passes(), MyPass()])``; a pass is any object with a ``name`` and a
``run(program) -> PassStats`` method (see :class:`Pass`).

For code that walks or edits programs the way the passes do (``coreai_core.precision``, a
custom pass): :func:`all_graphs`, :func:`weight_refs` and :func:`count_ops` walk a program;
:func:`is_pure`, :func:`is_deterministic` and :func:`is_heavy` answer what a rewrite may do
with an op, from its definition's traits.
"""

from coreai_core.optimizer._context import PassContext
from coreai_core.optimizer._manager import (
    OptimizeReport,
    PassManager,
    PassRecord,
    default_passes,
    optimize,
    pass_names,
    resolve_pass,
    validate_optimization,
)
from coreai_core.optimizer._pass import (
    Pass,
    PassStats,
    RewriteObserver,
)
from coreai_core.optimizer._predicates import is_deterministic, is_heavy, is_pure
from coreai_core.optimizer._program_walk import all_graphs, count_ops, weight_refs
from coreai_core.optimizer._rewriter import (
    RewritePass,
    Rewriter,
)
from coreai_core.optimizer.canonicalize import CanonicalizePass
from coreai_core.optimizer.constant_folding import ConstantFoldingPass
from coreai_core.optimizer.cse import CSEPass
from coreai_core.optimizer.dce import DCEPass
from coreai_core.optimizer.fold_affine import FoldAffinePass
from coreai_core.optimizer.inline_composites import InlineCompositesPass
from coreai_core.optimizer.validate import Check, copy_program, random_inputs
from coreai_core.optimizer.validate_report import (
    Culprit,
    OptimizationMismatchError,
    OutputDiff,
    PassCheck,
    ValidationReport,
)

__all__ = [
    "CSEPass", "CanonicalizePass", "Check", "ConstantFoldingPass", "Culprit", "DCEPass",
    "FoldAffinePass", "InlineCompositesPass", "OptimizationMismatchError", "OptimizeReport",
    "OutputDiff", "Pass", "PassCheck", "PassContext", "PassManager", "PassRecord", "PassStats",
    "RewriteObserver", "RewritePass", "Rewriter", "ValidationReport", "all_graphs",
    "copy_program", "count_ops", "default_passes", "is_deterministic", "is_heavy", "is_pure",
    "optimize", "pass_names", "random_inputs", "resolve_pass", "validate_optimization",
    "weight_refs",
]
