"""The optimizer on real architectures (issue 17): every corpus model is converted once and
verified against torch eager raw, after each default pass alone, and after the default
pipeline; no variant may raise, and no pass may add a convolution or a matmul.

``python tools/optimizer_corpus_report.py`` prints the same checks as a table, with the
number of rewrites each pass applied across the corpus.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from coreai_core import Program
from coreai_core.optimizer import PassStats, pass_names
from tests.models.corpus import CORPUS, TRANSFORMERS_FAMILIES
from tests.models.corpus.differential import PIPELINE, RAW, check_model, check_variant, convert

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # configs only: nothing may be downloaded
# below this the absolute tolerance alone would accept any result
MIN_OUTPUT_SCALE = 1e-2


def _param(name: str) -> object:
    slow = name.split("/")[0] in TRANSFORMERS_FAMILIES
    return pytest.param(name, marks=pytest.mark.slow) if slow else name


def test_corpus_covers_the_families_of_issue_17() -> None:
    transformers = [n for n in CORPUS if n.split("/")[0] in TRANSFORMERS_FAMILIES]
    assert len(transformers) >= 60, f"only {len(transformers)} transformers models"
    families = {n.split("/")[0] for n in CORPUS}
    assert families >= {"encoder", "decoder", "encoder_decoder", "vision", "audio",
                        "conv_block", "attention_block"}


@pytest.mark.parametrize("name", [_param(n) for n in sorted(CORPUS)])
def test_optimizer_preserves_results(name: str) -> None:
    result = check_model(name, CORPUS[name]())
    assert [v.name for v in result.variants] == [RAW, *pass_names(), PIPELINE]
    assert result.output_scale > MIN_OUTPUT_SCALE, (
        f"{name}: torch's output is {result.output_scale:.3g} at most; no error would show")
    raw = result.variant(RAW)
    assert raw.passed, f"{name}: the converted program differs from torch\n{raw.describe()}"
    problems = [v.describe() for v in result.failures]
    problems += [f"{v.name}: {v.heavy_ops} convolutions/matmuls where the raw program has "
                 f"{raw.heavy_ops}" for v in result.variants[1:]
                 if not v.error and v.heavy_ops > raw.heavy_ops]
    assert not problems, f"{name}:\n" + "\n".join(problems)


class _ScaleWeights:
    """A wrong pass: doubles every weight (the kind of error a bad fold makes)."""

    name = "scale_weights"

    def run(self, program: Program) -> PassStats:
        for key, value in program.weights.items():
            program.weights[key] = None if value is None else value * 2
        program.invalidate()
        return PassStats(rewritten=len(program.weights))


class _Raises:
    name = "raises"

    def run(self, program: Program) -> PassStats:
        raise ValueError("broken rewrite")


def test_the_check_catches_a_wrong_and_a_raising_pass() -> None:
    raw, feeds, expected = convert(CORPUS["conv_block/repvgg"]())
    assert raw.weights, "the model needs weights for this test"
    assert check_variant("none", raw, [], feeds, expected).passed
    wrong = check_variant("wrong", raw, [_ScaleWeights()], feeds, expected)
    assert not wrong.passed and not wrong.error
    raising = check_variant("raising", raw, [_Raises()], feeds, expected)
    assert not raising.passed and "ValueError: broken rewrite" in raising.error
    assert "test_corpus.py" in raising.error  # where it raised


def test_report_tool_prints_errors_and_per_pass_figures() -> None:
    tool = Path(__file__).resolve().parents[2] / "tools" / "optimizer_corpus_report.py"
    done = subprocess.run([sys.executable, str(tool), "-k", "conv_block/repvgg"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("conv_block/repvgg ") for line in lines)
    per_pass = [line.split() for line in lines if line.split()[:1] == ["fold_affine"]]
    assert len(per_pass) == 2  # in the pipeline and alone
    # the batch norms fold into the convolutions once constant folding computed their scales
    assert int(per_pass[0][3]) > 0, "fold_affine rewrote nothing on RepVGG in the pipeline"
