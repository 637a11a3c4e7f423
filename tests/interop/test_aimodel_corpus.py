"""The optimizer's model corpus (tests/models/corpus) exported to .aimodel, run on Apple's
interpreter and compared with our runtime, as test_aimodel_differential.py does for random
programs (the zoo models: test_aimodel_models.py).

The whole corpus takes ~20 minutes on 2 cores (106 models; all matched, after the fixes of
issue 36), so CI runs :data:`CI_MODELS`: one of each kind of block plus the models that found
an exporter bug; ``AIMODEL_CORPUS=all pytest tests/interop/test_aimodel_corpus.py`` runs all.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from coreai_torch.aimodel import export_aimodel, load_aimodel
from coreai_torch.verify import compare
from tests.models.corpus import CORPUS
from tests.models.corpus.differential import ATOL, RTOL, convert

CI_MODELS = (
    "attention_block/mlp_mixer", "attention_block/swin_shifted_windows",
    "conv_block/mobileone", "conv_block/poolformer_blocks",
    "encoder/fnet",  # complex -> float casts inside the graph (the cast rework broke them)
)
MODELS = sorted(CORPUS) if os.environ.get("AIMODEL_CORPUS") == "all" else CI_MODELS


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_corpus_model_on_apples_interpreter_matches_the_runtime(name: str,
                                                                tmp_path: Path) -> None:
    program, feeds, _ = convert(CORPUS[name]())
    program.optimize()
    inputs = dict(zip(program.graphs["main"].inputs, feeds, strict=True))
    path = export_aimodel(program, tmp_path / "model.aimodel")
    with load_aimodel(path) as asset:
        got = asset.run(inputs)
    want = program.run(inputs)
    assert list(got) == list(want)
    for out, ours in want.items():
        # the corpus tolerance (differential.py): absolute part scaled by the output's size
        scale = max(1.0, float(np.abs(ours).max(initial=0.0))) if ours.dtype.kind == "f" else 1.0
        err = compare(out, got[out].astype(ours.dtype), ours, RTOL, ATOL * scale)
        assert err.passed, f"{name} {out}: {err}"
