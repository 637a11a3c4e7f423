"""``export_aimodel`` and ``Program.save_asset`` are atomic and leave nothing behind: an
exception or a SIGKILL at every step leaves the complete old or the complete new asset; the
scratch folder a killed export leaves is removed by the next one (and nothing else is); a
full disk is an exception."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from coreai_torch.aimodel import _apple
from coreai_torch.aimodel import export as export_module
from coreai_torch.aimodel._checks import check_asset
from coreai_torch.errors import AimodelExportError
from tests.interop.export_faults import inject, write

ROOT = Path(__file__).resolve().parents[2]
WRITERS = ["export_aimodel", "save_asset"]


class Injected(OSError):
    """A disk error (the cleanup after the switch ignores those: the new asset is in place)."""


def _raise(name: str) -> None:
    raise Injected(name)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The program bytes of each variant's asset (the bytecode is deterministic)."""
    folder = tmp_path_factory.mktemp("ref")
    out = {}
    for v in "abc":
        write("export_aimodel", v, folder / f"{v}.aimodel")
        out[v] = (folder / f"{v}.aimodel" / "main.mlirb").read_bytes()
    return out


def holds(path: Path, reference: dict[str, bytes]) -> str | None:
    """Which variant's complete asset ``path`` holds (None if nothing is there)."""
    if not path.exists():
        return None
    check_asset(path)  # complete and consistent
    found = [v for v, data in reference.items() if (path / "main.mlirb").read_bytes() == data]
    assert len(found) == 1, os.listdir(path)
    return found[0]


def steps_of(writer: str, folder: Path, over_old: bool) -> list[str]:
    path = folder / "m.aimodel"
    if over_old:
        write(writer, "a", path)
    with inject(None, lambda name: None) as taken:
        write(writer, "b", path)
    return taken


def test_the_steps_of_an_export(tmp_path: Path) -> None:
    steps = ["make_dir", "save_program_asset", "write_custom_metadata", "fsync_tree", "replace",
             "remove_tree"]
    assert steps_of("export_aimodel", tmp_path / "old", True) == steps
    assert steps_of("save_asset", tmp_path / "new", False) == steps


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("over_old", [True, False], ids=["over-old", "fresh"])
def test_an_exception_at_any_step_leaves_the_old_or_the_new_asset(
        tmp_path: Path, reference: dict[str, bytes], writer: str, over_old: bool) -> None:
    steps = steps_of(writer, tmp_path / "count", over_old)
    switch = steps.index("replace")
    for at, name in enumerate(steps):
        path = tmp_path / f"at{at}" / "m.aimodel"
        if over_old:
            write(writer, "a", path)
        with inject(at, _raise):
            try:
                write(writer, "b", path)
                raised = False
            except (Injected, AimodelExportError):  # the latter wraps errors of Apple's writes
                raised = True
        expected = "b" if at > switch else "a" if over_old else None
        assert holds(path, reference) == expected, f"fault at step {at} ({name})"
        assert raised == (at <= switch), f"fault at step {at} ({name})"  # cleanup is quiet
        left = sorted(os.listdir(path.parent))
        if name == "remove_tree":  # the old asset's scratch folder stays, for the next export
            assert len(left) == 2, left
        else:
            assert left == ([] if expected is None else ["m.aimodel"]), f"step {at}: {left}"
        write(writer, "c", path)
        assert holds(path, reference) == "c"
        assert os.listdir(path.parent) == ["m.aimodel"]


def test_a_kill_at_any_step_leaves_the_old_or_the_new_asset(
        tmp_path: Path, reference: dict[str, bytes]) -> None:
    """Both writers, fresh and over an old asset, killed before each step in turn (and once
    not at all); one process forks the exports, so the imports are paid once."""
    runs, checks = [], []
    for writer in WRITERS:
        for over_old in (True, False):
            steps = steps_of(writer, tmp_path / f"count-{writer}-{over_old}", over_old)
            switch = steps.index("replace")
            for at in range(len(steps) + 1):
                path = tmp_path / f"{writer}-{over_old}-at{at}" / "m.aimodel"
                path.parent.mkdir()
                if over_old:
                    write(writer, "a", path)
                runs.append(f"{writer}:{at}:{path}")
                expected = "b" if at > switch else "a" if over_old else None
                checks.append((path, expected, at == len(steps)))
    run = subprocess.run([sys.executable, "-m", "tests.interop.export_faults", "b", *runs],
                         cwd=ROOT, timeout=900, capture_output=True, text=True, check=True)
    statuses = json.loads(run.stdout)
    for (path, expected, completes), status, name in zip(checks, statuses, runs, strict=True):
        assert status == (0 if completes else signal.SIGKILL), name
        assert holds(path, reference) == expected, f"killed: {name}"
        write("export_aimodel", "c", path)  # the next export removes what the killed one left
        assert holds(path, reference) == "c"
        assert os.listdir(path.parent) == ["m.aimodel"], f"killed: {name}"


