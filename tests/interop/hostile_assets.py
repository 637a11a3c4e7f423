"""Tampered ``.aimodel`` assets, and a runner that opens each in a child process.

Each case copies a good asset and damages it one way (:data:`CASES`). Run as a script, this
module opens the named cases one after the other, each ``MODE:NAME`` (``load``: in-process,
``isolated``: with ``load_aimodel(..., isolated=True)``), and prints one JSON line per case,
before and after it, so that :func:`outcomes` can tell a clean error from a process death or
a hang and go on with the remaining cases in a fresh process.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
X = np.arange(5, dtype=np.float32)  # the good asset's input; its output is X * WEIGHT
WEIGHT = np.linspace(0.5, 4.5, 5, dtype=np.float32)
DIMS_KEY = "coreai_torch.dynamic_dims"


def write_assets(folder: Path) -> None:
    """The good assets the cases start from: ``static.aimodel`` (``y = x * w``, a float32
    weight of 5) and ``dynamic.aimodel`` (``y = x * 2`` with ``x`` of a dynamic size)."""
    from coreai_core import Dim, Program, TensorType
    from coreai_core.dialects import coreai
    from coreai_torch.aimodel import export_aimodel

    p = Program()
    with p.graph("main", inputs={"x": TensorType((5,), "float32")}) as g:
        g.outputs({"y": coreai.broadcasting_mul(g["x"], coreai.constant(WEIGHT, name="w"))})
    export_aimodel(p, folder / "static.aimodel")
    d = Program()
    with d.graph("main", inputs={"x": TensorType((Dim("n", 1, 64),), "float32")}) as g:
        g.outputs({"y": coreai.broadcasting_mul(g["x"], 2.0)})
    export_aimodel(d, folder / "dynamic.aimodel")


def _rehash(asset: Path) -> None:
    (asset / "main.hash").write_bytes(hashlib.sha256((asset / "main.mlirb").read_bytes()).digest())


def _truncate(asset: Path) -> None:
    data = (asset / "main.mlirb").read_bytes()
    (asset / "main.mlirb").write_bytes(data[: len(data) // 2])


def _flip(asset: Path, at: int) -> None:
    data = bytearray((asset / "main.mlirb").read_bytes())
    data[at] ^= 0x10
    (asset / "main.mlirb").write_bytes(bytes(data))


def _flip_code(asset: Path) -> None:
    _flip(asset, 0)  # the bytecode's magic number


def _flip_weight(asset: Path) -> None:
    at = (asset / "main.mlirb").read_bytes().find(WEIGHT.tobytes())
    assert at >= 0, "the weight's bytes are not stored verbatim"
    _flip(asset, at + 6)  # a mantissa bit of the second value


def _replace_with(name: str, make: Callable[[Path], None]) -> Callable[[Path], None]:
    def tamper(asset: Path) -> None:
        os.unlink(asset / name)
        make(asset / name)
    return tamper


def _sparse(size: int) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        with open(path, "wb") as f:
            f.truncate(size)
    return make


def _dims_record(text: str) -> Callable[[Path], None]:
    def tamper(asset: Path) -> None:
        meta = json.loads((asset / "metadata.json").read_text())
        meta.setdefault("creatorDefinedMetadata", {})[DIMS_KEY] = text
        (asset / "metadata.json").write_text(json.dumps(meta))
    return tamper


_TB = 1 << 40
_NOT_REGULAR = r"main\.mlirb: is (a folder|a FIFO|a symlink)"
_HASH = r"main\.mlirb does not match main\.hash"
_DIMS = r"metadata\.json: the coreai_torch\.dynamic_dims record"

# name -> (the asset it starts from, how it is damaged, the error expected: type, message)
CASES: dict[str, tuple[str, Callable[[Path], None], str, str]] = {
    "truncated": ("static", _truncate, "AimodelAssetError", _HASH),
    "code-bit-flipped": ("static", _flip_code, "AimodelAssetError", _HASH),
    "weight-bit-flipped": ("static", _flip_weight, "AimodelAssetError", _HASH),
    "stale-hash": ("static", lambda a: (a / "main.hash").write_bytes(bytes(32)),
                   "AimodelAssetError", _HASH),
    "short-hash": ("static", lambda a: (a / "main.hash").write_bytes(b"abc"),
                   "AimodelAssetError", r"main\.hash: holds 3 bytes"),
    "missing-hash": ("static", lambda a: os.unlink(a / "main.hash"),
                     "AimodelAssetError", r"main\.hash: is missing"),
    "folder-at-mlirb": ("static", _replace_with("main.mlirb", os.mkdir),
                        "AimodelAssetError", _NOT_REGULAR),
    "fifo-at-mlirb": ("static", _replace_with("main.mlirb", os.mkfifo),
                      "AimodelAssetError", _NOT_REGULAR),
    "dev-zero-link-at-mlirb": ("static", _replace_with("main.mlirb",
                                                       lambda p: os.symlink("/dev/zero", p)),
                               "AimodelAssetError", _NOT_REGULAR),
    "fifo-at-metadata": ("static", _replace_with("metadata.json", os.mkfifo),
                         "AimodelAssetError", r"metadata\.json: is a FIFO"),
    "dev-zero-link-at-hash": ("static", _replace_with("main.hash",
                                                      lambda p: os.symlink("/dev/zero", p)),
                              "AimodelAssetError", r"main\.hash: is a symlink"),
    "huge-mlirb": ("static", _replace_with("main.mlirb", _sparse(_TB)),
                   "AimodelAssetError", r"main\.mlirb: is 1099511627776 bytes"),
    "huge-metadata": ("static", _replace_with("metadata.json", _sparse(1 << 30)),
                      "AimodelAssetError", r"metadata\.json: is 1073741824 bytes"),
    "bad-metadata-json": ("static", lambda a: (a / "metadata.json").write_text("{"),
                          "AimodelAssetError", r"metadata\.json: "),
    "dims-bad-json": ("dynamic", _dims_record("{"), "AimodelAssetError", _DIMS),
    "dims-deep": ("dynamic", _dims_record("[" * 100_000 + "]" * 100_000),
                  "AimodelAssetError", _DIMS),
    "dims-not-a-mapping": ("dynamic", _dims_record("5"), "AimodelAssetError", _DIMS),
    "dims-wrong-types": ("dynamic", _dims_record('{"main": {"input": {"x": ["abc"]}}}'),
                         "AimodelAssetError", _DIMS),
    "dims-bad-dim": ("dynamic", _dims_record('{"main": {"input": {"x": [[1, 2]]}}}'),
                     "AimodelAssetError", _DIMS),
    "dims-huge-bound": ("dynamic", _dims_record('{"main": {"input": {"x": [["n", 1, '
                                                + "9" * 400 + "]]}}}"),
                        "AimodelAssetError", _DIMS),
    "dims-bad-state": ("dynamic", _dims_record('{"main": {"state": [1]}}'),
                       "AimodelAssetError", _DIMS),
}

# damaged so that main.hash still matches: only Apple's parser can tell, and it aborts the
# process, so these run isolated (an exception carrying Apple's message)
FORGED: dict[str, tuple[str, Callable[[Path], None], str, str]] = {
    "truncated-rehashed": ("static", lambda a: (_truncate(a), _rehash(a)),
                           "AimodelInterpreterError", r"interpreter process died"),
    "code-bit-flipped-rehashed": ("static", lambda a: (_flip_code(a), _rehash(a)),
                                  "AimodelInterpreterError", r"interpreter process died"),
}


def make_case(good: Path, work: Path, name: str) -> Path:
    """A copy of the good asset ``name`` starts from, damaged as ``name`` says."""
    source, tamper, _, _ = {**CASES, **FORGED}[name]
    asset = work / f"{name}.aimodel"
    shutil.copytree(good / f"{source}.aimodel", asset, symlinks=True)
    tamper(asset)
    return asset


def _open_and_run(asset: Path, mode: str) -> None:
    from coreai_torch.aimodel import load_aimodel

    kwargs = {"isolated": True} if mode == "isolated" else {}
    with load_aimodel(asset, **kwargs) as loaded:
        loaded.run({"x": X})


def _main(argv: list[str]) -> None:
    work, runs = Path(argv[0]), argv[1:]
    import coreai_torch.aimodel  # noqa: F401  (imported before the first case starts)

    for name in runs:
        print(json.dumps({"case": name, "started": True}), flush=True)
        mode, case = name.split(":")
        try:
            _open_and_run(work / f"{case}.aimodel", mode)
            result = {"case": name, "raised": None}
        except Exception as e:
            result = {"case": name, "raised": type(e).__name__, "message": str(e)}
        print(json.dumps(result), flush=True)


def outcomes(work: Path, names: list[str], timeout: float = 120.0,
             ) -> dict[str, dict[str, object]]:
    """Open each case of ``names`` (``MODE:NAME``, made in ``work``) in a child process; per
    case, what it raised, or ``{"died": signal}`` / ``{"hung": True}`` (the process then
    starts over with the cases left; ``timeout`` bounds each process)."""
    found: dict[str, dict[str, object]] = {}
    left = list(names)
    while left:
        child = subprocess.Popen([sys.executable, "-m", "tests.interop.hostile_assets",
                                  str(work), *left], cwd=ROOT, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = child.communicate(timeout=timeout)
            hung = False
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            out, err = child.communicate()
            hung = True
        current = None
        for line in out.splitlines():
            record = json.loads(line)
            current = record["case"]
            if "started" not in record:
                found[current] = record
        if current is None or current in found:  # died before or between cases
            found.update({n: {"died": abs(child.returncode), "stderr": err[-2000:]}
                          for n in left if n not in found})
            break
        found[current] = ({"hung": True} if hung else
                          {"died": abs(child.returncode), "stderr": err[-2000:]})
        left = [n for n in left if n not in found]
    return found


if __name__ == "__main__":
    _main(sys.argv[1:])
