"""The ``coreai-torch`` command line: results, and one clear error line per misuse.

Each misuse checks the exit code, that stderr is one line naming the problem (no traceback,
no torch log lines) and that no stray file was written.
"""

from __future__ import annotations

import builtins
import errno
import logging
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import torch

from coreai_core import Program, TensorType, load
from coreai_core.dialects import coreai
from coreai_torch import get_decomp_table
from coreai_torch.cli import TORCH_EXPORT_NOISE, ExitCode, main
from tests.torch.harness import export

REPO = Path(__file__).resolve().parents[2]


class One(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.fc(x)).relu()


class Two(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x * y + 1


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A one-input and a two-input model as .pt2 files, the first converted to ``prog``."""
    root = tmp_path_factory.mktemp("cli")
    torch.manual_seed(0)
    one, x = One().eval(), torch.randn(4, 6)
    torch.export.save(torch.export.export(one, (x,)), str(root / "one.pt2"))
    y = torch.randn(4, 6)
    torch.export.save(torch.export.export(Two(), (x, y)), str(root / "two.pt2"))
    assert main(["convert", str(root / "one.pt2"), "-o", str(root / "prog")]) == 0
    assert main(["convert", str(root / "two.pt2"), "-o", str(root / "prog2")]) == 0
    np.savez(root / "in.npz", x=x.numpy())
    return {"model": one, "x": x, "pt2": str(root / "one.pt2"), "prog": str(root / "prog"),
            "prog2": str(root / "prog2"), "inputs": str(root / "in.npz")}


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The one line on stderr (asserting there is exactly one and no traceback)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


def listing(folder: Path) -> dict[str, int]:
    """Every file under ``folder`` with its size (to show nothing was written or removed)."""
    return {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*")
            if p.is_file()}


@pytest.fixture
def deny(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Path, int], None]]:
    """``deny(path, mode)`` chmods ``path``; as root, whom permission bits do not bind, it also
    makes opening anything under ``path`` fail with the EACCES the kernel gives other users."""
    denied: list[Path] = []
    real_open, real_os_open = builtins.open, os.open

    def blocked(file: Any) -> bool:
        if not isinstance(file, (str, os.PathLike)):
            return False
        p = Path(os.fspath(file)).absolute()
        return any(p == d or d in p.parents for d in denied)

    def guarded_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if blocked(file):
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    def guarded_os_open(file: Any, *args: Any, **kwargs: Any) -> int:
        if blocked(file):
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real_os_open(file, *args, **kwargs)

    def apply(path: Path, mode: int) -> None:
        path.chmod(mode)
        denied.append(path.absolute())
        if os.geteuid() == 0:
            monkeypatch.setattr(builtins, "open", guarded_open)
            monkeypatch.setattr(os, "open", guarded_os_open)

    yield apply
    for p in denied:
        p.chmod(0o755)


# -- what works ---------------------------------------------------------------------------------

def test_convert_run_inspect_verify(saved: dict[str, Any], tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.npz"
    assert main(["run", saved["prog"], "--inputs", saved["inputs"], "--outputs", str(out)]) == 0
    assert listing(tmp_path) == {"out.npz": out.stat().st_size}  # exactly the path given
    with np.load(out) as got:
        (value,) = [got[k] for k in got.files]
    np.testing.assert_allclose(value, saved["model"](saved["x"]).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    assert main(["inspect", saved["prog"]]) == 0
    text = capsys.readouterr().out
    assert "input  x: tensor<4x6xf32>" in text and "weights: 2 tensors" in text
    assert main(["verify", saved["pt2"], saved["prog"], "--inputs", saved["inputs"]]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["ops", "--filter", "aten::relu"]) == 0
    assert "aten::relu.default" in capsys.readouterr().out


def test_run_takes_an_npy_for_a_one_input_program(saved: dict[str, Any], tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", saved["x"].numpy())
    out = tmp_path / "r.npz"
    assert main(["run", saved["prog"], "--inputs", str(tmp_path / "x.npy"),
                 "--outputs", str(out)]) == 0
    with np.load(out) as got:
        (value,) = [got[k] for k in got.files]
    np.testing.assert_allclose(value, saved["model"](saved["x"]).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_force_replaces_existing_outputs(saved: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "r.npz"
    out.write_bytes(b"old")
    prog = tmp_path / "prog"
    assert main(["convert", saved["pt2"], "-o", str(prog)]) == 0
    assert main(["run", saved["prog"], "--inputs", saved["inputs"], "--outputs", str(out),
                 "--force"]) == 0
    assert main(["convert", saved["pt2"], "-o", str(prog), "--force"]) == 0
    assert sorted(os.listdir(tmp_path)) == ["prog", "r.npz"]  # no temporary left behind
    with np.load(out) as got:
        assert len(got.files) == 1
    assert load(prog).input_names == ["x"]


def test_outputs_named_like_savez_parameters_and_types_npz_lacks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = Program()
    with program.graph("main", inputs={"x": TensorType((3,), "bfloat16")}) as g:
        g.outputs({"file": coreai.cast(g["x"], "float32"),
                   "allow_pickle": coreai.broadcasting_add(g["x"], g["x"])})
    program.save(tmp_path / "prog")
    x = np.array([1.0, 2.5, -3.0], np.float32)  # exact in bfloat16
    np.savez(tmp_path / "in.npz", x=x)
    out = tmp_path / "r.npz"
    assert main(["run", str(tmp_path / "prog"), "--inputs", str(tmp_path / "in.npz"),
                 "--outputs", str(out)]) == 0
    assert "allow_pickle: bfloat16[3] (stored as float32)" in capsys.readouterr().out
    bf = x.astype(ml_dtypes.bfloat16)
    with np.load(out) as got:
        assert got.files == ["file", "allow_pickle"]
        np.testing.assert_array_equal(got["file"], x)
        assert got["allow_pickle"].dtype == np.float32
        np.testing.assert_array_equal(got["allow_pickle"], (bf + bf).astype(np.float32))
    np.savez(tmp_path / "inexact.npz", x=np.array([0.1, 0, 0], np.float32))
    assert main(["run", str(tmp_path / "prog"), "--inputs", str(tmp_path / "inexact.npz"),
                 "--outputs", str(tmp_path / "r2.npz")]) == ExitCode.BAD_INPUT
    assert "'x': the float32 values are not all exact in bfloat16" in error_line(capsys)
    assert not (tmp_path / "r2.npz").exists()


def test_demo(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "convnet" in out


def test_hides_torch_exports_future_warning(saved: dict[str, Any], tmp_path: Path) -> None:
    """torch.export's own FutureWarning is not shown to CLI users (demo, convert)."""
    model, x = saved["model"], saved["x"]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")  # undo pytest's filter for this message
        torch.export.export(model, (x,)).run_decompositions(get_decomp_table())
        assert any(re.search(TORCH_EXPORT_NOISE, str(w.message)) for w in seen), \
            "torch no longer warns: drop TORCH_EXPORT_NOISE from the CLI"
        seen.clear()
        assert main(["demo"]) == 0
        assert main(["convert", saved["pt2"], "-o", str(tmp_path / "prog")]) == 0
    assert [str(w.message) for w in seen if issubclass(w.category, FutureWarning)] == []


# -- the misuses of issue 18, item 17 -----------------------------------------------------------

@pytest.mark.parametrize("name", ["result.bin", "result", "folder"])
def test_run_outputs_must_be_an_npz_name(saved: dict[str, Any], tmp_path: Path, name: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "folder").mkdir()
    before = listing(tmp_path)
    assert main(["run", saved["prog"], "--inputs", saved["inputs"],
                 "--outputs", str(tmp_path / name)]) == ExitCode.BAD_INPUT
    assert f"{name}: the output file name must end in .npz" in error_line(capsys)
    assert listing(tmp_path) == before and sorted(os.listdir(tmp_path)) == ["folder"]


def test_run_outputs_folder_named_npz(saved: dict[str, Any], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "r.npz").mkdir()
    assert main(["run", saved["prog"], "--inputs", saved["inputs"], "--force",
                 "--outputs", str(tmp_path / "r.npz")]) == ExitCode.BAD_INPUT
    assert "r.npz: is a folder" in error_line(capsys)
    assert listing(tmp_path) == {}


def test_npy_for_a_two_input_program(saved: dict[str, Any], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "x.npy", saved["x"].numpy())
    assert main(["run", saved["prog2"], "--inputs", str(tmp_path / "x.npy"),
                 "--outputs", str(tmp_path / "r.npz")]) == ExitCode.BAD_INPUT
    line = error_line(capsys)
    assert "an .npy file holds one array, but entrypoint @main has 2 inputs ['x', 'y']" in line
    assert "pass an .npz" in line and not (tmp_path / "r.npz").exists()


def test_verify_input_names_checked(saved: dict[str, Any], tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    np.savez(tmp_path / "in.npz", xx=saved["x"].numpy())
    assert main(["verify", saved["pt2"], saved["prog"],
                 "--inputs", str(tmp_path / "in.npz")]) == ExitCode.BAD_INPUT
    line = error_line(capsys)
    assert "unknown input 'xx' (did you mean 'x'?)" in line and "missing input 'x'" in line


@pytest.mark.parametrize("array, reason", [
    (np.zeros((5, 6), np.float32), "axis 0 is 5, expected 4"),
    (np.zeros((4, 6), np.float64), "element type float64, expected float32"),
    (np.zeros((4, 6, 1), np.float32), "rank 3, expected 2"),
])
def test_verify_input_types_checked_before_torch_runs(
        saved: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        array: np.ndarray, reason: str) -> None:
    np.savez(tmp_path / "in.npz", x=array)
    assert main(["verify", saved["pt2"], saved["prog"],
                 "--inputs", str(tmp_path / "in.npz")]) == ExitCode.BAD_INPUT
    line = error_line(capsys)
    assert line.startswith("coreai-torch verify: error: ") and "expected tensor<4x6xf32>" in line
    assert reason in line and "Guard" not in line


def test_convert_of_a_non_pt2_file(saved: dict[str, Any], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    logger = logging.getLogger("torch.export")
    before = (list(logger.handlers), logger.propagate)
    (tmp_path / "fake.pt2").write_bytes(Path(saved["inputs"]).read_bytes())  # a zip, not a pt2
    (tmp_path / "junk.pt2").write_bytes(b"not a zip")
    for name in ["fake.pt2", "junk.pt2"]:
        assert main(["convert", str(tmp_path / name), "-o", str(tmp_path / "o")]) == 2
        assert f"{name}: not a torch.export program" in error_line(capsys)
    assert (list(logger.handlers), logger.propagate) == before  # torch's logging restored
    assert main(["convert", saved["inputs"], "-o", str(tmp_path / "o")]) == 2
    assert "in.npz: expected a .pt2 file written by torch.export.save" in error_line(capsys)
    assert sorted(os.listdir(tmp_path)) == ["fake.pt2", "junk.pt2"]


def test_convert_of_a_non_pt2_file_prints_no_torch_log(saved: dict[str, Any],
                                                       tmp_path: Path) -> None:
    fake = tmp_path / "fake.pt2"
    fake.write_bytes(Path(saved["inputs"]).read_bytes())
    done = subprocess.run([sys.executable, "-m", "coreai_torch.cli", "convert", str(fake),
                           "-o", str(tmp_path / "o")], capture_output=True, text=True,
                          cwd=REPO, timeout=300)
    assert done.returncode == ExitCode.BAD_INPUT
    assert done.stderr.splitlines() == [done.stderr.strip()]  # one line: no log, no traceback
    assert "fake.pt2: not a torch.export program" in done.stderr and done.stdout == ""


@pytest.mark.parametrize("option", ["--rtol", "--atol"])
@pytest.mark.parametrize("value", ["nan", "-1", "inf", "1e-3x"])
def test_tolerances_must_be_finite_and_non_negative(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str) -> None:
    # the model does not exist: the option is rejected before anything is read
    assert main(["verify", str(tmp_path / "m.pt2"), option, value]) == ExitCode.BAD_INPUT
    line = error_line(capsys)
    assert line.startswith(f"coreai-torch verify: error: argument {option}: {value!r}")


def test_existing_output_folder_refused_without_force(saved: dict[str, Any], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    prog = tmp_path / "prog"
    assert main(["convert", saved["pt2"], "-o", str(prog)]) == 0
    before = {k: (prog / k).read_bytes() for k in listing(prog)}
    assert main(["convert", saved["pt2"], "-o", str(prog)]) == ExitCode.BAD_INPUT
    assert "prog: already exists; pass --force to replace it" in error_line(capsys)
    assert {k: (prog / k).read_bytes() for k in listing(prog)} == before


def test_force_never_deletes_a_folder_of_the_users(saved: dict[str, Any], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    assert main(["convert", saved["pt2"], "-o", str(mine), "--force"]) == ExitCode.BAD_INPUT
    assert "mine: cannot save the program" in error_line(capsys)
    assert listing(tmp_path) == {"mine/notes.txt": 7}


def test_read_only_output_folder(saved: dict[str, Any], tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str],
                                 deny: Callable[[Path, int], None]) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    deny(ro, 0o555)
    assert main(["convert", saved["pt2"], "-o", str(ro / "prog")]) == ExitCode.BAD_INPUT
    assert "ro/prog: cannot write in" in error_line(capsys)
    assert main(["run", saved["prog"], "--inputs", saved["inputs"],
                 "--outputs", str(ro / "r.npz")]) == ExitCode.BAD_INPUT
    assert "ro/r.npz: cannot write in" in error_line(capsys)
    assert os.listdir(ro) == []


def test_unknown_entrypoint(saved: dict[str, Any], tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", saved["prog"], "--inputs", saved["inputs"], "--entrypoint", "forward",
                 "--outputs", str(tmp_path / "r.npz")]) == ExitCode.BAD_INPUT
    line = error_line(capsys)
    assert "no entrypoint 'forward'; its entrypoints are ['main']" in line
    assert os.listdir(tmp_path) == []


# -- the same audit over every subcommand -------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["convert", "{t}/missing.pt2", "-o", "{t}/o"], "missing.pt2: no such file"),
    (["convert", "{t}", "-o", "{t}/o"], ": is a folder (expected a .pt2 file"),
    (["convert", "{pt2}", "-o", "{t}/no/o"], "the folder '{t}/no' does not exist"),
    (["run", "{t}/nope", "--inputs", "{in}", "--outputs", "{t}/r.npz"], "nope: no such program"),
    (["run", "{pt2}", "--inputs", "{in}", "--outputs", "{t}/r.npz"], "one.pt2: is a file"),
    (["run", "{prog}", "--inputs", "{t}/no.npz", "--outputs", "{t}/r.npz"], "no.npz: no such"),
    (["run", "{prog}", "--inputs", "{t}", "--outputs", "{t}/r.npz"], ": is a folder"),
    (["run", "{prog}", "--inputs", "{pt2}", "--outputs", "{t}/r.npz"], "whose name ends in"),
    (["verify", "{t}/m.pt2"], "m.pt2: no such file"),
    (["verify", "{pt2}", "{t}/nope"], "nope: no such program"),
    (["verify", "{pt2}", "--inputs", "{t}"], ": is a folder"),
    (["inspect", "{t}/nope"], "nope: no such program"),
    (["inspect", "{pt2}"], "one.pt2: is a file"),
    (["inspect", "{prog}", "--graph", "{t}/g.png"], "g.png: the output file name must end in .svg"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["run", "{prog}"], "the following arguments are required: --inputs, --outputs"),
    (["demo", "--model", "resnet"], "invalid choice: 'resnet'"),
])
def test_misuse_is_one_line_exit_2(saved: dict[str, Any], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str], argv: list[str],
                                   message: str) -> None:
    names = {"t": str(tmp_path), "pt2": saved["pt2"], "prog": saved["prog"],
             "in": saved["inputs"]}
    assert main([a.format(**names) for a in argv]) == ExitCode.BAD_INPUT
    line = error_line(capsys)
    assert re.match(r"coreai-torch( \w+)?: error: ", line) and message.format(**names) in line
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name, content, message", [
    ("junk.npz", b"not a zip", "junk.npz: not a valid .npz file (ValueError: not a zip archive"),
    ("junk.npy", b"not numpy", "junk.npy: not a valid .npy file (ValueError: no .npy header"),
    ("obj.npy", None, "obj.npy: not a valid .npy file (ValueError: Object arrays cannot be"),
])
def test_malformed_input_files(saved: dict[str, Any], tmp_path: Path,
                               capsys: pytest.CaptureFixture[str], name: str,
                               content: bytes | None, message: str) -> None:
    if content is None:  # a pickled object array: never unpickled
        np.save(tmp_path / name, np.array([1, "a"], dtype=object), allow_pickle=True)
    else:
        (tmp_path / name).write_bytes(content)
    assert main(["run", saved["prog"], "--inputs", str(tmp_path / name),
                 "--outputs", str(tmp_path / "r.npz")]) == ExitCode.BAD_INPUT
    assert message in error_line(capsys)
    assert sorted(os.listdir(tmp_path)) == [name]


