"""`coreai-torch convert --format aimodel`: the asset runs on Apple's interpreter like torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from coreai_torch.aimodel import run_aimodel
from coreai_torch.cli import ExitCode, main


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(torch.relu(self.fc(x)), dim=-1)


@pytest.fixture(scope="module")
def pt2(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, torch.nn.Module, torch.Tensor]:
    root = tmp_path_factory.mktemp("aimodel_cli")
    torch.manual_seed(0)
    model, x = Block().eval(), torch.randn(3, 6)
    torch.export.save(torch.export.export(model, (x,)), str(root / "block.pt2"))
    return root / "block.pt2", model, x


def test_convert_writes_an_asset_that_matches_torch(pt2, tmp_path: Path) -> None:
    path, model, x = pt2
    out = tmp_path / "block.aimodel"
    assert main(["convert", str(path), "-o", str(out), "--format", "aimodel"]) == ExitCode.OK
    (got,) = run_aimodel(out, {"x": x.numpy()}).values()
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)  # float32, 6-term dot products
    # an existing asset is replaced only with --force
    assert main(["convert", str(path), "-o", str(out), "--format", "aimodel"]) \
        == ExitCode.BAD_INPUT
    assert main(["convert", str(path), "-o", str(out), "--format", "aimodel",
                 "--force"]) == ExitCode.OK


def test_the_output_name_must_end_in_aimodel(pt2, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path, _, _ = pt2
    assert main(["convert", str(path), "-o", str(tmp_path / "block"), "--format",
                 "aimodel"]) == ExitCode.BAD_INPUT
    assert "must end in .aimodel" in capsys.readouterr().err
    assert not (tmp_path / "block").exists()


def test_without_the_extra_the_error_says_what_to_install(pt2, tmp_path: Path) -> None:
    path, _, _ = pt2
    code = ("import sys; sys.modules['coreai'] = None\n"
            "from coreai_torch.cli import main\n"
            f"sys.exit(main(['convert', {str(path)!r}, '-o', {str(tmp_path / 'b.aimodel')!r}, "
            "'--format', 'aimodel']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == ExitCode.BAD_INPUT, done.stderr
    assert "pip install 'coreai-torch[coreai]'" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "b.aimodel").exists()
