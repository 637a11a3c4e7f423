"""Reading an artifact: the manifest, the checked files of its current revision, and the
assembly of text and weights into a program (which :func:`save` also runs before writing).

Every malformed input raises :class:`ArtifactError` naming the file; see docs/saving.md.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import re
import stat
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from coreai_core._ir import ProgramData
from coreai_core._safetensors_io import TensorLimit, decode, load_json, read_stored, some
from coreai_core._text_parser import DEFAULT_MAX_BYTES, parse_into
from coreai_core.errors import ArtifactError, CoreAIError
from coreai_core.verifier import verify

__all__ = ["FORMAT", "FORMAT_VERSION", "MANIFEST", "PROGRAM_FILE", "REVISION_FILES",
           "REVISION_NAME", "WEIGHTS_FILE", "Manifest", "artifact_root", "assemble",
           "check_revision", "digest", "first_symlink", "load_into", "no_symlink",
           "raw_manifest", "read_manifest", "writer"]

FORMAT = "coreai-artifact"
FORMAT_VERSION = 2
MANIFEST = "manifest.json"
PROGRAM_FILE = "program.coreai"
WEIGHTS_FILE = "weights.safetensors"
REVISION_FILES = (PROGRAM_FILE, WEIGHTS_FILE)
REVISION_NAME = re.compile(r"rev-[0-9a-f]{16}")
# The shortest weight declaration of the text form, ``weight@a:tensor<i1>``: every tensor
# of a weights file is a weight its program.coreai declares, so the text's size bounds them.
MIN_DECLARATION_BYTES = 19
# A manifest lists two files; anything much larger is not one.
MAX_MANIFEST_BYTES = 1 << 20
_CHUNK = 1 << 20
_ATTEMPTS = 5
_SHA256 = re.compile(r"[0-9a-f]{64}")


def writer() -> str:
    """``coreai-torch <version>``, recorded in each manifest."""
    try:
        return f"coreai-torch {importlib.metadata.version('coreai-torch')}"
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from a checkout
        return "coreai-torch (version unknown)"


def digest(path: Path) -> str:
    """SHA-256 of a file, hex."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


@attrs.frozen
class Manifest:
    """A checked format-2 manifest: the current revision folder and its files' sizes and
    SHA-256 checksums."""

    revision: str
    files: dict[str, tuple[int, str]]
    writer: str


def raw_manifest(root: Path) -> Any:
    """The JSON value in ``root/manifest.json`` (size-limited, never deeper than Python's
    recursion limit)."""
    path = root / MANIFEST
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ArtifactError(f"{root}: {MANIFEST} is not a regular file")
        if info.st_size > MAX_MANIFEST_BYTES:
            raise ArtifactError(f"{MANIFEST} is larger than {MAX_MANIFEST_BYTES} bytes; "
                                "not a coreai manifest")
        data = path.read_bytes()
    except FileNotFoundError:
        raise ArtifactError(f"{root} is not a coreai artifact: {MANIFEST} is missing (a "
                            "save to it may have been interrupted: save again)") from None
    except OSError as e:
        raise ArtifactError(f"{MANIFEST}: cannot read: {e.strerror or e}") from None
    return load_json(data, MANIFEST)


