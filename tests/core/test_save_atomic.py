"""save() is atomic and deletes only what it wrote: faults (an exception or SIGKILL) at every
disk-changing step, concurrent saves, folders that are not artifacts, user files, programs
whose text the parser would reject, artifacts of format 1 (also with a symlinked folder)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

from coreai_core import ArtifactError, Program, TensorType, load
from coreai_core import serialization as ser
from coreai_core.dialects import coreai
from tests.core.save_faults import inject, program
from tests.core.strategies import programs

ROOT = Path(__file__).resolve().parents[2]
A, B = program("a"), program("b")


def listing(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def clean_listing(path: Path) -> list[str]:
    """What a complete artifact folder holds: the manifest and one revision."""
    rev = json.loads((path / "manifest.json").read_text())["revision"]
    return sorted(["manifest.json", rev, f"{rev}/program.coreai", f"{rev}/weights.safetensors"])


def steps_of(save_over_old: bool, tmp_path: Path) -> list[str]:
    path = tmp_path / "count" / "m.coreai"
    if save_over_old:
        A.save(path)
    with inject(None, lambda name: None) as taken:
        B.save(path)
    return taken


def test_the_steps_of_a_save(tmp_path: Path) -> None:
    """The steps the fault tests below walk through, one by one."""
    revision = ["make_dir", "write_file", "write_safetensors", "fsync_dir"]
    switch = ["write_file", "replace", "fsync_dir"]
    # the folder first (over an old artifact, its make_dir finds it exists), then the old
    # revision is removed
    assert steps_of(True, tmp_path / "old") == [
        "make_dir", *revision, *switch, "remove_file", "remove_file", "remove_dir"]
    assert steps_of(False, tmp_path / "new") == ["make_dir", "fsync_dir", *revision, *switch]


class Injected(OSError):
    pass


def _raise(name: str) -> None:
    raise Injected(f"injected failure at {name}")


@pytest.mark.parametrize("over_old", [True, False], ids=["over-old", "fresh"])
def test_an_exception_at_any_step_leaves_the_old_or_the_new_artifact(
        tmp_path: Path, over_old: bool) -> None:
    steps = steps_of(over_old, tmp_path)
    switch = steps.index("replace")
    for at, name in enumerate(steps):
        path = tmp_path / f"at{at}" / "m.coreai"
        if over_old:
            A.save(path)
        with inject(at, _raise):
            try:
                B.save(path)
                raised = False
            except Injected:
                raised = True
        # before the switch the old artifact stays (none for a fresh save), after it the new
        expected = B if at > switch else A if over_old else None
        if expected is None:
            assert not path.exists(), f"fault at step {at} ({name}): {listing(path)}"
        else:
            assert load(path) == expected, f"fault at step {at} ({name})"
        # a save fails only if the fault came before the switch or at its fsync
        assert raised == (at <= switch + 1), f"fault at step {at} ({name})"
        if name not in ("remove_file", "remove_dir"):  # a failed removal leaves its file
            if path.exists():
                assert listing(path) == clean_listing(path), f"fault at step {at} ({name})"
            assert sorted(p.name for p in path.parent.iterdir()) in ([], ["m.coreai"])
        B.save(path)  # the next save cleans up whatever the failure left
        assert listing(path) == clean_listing(path)
        assert load(path) == B


@pytest.mark.parametrize("over_old", [True, False], ids=["over-old", "fresh"])
def test_a_kill_at_any_step_leaves_the_old_or_the_new_artifact(
        tmp_path: Path, over_old: bool) -> None:
    steps = steps_of(over_old, tmp_path)
    switch = steps.index("replace")
    paths = [tmp_path / f"at{at}" / "m.coreai" for at in range(len(steps) + 1)]
    for path in paths:
        if over_old:
            A.save(path)
    # a process saves b to paths[i] and is killed before step i (the last one completes)
    run = subprocess.run([sys.executable, "-m", "tests.core.save_faults", "kill-each", "b",
                          *map(str, paths)], cwd=ROOT, timeout=600, capture_output=True,
                         text=True, check=True)
    statuses = json.loads(run.stdout)
    assert statuses == [signal.SIGKILL] * len(steps) + [0]
    for at, path in enumerate(paths):
        if at > switch:
            assert load(path) == B
        elif over_old:
            assert load(path) == A
        elif path.exists():  # a first save killed early leaves a folder without a manifest
            with pytest.raises(ArtifactError, match=r"manifest\.json is missing \(a save to "
                                                    r"it may have been interrupted"):
                load(path)
        program("c").save(path)  # the next save recognizes the leftovers and removes them
        assert listing(path) == clean_listing(path)
        assert load(path) == program("c")


@pytest.mark.parametrize("over_old", [True, False], ids=["over-old", "fresh"])
def test_a_kill_while_the_weights_are_written(tmp_path: Path, over_old: bool) -> None:
    """safetensors writes through a temporary file in the revision folder: killed then, the
    file is left behind, and the next save recognizes it as its own."""
    path = tmp_path / "m.coreai"
    if over_old:
        A.save(path)
    for _ in range(3):  # the write may finish before the watcher sees the temporary file
        code = subprocess.run([sys.executable, "-m", "tests.core.save_faults",
                               "kill-mid-write", str(path)], cwd=ROOT, timeout=300).returncode
        if code != 3:
            break
    assert code == -signal.SIGKILL
    left = [p.name for p in path.glob("rev-*/.tmp*")]
    assert len(left) == 1, listing(path)
    if over_old:
        assert load(path) == A
    B.save(path)
    assert listing(path) == clean_listing(path)
    assert load(path) == B


def test_concurrent_saves_never_corrupt_the_artifact(tmp_path: Path) -> None:
    path = tmp_path / "m.coreai"
    A.save(path)
    c = program("c")
    children = [subprocess.Popen([sys.executable, "-m", "tests.core.save_faults", "loop",
                                  v, "10", str(path)], cwd=ROOT) for v in ("b", "c")]
    loads = 0
    while any(child.poll() is None for child in children):
        got = load(path)  # every load during the saves gives one complete program
        assert got in (A, B, c)
        loads += 1
    assert [child.wait() for child in children] == [0, 0]
    assert loads > 0
    got = load(path)
    assert got in (B, c)
    assert listing(path) == clean_listing(path)


def test_a_folder_that_is_not_an_artifact_is_refused_and_untouched(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "manifest.json").write_text("{}")
    (proj / "train.py").write_text("print('mine')")
    before = {p: p.read_bytes() for p in proj.iterdir()}
    with pytest.raises(FileExistsError, match=r"holds a manifest\.json that is not a coreai "
                                              r"artifact's"):
        A.save(proj)
    (proj / "manifest.json").unlink()
    with pytest.raises(FileExistsError, match=r"not a coreai artifact \(it has no manifest"):
        A.save(proj)
    (proj / "manifest.json").write_text("{")
    with pytest.raises(FileExistsError, match="not valid JSON"):
        A.save(proj)
    (proj / "manifest.json").write_text("{}")
    assert {p: p.read_bytes() for p in proj.iterdir()} == before
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match="not a folder"):
        A.save(tmp_path / "file")
    os.symlink(proj, tmp_path / "link")
    with pytest.raises(FileExistsError, match="symlink"):
        A.save(tmp_path / "link")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "link", "proj"]


def test_a_loaded_program_saved_over_its_own_artifact(tmp_path: Path) -> None:
    """The loaded weights are memory-mapped from the revision the save replaces (and
    removes): the save reads them before the switch, the program keeps working after it."""
    big = np.arange(ser.MMAP_BYTES // 2, dtype=np.float32)  # larger than MMAP_BYTES
    p = Program()
    with p.graph("main", inputs={"x": TensorType((1,), "float32")}) as g:
        w = coreai.constant(big, name="big")
        g.outputs({"y": coreai.broadcasting_add(g["x"], coreai.reduce_sum(w, axes=(0,)))})
    path = tmp_path / "m.coreai"
    p.save(path)
    loaded = load(path)
    assert isinstance(loaded.weights["big"], np.memmap)
    loaded.save(path)
    x = {"x": np.zeros(1, np.float32)}
    np.testing.assert_array_equal(loaded.run(x)["y"], p.run(x)["y"])
    again = load(path)
    assert again == p
    assert listing(path) == clean_listing(path)


def test_an_empty_folder_becomes_an_artifact(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    A.save(tmp_path / "m")
    assert load(tmp_path / "m") == A


def test_user_files_in_an_artifact_folder_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "m.coreai"
    A.save(path)
    old_rev = json.loads((path / "manifest.json").read_text())["revision"]
    (path / "README.md").write_text("notes")
    (path / "extra").mkdir()
    (path / "extra" / "data.bin").write_bytes(b"\x00")
    (path / old_rev / "mine.txt").write_text("a user file inside a revision")
    B.save(path)
    assert load(path) == B
    assert (path / "README.md").read_text() == "notes"
    assert (path / "extra" / "data.bin").read_bytes() == b"\x00"
    # the old revision's own files are gone; the folder stays for the user's file
    assert listing(path / old_rev) == ["mine.txt"]


def _nested_ifs(depth: int, capture: bool = False) -> Program:
    """``depth`` nested ``if_`` regions computing ``-x``; with ``capture`` the innermost
    region reads the graph's input ``x`` directly instead of through its operands."""
    p = Program()
    with p.graph("main", inputs={"c": TensorType((), "bool"),
                                 "x": TensorType((2,), "float32")}) as g:
        def branch(level: int):
            def body(c, a):
                if level == 0:
                    return coreai.neg(g["x"] if capture else a)
                (out,) = coreai.if_(c, [c, a], branch(level - 1), lambda c2, b: b)
                return out
            return body

        (y,) = coreai.if_(g["c"], [g["c"], g["x"]], branch(depth - 1), lambda c, b: b)
        g.outputs({"y": y})
    return p