def test_damaged_program_folder(saved: dict[str, Any], tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    prog = tmp_path / "prog"
    assert main(["convert", saved["pt2"], "-o", str(prog)]) == 0
    for rel, size in listing(prog).items():  # every file cut in half, whatever the format
        (prog / rel).write_bytes((prog / rel).read_bytes()[:size // 2])
    assert main(["inspect", str(prog)]) == ExitCode.BAD_INPUT
    assert "prog: cannot load program (" in error_line(capsys)


def test_unreadable_input_file(saved: dict[str, Any], tmp_path: Path,
                               capsys: pytest.CaptureFixture[str],
                               deny: Callable[[Path, int], None]) -> None:
    secret = tmp_path / "in.npz"
    secret.write_bytes(Path(saved["inputs"]).read_bytes())
    deny(secret, 0o000)
    assert main(["run", saved["prog"], "--inputs", str(secret),
                 "--outputs", str(tmp_path / "r.npz")]) == ExitCode.BAD_INPUT
    assert "in.npz: cannot read (Permission denied)" in error_line(capsys)
    assert os.listdir(tmp_path) == ["in.npz"]


def test_inspect_graph_needs_dot_and_writes_the_svg_given(
        saved: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))  # no Graphviz
    svg = tmp_path / "g.svg"
    assert main(["inspect", saved["prog"], "--graph", str(svg)]) == ExitCode.BAD_INPUT
    assert "--graph needs Graphviz's `dot` on PATH" in error_line(capsys)
    # a stand-in for Graphviz that copies the dot text it gets to the -o file
    dot = bin_dir / "dot"
    dot.write_text(f"#!{sys.executable}\nimport sys\n"
                   'open(sys.argv[3], "w").write(sys.stdin.read())\n')
    dot.chmod(0o755)
    assert main(["inspect", saved["prog"], "--graph", str(svg)]) == 0
    assert svg.read_text().startswith("digraph coreai {")
    assert sorted(os.listdir(tmp_path)) == ["bin", "g.svg"]
    assert main(["inspect", saved["prog"], "--graph", str(svg)]) == ExitCode.BAD_INPUT
    assert "g.svg: already exists; pass --force" in error_line(capsys)


def test_ops_filter_without_match(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops", "--filter", "aten::no_such_op"]) == ExitCode.CHECK_FAILED
    assert capsys.readouterr().err == "coreai-torch ops: no supported op contains " \
                                      "'aten::no_such_op'\n"


def test_unsupported_op_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    @torch.library.custom_op("test_cli::mystery", mutates_args=())
    def mystery(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @mystery.register_fake
    def _(x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.ops.test_cli.mystery(x) + 1

    torch.export.save(export(M(), (torch.randn(3),)), str(tmp_path / "m.pt2"))
    assert main(["convert", str(tmp_path / "m.pt2"), "-o", str(tmp_path / "o")]) == 3
    line = error_line(capsys)
    assert "1 op(s) have no lowering: test_cli::mystery.default (1x, e.g. node" in line
    assert "docs/custom-op-lowering.md" in line and not (tmp_path / "o").exists()


def test_ctrl_c_in_process(saved: dict[str, Any], tmp_path: Path,
                           capsys: pytest.CaptureFixture[str],
                           monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Program, "save", interrupted)
    assert main(["convert", saved["pt2"], "-o", str(tmp_path / "o")]) == ExitCode.INTERRUPTED
    assert error_line(capsys) == "coreai-torch convert: interrupted"
    assert os.listdir(tmp_path) == []


def test_ctrl_c_signal(saved: dict[str, Any], tmp_path: Path) -> None:
    """A real SIGINT during a run: exit 130, one line, no traceback, no partial output."""
    script = (
        "import os, signal, sys, time\n"
        "from coreai_core import Program\n"
        "from coreai_torch.cli import main\n"
        "def run(self, *a, **k):\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(30)\n"
        "Program.run = run\n"
        "sys.exit(main(sys.argv[1:]))\n")
    out = tmp_path / "r.npz"
    done = subprocess.run([sys.executable, "-c", script, "run", saved["prog"], "--inputs",
                           saved["inputs"], "--outputs", str(out)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == ExitCode.INTERRUPTED
    assert done.stderr == "coreai-torch run: interrupted\n"
    assert os.listdir(tmp_path) == []


def test_verify_a_bfloat16_model_from_float32_inputs(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2).to(torch.bfloat16)
    x = torch.randn(3, 4).to(torch.bfloat16)
    torch.export.save(torch.export.export(model, (x,)), str(tmp_path / "m.pt2"))
    assert main(["convert", str(tmp_path / "m.pt2"), "-o", str(tmp_path / "prog")]) == 0
    # nn.Linear names its input "input"; .npz has no bfloat16: float32, exact
    np.savez(tmp_path / "in.npz", input=x.float().numpy())
    capsys.readouterr()
    assert main(["verify", str(tmp_path / "m.pt2"), str(tmp_path / "prog"),
                 "--inputs", str(tmp_path / "in.npz"), "--rtol", "1e-2", "--atol", "1e-2"]) == 0
    assert "PASS" in capsys.readouterr().out


def test_a_failing_run_exits_3_and_writes_nothing(saved: dict[str, Any], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(Program, "run", broken)
    argv = ["run", saved["prog"], "--inputs", saved["inputs"], "--outputs", str(tmp_path / "r.npz")]
    assert main(argv) == ExitCode.FAILED
    assert error_line(capsys) == "coreai-torch run: error: RuntimeError: boom; second line"
    assert main(["--traceback", *argv]) == ExitCode.FAILED  # for a bug report
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and err.endswith("error: RuntimeError: boom; second line\n")
    assert os.listdir(tmp_path) == []


def test_a_name_too_long_for_the_file_system(saved: dict[str, Any], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    name = str(tmp_path / ("a" * 5000 + ".npz"))
    assert main(["run", saved["prog"], "--inputs", name,
                 "--outputs", str(tmp_path / "r.npz")]) == ExitCode.BAD_INPUT
    assert error_line(capsys).endswith(".npz: File name too long")
    assert main(["run", saved["prog"], "--inputs", saved["inputs"],
                 "--outputs", name]) == ExitCode.BAD_INPUT
    assert error_line(capsys).endswith(".npz: File name too long")
    assert os.listdir(tmp_path) == []


def test_an_interrupted_replacement_keeps_the_old_outputs(
        saved: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "r.npz"
    out.write_bytes(b"old results")

    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt  # Ctrl-C while the new archive is half written

    monkeypatch.setattr(np.lib.format, "write_array", interrupted)
    assert main(["run", saved["prog"], "--inputs", saved["inputs"], "--outputs", str(out),
                 "--force"]) == ExitCode.INTERRUPTED
    assert error_line(capsys) == "coreai-torch run: interrupted"
    assert out.read_bytes() == b"old results" and os.listdir(tmp_path) == ["r.npz"]
