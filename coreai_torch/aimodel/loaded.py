"""An ``.aimodel`` loaded once on Apple's bundled Core AI interpreter, run step after step.

Before Apple's loader sees an asset, :func:`~coreai_torch.aimodel._checks.check_asset` checks
every file of it (only folders and regular files, within size bounds, ``main.mlirb`` matching
the digest in ``main.hash``, valid metadata), so a damaged or tampered asset raises
:class:`AimodelAssetError` naming the file instead of taking the process down. The
interpreter runs in this process (:mod:`._interpreter`), or with ``isolated=True`` in a child
process, where an abort or crash of Apple's becomes an :class:`AimodelInterpreterError`
carrying Apple's own message. The interpreter's announcement of each function it loads is
dropped from stderr; anything else it writes is passed on as it comes.

A :class:`LoadedAimodel` may be shared by threads: its calls are serialized by a lock of its
own (Apple's runtime runs one call at a time on the asset's event loop).
"""

from __future__ import annotations

import difflib
import os
import threading
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import attrs
import numpy as np

from coreai_core import Dim, DType, RuntimeInputError, TensorType
from coreai_core.runtime import input_type_problems, to_array
from coreai_torch.aimodel._apple import ca
from coreai_torch.aimodel._checks import (
    AimodelAssetError,
    AimodelEntrypointError,
    AimodelInterpreterError,
    check_asset,
)
from coreai_torch.aimodel._context import NARROWED
from coreai_torch.aimodel._dims import KEY as DIMS_KEY
from coreai_torch.aimodel._dims import Record, declared_shapes, parse_record
from coreai_torch.aimodel._interpreter import (
    ChildInterpreter,
    LocalInterpreter,
    without_load_announcements,
)

__all__ = ["LoadedAimodel", "load_aimodel", "narrow_input", "run_aimodel"]

# the name tests/interop/test_aimodel_loaded.py knows the stderr filter by
_without_load_announcements = without_load_announcements


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


def _declared(declared: Mapping[str, tuple[tuple[int, ...], str]],
              recorded: Mapping[str, tuple[int | Dim, ...]]) -> dict[str, TensorType]:
    """The types Apple's function descriptor ``declared`` (a dynamic size is negative), with
    the dynamic dimensions' names and bounds the exporter ``recorded`` (see ``_dims.py``). A
    size Apple declares static wins over the record; a dynamic one without a recorded name
    is a symbol of its own."""
    out = {}
    for n, (shape, dtype) in declared.items():
        found = recorded.get(n)
        record: Sequence[int | Dim | None] = (
            found if found is not None and len(found) == len(shape) else (None,) * len(shape))
        out[n] = TensorType(tuple(
            s if s >= 0 else r if isinstance(r, Dim) else Dim(f"{n} axis {axis}")
            for axis, (s, r) in enumerate(zip(shape, record, strict=True))), dtype)
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
    """A function's signature (read once)."""

    inputs: dict[str, TensorType]
    outputs: list[str]
    state: dict[str, TensorType]


def _dims_record(path: Path, metadata: Mapping[str, Any]) -> Record:
    custom = metadata.get("creatorDefinedMetadata", {})
    text = custom.get(DIMS_KEY) if isinstance(custom, dict) else None
    if text is None:
        return {}
    try:
        return parse_record(text)
    except ValueError as e:
        raise AimodelAssetError(
            f"{path}/metadata.json: the {DIMS_KEY} record (the names and bounds of the "
            f"dynamic dimensions export_aimodel wrote) is malformed: {e}; export the asset "
            "again, or remove the record to run with Apple's own declared shapes") from None


