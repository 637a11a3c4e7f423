"""LLMs at real size: peak memory of export (load -> compress -> torch.export -> convert ->
save), asset sizes, and decode tokens/s and prefill time on the reference runtime against
``transformers`` eager generation with a static cache (same process, torch's default threads).

Checkpoints have the shapes of Qwen3-0.6B, Llama-3.2-1B, Qwen3-4B (and Qwen3-8B with
``--shapes qwen3-8b``), random float16 weights, written once as local safetensors folders
under ``--cache-dir`` (default ``$COREAI_LLM_CHECKPOINTS`` or ``/work/llm-checkpoints``),
never in the repository. Each case runs in a fresh process, one at a time, so its peak RSS
is its own::

    python benchmarks/bench_llm.py                                   # 0.6B and 1B, both schemes
    python benchmarks/bench_llm.py --shapes qwen3-4b --no-speed      # memory and sizes only
    python benchmarks/bench_llm.py --shapes qwen3-0.6b --schemes int4

The exported program has two entrypoints sharing the KV cache as state: ``prefill`` (a fixed
``--prompt`` tokens) and ``decode`` (one token). The memory target is peak RSS <= 1.3x the
checkpoint's bytes; the speed targets are decode >= 1.0x eager's tokens/s and prefill <= 1.0x
eager's time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import print_table, rss

SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "qwen3-0.6b": ("qwen3", dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072,
                                 num_hidden_layers=28, num_attention_heads=16,
                                 num_key_value_heads=8, head_dim=128, tie_word_embeddings=True,
                                 max_position_embeddings=40960, rope_theta=1000000.0)),
    "llama-3.2-1b": ("llama", dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                                   num_hidden_layers=16, num_attention_heads=32,
                                   num_key_value_heads=8, head_dim=64, tie_word_embeddings=True,
                                   max_position_embeddings=131072, rope_theta=500000.0,
                                   rope_scaling={"rope_type": "llama3", "factor": 32.0,
                                                 "low_freq_factor": 1.0,
                                                 "high_freq_factor": 4.0,
                                                 "original_max_position_embeddings": 8192})),
    "qwen3-4b": ("qwen3", dict(vocab_size=151936, hidden_size=2560, intermediate_size=9728,
                               num_hidden_layers=36, num_attention_heads=32,
                               num_key_value_heads=8, head_dim=128, tie_word_embeddings=True,
                               max_position_embeddings=40960, rope_theta=1000000.0)),
    # a smoke test of the script itself
    "tiny-qwen3": ("qwen3", dict(vocab_size=512, hidden_size=64, intermediate_size=128,
                                 num_hidden_layers=2, num_attention_heads=4,
                                 num_key_value_heads=2, head_dim=16, tie_word_embeddings=True,
                                 max_position_embeddings=1024)),
    "qwen3-8b": ("qwen3", dict(vocab_size=151936, hidden_size=4096, intermediate_size=12288,
                               num_hidden_layers=36, num_attention_heads=32,
                               num_key_value_heads=8, head_dim=128, tie_word_embeddings=False,
                               max_position_embeddings=40960, rope_theta=1000000.0)),
}
SHARD_BYTES = 1 << 30


# -- checkpoints -------------------------------------------------------------------------------

def checkpoint(shape: str, cache_dir: Path) -> Path:
    """The folder of the random float16 checkpoint of ``shape``, written once (shard by shard:
    at most one shard of tensors in memory)."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM

    folder = cache_dir / shape
    if (folder / "model.safetensors.index.json").is_file():
        return folder
    model_type, fields = SHAPES[shape]
    config = AutoConfig.for_model(model_type, **fields, torch_dtype="float16")
    with torch.device("meta"):
        meta = AutoModelForCausalLM.from_config(config)
    tensors = {k: v for k, v in meta.state_dict().items()
               if not (config.tie_word_embeddings and k == "lm_head.weight")}
    tmp = Path(tempfile.mkdtemp(dir=cache_dir, prefix=f".{shape}-"))
    g = torch.Generator().manual_seed(0)
    weight_map: dict[str, str] = {}
    shard: dict[str, torch.Tensor] = {}
    size, index = 0, 0

    def flush() -> None:
        nonlocal shard, size, index
        if shard:
            name = f"model-{index:05d}.safetensors"
            save_file(shard, tmp / name, metadata={"format": "pt"})
            weight_map.update(dict.fromkeys(shard, name))
            shard, size, index = {}, 0, index + 1

    for name, meta_t in tensors.items():
        if name.endswith("norm.weight"):
            t = torch.ones(meta_t.shape, dtype=torch.float16)
        else:
            t = (torch.randn(meta_t.shape, generator=g) * 0.02).to(torch.float16)
        shard[name] = t
        size += t.numel() * 2
        if size >= SHARD_BYTES:
            flush()
    flush()
    config.save_pretrained(tmp)
    total = sum((tmp / f).stat().st_size for f in set(weight_map.values()))
    (tmp / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": total}, "weight_map": weight_map}))
    tmp.rename(folder)
    return folder


def checkpoint_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.glob("*.safetensors"))


