"""An ``.aimodel`` loaded once on Apple's bundled Core AI interpreter, run step after step.

Apple's runtime is asynchronous: an asset is loaded inside an ``async with`` block and its
functions are awaited. :class:`LoadedAimodel` keeps that block open on an event loop of its
own, run in the calling thread (Apple's runtime driven from another thread aborts the process
at exit now and then), so plain synchronous calls reuse the loaded model; inside a running
event loop (a notebook) a call runs that loop on a worker thread. A call at other input
sizes than the last loads the asset afresh (coreai-core 1.0.0b3 aborts the process now and
then when a loaded model runs at several sizes). The interpreter announces every function it
loads on the process's stderr (from native code, below Python's ``sys.stderr``); those
announcements are dropped and anything else it writes is passed on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import difflib
import os
import re
import sys
import tempfile
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping, MutableMapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import attrs
import numpy as np

from coreai_core import Dim, DType, RuntimeInputError, TensorType
from coreai_core.runtime import input_type_problems, to_array
from coreai_torch.aimodel._apple import NDArray, ca, read_custom_metadata
from coreai_torch.aimodel._context import NARROWED
from coreai_torch.aimodel._dims import KEY as DIMS_KEY
from coreai_torch.aimodel._dims import declared_shapes

__all__ = ["LoadedAimodel", "load_aimodel", "narrow_input", "run_aimodel"]

T = TypeVar("T")

# The line Apple's interpreter writes to stderr for each function it loads.
_LOAD_ANNOUNCEMENT = re.compile(rb"^ODIE \[[^\]]*\]: Loading function '[^']*'\r?$")
# fd 2 is the process's: one redirection at a time
_STDERR_LOCK = threading.Lock()


@contextlib.contextmanager
def _without_load_announcements() -> Iterator[None]:
    """Runs the block with file descriptor 2 captured, then writes what was captured back
    to stderr without the interpreter's load announcements."""
    with _STDERR_LOCK, tempfile.TemporaryFile() as sink:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            kept = [line for line in sink.read().splitlines(keepends=True)
                    if not _LOAD_ANNOUNCEMENT.match(line.rstrip(b"\n"))]
            if kept:
                sys.stderr.write(b"".join(kept).decode(errors="replace"))


def narrow_input(name: str, array: np.ndarray, kind: str = "input") -> np.ndarray:
    """``array`` as the .aimodel takes it: int64 -> int32 (values must fit), float64 -> float32
    (finite values must not overflow).

    ``kind`` (``"input"`` or ``"state"``) names what ``array`` is in the error message.
    """
    dtype = DType.of(array.dtype)
    if dtype not in NARROWED:
        return _contiguous(array)
    if dtype is DType.int64 and array.size:
        info = np.iinfo(np.int32)
        if array.min() < info.min or array.max() > info.max:
            raise ValueError(f"{kind} {name!r}: int64 values in [{array.min()}, {array.max()}] "
                             f"do not fit the .aimodel's int32 {kind}")
    if dtype is DType.float64 and array.size:
        finite = array[np.isfinite(array)]
        if finite.size and np.abs(finite).max() > np.finfo(np.float32).max:
            raise ValueError(f"{kind} {name!r}: float64 values up to {np.abs(finite).max():g} "
                             f"overflow the .aimodel's float32 {kind}")
    return _contiguous(array.astype(NARROWED[dtype].numpy))


def _contiguous(array: np.ndarray) -> np.ndarray:
    # not np.ascontiguousarray: it turns a 0-d array into a 1-d one
    return array if array.flags.c_contiguous else array.copy(order="C")


def _declared(describe: Callable[[str], Any], names: list[str],
              recorded: Mapping[str, tuple[int | Dim, ...]]) -> dict[str, TensorType]:
    """The types an Apple function descriptor declares for ``names``, with the dynamic
    dimensions' names and bounds the exporter ``recorded`` (see ``_dims.py``); a dynamic
    dimension without a record (Apple reports a negative size) is a symbol of its own."""
    out = {}
    for n in names:
        d = describe(n)
        shape = recorded.get(n)
        if shape is None or len(shape) != len(d.shape):
            shape = tuple(Dim(f"{n} axis {axis}") if s is None or s < 0 else int(s)
                          for axis, s in enumerate(d.shape))
        out[n] = TensorType(shape, d.dtype)
    return out


