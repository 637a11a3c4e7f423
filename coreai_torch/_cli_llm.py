"""``coreai-torch llm``: export a checkpoint to a bundle, generate with it, evaluate it."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from coreai_torch._cli_io import CliError

__all__ = ["add_llm_parser"]

DEFAULT_MAX_CONTEXT = 2048


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: pass an integer >= 1")
    return value


def _ids(text: str) -> list[int]:
    try:
        ids = [int(t) for t in text.replace(" ", "").split(",") if t]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: pass token ids as 1,2,3") from None
    if not ids:
        raise argparse.ArgumentTypeError("pass at least one token id")
    return ids


def _llm_errors(fn: Any) -> Any:
    """Bad input of the llm API (an LLMError, a bad sampling argument) is exit code 2."""
    def run(args: argparse.Namespace) -> int:
        from coreai_torch.llm.errors import LLMError

        try:
            return int(fn(args))
        except (LLMError, ValueError) as e:
            raise CliError(str(e)) from e
    return run


def cmd_llm_export(args: argparse.Namespace) -> int:
    from coreai_torch import llm

    max_context = args.max_context
    if max_context is None:
        probe = llm.inspect_checkpoint(args.checkpoint, max_context=2,
                                       num_layers=args.num_layers)
        max_context = min(probe.max_positions or DEFAULT_MAX_CONTEXT, DEFAULT_MAX_CONTEXT)
    info = llm.inspect_checkpoint(args.checkpoint, max_context=max_context,
                                  num_layers=args.num_layers)
    if args.dry_run:
        print("dry run (nothing written):")
        print(f"  checkpoint:   {args.checkpoint}")
        print(f"  model type:   {info.model_type}")
        print(f"  layers:       {info.num_layers}")
        print(f"  max context:  {max_context} (model positions: {info.max_positions})")
        print(f"  compression:  {args.compression or 'none'}")
        print(f"  precision:    {args.precision}")
        print(f"  platform:     {args.platform or 'macOS'}")
        print(f"  files copied: {', '.join(info.files) or 'none'}")
        print(f"  output:       {args.output}" + (" (replaced)" if args.overwrite else ""))
        return 0
    t0 = time.perf_counter()
    bundle = llm.export(args.checkpoint, args.output, max_context=max_context,
                        compression=args.compression, precision=args.precision,
                        num_layers=args.num_layers, platform=args.platform,
                        overwrite=args.overwrite, aimodel=False if args.no_aimodel else None)
    files = bundle.manifest["files"]
    print(f"wrote {bundle.path} ({info.model_type}, {info.num_layers} layers, max context "
          f"{max_context}, {args.precision}) in {time.perf_counter() - t0:.1f} s: "
          f"{files['program']}" + (f", {files['aimodel']}" if files["aimodel"] else
                                   f" (no .aimodel: {bundle.manifest['aimodel_missing']})"))
    return 0


def cmd_llm_generate(args: argparse.Namespace) -> int:
    from coreai_torch import llm

    with llm.load(args.bundle, runtime=args.runtime) as model:
        if args.ids is not None:
            if args.chat:
                raise CliError("--chat applies the chat template to --prompt text, not --ids")
            prompt = args.ids
        elif args.chat:  # the template writes the special tokens itself
            chat = model.chat_prompt([{"role": "user", "content": args.prompt}])
            prompt = model.encode(chat, add_special_tokens=False)
        else:
            prompt = model.encode(args.prompt)
        tokens = model.generate(prompt, args.max_new_tokens, temperature=args.temperature,
                                top_k=args.top_k, top_p=args.top_p, seed=args.seed)
        stats = model.stats
        text = model.decode(tokens) if model.tokenizer is not None else None
    report = {"tokens": tokens, "text": text, "prompt_tokens": stats.prompt_tokens,
              "new_tokens": stats.new_tokens, "prefill_seconds": stats.prefill_seconds,
              "decode_seconds": stats.decode_seconds,
              "decode_tokens_per_second": stats.decode_tokens_per_second,
              "runtime": args.runtime}
    if args.json:
        print(json.dumps(report))
        return 0
    print(text if text is not None else ",".join(map(str, tokens)))
    print(f"{stats.new_tokens} tokens: prefill {stats.prompt_tokens} tokens in "
          f"{stats.prefill_seconds * 1e3:.1f} ms, decode {stats.decode_tokens_per_second:.1f} "
          f"tokens/s ({args.runtime})", file=sys.stderr)
    return 0


def cmd_llm_eval(args: argparse.Namespace) -> int:
    from coreai_torch import llm
    from coreai_torch.llm.evaluate import perplexity

    path = Path(args.text)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(f"{path}: cannot read the text ({e})") from e
    with llm.load(args.bundle, runtime=args.runtime) as model:
        value = perplexity(model, text, window=args.window)
    if args.json:
        print(json.dumps({"perplexity": value, "runtime": args.runtime}))
    else:
        print(f"perplexity {value:.4f} ({args.runtime})")
    return 0


def add_llm_parser(sub: Any) -> None:
    """Add ``llm export|generate|eval`` to the ``coreai-torch`` subcommands ``sub``."""
    llm = sub.add_parser("llm", help="large language models: export, generate, evaluate")
    cmds = llm.add_subparsers(dest="llm_command", required=True)
    p = cmds.add_parser("export", help="export a local checkpoint folder to a bundle")
    p.add_argument("checkpoint", help="folder with config.json, *.safetensors, tokenizer files")
    p.add_argument("-o", "--output", required=True, help="the bundle folder to write")
    p.add_argument("--compression", help="none, int4, palettize4, palettize8, mixed-4-8, or "
                                         "a coreai-opt YAML config")
    p.add_argument("--precision", choices=("float32", "float16"), default="float32")
    p.add_argument("--max-context", type=_positive,
                   help=f"KV cache length (default: the model's positions, at most "
                        f"{DEFAULT_MAX_CONTEXT})")
    p.add_argument("--num-layers", type=_positive, help="keep the first N layers only")
    p.add_argument("--platform", choices=("macOS", "iOS"))
    p.add_argument("--overwrite", action="store_true", help="replace an existing bundle")
    p.add_argument("--no-aimodel", action="store_true", help="write no .aimodel")
    p.add_argument("--dry-run", action="store_true",
                   help="check the checkpoint and print what would be exported")
    p.set_defaults(fn=_llm_errors(cmd_llm_export))
    p = cmds.add_parser("generate", help="generate tokens with a bundle (prints tokens/s)")
    p.add_argument("bundle")
    prompt = p.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt", help="prompt text (the bundle's tokenizer encodes it)")
    prompt.add_argument("--ids", type=_ids, help="prompt token ids, e.g. 1,2,3")
    p.add_argument("--chat", action="store_true",
                   help="wrap --prompt in the checkpoint's chat template as a user message")
    p.add_argument("--max-new-tokens", type=_positive, default=32)
    p.add_argument("--runtime", choices=("reference", "aimodel"), default="reference")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-k", type=_positive)
    p.add_argument("--top-p", type=float)
    p.add_argument("--seed", type=int)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(fn=_llm_errors(cmd_llm_generate))
    p = cmds.add_parser("eval", help="perplexity of a bundle on a text file")
    p.add_argument("bundle")
    p.add_argument("--text", required=True, help="a UTF-8 text file")
    p.add_argument("--window", type=_positive, help="tokens per window (default: max context)")
    p.add_argument("--runtime", choices=("reference", "aimodel"), default="reference")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(fn=_llm_errors(cmd_llm_eval))
