"""What a type checker sees of the public API: exact builder signatures, typed results."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SNIPPET = '''
import numpy as np
from coreai_core import Location, Program, TensorType, parse
from coreai_core.dialects import coreai

p = Program()
with p.graph("main", inputs={"x": TensorType((2, 3), "float32")}) as g:
    x = g["x"]
    y = coreai.broadcasting_add(x, 1.0, loc=Location("m.py", 3))  # a number as an operand
    values, indices = coreai.sort(y, axis=1)
    z = coreai.reshape(values, np.array([3, 2]))  # an array as an operand
    t = coreai.transpose(z, [1, 0])  # a list for Ints
    c = coreai.cast(t, "float16")  # a dtype name
    pooled = coreai.maxpool2d(coreai.reshape(x, [1, 1, 2, 3]), [1, 1], return_indices=True)
    reveal_type(coreai.relu(x))  # R1
    reveal_type(coreai.sort(x))  # R2
    reveal_type(coreai.split(x, [1, 2], axis=1))  # R3
    reveal_type(pooled)  # R4
    coreai.relu(x, bogus=1)  # E1
    coreai.transpose(x, perm="10")  # E2
    g.outputs({"y": c})
reveal_type(parse(str(p)).run({"x": np.ones((2, 3), np.float32)}))  # R5
'''


@pytest.mark.slow
def test_builders_have_the_signatures_a_type_checker_needs(tmp_path, monkeypatch) -> None:
    api = pytest.importorskip("mypy.api", reason="mypy is a dev dependency")
    (tmp_path / "snippet.py").write_text(SNIPPET)
    monkeypatch.chdir(ROOT)  # the repository's coreai_core and its mypy config
    out, err, _ = api.run([str(tmp_path / "snippet.py"), "--cache-dir", str(tmp_path / "c")])
    lines: dict[int, list[str]] = {}
    for m in re.finditer(r"snippet\.py:(\d+): (.*)", out):
        lines.setdefault(int(m.group(1)), []).append(m.group(2))
    by_tag = {}
    for number, text in enumerate(SNIPPET.splitlines(), start=1):
        tag = re.search(r"# ([RE]\d)$", text)
        if tag:
            by_tag[tag.group(1)] = lines.pop(number, [""])[0]
    value = "coreai_core._ir.Value"
    assert by_tag["R1"] == f'note: Revealed type is "{value}"'
    assert by_tag["R2"] == f'note: Revealed type is "tuple[{value}, {value}]"'
    assert by_tag["R3"] == f'note: Revealed type is "tuple[{value}, ...]"'
    assert by_tag["R4"] == f'note: Revealed type is "tuple[{value}, {value}]"'
    assert by_tag["R5"].startswith('note: Revealed type is "dict[str, numpy.ndarray')
    assert by_tag["E1"].startswith('error: Unexpected keyword argument "bogus" for "relu"')
    assert by_tag["E2"].startswith('error: Argument "perm" to "transpose" has incompatible type')
    assert not lines, f"unexpected mypy output: {lines} {err}"
