"""Source listings annotated line by line (used by the source annotator and the benchmarker).

:func:`write_annotated_sources` prints each annotated file's lines with the notes for a line
under it; files that cannot be read are listed with their notes only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

__all__ = ["write_annotated_sources"]

CONTEXT = 2  # lines shown around each annotated line when not printing whole files


def write_annotated_sources(notes: Mapping[tuple[str, int], Sequence[str]], output: TextIO, *,
                            whole_files: bool = False) -> None:
    """Print the source lines that carry notes (``(file, line) -> notes``) with the notes."""
    by_file: dict[str, dict[int, list[str]]] = defaultdict(dict)
    for (file, line), texts in notes.items():
        by_file[file][line] = list(texts)
    for file in sorted(by_file):
        lines = by_file[file]
        output.write(f"== {file}\n")
        try:
            source = Path(file).read_text(encoding="utf-8").splitlines()
        except OSError:
            for line in sorted(lines):
                output.write(f"  {line:>5} | (source not readable)\n")
                for text in lines[line]:
                    output.write(f"        ^ {text}\n")
            continue
        shown = (set(range(1, len(source) + 1)) if whole_files else
                 {n for line in lines for n in range(line - CONTEXT, line + CONTEXT + 1)
                  if 1 <= n <= len(source)})
        previous = 0
        for n in sorted(shown):
            if previous and n != previous + 1:
                output.write("        ...\n")
            output.write(f"  {n:>5} | {source[n - 1]}\n")
            for text in lines.get(n, []):
                output.write(f"        ^ {text}\n")
            previous = n
