"""The insertion context builders append to (a ContextVar, so threads never share it)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import attrs
import numpy as np

from coreai_core._dtypes import DType
from coreai_core._ir import UNKNOWN_LOC, Graph, Location, ProgramData

# Constants with more elements than this are stored in Program.weights and printed by name.
INLINE_LIMIT = 16


@attrs.define
class InsertionPoint:
    graph: Graph
    location: Location = UNKNOWN_LOC
    weight_prefix: str = "const"


_CURRENT: contextvars.ContextVar[InsertionPoint | None] = contextvars.ContextVar(
    "coreai_insertion_point", default=None
)


@contextlib.contextmanager
def insertion_point(graph: Graph, location: Location | None = None) -> Iterator[InsertionPoint]:
    """Make ``graph`` the target of builder calls inside the ``with`` block."""
    outer = _CURRENT.get()
    ip = InsertionPoint(graph, location or (outer.location if outer else UNKNOWN_LOC))
    token = _CURRENT.set(ip)
    try:
        yield ip
    finally:
        _CURRENT.reset(token)


@contextlib.contextmanager
def default_location(location: Location) -> Iterator[None]:
    """Ops built inside this block without ``loc=`` get ``location``."""
    ip = current()
    saved = ip.location
    ip.location = location
    try:
        yield
    finally:
        ip.location = saved


def current() -> InsertionPoint:
    ip = _CURRENT.get()
    if ip is None:
        raise RuntimeError(
            "coreai builders must be called inside an insertion context, e.g. "
            "`with program.graph('main', inputs=...) as g:` or inside a lowering function"
        )
    return ip


def current_graph() -> Graph:
    """The graph builder calls append to (RuntimeError outside an insertion context)."""
    return current().graph


def current_program() -> ProgramData | None:
    """The program of the graph builder calls append to (None outside an insertion context
    or for a graph that belongs to no program)."""
    ip = _CURRENT.get()
    return ip.graph.program if ip is not None else None


def default_dtype_of(value: Any) -> DType:
    """Element type for a Python scalar/list or numpy array turned into a constant."""
    if isinstance(value, np.ndarray | np.generic):
        return DType.of(value.dtype)
    arr = np.asarray(value)
    if arr.size == 0 and isinstance(value, (list, tuple)):
        return DType.int64  # an empty list is an empty shape or index list
    if arr.dtype == np.bool_:
        return DType.bool
    if arr.dtype.kind in "iu":
        return DType.int64
    if arr.dtype.kind == "f":
        return DType.float32
    if arr.dtype.kind == "c":
        return DType.complex64  # torch's default complex type
    raise TypeError(f"cannot make a constant from {value!r}")
