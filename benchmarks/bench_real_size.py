"""Real-size models: the numpy runtime against torch eager and onnxruntime, default environment.

Each model is built from a ``transformers`` config (or ``torch.nn``: the LSTM and GRU) with
random weights (nothing downloaded), exported, converted, optimized and run with
``program.run`` the way a user runs it: no ``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS`` (the
runtime sets BLAS threads itself). In the same process, one after the other: the runtime on
every available core (``program.run``, the default) and on one thread
(``Runtime(threads=1)``); torch eager at its default thread count and at one thread; and
onnxruntime at its default settings on the same model exported with
``torch.onnx.export(..., dynamo=True)`` (a failed export is reported in its cell). Columns:
export/convert/optimize seconds, the medians and the ratios of the default runtime to eager
at its default threads and to onnxruntime (targets: <= 1.0 and <= 1.5), the weight bytes, the
peak RSS while ``run()`` is timed and its growth over the RSS before (activations and
temporaries; a lower bound, as heap memory freed earlier is reused; weights are shared with
torch, not copied).

Run: ``python benchmarks/bench_real_size.py [--models bert,vit,resnet50,mobilenet_v2,llama,
llama_decode,lstm,gru] [--repeat 3] [--quick] [--no-ort]`` (onnxruntime and onnxscript:
``pip install -e '.[bench]'``). The Llamas have the 1.1B shape (22 layers, 4.4 GB of float32
weights; about 15 GB peak with onnxruntime's copy); ``--llama-layers 4`` keeps 4 of them.
``--quick``: BERT, ResNet-50, MobileNetV2 and the 4-layer Llamas, 2 timed runs each, no
onnxruntime (its export takes minutes): a smoke test of the numbers, not the final figures.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # random weights from configs: nothing to fetch

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median_time, print_table, reset_peak_rss, rss

from coreai_core import Program
from coreai_core.runtime import Runtime
from coreai_torch import TorchConverter, get_decomp_table
from tests.models.builders import HF
from tests.models.llm import LlamaDecodeStep

Built = tuple[torch.nn.Module, tuple[torch.Tensor, ...]]
GB = 1e9


def _ids(vocab: int, length: int) -> torch.Tensor:
    return torch.randint(0, vocab, (1, length), generator=torch.Generator().manual_seed(1))


def _pixels() -> torch.Tensor:
    return torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(2))


def bert() -> Built:
    from transformers import BertConfig, BertModel

    cfg = BertConfig()  # base: 12 layers, hidden 768
    model = HF(BertModel(cfg, add_pooling_layer=False), "last_hidden_state",
               ("input_ids", "attention_mask"))
    return model, (_ids(cfg.vocab_size, 128), torch.ones(1, 128, dtype=torch.int64))


def vit() -> Built:
    from transformers import ViTConfig, ViTModel

    model = ViTModel(ViTConfig(), add_pooling_layer=False)  # base/16, 224x224
    return HF(model, "last_hidden_state", ("pixel_values",)), (_pixels(),)


def resnet50() -> Built:
    from transformers import ResNetConfig, ResNetModel

    return HF(ResNetModel(ResNetConfig()), "pooler_output", ("pixel_values",)), (_pixels(),)


def mobilenet_v2() -> Built:
    from transformers import MobileNetV2Config, MobileNetV2Model

    model = MobileNetV2Model(MobileNetV2Config())  # depth multiplier 1.0, 224x224
    return HF(model, "pooler_output", ("pixel_values",)), (_pixels(),)


# Layers of the Llamas (``--llama-layers``): TinyLlama-1.1B has 22.
LLAMA_LAYERS = {"layers": 22}


def _llama_1b() -> torch.nn.Module:
    """A transformers Llama of the TinyLlama-1.1B shape: 22 layers (or ``--llama-layers``),
    hidden 2048, GQA 32/4."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632,
                      num_hidden_layers=LLAMA_LAYERS["layers"],
                      num_attention_heads=32, num_key_value_heads=4, vocab_size=32000,
                      max_position_embeddings=2048, use_cache=False)
    return LlamaForCausalLM(cfg)


