"""Source locations for FX nodes: relative file, line and nn.Module path."""

from __future__ import annotations

import functools
import os
import re

import torch.fx

from coreai_core import Location

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
_PKG_ROOTS = ("site-packages/", "dist-packages/")


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
def _user_frame(stack_trace: str) -> tuple[str, int] | None:
    """The innermost frame outside torch itself (the user's line), else the innermost."""
    frames = _FRAME.findall(stack_trace or "")
    if not frames:
        return None
    user = [f for f in frames if "/torch/" not in f[0].replace("\\", "/")]
    file, line = (user or frames)[-1]
    return relative_path(file), int(line)


def location_of(node: torch.fx.Node) -> Location:
    """The Location of an FX node from its stack trace and nn_module_stack metadata."""
    frame = _user_frame(node.meta.get("stack_trace", ""))
    module_path = None
    stack = node.meta.get("nn_module_stack")
    if stack:
        path, _cls = list(stack.values())[-1]
        module_path = _clean_module_path(path)
    if frame is None:
        return Location(module_path=module_path)
    return Location(frame[0], frame[1], module_path)


@functools.lru_cache(maxsize=4096)
def _clean_module_path(path: str) -> str | None:
    # torch spells the path as e.g. "L['self'].layers[0].attn" or "layers.0.attn".
    path = re.sub(r"^L\['self'\]\.?", "", path)
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    path = re.sub(r"\['([^']+)'\]", r".\1", path).strip(".")
    return path or None


def describe(node: torch.fx.Node) -> str | None:
    """``file:line`` of the user's source for an FX node, for error messages."""
    loc = location_of(node)
    if loc.file is None:
        return None
    return f"{loc.file}:{loc.line}"
