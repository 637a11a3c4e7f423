"""Our op locations as Core AI (MLIR) locations of the ops an export emits for them.

A converter in debug mode records each op's file and line, module path, op id and call
stack; in release mode the op id only (``TorchConverter.Mode``). The export carries what the
program holds, as a fused MLIR location: every stack frame a file-line location, and the op
id and module path in the fused location's metadata (``fused<{coreai_torch.op_id = ...,
coreai_torch.module = ...}>``). Metadata, because Apple's rewrite passes replace name
locations with their own debug information (``AddUniqueID``), and because MLIR collapses a
fused location of one part, which those passes then reject.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

from coreai_core import Location
from coreai_torch.aimodel._apple import raw_ir

__all__ = ["apple_location"]

_FRAME = re.compile(r"^(?P<file>.*):(?P<line>\d+)(?: in .*)?$")


def _files(loc: Location) -> list[Any]:
    frames = [m for m in map(_FRAME.match, loc.stack) if m is not None]
    if frames:
        return [raw_ir.Location.file(m["file"], int(m["line"]), 0) for m in frames]
    if loc.file is not None:
        return [raw_ir.Location.file(loc.file, loc.line or 0, 0)]
    return []


def _metadata(loc: Location) -> Any:
    entries = {"coreai_torch.op_id": loc.op_id, "coreai_torch.module": loc.module_path}
    return raw_ir.DictAttr.get({k: raw_ir.StringAttr.get(v)
                                for k, v in entries.items() if v})


@contextlib.contextmanager
def apple_location(loc: Location) -> Iterator[None]:
    """Make the Core AI ops built inside the block carry ``loc`` (nothing for an unknown
    location)."""
    if not loc.is_known:
        yield
        return
    with raw_ir.Location.fused(_files(loc) or [raw_ir.Location.unknown()],
                               metadata=_metadata(loc)):
        yield
