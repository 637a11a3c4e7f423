"""What the ``coreai-torch`` command line reads and writes, checked before any work is done.

Every problem a user can fix (a missing, unreadable or ill-formed file, an output that exists
or cannot be written, inputs that do not fit the program) raises :class:`CliError` with one
line that names the file and says what to do; ``cli.main`` prints it and exits with code 2.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from coreai_core import DType, Graph, Program
from coreai_core.durable_fs import replacing
from coreai_core.runtime import input_type_problems


class CliError(Exception):
    """A problem with the command line or its files: printed as one line, exit code 2."""


def one_line(text: str) -> str:
    """``text`` on one line: an indented list under a heading joins with ``; ``."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    out = lines[0]
    for line in lines[1:]:
        out += (" " if out.endswith(":") else "; ") + line
    return out


# -- reading ----------------------------------------------------------------------------------

def input_file(path: str, what: str, suffixes: tuple[str, ...]) -> Path:
    """``path`` after checking it is a readable file whose name ends in one of ``suffixes``."""
    p = Path(path)
    if not p.exists():
        raise CliError(f"{path}: no such file (expected {what})")
    if p.is_dir():
        raise CliError(f"{path}: is a folder (expected {what})")
    if p.suffix.lower() not in suffixes:
        raise CliError(f"{path}: expected {what}, whose name ends in {' or '.join(suffixes)}")
    try:
        with open(p, "rb"):
            pass
    except OSError as e:
        raise CliError(f"{path}: cannot read ({e.strerror or e})") from None
    return p


@contextlib.contextmanager
def captured_logs(*names: str) -> Iterator[list[logging.LogRecord]]:
    """Collect the records of loggers ``names`` (and their children) instead of printing them.

    The loggers' propagation is restored on exit; the caller decides whether to replay the
    records (``replay``) or to fold them into its own error.
    """
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Collect()
    loggers = [logging.getLogger(n) for n in names]
    saved = [(lg.handlers, lg.propagate) for lg in loggers]
    try:
        for lg in loggers:
            lg.handlers, lg.propagate = [handler], False
        yield records
    finally:
        for lg, (handlers, propagate) in zip(loggers, saved, strict=True):
            lg.handlers, lg.propagate = handlers, propagate


def replay(records: list[logging.LogRecord]) -> None:
    """Hand captured records to their loggers' own handlers, as if never captured."""
    for record in records:
        logging.getLogger(record.name).handle(record)


def _root_cause(error: BaseException, records: list[logging.LogRecord]) -> BaseException:
    # torch.export.load logs the real failure with its traceback, then raises a generic
    # "check the warnings above"; the logged exception is the one worth showing
    logged = [r.exc_info[1] for r in records if r.exc_info and r.exc_info[1] is not None]
    return logged[-1] if logged else error


def load_exported_program(path: str) -> Any:
    """The ``torch.export.ExportedProgram`` saved in the ``.pt2`` file ``path``."""
    import torch

    what = "a .pt2 file written by torch.export.save"
    p = input_file(path, what, (".pt2",))
    if not zipfile.is_zipfile(p):
        raise CliError(f"{path}: not a torch.export program (not a .pt2 archive; expected {what})")
    with captured_logs("torch.export", "torch._export") as records:
        try:
            ep = torch.export.load(str(p))
        except Exception as e:  # torch raises many types for a bad archive
            cause = _root_cause(e, records)
            raise CliError(f"{path}: not a torch.export program "
                           f"({type(cause).__name__}: {one_line(str(cause))})") from e
    replay(records)
    return ep


def load_program(path: str) -> Program:
    """The program saved (by ``convert`` or ``Program.save``) in the folder ``path``."""
    from coreai_core import load

    p = Path(path)
    if not p.exists():
        raise CliError(f"{path}: no such program (expected a folder written by `convert`)")
    if not p.is_dir():
        raise CliError(f"{path}: is a file (expected a program folder written by `convert`)")
    try:
        return load(p)
    except Exception as e:  # a damaged artifact raises ArtifactError; I/O errors OSError
        raise CliError(f"{path}: cannot load program ({type(e).__name__}: "
                       f"{one_line(str(e))})") from e


