"""The adapter to Apple's package (coreai_torch/aimodel/_apple.py): the installed release is a
tested one, and pyproject.toml's requirement admits exactly the tested releases' series."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

from coreai_torch.aimodel._apple import TESTED_VERSIONS, installed_version

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"


def _coreai_requirements() -> list[Requirement]:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    reqs = [Requirement(r) for extra in project["optional-dependencies"].values()
            for r in extra]
    return [r for r in reqs if r.name == "coreai-core"]


def test_the_installed_release_is_tested() -> None:
    assert installed_version() in TESTED_VERSIONS


def test_the_requirement_is_bounded_to_the_tested_releases() -> None:
    reqs = _coreai_requirements()
    assert len(reqs) >= 2  # the coreai and test extras
    tested = [Version(v) for v in TESTED_VERSIONS]
    newer = Version(f"{max(tested).base_version}b{(max(tested).pre or ('b', 0))[1] + 1}")
    for req in reqs:
        assert all(req.specifier.contains(v, prereleases=True) for v in tested), req
        assert not req.specifier.contains(newer, prereleases=True), (
            f"{req} admits the untested {newer}")
        assert not req.specifier.contains(Version("2.0"), prereleases=True), req