def llama() -> Built:
    """The 1.1B Llama, prefill of 128 tokens."""
    model = _llama_1b()
    return HF(model, "logits", ("input_ids",)), (_ids(model.config.vocab_size, 128),)


def llama_decode() -> Built:
    """The 1.1B Llama, one decode step at position 128 of a 256-position KV cache."""
    model = _llama_1b()
    step = LlamaDecodeStep(model, max_len=256)
    return step, (_ids(model.config.vocab_size, 1), torch.tensor([128]))


class Recurrent(torch.nn.Module):
    """A 2-layer ``nn.LSTM``/``nn.GRU`` (input 256, hidden 512) over a batch-first sequence."""

    def __init__(self, kind: type[torch.nn.Module]) -> None:
        super().__init__()
        self.rnn = kind(input_size=256, hidden_size=512, num_layers=2, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0]


def _sequence(batch: int) -> torch.Tensor:
    return torch.randn(batch, 100, 256, generator=torch.Generator().manual_seed(3))


def lstm() -> Built:
    """LSTM, 2 layers, hidden 512, 100 steps, batch 8."""
    return Recurrent(torch.nn.LSTM), (_sequence(8),)


def gru() -> Built:
    """GRU, 2 layers, hidden 512, 100 steps, batch 8."""
    return Recurrent(torch.nn.GRU), (_sequence(8),)


MODELS: dict[str, tuple[str, Callable[[], Built]]] = {
    "bert": ("BERT-base, seq 128", bert),
    "vit": ("ViT-base/16, 224", vit),
    "resnet50": ("ResNet-50, 224", resnet50),
    "mobilenet_v2": ("MobileNetV2, 224", mobilenet_v2),
    "llama": ("Llama 1.1B shape, prefill 128", llama),
    "llama_decode": ("Llama 1.1B shape, decode step (KV cache as state)", llama_decode),
    "lstm": ("LSTM 2x512, 100 steps, batch 8", lstm),
    "gru": ("GRU 2x512, 100 steps, batch 8", gru),
}


def built_model(key: str) -> tuple[str, torch.nn.Module, tuple[torch.Tensor, ...]]:
    """Model ``key``'s label, module (eval mode, seeded random weights) and inputs."""
    label, build = MODELS[key]
    torch.manual_seed(0)
    model, inputs = build()
    return label, model.eval(), inputs


def optimized_program(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
                      ) -> tuple[Program, dict[str, np.ndarray]]:
    """``model`` exported, converted and optimized, and its feeds for ``inputs``."""
    ep = torch.export.export(model, inputs).run_decompositions(get_decomp_table())
    program = TorchConverter(progress=False).add_exported_program(ep).to_coreai()
    del ep  # only the program (whose weights are views of the model's) stays
    program.optimize()
    return program, dict(zip(program.input_names, [t.numpy() for t in inputs], strict=True))


