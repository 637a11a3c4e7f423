"""Perplexity of a causal LM on a token sequence or a text.

Works over anything that runs a prefill over a sequence and returns its logits
(:class:`LogitsModel`): the loaded bundle of :func:`coreai_torch.llm.load`, or
:class:`TransformersLogits` around an eager ``transformers`` model, so an exported (and
compressed) model and its uncompressed original are measured the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
from scipy.special import log_softmax

__all__ = ["LogitsModel", "ProgramLogits", "TransformersLogits", "negative_log_likelihoods",
           "perplexity"]


@runtime_checkable
class LogitsModel(Protocol):
    """A causal LM evaluated from a fresh state: ``logits(ids)`` returns the logits after each
    of the ``n`` tokens, shape ``(n, vocab)``. Optional attributes: ``tokenizer`` (for text:
    a ``tokenizers.Tokenizer`` or a ``transformers`` tokenizer) and ``max_context`` (the longest
    sequence one call takes)."""

    def logits(self, token_ids: Sequence[int]) -> np.ndarray: ...


class TransformersLogits:
    """:class:`LogitsModel` over an eager ``transformers`` causal LM (no cache, one forward)."""

    def __init__(self, model: Any, tokenizer: Any = None, max_context: int | None = None) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_context = max_context or getattr(model.config, "max_position_embeddings", None)

    def logits(self, token_ids: Sequence[int]) -> np.ndarray:
        import torch

        ids = torch.tensor([list(token_ids)], dtype=torch.long)
        with torch.no_grad():
            out = self.model(input_ids=ids, use_cache=False).logits[0]
        return out.float().numpy()


class ProgramLogits:
    """:class:`LogitsModel` over a converted program whose entrypoint maps ``input_ids``
    ``[1, n]`` to logits ``[1, n, vocab]`` without a cache (e.g. a ``transformers`` model
    exported with ``use_cache=False``). A program exported at a fixed length ``max_context``
    takes shorter sequences padded on the right: the model is causal, so the logits of the
    first tokens do not depend on the padding."""

    def __init__(self, program: Any, *, entrypoint: str = "main", tokenizer: Any = None,
                 max_context: int | None = None, pad_id: int = 0) -> None:
        self.program, self.entrypoint = program, entrypoint
        self.tokenizer, self.pad_id = tokenizer, pad_id
        graph = program.graphs[entrypoint]
        self._input = next(iter(graph.inputs))
        length = graph.inputs[self._input].type.shape[-1]
        self._fixed = length if isinstance(length, int) else None
        self.max_context = max_context or self._fixed

    def logits(self, token_ids: Sequence[int]) -> np.ndarray:
        ids = list(token_ids)
        n = len(ids)
        if self._fixed is not None:
            if n > self._fixed:
                raise ValueError(f"ProgramLogits: {n} tokens exceed the program's fixed "
                                 f"length {self._fixed}; pass window<={self._fixed}")
            ids += [self.pad_id] * (self._fixed - n)
        feed = {self._input: np.asarray([ids], dtype=np.int64)}
        out = self.program.run(feed, entrypoint=self.entrypoint)
        return np.asarray(next(iter(out.values())))[0, :n].astype(np.float32)


def _encode(model: Any, text: str) -> list[int]:
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise ValueError(f"perplexity: {type(model).__name__} has no tokenizer to encode the "
                         "text; pass token ids instead (or a model with a `tokenizer`)")
    encoded = tokenizer.encode(text)
    return list(getattr(encoded, "ids", encoded))


def negative_log_likelihoods(model: LogitsModel, token_ids: Sequence[int] | str, *,
                             window: int | None = None) -> np.ndarray:
    """``-log p(token_i | tokens before it in its window)`` for every token but the first of
    each window, in float64. The sequence is cut into consecutive windows of ``window`` tokens
    (default: the model's ``max_context``, or the whole sequence), each evaluated from a fresh
    state."""
    if not callable(getattr(model, "logits", None)):
        raise TypeError(f"perplexity: {type(model).__name__} has no logits(token_ids) method; "
                        "wrap a transformers model in TransformersLogits")
    ids = _encode(model, token_ids) if isinstance(token_ids, str) else [int(t) for t in
                                                                         token_ids]
    if len(ids) < 2:
        raise ValueError(f"perplexity: needs at least 2 tokens, got {len(ids)}")
    size = window or getattr(model, "max_context", None) or len(ids)
    if size < 2:
        raise ValueError(f"perplexity: window must hold at least 2 tokens, got {size}")
    out: list[np.ndarray] = []
    for start in range(0, len(ids) - 1, size):
        chunk = ids[start:start + size]
        if len(chunk) < 2:
            break
        logits = np.asarray(model.logits(chunk), dtype=np.float64)
        if logits.shape[0] != len(chunk):
            raise ValueError(f"perplexity: {type(model).__name__}.logits returned "
                             f"{logits.shape[0]} rows for {len(chunk)} tokens")
        logp = log_softmax(logits[:-1], axis=-1)
        out.append(-logp[np.arange(len(chunk) - 1), chunk[1:]])
    return np.concatenate(out)


def perplexity(model: LogitsModel, token_ids: Sequence[int] | str, *,
               window: int | None = None) -> float:
    """``exp`` of the mean negative log-likelihood of ``token_ids`` (or of ``text``, encoded
    with the model's tokenizer) under ``model``; see :func:`negative_log_likelihoods` for the
    windows."""
    return math.exp(float(np.mean(negative_log_likelihoods(model, token_ids, window=window))))