def _bind(kind: str, types: Mapping[str, TensorType], given: Mapping[str, np.ndarray],
          others: Callable[[], set[str]]) -> tuple[dict[str, np.ndarray], list[str]]:
    """The narrowed arrays for ``types`` and every problem with ``given`` (names, narrowing,
    element types, shapes). ``others()`` gives names that are not this function's but are
    accepted (the state of the asset's other functions)."""
    problems = []
    unknown = [n for n in given if n not in types]
    accepted = others() if unknown else set()
    for n in unknown:
        if n not in accepted:
            close = difflib.get_close_matches(n, list(types), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            problems.append(f"unknown {kind} {n!r}{hint} (expected {list(types)})")
    arrays: dict[str, np.ndarray] = {}
    dims: dict[str, tuple[int, str]] = {}
    for n, t in types.items():
        if n not in given:
            problems.append(f"missing {kind} {n!r} ({t})")
            continue
        try:
            a = narrow_input(n, given[n], kind)
        except ValueError as e:
            problems.append(str(e))
            continue
        problems += input_type_problems(f"{kind} {n}", a, t, dims)
        arrays[n] = a
    return arrays, problems


@attrs.define
class _Function:
    """A loaded function and its signature (read once); ``shapes``: the input shapes of its
    last call."""

    call: Any
    inputs: dict[str, TensorType]
    outputs: list[str]
    state: dict[str, TensorType]
    shapes: tuple[tuple[int, ...], ...] | None = None


class LoadedAimodel:
    """An ``.aimodel`` loaded on Apple's interpreter (see :func:`load_aimodel`).

    A context manager: leaving the ``with`` block (or :meth:`close`) releases the model.
    ``state`` is the state it holds for calls without ``state=`` (like ``Program.state``).
    """

    def __init__(self, path: Path, state: Mapping[str, Any] | None = None) -> None:
        self.path = path
        self._initial = {k: to_array(v).copy() for k, v in (state or {}).items()}
        self.state: dict[str, np.ndarray] = {k: v.copy() for k, v in self._initial.items()}
        self._functions: dict[str, _Function] = {}
        self._dims = read_custom_metadata(path, DIMS_KEY) or {}
        self.function_names: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._executable: Any = None
        self._model: Any = None
        try:
            with _without_load_announcements():
                self._model = self._await(self._open())
        except BaseException:
            self._stop_loop()
            raise

    async def _open(self) -> Any:
        self._executable = ca.AIModelAsset.load(self.path).executable(
            specialization_options=None)
        model = await self._executable.__aenter__()
        self.function_names = list(model.function_names)
        return model

    def _await(self, coro: Coroutine[Any, Any, T]) -> T:
        """Runs ``coro`` on the asset's own event loop, in this thread; inside a running
        loop (a notebook) on a worker thread (the asset's loop runs one call at a time)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._loop.run_until_complete(coro)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(self._loop.run_until_complete, coro).result()

    def _stop_loop(self) -> None:
        self._loop.close()

    @property
    def closed(self) -> bool:
        return self._model is None

    def close(self) -> None:
        """Release the loaded model (idempotent)."""
        if self._model is None:
            return
        try:
            self._await(self._release())
        finally:
            self._stop_loop()

    async def _release(self) -> None:
        # in the order Apple's own ``async with`` block has: the model is released while its
        # functions are alive, then they go
        executable, functions = self._executable, list(self._functions.values())
        self._model, self._executable = None, None
        self._functions.clear()
        await executable.__aexit__(None, None, None)
        del functions

    def __enter__(self) -> LoadedAimodel:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        status = "closed" if self.closed else f"functions={self.function_names}"
        return f"<LoadedAimodel {str(self.path)!r} {status}>"

    def reset_state(self) -> None:
        """Restore the held state to the values given to :func:`load_aimodel`."""
        self.state = {k: v.copy() for k, v in self._initial.items()}

    def _function(self, entrypoint: str) -> _Function:
        if self._model is None:
            raise ValueError(f"{self.path} was closed; load it again with load_aimodel")
        fn = self._functions.get(entrypoint)
        if fn is None:
            if entrypoint not in self.function_names:
                raise KeyError(f"{self.path} has no function {entrypoint!r}; it has "
                               f"{self.function_names}")
            with _without_load_announcements():
                fn = self._functions[entrypoint] = self._await(self._load(entrypoint))
        return fn

    async def _load(self, entrypoint: str) -> _Function:
        call = self._model.load_function(entrypoint)
        desc = call.desc
        return _Function(
            call,
            _declared(desc.input_descriptor, list(desc.input_names),
                      declared_shapes(self._dims, entrypoint, "input")),
            list(desc.output_names),
            _declared(desc.state_descriptor, list(desc.state_names),
                      declared_shapes(self._dims, entrypoint, "state")))

    def _reopen(self) -> None:
        self._await(self._release())
        with _without_load_announcements():
            self._model = self._await(self._open())

    def input_names(self, entrypoint: str = "main") -> list[str]:
        """The inputs of ``entrypoint``, in order."""
        return list(self._function(entrypoint).inputs)

    def output_names(self, entrypoint: str = "main") -> list[str]:
        """The outputs of ``entrypoint``, in order."""
        return list(self._function(entrypoint).outputs)

    def state_names(self, entrypoint: str = "main") -> list[str]:
        """The state of ``entrypoint``."""
        return list(self._function(entrypoint).state)

    def run(self, inputs: Mapping[str, Any] | Sequence[Any], entrypoint: str = "main",
            state: MutableMapping[str, Any] | None = None) -> dict[str, np.ndarray]:
        """Run ``entrypoint`` once; returns output name -> array, in the function's output order.

        ``inputs`` maps input names to arrays (or lists them in input order); int64/float64
        arrays are narrowed as on export. State works like ``Program.run``: without
        ``state`` the asset's held ``state`` is read and updated; with ``state`` (a
        mutable mapping from state names to arrays) that mapping is read and, after a
        successful call, updated in place. Either way successive calls (of one function, or
        of several sharing state names, e.g. ``prefill`` then ``decode``) continue from it.
        Each new array keeps the dtype its entry had (int64 state runs as int32 and is
        widened back). Names of other functions' state are accepted and left alone. Bad
        inputs or state raise one :class:`~coreai_core.RuntimeInputError` listing every
        problem, before anything runs.
        """
        if state is not None and not isinstance(state, MutableMapping):
            raise TypeError("state must be a mutable mapping (it is updated with the new "
                            f"state), got {type(state).__name__}")
        fn = self._function(entrypoint)
        if not isinstance(inputs, Mapping):
            if len(inputs) != len(fn.inputs):
                raise RuntimeInputError(f"got {len(inputs)} inputs, function {entrypoint!r} "
                                        f"of {self.path} takes {list(fn.inputs)}")
            inputs = dict(zip(fn.inputs, inputs, strict=True))
        held = self.state if state is None else state
        given = {k: to_array(v) for k, v in held.items()}

        def others() -> set[str]:
            return {k for name in self.function_names if name != entrypoint
                    for k in self._function(name).state}

        feeds, problems = _bind("input", fn.inputs, {k: to_array(v) for k, v in inputs.items()},
                                set)
        buffers, state_problems = _bind("state", fn.state, given, others)
        problems += state_problems
        if fn.state and state is None and not self.state:
            problems.append(f"function {entrypoint!r} has state {list(fn.state)}: pass "
                            "state={name: array} (e.g. a copy of program.state), or load the "
                            "asset with load_aimodel(path, state=program.state) to hold it")
        if problems:
            raise RuntimeInputError(f"bad inputs for function {entrypoint!r} of {self.path} "
                                    "(nothing was run):\n  " + "\n  ".join(problems))
        shapes = tuple(a.shape for a in feeds.values())
        if fn.shapes is not None and shapes != fn.shapes:
            # coreai-core 1.0.0b3 aborts the process now and then when one loaded model runs
            # a function at other input sizes: the asset is loaded afresh for each new size
            # (steps at one size reuse it)
            self._reopen()
            fn = self._function(entrypoint)
        fn.shapes = shapes
        outputs, new_state = self._await(self._call(fn, feeds, buffers))
        for k, a in new_state.items():
            held[k] = a.astype(given[k].dtype, copy=False)
        return outputs

    async def _call(self, fn: _Function, feeds: dict[str, np.ndarray],
                    state: dict[str, np.ndarray],
                    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        buffers = {k: NDArray(a) for k, a in state.items()}  # Apple updates these in place
        out = await fn.call(inputs={k: NDArray(a) for k, a in feeds.items()}, state=buffers)
        arrays = {}
        for name in fn.outputs:
            value = out[name]
            if not isinstance(value, NDArray):
                raise TypeError(f"{self.path}: output {name!r} is an image, not a tensor")
            arrays[name] = np.array(value.numpy())  # a copy: the model's buffers are reused
        return arrays, {k: np.array(b.numpy()) for k, b in buffers.items()}


def load_aimodel(path: str | os.PathLike[str], *,
                 state: Mapping[str, Any] | None = None) -> LoadedAimodel:
    """Load the ``.aimodel`` at ``path`` on Apple's interpreter once, to run it many times.

    ``state`` (e.g. ``program.state``) is copied as the state the asset holds for calls of
    :meth:`LoadedAimodel.run` without ``state=``. Use it as a context manager::

        with load_aimodel("decoder.aimodel", state=program.state) as asset:
            for token in tokens:
                logits = asset.run({"x": token})["logits"]
    """
    target = Path(path)
    if not ca.AIModelAsset.is_valid(target):
        raise FileNotFoundError(f"{target} is not an .aimodel asset (write one with "
                                "export_aimodel)")
    return LoadedAimodel(target, state)


def run_aimodel(path: str | os.PathLike[str], inputs: Mapping[str, Any], *,
                entrypoint: str = "main", state: MutableMapping[str, Any] | None = None,
                ) -> dict[str, np.ndarray]:
    """Load the ``.aimodel`` at ``path``, run ``entrypoint`` once and release it.

    ``inputs`` and ``state`` are :meth:`LoadedAimodel.run`'s, except that a function with
    state needs ``state=`` here (it is updated in place). To run many steps, load the asset
    once with :func:`load_aimodel`: loading takes most of the time of a small model's call.
    """
    with load_aimodel(path) as asset:
        return asset.run(inputs, entrypoint=entrypoint, state=state)
