"""The bundle folder an export writes, its manifest, and writing it atomically.

A bundle holds ``program.coreai`` (the converted program: the ``prefill`` and ``decode``
entrypoints sharing the KV cache as state), ``model.aimodel`` (the same program as Apple's
asset, when Apple's ``coreai`` package is installed), the model's ``config.json``, the
checkpoint's tokenizer and generation files, and ``manifest.json`` describing all of it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from coreai_core import durable_fs as fs
from coreai_torch.llm.errors import BundleError

__all__ = ["AIMODEL_FILE", "FORMAT", "MANIFEST_FILE", "PROGRAM_FILE", "LLMBundle",
           "check_out_dir", "graph_signature", "staged_dir"]

FORMAT = "coreai-torch-llm-bundle"
FORMAT_VERSION = 1
MANIFEST_FILE = "manifest.json"
PROGRAM_FILE = "program.coreai"
AIMODEL_FILE = "model.aimodel"


def _dim(d: Any) -> Any:
    return d if isinstance(d, int) else {"name": d.name, "min": d.min, "max": d.max}


def _tensor(value: Any) -> dict[str, Any]:
    return {"shape": [_dim(d) for d in value.type.shape], "dtype": str(value.type.element_type)}


def graph_signature(program: Any, entrypoint: str) -> dict[str, Any]:
    """The manifest entry of one entrypoint: its inputs, outputs and state, each with shape
    (a dynamic dimension as ``{name, min, max}``) and dtype."""
    g = program.graphs[entrypoint]
    return {"inputs": {n: _tensor(v) for n, v in g.inputs.items()},
            "outputs": {n: _tensor(v) for n, v in g.output_values.items()},
            "state": sorted(g.state_inputs)}


@attrs.frozen
class LLMBundle:
    """An exported LLM: a folder and its manifest (``manifest.json``, as a dict).

    ``llm.load(bundle)`` loads it to generate.
    """

    path: Path
    manifest: dict[str, Any] = attrs.field(repr=False)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> LLMBundle:
        """Read the bundle folder at ``path`` (its manifest is checked, nothing else loaded)."""
        folder = Path(path)
        manifest_path = folder / MANIFEST_FILE
        if not manifest_path.is_file():
            raise BundleError(f"{folder}: not an LLM bundle (no {MANIFEST_FILE}); write one "
                              f"with coreai_torch.llm.export or `coreai-torch llm export`")
        try:
            manifest = json.loads(manifest_path.read_text())
        except (ValueError, UnicodeDecodeError) as e:
            raise BundleError(f"{manifest_path}: malformed manifest ({e})") from e
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise BundleError(f"{manifest_path}: not a {FORMAT} manifest")
        if manifest.get("format_version") != FORMAT_VERSION:
            raise BundleError(f"{manifest_path}: format version "
                              f"{manifest.get('format_version')!r}; this coreai-torch reads "
                              f"version {FORMAT_VERSION}: re-export the model")
        return cls(folder, manifest)

    @property
    def max_context(self) -> int:
        return int(self.manifest["max_context"])

    @property
    def eos_token_ids(self) -> list[int]:
        return [int(i) for i in self.manifest.get("eos_token_ids", [])]

    def file(self, key: str) -> Path | None:
        """The path of the bundle's ``key`` file (``"program"``, ``"aimodel"``,
        ``"config"``), or None when the bundle has none."""
        name = self.manifest["files"].get(key)
        return self.path / name if name else None


def _is_bundle(folder: Path) -> bool:
    try:
        return json.loads((folder / MANIFEST_FILE).read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def check_out_dir(out_dir: Path, *, overwrite: bool) -> None:
    """Raise :class:`BundleError` unless a bundle may be written at ``out_dir``: it does not
    exist, or ``overwrite`` is set and it is a bundle (a folder this project did not write is
    never replaced)."""
    if out_dir.exists() or out_dir.is_symlink():
        if not overwrite:
            raise BundleError(f"{out_dir} exists; pass overwrite=True (CLI: --overwrite) to "
                              f"replace it, or choose another output folder")
        if not (out_dir.is_dir() and _is_bundle(out_dir)):
            raise BundleError(f"{out_dir} exists and is not an LLM bundle; it is never "
                              f"replaced: choose another output folder")


@contextlib.contextmanager
def staged_dir(out_dir: Path, *, overwrite: bool) -> Iterator[Path]:
    """A fresh sibling folder of ``out_dir`` to write a bundle into; on a clean exit it
    becomes ``out_dir`` by a rename, on an error it is removed and ``out_dir`` is untouched.

    An existing ``out_dir`` is refused unless ``overwrite`` is set and it is a bundle (a
    folder this project did not write is never replaced). Replacing moves the old bundle
    in one atomic exchange (:func:`coreai_core.durable_fs.replace`), then deletes the old:
    ``out_dir`` holds the whole old or the whole new bundle at every instant.
    """
    out_dir = Path(out_dir)
    check_out_dir(out_dir, overwrite=overwrite)
    parent = out_dir.parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.staging-", dir=parent))
    try:
        yield staging
        fs.fsync_tree(staging)
        old = fs.replace(staging, out_dir)  # an existing bundle comes back at `staging`
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