def model_keys(parser: argparse.ArgumentParser, text: str) -> list[str]:
    """The model keys of a ``--models`` value; a parser error names unknown ones."""
    keys = [k for k in text.split(",") if k]
    unknown = [k for k in keys if k not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; choose from {list(MODELS)}")
    return keys


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - t0


def _onnxruntime(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
                 repeat: int) -> float | str:
    """Median seconds of onnxruntime (default settings) on the dynamo export, or why not."""
    try:
        import onnxruntime as ort
    except ImportError:
        return "onnxruntime not installed (pip install -e '.[bench]')"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the exporter's progress lines
                torch.onnx.export(model, inputs, path, dynamo=True, external_data=True,
                                  verbose=False)
        except Exception as e:  # report the reason in the table instead of stopping
            return f"export failed: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        feeds = {i.name: t.numpy() for i, t in zip(session.get_inputs(), inputs)}
        return median_time(lambda: session.run(None, feeds), repeat=repeat)


def _coreai(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
            repeat: int) -> tuple[list[float], np.ndarray]:
    """Export, convert, optimize seconds, run seconds on every core and on one thread, peak
    RSS while running and its growth over the RSS before; and one run's output. The program
    is freed on return."""
    ep, t_export = _timed(lambda: torch.export.export(model, inputs)
                          .run_decompositions(get_decomp_table()))
    program, t_convert = _timed(
        lambda: TorchConverter(progress=False).add_exported_program(ep).to_coreai())
    ep = None  # only the program (whose weights are views of the model's) stays
    _, t_optimize = _timed(program.optimize)
    feeds = dict(zip(program.input_names, [t.numpy() for t in inputs], strict=True))
    gc.collect()
    before = rss()
    reset_peak_rss()
    t_run = median_time(lambda: program.run(feeds), repeat=repeat)
    peak = rss("VmHWM")
    one_thread = Runtime(threads=1)
    t_run1 = median_time(lambda: one_thread.run(program, feeds), repeat=repeat)
    output = next(iter(program.run(feeds).values()))
    return [t_export, t_convert, t_optimize, t_run, t_run1, peak / GB,
            (peak - before) / GB], output


def _eager(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], repeat: int,
           threads: int) -> tuple[float, np.ndarray]:
    """Median seconds of torch eager on ``threads`` threads, and its output."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            expected = model(*inputs).numpy()
            return median_time(lambda: model(*inputs), repeat=repeat), expected
    finally:
        torch.set_num_threads(previous)


def measure(key: str, repeat: int, ort: bool, torch_threads: int) -> list[Any]:
    """One table row for model ``key``."""
    label, model, inputs = built_model(key)
    weight_bytes = sum(p.numel() * p.element_size()
                       for p in [*model.parameters(), *model.buffers()])
    (t_export, t_convert, t_optimize, t_run, t_run1, peak, growth), got = _coreai(
        model, inputs, repeat)
    gc.collect()
    t_eager, expected = _eager(model, inputs, repeat, torch_threads)
    t_eager1, _ = _eager(model, inputs, repeat, 1)
    err = float(np.max(np.abs(got - expected)) / max(float(np.max(np.abs(expected))), 1e-30))
    t_ort = _onnxruntime(model, inputs, repeat) if ort else "skipped"
    ort_ratio = t_run / t_ort if isinstance(t_ort, float) else "-"
    return [label, t_export, t_convert, t_optimize, t_run, t_run1, t_eager, t_eager1, t_ort,
            t_run / t_eager, t_run1 / t_eager1, ort_ratio, f"{err:.1e}", weight_bytes / GB,
            peak, growth]


QUICK = "bert,resnet50,mobilenet_v2,llama,llama_decode"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=None,
                        help=f"comma-separated, from {', '.join(MODELS)} (default: all; "
                             f"with --quick: {QUICK})")
    parser.add_argument("--repeat", type=int, default=None,
                        help="timed runs per median (default 3; 2 with --quick)")
    parser.add_argument("--llama-layers", type=int, default=None,
                        help="decoder layers of the Llamas (default 22; 4 with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help="fewer models, 4-layer Llamas, 2 runs, no onnxruntime")
    parser.add_argument("--no-ort", action="store_true", help="skip onnxruntime")
    args = parser.parse_args()
    keys = model_keys(parser, args.models or (QUICK if args.quick else ",".join(MODELS)))
    repeat = args.repeat or (2 if args.quick else 3)
    LLAMA_LAYERS["layers"] = args.llama_layers or (4 if args.quick else 22)
    torch_threads = torch.get_num_threads()  # torch's default, before anything changes it
    rows = []
    for key in keys:
        rows.append(measure(key, repeat, not (args.no_ort or args.quick), torch_threads))
        print(f"{key}: done", file=sys.stderr, flush=True)
    cores = Runtime().threads
    print(f"runtime: {cores} thread(s) by default; torch eager: {torch_threads} by default; "
          f"Llama layers: {LLAMA_LAYERS['layers']}")
    print_table(["model", "export s", "convert s", "optimize s", f"run s ({cores} thr)",
                 "run s (1 thr)", f"eager s ({torch_threads} thr)", "eager s (1 thr)",
                 "onnxruntime s (default)", "run/eager", "run/eager (1 thr each)", "run/ort",
                 "max rel err", "weights GB", "run peak RSS GB", "run RSS growth GB"], rows)


if __name__ == "__main__":
    main()