class LoadedAimodel:
    """An ``.aimodel`` loaded on Apple's interpreter (see :func:`load_aimodel`).

    A context manager: leaving the ``with`` block (or :meth:`close`) releases the model.
    ``state`` is the state it holds for calls without ``state=`` (like ``Program.state``).
    ``isolated`` says whether the interpreter runs in a child process. Safe to share between
    threads: calls are serialized.
    """

    def __init__(self, path: Path, state: Mapping[str, Any] | None = None, *,
                 isolated: bool = False, metadata: Mapping[str, Any] | None = None) -> None:
        self.path = path
        self.isolated = isolated
        self._initial = {k: to_array(v).copy() for k, v in (state or {}).items()}
        self.state: dict[str, np.ndarray] = {k: v.copy() for k, v in self._initial.items()}
        self._functions: dict[str, _Function] = {}
        self._dims = _dims_record(path, check_asset(path) if metadata is None else metadata)
        self._lock = threading.RLock()
        self._interpreter: LocalInterpreter | ChildInterpreter | None = (
            ChildInterpreter(path, AimodelInterpreterError) if isolated
            else LocalInterpreter(path))
        self.function_names: list[str] = list(self._interpreter.function_names)

    @property
    def closed(self) -> bool:
        return self._interpreter is None

    def close(self) -> None:
        """Release the loaded model (idempotent)."""
        with self._lock:
            interpreter, self._interpreter = self._interpreter, None
            self._functions.clear()
            if interpreter is not None:
                interpreter.close()

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
        with self._lock:
            self.state = {k: v.copy() for k, v in self._initial.items()}

    def _live(self) -> LocalInterpreter | ChildInterpreter:
        if self._interpreter is None:
            raise ValueError(f"{self.path} was closed; load it again with load_aimodel")
        return self._interpreter

    def _function(self, entrypoint: str) -> _Function:
        with self._lock:
            interpreter = self._live()
            fn = self._functions.get(entrypoint)
            if fn is None:
                if entrypoint not in self.function_names:
                    raise AimodelEntrypointError(
                        f"{self.path} has no function {entrypoint!r}; it has "
                        f"{self.function_names} (pass one of them as entrypoint=)")
                inputs, outputs, state = self._guarded(interpreter.signature, entrypoint)
                fn = self._functions[entrypoint] = _Function(
                    _declared(inputs, declared_shapes(self._dims, entrypoint, "input")),
                    outputs, _declared(state, declared_shapes(self._dims, entrypoint, "state")))
            return fn

    def _guarded(self, step: Callable[..., Any], *args: Any) -> Any:
        """``step(*args)``; when the child interpreter died the asset is closed."""
        try:
            return step(*args)
        except AimodelInterpreterError:
            if self._interpreter is not None and self._interpreter.closed:
                self._interpreter, self._functions = None, {}
            raise

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
        with self._lock:
            return self._run(inputs, entrypoint, state)

    def _run(self, inputs: Mapping[str, Any] | Sequence[Any], entrypoint: str,
             state: MutableMapping[str, Any] | None) -> dict[str, np.ndarray]:
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
        outputs, new_state = self._guarded(self._live().run, entrypoint, feeds, buffers)
        for k, a in new_state.items():
            held[k] = a.astype(given[k].dtype, copy=False)
        return dict(outputs)


def load_aimodel(path: str | os.PathLike[str], *, state: Mapping[str, Any] | None = None,
                 isolated: bool = False) -> LoadedAimodel:
    """Load the ``.aimodel`` at ``path`` on Apple's interpreter once, to run it many times.

    ``state`` (e.g. ``program.state``) is copied as the state the asset holds for calls of
    :meth:`LoadedAimodel.run` without ``state=``. Use it as a context manager::

        with load_aimodel("decoder.aimodel", state=program.state) as asset:
            for token in tokens:
                logits = asset.run({"x": token})["logits"]

    Every file of the asset is checked first (see the module docstring): a damaged one
    raises :class:`~coreai_torch.aimodel.AimodelAssetError` naming it. With ``isolated``
    the interpreter runs in a child process: an abort or crash inside Apple's interpreter
    (e.g. on an asset damaged and re-hashed on purpose) raises
    :class:`~coreai_torch.aimodel.AimodelInterpreterError` with Apple's message instead of
    ending this process, at a cost per call (docs/coreai-interop.md gives it).
    """
    target = Path(path)
    if not target.is_dir():
        raise FileNotFoundError(f"{target} is not an .aimodel asset (write one with "
                                "export_aimodel)")
    metadata = check_asset(target)
    if not ca.AIModelAsset.is_valid(target):
        raise FileNotFoundError(f"{target} is not an .aimodel asset (write one with "
                                "export_aimodel)")
    return LoadedAimodel(target, state, isolated=isolated, metadata=metadata)


def run_aimodel(path: str | os.PathLike[str], inputs: Mapping[str, Any], *,
                entrypoint: str = "main", state: MutableMapping[str, Any] | None = None,
                isolated: bool = False) -> dict[str, np.ndarray]:
    """Load the ``.aimodel`` at ``path``, run ``entrypoint`` once and release it.

    ``inputs`` and ``state`` are :meth:`LoadedAimodel.run`'s, except that a function with
    state needs ``state=`` here (it is updated in place). To run many steps, load the asset
    once with :func:`load_aimodel`: loading takes most of the time of a small model's call.
    ``isolated`` is :func:`load_aimodel`'s.
    """
    with load_aimodel(path, isolated=isolated) as asset:
        return asset.run(inputs, entrypoint=entrypoint, state=state)
