"""Generation from one exported bundle (llama): text in and out, the chat template, sampling,
streaming, stop tokens, the logits of a prefill, and the two runtimes agreeing."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from coreai_torch import llm
from coreai_torch.llm.sampling import Sampler
from tests.llm.checkpoints import CHAT_TEMPLATE, WORDS
from tests.llm.conftest import PROMPT


@pytest.fixture(scope="module")
def model(llama_bundle: Any) -> Any:
    with llm.load(llama_bundle) as loaded:
        yield loaded


def test_text_in_text_out(model: Any, llama_checkpoint: Any) -> None:
    from transformers import AutoModelForCausalLM

    text = "the cat sat on a mat"
    ids = model.encode(text)
    assert ids[0] == 1 and len(ids) == 7  # <s> and six words
    new = model.generate(ids, 6)
    assert model.generate(text, 6) == model.decode(new)
    assert model.generate_text(text, 6) == model.decode(new)
    hf = AutoModelForCausalLM.from_pretrained(llama_checkpoint, local_files_only=True).eval()
    with torch.no_grad():
        expected = hf.generate(torch.tensor([ids]), max_new_tokens=6, do_sample=False)
    assert new == expected[0, len(ids):].tolist()


def test_the_chat_template_is_the_checkpoints(model: Any) -> None:
    from jinja2 import Template

    messages = [{"role": "user", "content": "the dog ran"}]
    expected = Template(CHAT_TEMPLATE).render(messages=messages, add_generation_prompt=True)
    assert model.chat_prompt(messages) == expected == "<|user|> the dog ran <|assistant|>"


def test_streaming_yields_what_generate_returns(model: Any) -> None:
    whole = model.generate(PROMPT, 10)
    assert list(model.generate(PROMPT, 10, stream=True)) == whole
    pieces = list(model.generate("the cat", 5, stream=True))
    assert "".join(pieces) == model.generate("the cat", 5)


def test_stop_tokens_end_generation_and_are_kept(model: Any) -> None:
    whole = model.generate(PROMPT, 10)
    stop = whole[3]
    first = whole.index(stop)
    assert model.generate(PROMPT, 10, stop=stop) == whole[:first + 1]
    assert model.generate(PROMPT, 10, stop=[stop, 999]) == whole[:first + 1]


def test_sampling_is_reproducible_from_a_seed(model: Any) -> None:
    a = model.generate(PROMPT, 12, temperature=1.5, top_k=20, seed=3)
    b = model.generate(PROMPT, 12, temperature=1.5, top_k=20, seed=3)
    c = model.generate(PROMPT, 12, temperature=1.5, top_k=20, seed=4)
    assert a == b and a != c


def test_generations_do_not_leak_into_each_other(model: Any) -> None:
    """Each generation starts from an empty cache, whatever ran before."""
    first = model.generate(PROMPT, 8)
    model.generate([1, 40, 41, 42], 5)
    assert model.generate(PROMPT, 8) == first


def test_prefill_logits_match_transformers(model: Any, llama_checkpoint: Any) -> None:
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(llama_checkpoint, local_files_only=True).eval()
    with torch.no_grad():
        expected = hf(torch.tensor([PROMPT])).logits[0].numpy()
    np.testing.assert_allclose(model.logits(PROMPT), expected, rtol=1e-4, atol=1e-4)


def test_the_runtimes_agree_when_sampling(llama_bundle: Any) -> None:
    with llm.load(llama_bundle, runtime="aimodel") as apple, llm.load(llama_bundle) as ours:
        options = {"temperature": 0.8, "top_p": 0.9, "seed": 11}
        assert apple.generate(PROMPT, 12, **options) == ours.generate(PROMPT, 12, **options)
        assert apple.stats.new_tokens == 12 and apple.stats.decode_tokens_per_second > 0


def test_the_stats_of_the_last_generation(model: Any) -> None:
    model.generate(PROMPT, 5, stop=[])
    stats = model.stats
    assert (stats.prompt_tokens, stats.new_tokens) == (len(PROMPT), 5)
    assert stats.prefill_seconds > 0 and stats.decode_tokens_per_second > 0


# -- the sampler against its definition, computed independently --------------------------------

def _filtered_distribution(logits: np.ndarray, temperature: float, top_k: int | None,
                           top_p: float | None) -> np.ndarray:
    """softmax(logits / T) restricted to the top-k, then to the nucleus, renormalised."""
    p = np.exp((logits - logits.max()) / temperature)
    p /= p.sum()
    keep = np.ones_like(p, bool)
    if top_k is not None:
        keep &= p >= np.sort(p)[-top_k]
    if top_p is not None:
        order = np.argsort(-p)
        mass = np.cumsum(p[order]) / p[keep].sum() if top_k else np.cumsum(p[order])
        inside = np.zeros_like(keep)
        inside[order[:int(np.argmax(mass >= top_p)) + 1]] = True
        keep &= inside
    q = np.where(keep, p, 0)
    return q / q.sum()


@pytest.mark.parametrize(("temperature", "top_k", "top_p"),
                         [(1.0, None, None), (0.5, 3, None), (2.0, None, 0.6), (1.0, 4, 0.7)])
def test_sampler_frequencies_follow_the_filtered_softmax(temperature: float,
                                                         top_k: int | None,
                                                         top_p: float | None) -> None:
    logits = np.array([2.0, 1.5, 0.3, 0.2, -1.0, 1.0, 0.0, -0.5])
    sampler = Sampler(temperature, top_k, top_p, seed=0)
    draws = np.bincount([sampler(logits) for _ in range(4000)], minlength=logits.size)
    expected = _filtered_distribution(logits, temperature, top_k, top_p)
    assert set(np.flatnonzero(draws)) <= set(np.flatnonzero(expected))
    # 4000 draws: the standard error of a frequency is <= 0.008; 4 of them is a safe bound
    np.testing.assert_allclose(draws / draws.sum(), expected, atol=0.035)


def test_greedy_picks_the_first_of_equal_maxima_like_torch() -> None:
    logits = np.array([0.0, 3.0, 1.0, 3.0], np.float32)
    assert Sampler()(logits) == int(torch.argmax(torch.from_numpy(logits))) == 1


def test_words_are_in_the_tokenizer(model: Any) -> None:
    assert model.decode(model.encode(" ".join(WORDS))) == " ".join(WORDS)
