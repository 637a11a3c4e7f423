"""Choosing the next token from logits with numpy: greedy, or sampled with temperature,
top-k and top-p (nucleus), reproducible from a seed."""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

__all__ = ["Sampler"]


def _check(temperature: Any, top_k: Any, top_p: Any) -> None:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not (
            math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature={temperature!r}: pass a finite number >= 0 (0: greedy)")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int)
                              or top_k < 1):
        raise ValueError(f"top_k={top_k!r}: pass an int >= 1 or None")
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float))
                              or not 0 < top_p <= 1):
        raise ValueError(f"top_p={top_p!r}: pass a number in (0, 1] or None")
    if temperature == 0 and (top_k is not None or top_p is not None):
        raise ValueError("top_k/top_p filter what is sampled: pass temperature > 0 with them "
                         "(temperature=0 is greedy)")


@attrs.define
class Sampler:
    """Picks tokens: ``temperature == 0`` is greedy (the first of equal maxima, like torch's
    argmax); otherwise softmax(logits / temperature) restricted to the ``top_k`` most likely
    tokens and to the smallest set whose probability reaches ``top_p``, drawn from a numpy
    generator seeded with ``seed`` (None: fresh entropy)."""

    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None
    _rng: np.random.Generator = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        _check(self.temperature, self.top_k, self.top_p)
        self._rng = np.random.default_rng(self.seed)

    def __call__(self, logits: np.ndarray) -> int:
        """The next token for ``logits`` [vocab]."""
        if self.temperature == 0:
            return int(np.argmax(logits))
        scaled = np.asarray(logits, np.float64) / self.temperature
        order = np.argsort(-scaled, kind="stable")
        if self.top_k is not None:
            order = order[:self.top_k]
        kept = scaled[order]
        probs = np.exp(kept - kept.max())
        probs /= probs.sum()
        if self.top_p is not None and self.top_p < 1:
            # the smallest prefix (by probability) reaching top_p; at least one token
            cut = int(np.searchsorted(np.cumsum(probs), self.top_p)) + 1
            order, probs = order[:cut], probs[:cut] / probs[:cut].sum()
        return int(order[self._rng.choice(len(order), p=probs)])
