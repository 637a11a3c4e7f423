"""The cost of rejecting a hostile weights file (issue 28): an artifact whose
``weights.safetensors`` header lists 1,000,000 zero-size tensors the program does not declare
(a ~60 MB header, the manifest re-hashed). Before the fix ``load`` took 15 s and 1.27 GB and
raised a 10.9 MB message; it now stops parsing the header at the bound the size of
``program.coreai`` sets. Prints the time, the growth of peak memory and the message.
Run from the repository root: ``python benchmarks/bench_hostile_header.py``.
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from coreai_core import ArtifactError, load
from tests.core.save_faults import program
from tests.core.test_load_errors import _header, write_header

ENTRIES = 1_000_000


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.coreai"
        program("a").save(path)
        header, body = _header(path)
        for i in range(ENTRIES):
            header[f"extra.{i}"] = {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
        write_header(path, header, body)
        del header
        size = next(path.glob("rev-*/weights.safetensors")).stat().st_size
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        try:
            load(path)
            raise SystemExit("loaded: the hostile file was not rejected")
        except ArtifactError as e:
            message = str(e)
        took = time.perf_counter() - start
        grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) / 1024
    print(f"{ENTRIES:,} undeclared tensors, {size / 1e6:.0f} MB weights file: rejected in "
          f"{took:.2f} s (most of it the SHA-256 pass), peak memory grew {grew:.0f} MB over "
          f"building the file, message {len(message)} characters:\n  {message}")


if __name__ == "__main__":
    main()