def read_manifest(root: Path, raw: Any = None) -> Manifest:
    """The format-2 manifest of the artifact folder ``root`` (``raw``: its JSON value, if
    read already), checked field by field."""
    if raw is None:
        raw = raw_manifest(root)
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ArtifactError(f"{MANIFEST}: not a {FORMAT} manifest")
    version, wrote = raw.get("version"), raw.get("writer")
    if version != FORMAT_VERSION:
        by = f" by {wrote}" if isinstance(wrote, str) else ""
        raise ArtifactError(f"{MANIFEST}: artifact format {version!r}{by}; this {writer()} "
                            f"reads formats 1 and {FORMAT_VERSION}: use the version that "
                            "wrote it")
    if "revision" not in raw and "weights" in raw:
        raise ArtifactError(f"{MANIFEST}: 'version' is {FORMAT_VERSION}, but the manifest is a "
                            "format 1 one (it lists 'weights'; format 2 lists a 'revision'): "
                            "the version field was edited, or the manifest is not this "
                            "artifact's")
    revision = raw.get("revision")
    if not isinstance(revision, str) or not REVISION_NAME.fullmatch(revision):
        raise ArtifactError(f"{MANIFEST}: 'revision' must be a folder name like "
                            f"'rev-0123456789abcdef', got {_short(revision)}")
    files = raw.get("files")
    if not isinstance(files, dict) or sorted(files) != sorted(REVISION_FILES):
        raise ArtifactError(f"{MANIFEST}: 'files' must list exactly {list(REVISION_FILES)}, "
                            f"got {_short(files)}")
    checked: dict[str, tuple[int, str]] = {}
    for name, entry in files.items():
        size = entry.get("size") if isinstance(entry, dict) else None
        sha = entry.get("sha256") if isinstance(entry, dict) else None
        if type(size) is not int or size < 0 or not isinstance(sha, str) \
                or not _SHA256.fullmatch(sha):
            raise ArtifactError(f"{MANIFEST}: file {name!r} needs a 'size' (int) and a "
                                f"'sha256' (64 hex digits), got {_short(entry)}")
        checked[name] = (size, sha)
    return Manifest(revision, checked, wrote if isinstance(wrote, str) else "unknown")


def first_symlink(root: Path, rel: str) -> str | None:
    """The first component of the relative path ``rel`` inside ``root`` that is a symlink
    (as a path relative to ``root``), or None. Every component is checked with ``lstat``,
    not only the last: a linked folder leads out of the artifact as surely as a linked file.
    Raises ``FileNotFoundError`` if a component is missing."""
    path, parts = root, rel.split("/")
    for i, part in enumerate(parts):
        path = path / part
        if stat.S_ISLNK(os.lstat(path).st_mode):
            return "/".join(parts[:i + 1])
    return None


def no_symlink(root: Path, rel: str) -> Path:
    """``root/rel``, or an ArtifactError naming the symlink on its way: an artifact holds
    only real folders and regular files, and reading one never follows a link out of it."""
    link = first_symlink(root, rel)
    if link is None:
        return root / rel
    try:
        to = f" (to {_short(os.readlink(root / link), 400)})"
    except OSError:
        to = ""
    raise ArtifactError(f"{link}: is a symlink{to}; an artifact holds only real folders and "
                        "regular files, and load never follows a symlink out of it: replace "
                        "the link by a copy of what it points to")


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_revision(root: Path, manifest: Manifest) -> Path:
    """The current revision folder, after checking its files: regular, the listed size and
    SHA-256, and nothing else in the folder."""
    try:
        folder = no_symlink(root, manifest.revision)
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            raise ArtifactError(f"{manifest.revision}: not a folder")
        present = sorted(os.listdir(folder))
    except FileNotFoundError:
        raise ArtifactError(f"{manifest.revision}: the folder named by {MANIFEST} is "
                            "missing") from None
    except OSError as e:
        raise ArtifactError(f"{manifest.revision}: cannot read: {e.strerror or e}") from None
    for name in present:
        if name not in manifest.files:
            raise ArtifactError(f"{manifest.revision}/{name}: file is not listed in {MANIFEST}")
    for name, (size, sha) in manifest.files.items():
        check_listed_file(root, f"{manifest.revision}/{name}", size, sha, MANIFEST)
    return folder


def check_listed_file(root: Path, rel: str, size: int, sha: str, manifest: str) -> Path:
    """The path of file ``rel`` below ``root`` after checking it is what ``manifest`` lists:
    a regular file (no symlink on the way) of ``size`` bytes whose SHA-256 is ``sha``;
    otherwise an ArtifactError naming the file and what differs."""
    try:
        path = no_symlink(root, rel)
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ArtifactError(f"{rel}: not a regular file")
        if info.st_size != size:
            raise ArtifactError(f"{rel}: size {info.st_size} bytes, {manifest} says {size} "
                                "(truncated or modified)")
        if digest(path) != sha:
            raise ArtifactError(f"{rel}: SHA-256 checksum does not match {manifest} "
                                "(file modified)")
    except FileNotFoundError:
        raise ArtifactError(f"{rel}: file is missing") from None
    except OSError as e:
        raise ArtifactError(f"{rel}: cannot read: {e.strerror or e}") from None
    return path


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(
        np.ascontiguousarray(a).reshape(-1).view(np.uint8),
        np.ascontiguousarray(b).reshape(-1).view(np.uint8))


