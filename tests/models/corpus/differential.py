"""The differential check of one corpus model: the raw program, a copy after each default pass
alone, and a copy after the default pipeline, each run and compared with torch eager.

The model is exported, decomposed and converted once; torch runs once. A pass that raises is
recorded as that variant's error (a pass must never raise on a program that verifies).
"""

from __future__ import annotations

import copy
import time
import traceback
from collections.abc import Sequence

import attrs
import numpy as np
import torch

from coreai_core import Program
from coreai_core.optimizer import OptimizeReport, Pass, is_heavy, optimize, pass_names
from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch.verify import OutputError, compare
from tests.models.builders import Built

# float32 tolerances of the corpus, one table for every model: an element passes when
# |got - torch| <= RTOL * |torch| + ATOL * max(1, max |torch output|).
# The runtime and torch both accumulate in float32 but in different orders (BLAS blocking,
# im2col vs direct convolutions, numpy pairwise sums vs ATen's vectorized reductions), so each
# dot product or reduction differs by a few ulps of its partial sums. Those errors scale with
# the activations' magnitude, not with each result element, and propagate through the layers:
# hence an absolute part proportional to the output's largest magnitude. Measured against a
# float64 torch run, the deepest models (HF MobileNetV2: 17 blocks, output up to 6) are off
# by 2.8e-4 here and by 1.0e-4 in torch's own float32 run, inside ATOL * 6 = 6e-4; the
# optimizer bugs of issue 17 are off by 0.65 to 3.9.
RTOL = 1e-3
ATOL = 1e-4

RAW = "raw"
PIPELINE = "pipeline"


@attrs.define
class VariantResult:
    """One program variant (raw, after one pass, after the pipeline) against torch."""

    name: str
    outputs: list[OutputError] = attrs.field(factory=list)
    error: str = ""
    report: OptimizeReport | None = None
    heavy_ops: int = 0

    @property
    def passed(self) -> bool:
        return not self.error and bool(self.outputs) and all(o.passed for o in self.outputs)

    @property
    def max_abs(self) -> float:
        return max((o.max_abs for o in self.outputs), default=float("inf"))

    def describe(self) -> str:
        if self.error:
            return f"{self.name}: raised {self.error}"
        parts = [f"{o.name} max abs {o.max_abs:.3g} (rel {o.max_rel:.3g})"
                 + ("" if o.passed else f" FAIL {o.problem}") for o in self.outputs]
        return f"{self.name}: " + "; ".join(parts)


@attrs.define
class ModelResult:
    """Every variant of one model, in order: raw, each default pass, pipeline."""

    name: str
    variants: list[VariantResult]
    seconds: float
    output_scale: float  # largest |torch output|: a vanishing output would hide any error

    @property
    def failures(self) -> list[VariantResult]:
        return [v for v in self.variants if not v.passed]

    def variant(self, name: str) -> VariantResult:
        return next(v for v in self.variants if v.name == name)


def _flatten(out: object) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flatten(o)]
    raise TypeError(f"corpus models return tensors or tuples of them, got {type(out)}")


def convert(built: Built) -> tuple[Program, list[np.ndarray], list[np.ndarray]]:
    """Export, decompose and convert; returns the program, its numpy inputs and torch's
    outputs (eager, float)."""
    model, inputs = built
    with torch.no_grad():
        expected = [t.detach().numpy() for t in _flatten(model(*inputs))]
        ep = torch.export.export(model, inputs).run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep).to_coreai()
    return program, [t.numpy() for t in inputs], expected


def heavy_ops(program: Program) -> int:
    """How many ops a rewrite must never duplicate to fold a cheap one (issue 17, section 3):
    the ``heavy`` ones (convolutions, matmuls, ...) in ``program``, all graphs, composites too."""
    return sum(is_heavy(op) for g in program.graphs.values() for op in g.ops)


def _run(name: str, program: Program, feeds: list[np.ndarray], expected: list[np.ndarray],
         report: OptimizeReport | None = None) -> VariantResult:
    got = list(program.run(feeds).values())
    if len(got) != len(expected):
        return VariantResult(name, error=f"{len(got)} outputs, torch has {len(expected)}")
    outputs = [compare(out, g, e, RTOL, ATOL * max(1.0, float(np.abs(e).max(initial=0.0))))
               for out, g, e in zip(program.output_names, got, expected, strict=True)]
    return VariantResult(name, outputs, report=report, heavy_ops=heavy_ops(program))


def _where(exc: BaseException) -> str:
    """Where a pass raised: its innermost frame in the optimizer package (the rewrite rule),
    else its first frame below the pass manager (a custom pass), and the innermost frame when
    that is deeper (an IR helper)."""
    frames = traceback.extract_tb(exc.__traceback__)
    managed = [i for i, f in enumerate(frames) if f.filename.endswith("optimizer/_manager.py")]
    below = frames[managed[-1] + 1:] if managed else frames
    below = below or frames[-1:]
    in_passes = [f for f in below if "/optimizer/" in f.filename.replace("\\", "/")]
    entry = in_passes[-1] if in_passes else below[0]
    where = f"{entry.filename}:{entry.lineno} in {entry.name}"
    last = frames[-1]
    return where if last is entry else f"{where}, raised at {last.filename}:{last.lineno}"


def check_variant(name: str, raw: Program, passes: Sequence[str | Pass] | None,
                  feeds: list[np.ndarray], expected: list[np.ndarray]) -> VariantResult:
    """Optimize a copy of ``raw`` with ``passes`` (the default pipeline when None), verify
    it and compare its outputs with torch's ``expected``."""
    program = copy.deepcopy(raw)
    try:
        report = optimize(program, passes)
        program.verify()
    except Exception as exc:  # recorded: a pass must not raise on a verified program
        return VariantResult(name, error=f"{type(exc).__name__}: {exc} [{_where(exc)}]")
    return _run(name, program, feeds, expected, report)


def check_model(name: str, built: Built) -> ModelResult:
    """Convert ``built`` once and verify every variant against torch eager."""
    start = time.perf_counter()
    raw, feeds, expected = convert(built)
    raw.verify()
    variants = [_run(RAW, raw, feeds, expected)]
    variants += [check_variant(p, raw, [p], feeds, expected) for p in pass_names()]
    variants.append(check_variant(PIPELINE, raw, None, feeds, expected))
    scale = max(float(np.abs(e).max(initial=0.0)) for e in expected)
    return ModelResult(name, variants, time.perf_counter() - start, scale)