def load_arrays(path: str) -> dict[str, np.ndarray] | np.ndarray:
    """The arrays of an ``.npz`` file (by name) or the one array of an ``.npy`` file."""
    p = input_file(path, "an .npz file (one array per input name) or an .npy file",
                   (".npz", ".npy"))
    kind = p.suffix.lower()
    try:
        with open(p, "rb") as f:
            magic = f.read(len(_NPY_MAGIC))
        # numpy takes any file without its magic bytes for a pickle and says so: check first
        if kind == ".npy" and magic != _NPY_MAGIC:
            raise ValueError("no .npy header; write it with numpy.save")
        if kind == ".npz" and not zipfile.is_zipfile(p):
            raise ValueError("not a zip archive; write it with numpy.savez")
        if kind == ".npy":
            return np.asarray(np.load(p, allow_pickle=False))
        with np.load(p, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except Exception as e:  # numpy raises ValueError, OSError, BadZipFile, MemoryError, ...
        raise CliError(f"{path}: not a valid {kind} file "
                       f"({type(e).__name__}: {one_line(str(e))})") from e


_NPY_MAGIC = b"\x93NUMPY"


# -- inputs against the program ---------------------------------------------------------------

def bind_inputs(program: Program, entrypoint: str, data: Mapping[str, np.ndarray] | np.ndarray,
                source: str) -> dict[str, np.ndarray]:
    """The arrays of ``data`` by input name, checked against ``entrypoint``'s input types.

    An ``.npy`` array is the input of a one-input entrypoint. Raises one :class:`CliError`
    listing every missing, unknown or mistyped input.
    """
    graph = entry_graph(program, entrypoint)
    names = list(graph.inputs)
    if isinstance(data, np.ndarray):
        if len(names) != 1:
            raise CliError(f"{source}: an .npy file holds one array, but entrypoint "
                           f"@{entrypoint} has {len(names)} inputs {names}; pass an .npz with "
                           f"one array per input name (numpy.savez)")
        data = {names[0]: data}
    problems = []
    for extra in (n for n in data if n not in graph.inputs):
        close = difflib.get_close_matches(extra, names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        problems.append(f"unknown input {extra!r}{hint}")
    problems += [f"missing input {n!r}" for n in names if n not in data]
    misnamed = bool(problems)
    arrays: dict[str, np.ndarray] = {}
    dims: dict[str, tuple[int, str]] = {}
    for n, value in graph.inputs.items():
        if n in data:
            arrays[n] = _from_storage(n, data[n], value.type.element_type, problems)
            problems += input_type_problems(n, arrays[n], value.type, dims)
    if misnamed:
        problems.append("numpy.savez(path, name=array, ...) stores arrays by input name")
    if problems:
        raise CliError(f"{source} does not fit the inputs of entrypoint @{entrypoint} "
                       f"{names}: " + "; ".join(problems))
    return arrays


def _from_storage(name: str, a: np.ndarray, dtype: DType, problems: list[str]) -> np.ndarray:
    """An input of a type numpy files cannot hold (bfloat16, ...) given in its storage type
    (see :func:`storable`), narrowed when every value is exact in ``dtype``."""
    storage = _STORAGE.get(dtype)
    if storage is None or a.dtype != storage:
        return a
    narrow = a.astype(dtype.numpy)
    if not np.array_equal(narrow.astype(storage), a, equal_nan=True):
        problems.append(f"{name!r}: the {a.dtype} values are not all exact in {dtype}")
    return narrow


def entry_graph(program: Program, entrypoint: str) -> Graph:
    """Graph ``entrypoint`` of ``program``, or a :class:`CliError` listing the entrypoints."""
    if entrypoint not in program.graphs:
        raise CliError(f"the program has no entrypoint {entrypoint!r}; its entrypoints are "
                       f"{program.entrypoints}")
    return program.graphs[entrypoint]


# -- writing ----------------------------------------------------------------------------------

def output_path(path: str, *, suffix: str | None, force: bool, folder: bool = False) -> Path:
    """``path`` after checking that it can be written: its folder exists and is writable, it
    has ``suffix`` (a file) and, unless ``force``, it does not exist yet."""
    p = Path(path)
    kind = "folder" if folder else "file"
    if suffix is not None and p.suffix.lower() != suffix:
        raise CliError(f"{path}: the output file name must end in {suffix}")
    parent = p.parent
    if not parent.is_dir():
        raise CliError(f"{path}: the folder {str(parent)!r} does not exist; create it first")
    if p.exists() or p.is_symlink():
        if not folder and p.is_dir():
            raise CliError(f"{path}: is a folder (expected an output {kind} name)")
        if not force:
            raise CliError(f"{path}: already exists; pass --force to replace it")
    try:
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as e:
        raise CliError(f"{path}: cannot write in {str(parent)!r} ({e.strerror or e})") from None
    return p


# types numpy cannot store in .npy/.npz (ml_dtypes' are written as raw bytes), with the type
# that holds each of their values exactly
_STORAGE = {DType.bfloat16: np.float32, DType.float8_e4m3fn: np.float32,
            DType.float8_e5m2: np.float32, DType.float4_e2m1fn: np.float32,
            DType.int4: np.int8, DType.uint4: np.uint8}


def storable(a: np.ndarray) -> np.ndarray:
    """``a``, widened to a type ``.npz`` can hold when numpy lacks its own (e.g. bfloat16)."""
    widen = next((np.dtype(w) for d, w in _STORAGE.items() if a.dtype == d.numpy), None)
    return a if widen is None else a.astype(widen)


def write_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` to the ``.npz`` file ``path`` exactly (no suffix added), atomically."""
    # numpy.savez takes the names as keyword arguments, so an output called "file" or
    # "allow_pickle" would clash with its parameters; the archive is written member by member
    with replacing(path) as tmp, open(tmp, "xb") as f, \
            zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as archive:
        for name, a in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asarray(a), allow_pickle=False)