# -- memory sampling ---------------------------------------------------------------------------

class PhasePeaks:
    """Samples this process's RSS every few milliseconds; the peak of each named phase."""

    def __init__(self) -> None:
        self.phase = "start"
        self.peaks: dict[str, int] = {}
        # anonymous memory only: without the checkpoint's memory-mapped pages, which the
        # kernel can drop (they are clean page cache), counted in RSS once read
        self.anon: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            now, anon = rss(), rss("RssAnon")
            if now > self.peaks.get(self.phase, 0):
                self.peaks[self.phase] = now
            if anon > self.anon.get(self.phase, 0):
                self.anon[self.phase] = anon
            time.sleep(0.005)

    def enter(self, phase: str) -> None:
        self.phase = phase
        self.peaks[phase] = rss()

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join()
        return self.peaks


# -- the exported module -----------------------------------------------------------------------

def static_cache_lm(model: Any, max_cache_len: int) -> Any:
    """``forward(input_ids [1, n], cache_position [n]) -> logits``: ``model`` with
    ``transformers``' ``StaticCache`` held in buffers (program state after conversion)."""
    import torch
    from transformers.cache_utils import StaticCache

    class StaticCacheLM(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model
            config = model.config.get_text_config()
            self.cache = StaticCache(config=config, max_cache_len=max_cache_len)
            heads = config.num_key_value_heads
            head_dim = getattr(config, "head_dim", None) or (
                config.hidden_size // config.num_attention_heads)
            dtype = next(p for p in model.parameters() if p.is_floating_point()
                         and p.numel()).dtype
            self.cache.early_initialization(1, heads, head_dim, dtype, torch.device("cpu"))
            for i, layer in enumerate(self.cache.layers):
                self.register_buffer(f"key_cache_{i}", layer.keys, persistent=False)
                self.register_buffer(f"value_cache_{i}", layer.values, persistent=False)

        def forward(self, input_ids: torch.Tensor, cache_position: torch.Tensor) -> Any:
            for i, layer in enumerate(self.cache.layers):
                layer.keys = getattr(self, f"key_cache_{i}")
                layer.values = getattr(self, f"value_cache_{i}")
                layer.cumulative_length = cache_position[0].clone()
            out = self.model(input_ids=input_ids, attention_mask=None,
                             past_key_values=self.cache, use_cache=True,
                             cache_position=cache_position)
            return out.logits

    return StaticCacheLM().eval()


def load(folder: Path) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    os.environ["HF_HUB_OFFLINE"] = "1"
    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float16,
                                                local_files_only=True).eval().requires_grad_(
                                                    False)


def export_case(folder: Path, scheme: str, out: Path, prompt: int, max_context: int,
                ) -> dict[str, Any]:
    """Load -> compress -> export (prefill, decode) -> convert -> save, sampling RSS."""
    import warnings

    import torch

    from coreai_torch import TorchConverter, get_decomp_table
    from coreai_torch.llm._sizes import asset_bytes
    from coreai_torch.llm.compression import compress

    peaks = PhasePeaks()
    times: dict[str, float] = {}
    t0 = time.perf_counter()

    def mark(phase: str) -> None:
        nonlocal t0
        times[peaks.phase] = time.perf_counter() - t0
        t0 = time.perf_counter()
        peaks.enter(phase)

    mark("load")
    model = load(folder)
    mark("compress")
    manifest = None
    if scheme != "float16":
        model, manifest = compress(model, scheme)
    mark("export")
    lm = static_cache_lm(model, max_context)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        eps = {
            "prefill": torch.export.export(lm, (torch.zeros(1, prompt, dtype=torch.long),
                                                torch.arange(prompt))),
            "decode": torch.export.export(lm, (torch.zeros(1, 1, dtype=torch.long),
                                               torch.tensor([prompt]))),
        }
        mark("decompose")
        eps = {k: ep.run_decompositions(get_decomp_table()) for k, ep in eps.items()}
    mark("convert")
    converter = TorchConverter()
    for name, ep in eps.items():
        converter.add_exported_program(ep, input_names=["input_ids", "cache_position"],
                                       output_names=["logits"], entrypoint_name=name)
    program = converter.to_coreai()
    del eps, converter
    # drops what conversion left unread (e.g. an int8-held int4 table, once stored as int4);
    # the full pipeline would also fold each transposed weight into a copy
    program.optimize(passes=["dce"])
    mark("save")
    program.save(out)
    mark("end")
    return {"peaks": peaks.stop(), "anon_peaks": peaks.anon, "times": times,
            "asset_bytes": asset_bytes(out), "size": manifest["size"] if manifest else None}


# -- speed -------------------------------------------------------------------------------------

def speed_case(folder: Path, scheme: str, asset: Path, prompt: int, decode: int,
               max_context: int) -> dict[str, Any]:
    """Prefill time and decode tokens/s: the saved program on the reference runtime, and the
    same model in ``transformers`` eager with a static cache, in this process."""
    import numpy as np
    import torch

    from coreai_core import load as load_program
    from coreai_torch.llm.compression import compress

    rng = np.random.default_rng(0)
    vocab = json.loads((folder / "config.json").read_text())["vocab_size"]
    ids = rng.integers(0, min(vocab, 1000), (1, prompt))
    out: dict[str, Any] = {}

    program = load_program(asset)
    t = time.perf_counter()
    logits = program.run({"input_ids": ids, "cache_position": np.arange(prompt)},
                         entrypoint="prefill")["logits"]
    out["plan_and_prefill_s"] = time.perf_counter() - t
    program.reset_state()
    t = time.perf_counter()
    logits = program.run({"input_ids": ids, "cache_position": np.arange(prompt)},
                         entrypoint="prefill")["logits"]
    out["prefill_s"] = time.perf_counter() - t
    token = int(logits[0, -1].argmax())
    ours = [token]
    steps = []
    for i in range(decode):
        t = time.perf_counter()
        logits = program.run({"input_ids": np.array([[token]]),
                              "cache_position": np.array([prompt + i])},
                             entrypoint="decode")["logits"]
        steps.append(time.perf_counter() - t)
        token = int(logits[0, -1].argmax())
        ours.append(token)
    out["decode_tok_s"] = 1 / float(np.median(steps[1:] or steps))
    out["rss_runtime"] = rss()
    del program

    model = load(folder)
    if scheme != "float16":
        model, _ = compress(model, scheme)
    ids_t = torch.from_numpy(ids)
    with torch.no_grad():
        kwargs = dict(do_sample=False, cache_implementation="static",
                      cache_config={"max_cache_len": max_context}, pad_token_id=0)
        model.generate(ids_t, max_new_tokens=2, **kwargs)  # warm up
        t = time.perf_counter()
        model.generate(ids_t, max_new_tokens=1, **kwargs)
        first = time.perf_counter() - t
        t = time.perf_counter()
        eager = model.generate(ids_t, max_new_tokens=decode + 1, **kwargs)
        total = time.perf_counter() - t
    out["eager_prefill_s"] = first
    out["eager_decode_tok_s"] = decode / max(total - first, 1e-9)
    out["greedy_agree"] = int(sum(a == b for a, b in zip(ours, eager[0, prompt:].tolist())))
    out["tokens"] = len(ours)
    return out


# -- driver ------------------------------------------------------------------------------------

def _child(args: argparse.Namespace) -> None:
    folder = Path(args.folder)
    if args.child == "export":
        result = export_case(folder, args.scheme, Path(args.asset), args.prompt,
                             args.max_context)
    else:
        result = speed_case(folder, args.scheme, Path(args.asset), args.prompt, args.decode,
                            args.max_context)
    print("RESULT " + json.dumps(result))


def _run_child(kind: str, folder: Path, scheme: str, asset: Path,
               args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", kind, "--folder", str(folder), "--scheme",
           scheme, "--asset", str(asset), "--prompt", str(args.prompt), "--decode",
           str(args.decode), "--max-context", str(args.max_context)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"{kind} {folder.name} {scheme} failed:\n{proc.stderr[-3000:]}")


MEMORY_COLUMNS = ["shape", "scheme", "ckpt GiB", "peak RSS GiB", "x ckpt", "anon x ckpt",
                  "peak in", "per phase GiB", "asset GiB", "asset x f16", "export s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="qwen3-0.6b,llama-3.2-1b")
    parser.add_argument("--schemes", default="float16,int4")
    parser.add_argument("--cache-dir", default=os.environ.get("COREAI_LLM_CHECKPOINTS",
                                                               "/work/llm-checkpoints"))
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--decode", type=int, default=16)
    parser.add_argument("--max-context", type=int, default=256)
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--child", choices=["export", "speed"])
    parser.add_argument("--folder")
    parser.add_argument("--scheme")
    parser.add_argument("--asset")
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    cache = Path(args.cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    mem_rows, speed_rows = [], []
    for shape in args.shapes.split(","):
        folder = checkpoint(shape, cache)
        ckpt = checkpoint_bytes(folder)
        for scheme in args.schemes.split(","):
            with tempfile.TemporaryDirectory(dir=cache) as tmp:
                asset = Path(tmp) / "model.coreai"
                r = _run_child("export", folder, scheme, asset, args)
                peak = max(r["peaks"].values())
                where = max(r["peaks"], key=r["peaks"].get)
                anon = max(r.get("anon_peaks", {"-": 0}).values())
                phases = " ".join(f"{k} {v / 2**30:.2f}" for k, v in r["peaks"].items()
                                  if k != "start")
                mem_rows.append([shape, scheme, f"{ckpt / 2**30:.2f}", f"{peak / 2**30:.2f}",
                                 f"{peak / ckpt:.2f}", f"{anon / ckpt:.2f}", where, phases,
                                 f"{r['asset_bytes'] / 2**30:.3f}",
                                 f"{r['asset_bytes'] / ckpt:.3f}",
                                 f"{sum(r['times'].values()):.0f}"])
                print_table(MEMORY_COLUMNS, mem_rows[-1:])
                if not args.no_speed:
                    s = _run_child("speed", folder, scheme, asset, args)
                    speed_rows.append([
                        shape, scheme, s["prefill_s"], s["eager_prefill_s"],
                        s["prefill_s"] / s["eager_prefill_s"], s["decode_tok_s"],
                        s["eager_decode_tok_s"], s["decode_tok_s"] / s["eager_decode_tok_s"],
                        f"{s['greedy_agree']}/{s['tokens']}",
                        f"{s['rss_runtime'] / 2**30:.2f}"])
                    print(speed_rows[-1], flush=True)
    print("\nExport: peak RSS against the float16 checkpoint's bytes (target <= 1.3x)\n")
    print_table(MEMORY_COLUMNS, mem_rows)
    if speed_rows:
        print(f"\nReference runtime vs transformers eager (static cache), prompt "
              f"{args.prompt}, {args.decode} decode steps (targets: prefill <= 1.0x, decode "
              ">= 1.0x)\n")
        print_table(["shape", "scheme", "prefill s", "eager prefill s", "x eager",
                     "decode tok/s", "eager tok/s", "x eager", "greedy agree",
                     "runtime RSS GiB"], speed_rows)


if __name__ == "__main__":
    main()
