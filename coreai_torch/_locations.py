"""Source locations for FX nodes: relative file, line, nn.Module path, the node's id and the
user's call stack.

How much a converted op keeps is the converter's mode (``TorchConverter.Mode``): ``debug``
keeps everything, ``release`` the op id (the FX node's name) only. The converter sets it for
the duration of a conversion with :func:`recording`; it is a context variable, so two
converters in two threads each record with their own mode.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import re
from collections.abc import Iterator
from typing import Literal

import torch.fx

from coreai_core import Location

Detail = Literal["debug", "release"]

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<fn>[^\n]+))?')
_PKG_ROOTS = ("site-packages/", "dist-packages/")
_DETAIL: contextvars.ContextVar[Detail] = contextvars.ContextVar("coreai_torch_location_detail",
                                                                 default="debug")


@contextlib.contextmanager
def recording(detail: Detail) -> Iterator[None]:
    """Make :func:`location_of` record ``detail`` ("debug" or "release") inside the block."""
    token = _DETAIL.set(detail)
    try:
        yield
    finally:
        _DETAIL.reset(token)


def relative_path(path: str) -> str:
    """A deterministic, machine-independent spelling of a source path."""
    for root in _PKG_ROOTS:
        if root in path:
            return path.split(root, 1)[1]
    try:
        rel = os.path.relpath(path)
    except ValueError:
        rel = path
    if rel.startswith(".."):
        return os.path.basename(path)
    return rel


@functools.lru_cache(maxsize=4096)
def _frames(stack_trace: str) -> tuple[tuple[str, int, str], ...]:
    """(relative file, line, function) of every frame of a traceback, outermost first."""
    return tuple((relative_path(m["file"]), int(m["line"]), (m["fn"] or "").strip())
                 for m in _FRAME.finditer(stack_trace or ""))


def _user_frame(stack_trace: str) -> tuple[str, int] | None:
    """The innermost frame outside torch itself (the user's line), else the innermost."""
    frames = _frames(stack_trace)
    if not frames:
        return None
    user = [f for f in frames if not f[0].replace("\\", "/").startswith("torch/")]
    file, line, _ = (user or frames)[-1]
    return file, line


def location_of(node: torch.fx.Node) -> Location:
    """The Location of an FX node, with what the current mode records (see the module doc):
    its id always; in debug mode also its user frame, module path and call stack."""
    if _DETAIL.get() == "release":
        return Location(op_id=node.name)
    trace = node.meta.get("stack_trace", "")
    frame = _user_frame(trace)
    module_path = None
    stack = node.meta.get("nn_module_stack")
    if stack:
        path, _cls = list(stack.values())[-1]
        module_path = _clean_module_path(path)
    frames = tuple(f"{file}:{line} in {fn}" if fn else f"{file}:{line}"
                   for file, line, fn in _frames(trace))
    file, line = frame if frame is not None else (None, None)
    return Location(file, line, module_path, node.name, frames)


@functools.lru_cache(maxsize=4096)
def _clean_module_path(path: str) -> str | None:
    # torch spells the path as e.g. "L['self'].layers[0].attn" or "layers.0.attn".
    path = re.sub(r"^L\['self'\]\.?", "", path)
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    path = re.sub(r"\['([^']+)'\]", r".\1", path).strip(".")
    return path or None


def describe(node: torch.fx.Node) -> str | None:
    """``file:line`` of the user's source for an FX node, for error messages (whatever the
    mode: an error always names the user's line)."""
    frame = _user_frame(node.meta.get("stack_trace", ""))
    if frame is None:
        return None
    return f"{frame[0]}:{frame[1]}"
