"""What ``TorchConverter(mode=...)`` costs in size: DEBUG (file and line, module path, op id and
the user's call stack on every op) against RELEASE (the op id only).

For each model (random weights from a ``transformers`` config at the real checkpoint's shape,
nothing downloaded): the number of ops, the bytes of the text form with locations
(``program.to_text(locations=True)``, weights elided), of the saved ``.coreai`` artifact
(``program.save``: text, weights and checksums) and of the ``.aimodel`` (``export_aimodel``,
needs the ``coreai`` extra), per mode, and RELEASE's saving over DEBUG.

Run: ``python benchmarks/bench_mode_sizes.py [--models bert,gpt2]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table

from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch.aimodel import export_aimodel
from tests.models.builders import hf_model


def _bert() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import BertConfig, BertModel  # bert-base-uncased's shape

    ids = torch.randint(0, 30522, (1, 128), generator=torch.Generator().manual_seed(1))
    return hf_model(BertModel, BertConfig(), (ids,), ("input_ids",))


def _gpt2() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import GPT2Config, GPT2Model  # gpt2 (124M)'s shape

    ids = torch.randint(0, 50257, (1, 128), generator=torch.Generator().manual_seed(1))
    return hf_model(GPT2Model, GPT2Config(use_cache=False), (ids,), ("input_ids",))


MODELS = {"bert": _bert, "gpt2": _gpt2}


def _bytes(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(
        f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    rows = []
    for name in args.models.split(","):
        m, inputs = MODELS[name]()
        ep = torch.export.export(m, inputs).run_decompositions(get_decomp_table())
        sizes = {}
        for mode in TorchConverter.Mode:
            program = TorchConverter(mode=mode).add_exported_program(ep).to_coreai()
            with tempfile.TemporaryDirectory() as tmp:
                program.save(Path(tmp) / "m.coreai")
                export_aimodel(program, Path(tmp) / "m.aimodel")
                sizes[mode] = (len(program.to_text(locations=True).encode()),
                               _bytes(Path(tmp) / "m.coreai"), _bytes(Path(tmp) / "m.aimodel"))
            ops = sum(len(g.ops) for g in program.graphs.values())
            rows.append([name, mode.name, ops, *sizes[mode]])
            del program
        debug, release = sizes[TorchConverter.Mode.DEBUG], sizes[TorchConverter.Mode.RELEASE]
        rows.append([name, "saved", "", *(d - r for d, r in zip(debug, release, strict=True))])
    print_table(["model", "mode", "ops", "text B", ".coreai B", ".aimodel B"], rows)


if __name__ == "__main__":
    main()