def assemble(program: ProgramData, text: str, weights: dict[str, np.ndarray], *,
             max_bytes: int | None = DEFAULT_MAX_BYTES) -> None:
    """Parse ``text`` into the empty ``program``, bind ``weights`` (every bound weight, by
    name), verify it and check that weights printed inline equal their stored data.
    ``max_bytes`` bounds what the text may make the parser allocate (see ``parse``).

    :func:`load_into` runs this on the files, :func:`save` on what it is about to write.
    """
    try:
        parse_into(program, text, weights=weights, max_bytes=max_bytes)
        verify(program)
    except CoreAIError as e:
        raise ArtifactError(f"{PROGRAM_FILE}: {e}") from None
    extra = sorted(set(weights) - set(program.weight_types))
    if extra:
        raise ArtifactError(f"{WEIGHTS_FILE} holds weights {PROGRAM_FILE} does not declare: "
                            f"{some(extra)}")
    for name in program.weight_types:
        inline, data = program.weights.get(name), weights.get(name)
        if data is None:
            if inline is not None:
                raise ArtifactError(f"weight {name!r}: {PROGRAM_FILE} gives its data, but "
                                    f"{WEIGHTS_FILE} does not hold it")
            continue
        t = program.weight_types[name]
        if data.shape != t.shape or data.dtype != t.element_type.numpy:
            raise ArtifactError(f"weight {name!r}: {WEIGHTS_FILE} holds {data.dtype}"
                                f"{list(data.shape)}, {PROGRAM_FILE} declares {t}")
        if inline is not None and inline is not data and not _same(np.asarray(inline), data):
            raise ArtifactError(f"weight {name!r}: the data in {PROGRAM_FILE} differs from "
                                f"{WEIGHTS_FILE}")
        program.weights[name] = data
    program.reset_state()
    program.invalidate()


def artifact_root(path: str | os.PathLike[str]) -> Path:
    """``path`` as a folder, or an ArtifactError saying why it is not an artifact."""
    root = Path(path)
    try:
        if not root.is_dir():
            what = "does not exist" if not root.exists() else "is not a folder"
            raise ArtifactError(f"{_short(str(path))}: not a coreai artifact ({what})")
    except OSError as e:  # e.g. a name too long for the filesystem
        raise ArtifactError(f"{_short(str(path))}: not a coreai artifact "
                            f"({e.strerror or e})") from None
    return root


def load_into(program: ProgramData, root: Path, raw: Any, *,
              max_bytes: int | None = DEFAULT_MAX_BYTES) -> None:
    """Load the format-2 artifact folder ``root`` (``raw``: its manifest's JSON value) into
    the empty ``program``, checking it completely first. Raises :class:`ArtifactError`
    naming the file for anything malformed."""
    manifest = read_manifest(root, raw)
    for _ in range(_ATTEMPTS):
        try:
            text, weights = _read_revision(root, manifest)
            break
        except ArtifactError:
            # a concurrent save replaced the revision while it was read: read the new one
            again = read_manifest(root)
            if again == manifest:
                raise
            manifest = again
    else:
        raise ArtifactError(f"{root}: replaced by {_ATTEMPTS} concurrent saves while it was "
                            "loaded; load it again")
    assemble(program, text, weights, max_bytes=max_bytes)


def _read_revision(root: Path, manifest: Manifest) -> tuple[str, dict[str, np.ndarray]]:
    """The checked text and weights of the revision ``manifest`` names."""
    folder = check_revision(root, manifest)
    try:
        text = (folder / PROGRAM_FILE).read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ArtifactError(f"{PROGRAM_FILE}: not UTF-8 text ({e})") from None
    except OSError as e:
        raise ArtifactError(f"{PROGRAM_FILE}: cannot read: {e.strerror or e}") from None
    text_bytes = manifest.files[PROGRAM_FILE][0]
    most = text_bytes // MIN_DECLARATION_BYTES
    limit = TensorLimit(most, f"{PROGRAM_FILE} ({text_bytes} bytes) can declare at most {most} "
                              f"weights (a declaration takes at least {MIN_DECLARATION_BYTES} "
                              "bytes)")
    stored, metadata = read_stored(folder / WEIGHTS_FILE, WEIGHTS_FILE, limit)
    return text, decode(stored, metadata, WEIGHTS_FILE)
