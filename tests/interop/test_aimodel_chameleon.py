"""Chameleon (transformers, a tiny config with random weights): its export killed the process
inside Apple's compiler (issue 36). The logits masking of image tokens is a ``scatter_nd`` of
no updates when the vocabulary has no image tokens; Core AI's compiler crashes on empty
indices, so the exporter emits that scatter as the identity. The export runs in a child
process, so a regression fails this test instead of killing the run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from coreai_torch import TorchConverter, get_decomp_table
from tests.interop.isolated_export import export_in_child
from tests.models.builders import hf_model, token_ids
from tests.models.corpus.hf_text import DECODER, VOCAB


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ChameleonForConditionalGeneration"])
def test_chameleon_exports_and_matches_the_runtime(kind: str, tmp_path: Path) -> None:
    import transformers

    config = transformers.ChameleonConfig(**DECODER, vocabulary_map={"<image>": 3})
    field = "logits" if kind.endswith("Generation") else "last_hidden_state"
    model, inputs = hf_model(getattr(transformers, kind), config, (token_ids(VOCAB),),
                             ("input_ids",), field)
    with torch.no_grad():
        want = model(*inputs).numpy()
        ep = torch.export.export(model, inputs).run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep).to_coreai()
    program.optimize()
    feeds = dict(zip(program.graphs["main"].inputs, (t.numpy() for t in inputs), strict=True))
    (ours,) = program.run(feeds).values()
    np.testing.assert_allclose(ours, want, rtol=1e-3, atol=1e-4)  # the corpus tolerance
    result = export_in_child(program, feeds, tmp_path)
    assert "refused" not in result, result
    # our runtime's tolerance against Apple's interpreter (tests/interop/helpers.py) for a
    # 2-layer decoder: float32 matmuls summed in other orders
    assert all(err <= 1e-4 for err in result["max_abs"].values()), result
