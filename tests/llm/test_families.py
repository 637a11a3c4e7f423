"""The family matrix: for every supported model type, greedy generation (float32) from the
exported bundle equals ``transformers``' ``generate()`` token for token, on the reference
runtime and on Apple's interpreter, from a tiny random checkpoint written here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coreai_torch import llm
from coreai_torch.llm.errors import BundleError
from coreai_torch.llm.families import NO_AIMODEL, SUPPORTED
from tests.llm.checkpoints import CONFIGS, write_checkpoint
from tests.llm.conftest import MAX_CONTEXT, PROMPT, transformers_greedy

NEW_TOKENS = MAX_CONTEXT - len(PROMPT) + 1  # up to the last position of the cache


def test_every_supported_family_has_a_checkpoint() -> None:
    assert sorted(CONFIGS) == sorted(SUPPORTED)


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def exported(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Any, list[int]]:
    family = request.param
    folder = write_checkpoint(tmp_path_factory.mktemp(family) / "checkpoint", family)
    bundle = llm.export(folder, Path(folder).parent / "bundle", max_context=MAX_CONTEXT,
                        progress=False)
    return family, bundle, transformers_greedy(folder, PROMPT, NEW_TOKENS)


@pytest.mark.slow
def test_transformers_generation_is_not_degenerate(exported: tuple[str, Any, list[int]]
                                                   ) -> None:
    """A random model whose greedy tokens were all equal would not tell a wrong cache from
    a right one."""
    family, _, expected = exported
    assert len(set(expected)) >= 3, (family, expected)


@pytest.mark.slow
@pytest.mark.parametrize("runtime", ["reference", "aimodel"])
def test_greedy_generation_equals_transformers(exported: tuple[str, Any, list[int]],
                                               runtime: str) -> None:
    family, bundle, expected = exported
    if runtime == "aimodel" and family in NO_AIMODEL:
        # refused by name, with the reason, and the bundle says so
        assert bundle.manifest["aimodel_missing"].startswith(f"{family}: ")
        with pytest.raises(BundleError, match=r"has no \.aimodel .*mixture-of-experts"):
            llm.load(bundle, runtime=runtime)
        return
    with llm.load(bundle, runtime=runtime) as model:
        assert model.generate(PROMPT, NEW_TOKENS) == expected, family
