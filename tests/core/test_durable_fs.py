"""coreai_core.durable_fs.replace, the project's one atomic replace (used by artifacts, the
command line's output files and the .aimodel export), and replacing(), built on it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coreai_core import durable_fs as fs


def test_replace_swaps_files_and_folders_atomically(tmp_path: Path) -> None:
    """A file over a file, a folder onto a missing path, a folder over a folder (swapped in
    one step: the old one is returned, at the source path, for the caller to remove)."""
    (tmp_path / "new.txt").write_text("new")
    (tmp_path / "old.txt").write_text("old")
    assert fs.replace(tmp_path / "new.txt", tmp_path / "old.txt") is None
    assert (tmp_path / "old.txt").read_text() == "new" and not (tmp_path / "new.txt").exists()
    for name, text in (("a", "1"), ("b", "2")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "f").write_text(text)
    assert fs.replace(tmp_path / "a", tmp_path / "c") is None
    assert fs.replace(tmp_path / "b", tmp_path / "c") == tmp_path / "b"
    assert (tmp_path / "c" / "f").read_text() == "2"
    assert (tmp_path / "b" / "f").read_text() == "1"
    fs.remove_tree(tmp_path / "b")
    assert sorted(os.listdir(tmp_path)) == ["c", "old.txt"]


class Interrupted(Exception):
    pass


def test_replacing_writes_the_whole_file_or_nothing(tmp_path: Path) -> None:
    path = tmp_path / "out.npz"
    path.write_bytes(b"old")
    with pytest.raises(Interrupted), fs.replacing(path) as tmp:
        tmp.write_bytes(b"half")
        raise Interrupted
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["out.npz"]
    with fs.replacing(path) as tmp:
        tmp.write_bytes(b"new")
        assert path.read_bytes() == b"old"  # not before the block ends
    assert path.read_bytes() == b"new" and os.listdir(tmp_path) == ["out.npz"]
