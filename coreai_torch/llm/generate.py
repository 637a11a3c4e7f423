"""``llm.load``: a bundle loaded on a runtime, generating tokens or text."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from coreai_torch.llm.bundle import LLMBundle
from coreai_torch.llm.errors import ContextLengthError
from coreai_torch.llm.runtime import Backend, open_backend
from coreai_torch.llm.sampling import Sampler
from coreai_torch.llm.tokenizer import BundleTokenizer

__all__ = ["GenerationStats", "LoadedLLM", "load"]


@attrs.define
class GenerationStats:
    """Timings of the last generation: the prefill, and the decode steps after it."""

    prompt_tokens: int = 0
    new_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0

    @property
    def decode_tokens_per_second(self) -> float:
        steps = self.new_tokens - 1  # the first new token comes from the prefill
        return steps / self.decode_seconds if steps > 0 and self.decode_seconds > 0 else 0.0


def _token_list(input_ids: Any) -> list[int]:
    arr = np.asarray(input_ids)
    if arr.ndim == 2 and arr.shape[0] == 1:
        arr = arr[0]
    if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"input_ids: pass a non-empty sequence of token ids (ints), a [1, n] "
                         f"array or a string; got shape {arr.shape} of {arr.dtype}")
    return [int(t) for t in arr]


def _stop_ids(stop: Any) -> set[int]:
    if stop is None:
        return set()
    items = [stop] if isinstance(stop, (int, np.integer)) else list(stop)
    if not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in items):
        raise ValueError(f"stop={stop!r}: pass a token id or a sequence of token ids")
    return {int(t) for t in items}


class LoadedLLM:
    """An exported LLM on one runtime; ``generate`` runs the prompt through ``prefill`` once,
    then one ``decode`` step per new token, the KV cache carried between them as state (the
    asset is loaded once). Use it as a context manager, or call :meth:`close`.

    ``tokenizer`` is the bundle's :class:`BundleTokenizer` (None when the checkpoint had no
    ``tokenizer.json``); ``stats`` holds the timings of the last generation.
    """

    def __init__(self, bundle: LLMBundle, runtime: str) -> None:
        self.bundle, self.runtime = bundle, runtime
        self._backend: Backend = open_backend(bundle, runtime)
        tokenizer_file = bundle.path / "tokenizer.json"
        self.tokenizer = BundleTokenizer(bundle.path) if tokenizer_file.is_file() else None
        self.stats = GenerationStats()

    @property
    def max_context(self) -> int:
        return self.bundle.max_context

    def __enter__(self) -> LoadedLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._backend.close()

    def _need_tokenizer(self) -> BundleTokenizer:
        if self.tokenizer is None:
            raise ValueError(f"{self.bundle.path}: the bundle has no tokenizer.json, so text "
                             f"cannot be encoded; pass token ids")
        return self.tokenizer

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        """``text`` as token ids (with the tokenizer's special tokens, e.g. a BOS, unless
        ``add_special_tokens=False``, as for a chat prompt whose template writes them)."""
        return self._need_tokenizer().encode(text, add_special_tokens=add_special_tokens)

    def decode(self, ids: Sequence[int]) -> str:
        """Token ids as text, without special tokens."""
        return self._need_tokenizer().decode(ids)

    def chat_prompt(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """``messages`` rendered with the checkpoint's chat template, ready to generate."""
        return self._need_tokenizer().apply_chat_template(messages)

    def generate(self, input_ids: Sequence[int] | np.ndarray | str, max_new_tokens: int, *,
                 temperature: float = 0, top_k: int | None = None, top_p: float | None = None,
                 seed: int | None = None, stop: int | Iterable[int] | None = None,
                 stream: bool = False) -> Any:
        """Generate up to ``max_new_tokens`` tokens after the prompt.

        ``input_ids`` is the prompt as token ids, or as text (encoded with the bundle's
        tokenizer). Returns the new tokens only: a list of ids, or their text when the prompt
        was text; ``stream=True`` returns an iterator yielding each new token (its id, or the
        text it adds) as it is produced. Greedy by default (``temperature=0``); sampling with
        ``temperature > 0``, ``top_k``, ``top_p``, reproducible with ``seed``. Generation ends
        after a token of the bundle's end-of-sequence ids or of ``stop`` (which is included).
        Raises :class:`ContextLengthError` when the prompt and the new tokens do not fit
        ``max_context``.
        """
        text = isinstance(input_ids, str)
        prompt = self.encode(input_ids) if isinstance(input_ids, str) else _token_list(
            input_ids)
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or (
                max_new_tokens < 1):
            raise ValueError(f"max_new_tokens={max_new_tokens!r}: pass an int >= 1")
        limit = self.max_context
        if len(prompt) > limit:
            raise ContextLengthError(f"the prompt has {len(prompt)} tokens, more than the "
                                     f"bundle's max_context={limit}; shorten it or export "
                                     f"with a larger max_context")
        # the last new token is never fed back, so it needs no cache position
        if len(prompt) + max_new_tokens - 1 > limit:
            raise ContextLengthError(
                f"{len(prompt)} prompt tokens + {max_new_tokens} new tokens exceed the "
                f"bundle's max_context={limit}; pass max_new_tokens <= "
                f"{limit - len(prompt) + 1} or export with a larger max_context")
        vocab = int(self.bundle.manifest["vocab_size"])
        if min(prompt) < 0 or max(prompt) >= vocab:
            raise ValueError(f"input_ids: token ids must be in [0, {vocab}) (the model's "
                             f"vocabulary); got {min(prompt)}..{max(prompt)}")
        sampler = Sampler(float(temperature), top_k, top_p, seed)
        stops = _stop_ids(stop) | set(self.bundle.eos_token_ids)
        tokens = self._tokens(prompt, max_new_tokens, sampler, stops)
        if stream:
            return self._texts(tokens) if text else tokens
        new = list(tokens)
        return self.decode(new) if text else new

    def logits(self, token_ids: Sequence[int]) -> np.ndarray:
        """The logits after each of ``token_ids`` ([n, vocab], float32): one ``prefill`` from
        an empty cache (what :func:`coreai_torch.llm.evaluate.perplexity` measures)."""
        ids = _token_list(token_ids)
        if len(ids) > self.max_context:
            raise ContextLengthError(f"{len(ids)} tokens exceed the bundle's max_context="
                                     f"{self.max_context}; evaluate shorter windows")
        state = self._backend.new_state()
        return np.asarray(self._backend.step("prefill", np.array(ids), 0, state), np.float32)

    def generate_text(self, prompt: str, max_new_tokens: int, **options: Any) -> str:
        """The text generated after ``prompt`` (``generate`` with a string prompt)."""
        return str(self.generate(prompt, max_new_tokens, **options))

    def _tokens(self, prompt: list[int], max_new_tokens: int, sampler: Sampler,
                stops: set[int]) -> Iterator[int]:
        backend = self._backend
        state = backend.new_state()
        self.stats = stats = GenerationStats(prompt_tokens=len(prompt))
        t0 = time.perf_counter()
        logits = backend.step("prefill", np.array(prompt), 0, state)[-1]
        stats.prefill_seconds = time.perf_counter() - t0
        position = len(prompt)
        for i in range(max_new_tokens):
            token = sampler(logits)
            stats.new_tokens += 1
            yield token
            if token in stops or i == max_new_tokens - 1:
                return
            t0 = time.perf_counter()
            logits = backend.step("decode", np.array([token]), position, state)[-1]
            stats.decode_seconds += time.perf_counter() - t0
            position += 1

    def _texts(self, tokens: Iterator[int]) -> Iterator[str]:
        done, shown = [], ""
        for token in tokens:
            done.append(token)
            text = self.decode(done)
            yield text[len(shown):]
            shown = text


def load(bundle: LLMBundle | str | os.PathLike[str], runtime: str = "reference") -> LoadedLLM:
    """Load an exported bundle (a folder or an :class:`LLMBundle`) on ``runtime``:
    ``"reference"`` (the numpy runtime, anywhere) or ``"aimodel"`` (Apple's interpreter; needs
    Apple's ``coreai`` package and a bundle exported with it)."""
    opened = bundle if isinstance(bundle, LLMBundle) else LLMBundle.open(bundle)
    return LoadedLLM(opened, runtime)