def test_only_dead_exports_scratch_folders_are_removed(tmp_path: Path,
                                                       reference: dict[str, bytes]) -> None:
    path = tmp_path / "m.aimodel"
    live = tmp_path / ".m.aimodel.export-0123456789abcdef"  # a live export's: locked
    dead = tmp_path / ".m.aimodel.export-fedcba9876543210"
    for folder in (live, dead):
        folder.mkdir()
        (folder / "m.aimodel").mkdir()
    mine = [tmp_path / ".m.aimodel.export-notmine", tmp_path / ".m.aimodel.export-0000"]
    for folder in mine:
        folder.mkdir()
    (tmp_path / ".m.aimodel.export-1111111111111111").write_text("a file, not a folder")
    held = export_module._try_lock(live)
    assert held is not None
    try:
        write("export_aimodel", "a", path)
        assert live.exists() and not dead.exists()
    finally:
        os.close(held)
    write("export_aimodel", "b", path)
    assert holds(path, reference) == "b"
    assert sorted(os.listdir(tmp_path)) == sorted(
        [".m.aimodel.export-1111111111111111", "m.aimodel", *(f.name for f in mine)])


def test_an_earlier_releases_leftovers_are_removed(tmp_path: Path,
                                                   reference: dict[str, bytes]) -> None:
    """Exports before this layout staged in ``tempfile.mkdtemp(prefix=".m.aimodel.")`` and
    renamed the old asset aside into it; killed, they left a full copy of a model there."""
    path = tmp_path / "m.aimodel"
    write("export_aimodel", "a", path)
    left = tmp_path / ".m.aimodel.k2_x9q0a"
    left.mkdir()
    shutil.copytree(path, left / "previous.aimodel")
    shutil.copytree(path, left / "m.aimodel")
    kept = [tmp_path / ".m.aimodel.abcdefgh", tmp_path / ".m.aimodel.12345678"]
    kept[0].mkdir()
    (kept[0] / "notes.txt").write_text("a user's")  # not what the old export wrote
    shutil.copytree(path, kept[1] / "m.aimodel")
    (kept[1] / "m.aimodel" / "extra.bin").write_bytes(b"x")
    write("export_aimodel", "b", path)
    assert holds(path, reference) == "b"
    assert sorted(os.listdir(tmp_path)) == sorted(["m.aimodel", *(k.name for k in kept)])


def test_a_full_disk_is_an_exception(tmp_path: Path, reference: dict[str, bytes],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The bytecode's copy fails as on a full disk: the export raises, the old asset stays,
    nothing is left behind."""
    path = tmp_path / "m.aimodel"
    write("export_aimodel", "a", path)

    def full(source: int, target: Path) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))

    monkeypatch.setattr(_apple, "_copy_out", full)
    monkeypatch.setattr(export_module, "_through_memory", lambda program, folder: True)
    with pytest.raises(AimodelExportError, match=r"cannot write .*m\.aimodel: No space left on "
                                                 r"device \(\d+ bytes free on its disk\)"):
        write("export_aimodel", "b", path)
    assert holds(path, reference) == "a"
    assert os.listdir(tmp_path) == ["m.aimodel"]


def _mount_tiny_tmpfs(folder: Path) -> bool:
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(folder)],
                          capture_output=True)
    return done.returncode == 0


def test_a_full_disk_is_an_exception_on_a_real_filesystem(tmp_path: Path) -> None:
    """On a 256 KiB tmpfs (where this test may mount one): an 800 KB weight does not fit.
    Before, LLVM ended the process ("LLVM ERROR: IO failure") and left the staged copy."""
    disk = tmp_path / "disk"
    if os.geteuid() != 0 or not _mount_tiny_tmpfs(disk):
        pytest.skip("needs permission to mount a tmpfs (the injected test above covers the "
                    "same path)")
    try:
        code = ("import numpy as np\n"
                "from coreai_core import Program, TensorType\n"
                "from coreai_core.dialects import coreai\n"
                "from coreai_torch.aimodel import export_aimodel\n"
                "p = Program()\n"
                "with p.graph('main', inputs={'x': TensorType((200000,), 'float32')}) as g:\n"
                "    w = np.random.default_rng(0).standard_normal(200000).astype(np.float32)\n"
                "    g.outputs({'y': coreai.broadcasting_mul(g['x'], coreai.constant(w, "
                "name='w'))})\n"
                f"export_aimodel(p, {str(disk / 'm.aimodel')!r})\n")
        run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                             text=True, timeout=300)
        assert run.returncode == 1, run.stderr
        assert "AimodelExportError: cannot write" in run.stderr
        assert "No space left on device" in run.stderr and "LLVM ERROR" not in run.stderr
        assert os.listdir(disk) == []
    finally:
        subprocess.run(["umount", str(disk)], check=False)
