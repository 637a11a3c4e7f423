"""The bundle's tokenizer (``tokenizers``' ``tokenizer.json``) and chat template (jinja2)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["BundleTokenizer"]


class BundleTokenizer:
    """Encodes and decodes text with the checkpoint's ``tokenizer.json``; renders its chat
    template (``chat_template.jinja`` or ``tokenizer_config.json``'s ``chat_template``) in
    jinja2's sandbox, as transformers does."""

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        config_path = folder / "tokenizer_config.json"
        config = json.loads(config_path.read_text()) if config_path.is_file() else {}
        self.special = {k: v if isinstance(v, str) else (v or {}).get("content")
                        for k, v in config.items()
                        if k in ("bos_token", "eos_token", "pad_token", "unk_token")}
        template: Any = None
        if (folder / "chat_template.jinja").is_file():
            template = (folder / "chat_template.jinja").read_text()
        elif (folder / "chat_template.json").is_file():
            template = json.loads((folder / "chat_template.json").read_text()).get(
                "chat_template")
        else:
            template = config.get("chat_template")
        if isinstance(template, list):  # named templates: the default one
            named = {t.get("name"): t.get("template") for t in template}
            template = named.get("default", next(iter(named.values()), None))
        self.chat_template: str | None = template

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids)

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens))

    def apply_chat_template(self, messages: Sequence[Mapping[str, Any]], *,
                            add_generation_prompt: bool = True, **variables: Any) -> str:
        """``messages`` (``{"role": ..., "content": ...}``) as the prompt text the model was
        trained on."""
        if self.chat_template is None:
            raise ValueError("the checkpoint has no chat template (chat_template.jinja or "
                             "tokenizer_config.json's chat_template); pass the prompt text")
        from jinja2.exceptions import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise TemplateError(message)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=["jinja2.ext.loopcontrols"])
        env.globals["raise_exception"] = raise_exception
        template = env.from_string(self.chat_template)
        return str(template.render(messages=list(messages),
                                   add_generation_prompt=add_generation_prompt,
                                   **{**self.special, **variables}))
