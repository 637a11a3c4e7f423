"""The optimizer's model corpus: architectures users convert, each a builder returning
``(module, example_inputs)`` (see :mod:`tests.models.builders`).

- transformers models from tiny configs with random weights: text encoders, decoders and
  encoder-decoders (:mod:`.hf_text`), vision and audio models (:mod:`.hf_vision_audio`);
- hand-built plain-torch blocks for families no library here provides
  (:mod:`.conv_blocks`, :mod:`.attention_blocks`).

:func:`.differential.check_model` verifies one model raw, after each default pass alone and
after the default pipeline; ``tests/models/test_corpus.py`` runs it on every model and
``tools/optimizer_corpus_report.py`` prints the per-pass figures.
"""

from __future__ import annotations

from tests.models.builders import Builder
from tests.models.corpus.attention_blocks import ATTENTION_BLOCKS
from tests.models.corpus.conv_blocks import CONV_BLOCKS
from tests.models.corpus.hf_text import DECODERS, ENCODER_DECODERS, ENCODERS
from tests.models.corpus.hf_vision_audio import AUDIO_MODELS, VISION

# family name -> models; a model's corpus id is "<family>/<name>"
FAMILIES: dict[str, dict[str, Builder]] = {
    "encoder": ENCODERS, "decoder": DECODERS, "encoder_decoder": ENCODER_DECODERS,
    "vision": VISION, "audio": AUDIO_MODELS, "conv_block": CONV_BLOCKS,
    "attention_block": ATTENTION_BLOCKS,
}
# the transformers families: a few seconds each to export (marked slow in the test)
TRANSFORMERS_FAMILIES = frozenset({"encoder", "decoder", "encoder_decoder", "vision", "audio"})

CORPUS: dict[str, Builder] = {f"{family}/{name}": builder
                              for family, models in FAMILIES.items()
                              for name, builder in models.items()}

__all__ = ["CORPUS", "FAMILIES", "TRANSFORMERS_FAMILIES"]