@pytest.mark.parametrize(("depth", "capture", "problem"), [
    (49, False, "nest"),  # the parser's nesting limit is 48
    (2, True, "region uses %x of the enclosing graph")])
def test_a_program_the_parser_would_reject_is_not_saved(
        tmp_path: Path, depth: int, capture: bool, problem: str) -> None:
    """Programs the builders accept and the runtime runs, but whose text the parser
    rejects: save refuses before touching the old artifact."""
    path = tmp_path / "m.coreai"
    A.save(path)
    before = {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    rejected = _nested_ifs(depth, capture)
    x = np.array([1.5, -2.0], np.float32)
    np.testing.assert_array_equal(rejected.run({"c": np.array(True), "x": x})["y"], -x)
    with pytest.raises(ArtifactError, match=rf"cannot save .*m\.coreai: the saved program "
                                            rf"would not load back: program\.coreai: .*{problem}"):
        rejected.save(path)
    assert {p: p.read_bytes() for p in path.rglob("*") if p.is_file()} == before
    assert load(path) == A
    accepted = _nested_ifs(48)
    accepted.save(path)
    assert load(path) == accepted


def test_a_program_nested_deeper_than_the_printer_recurses_is_not_saved(
        tmp_path: Path) -> None:
    path = tmp_path / "m.coreai"
    A.save(path)
    with pytest.raises(ArtifactError, match=r"cannot save .*m\.coreai: the program's regions "
                                            r"are nested too deeply to write as text"):
        _nested_ifs(300).save(path)
    assert load(path) == A
    assert listing(path) == clean_listing(path)


FORMAT_1 = Path(__file__).parent / "golden" / "format1_artifact"


def test_a_format_1_artifact_loads_and_is_replaced_by_format_2(tmp_path: Path) -> None:
    """``golden/format1_artifact`` was written by coreai-torch 0.1.0 (format 1: .npy
    weights) from ``program("a")``."""
    assert load(FORMAT_1) == A
    path = tmp_path / "old.coreai"
    shutil.copytree(FORMAT_1, path)
    (path / "weights" / "mine.npy").write_bytes(b"user")
    B.save(path)
    assert load(path) == B
    # format 1's files are gone, the user's file (and so its folder) is kept
    assert sorted(p for p in listing(path) if not p.startswith("rev-")) == [
        "manifest.json", "weights", "weights/mine.npy"]


@settings(max_examples=30)
@given(p=programs(dynamic=True))
def test_random_programs_save_and_load_back_equal(p: Program) -> None:
    """save's check that the artifact loads back never rejects a valid program."""
    with tempfile.TemporaryDirectory() as tmp:
        p.save(Path(tmp) / "m")
        assert load(Path(tmp) / "m") == p


# -- format 1 with weights/ or state/ a symlink (e.g. weights kept on another disk) -------------

def linked_format_1(tmp: Path, folder: str) -> tuple[Path, Path]:
    """A copy of the golden format-1 artifact whose ``folder`` (``weights`` or ``state``) was
    moved out of it and replaced by a symlink to where it went."""
    path = tmp / "old.coreai"
    shutil.copytree(FORMAT_1, path)
    outside = tmp / "other-disk" / folder
    outside.parent.mkdir()
    os.replace(path / folder, outside)
    os.symlink(outside, path / folder)
    return path, outside


def contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def refused_for_its_link(path: Path, folder: str) -> None:
    with pytest.raises(ArtifactError, match=rf"^{folder}: is a symlink \(to '.*other-disk/"
                                            rf"{folder}'\); an artifact holds only real folders "
                                            "and regular files, and load never follows"):
        load(path)


@pytest.mark.parametrize("folder", ["weights", "state"])
def test_a_format_1_artifact_with_a_symlinked_folder(tmp_path: Path, folder: str) -> None:
    """Loading refuses it, naming the link; saving over it converts it to format 2 without
    deleting anything through the link: the link and the files it points to are the user's
    (format 1 never wrote a link) and are kept."""
    path, outside = linked_format_1(tmp_path, folder)
    before = contents(outside)
    assert len(before) == {"weights": 5, "state": 1}[folder]
    refused_for_its_link(path, folder)
    B.save(path)
    assert load(path) == B
    assert contents(outside) == before
    assert (path / folder).is_symlink() and os.readlink(path / folder) == str(outside)
    other = {"weights": "state", "state": "weights"}[folder]  # the real folder's files go
    assert not (path / other).exists() and not (path / "program.coreai").exists()


@pytest.mark.parametrize("folder", ["weights", "state"])
def test_faults_saving_over_a_format_1_artifact_with_a_symlinked_folder(
        tmp_path: Path, folder: str) -> None:
    """An exception at each step of the save, then a SIGKILL at each: the files behind the
    link are never touched, and the path holds the old (refused for its link) or the new
    artifact."""
    path, _ = linked_format_1(tmp_path / "count", folder)
    with inject(None, lambda name: None) as steps:
        B.save(path)
    switch = steps.index("replace")
    assert steps[switch + 2:] == ["remove_file"] * (7 - len(contents(tmp_path / "count" /
                                                                      "other-disk" / folder))) \
        + ["remove_dir"]  # the old files outside the link, then the real folder
    for at, name in enumerate(steps):
        path, outside = linked_format_1(tmp_path / f"raise{at}", folder)
        before = contents(outside)
        with inject(at, _raise), contextlib.suppress(Injected):
            B.save(path)
        assert contents(outside) == before, f"fault at step {at} ({name})"
        if at > switch:
            assert load(path) == B, f"fault at step {at} ({name})"
        else:
            refused_for_its_link(path, folder)
        B.save(path)
        assert load(path) == B and contents(outside) == before
    made = [linked_format_1(tmp_path / f"kill{at}", folder) for at in range(len(steps) + 1)]
    before = contents(made[0][1])
    run = subprocess.run([sys.executable, "-m", "tests.core.save_faults", "kill-each", "b",
                          *(str(path) for path, _ in made)], cwd=ROOT, timeout=600,
                         capture_output=True, text=True, check=True)
    assert json.loads(run.stdout) == [signal.SIGKILL] * len(steps) + [0]
    for at, (path, outside) in enumerate(made):
        assert contents(outside) == before, f"killed at step {at}"
        if at > switch:
            assert load(path) == B, f"killed at step {at}"
        else:
            refused_for_its_link(path, folder)
        program("c").save(path)
        assert load(path) == program("c") and contents(outside) == before
