"""Run an ``.aimodel`` on Apple's bundled Core AI interpreter and compare it with torch."""

from __future__ import annotations

import asyncio
import concurrent.futures
import difflib
import os
from collections.abc import Callable, Coroutine, Mapping, MutableMapping
from pathlib import Path
from typing import Any, TypeVar

import attrs
import numpy as np
import torch
from coreai.authoring import AIModelAsset
from coreai.runtime import NDArray
from torch.export import ExportedProgram

from coreai_core import DType, Program, RuntimeInputError, TensorType
from coreai_core.runtime import input_type_problems, to_array
from coreai_torch.aimodel._context import NARROWED
from coreai_torch.verify import VerifyReport, compare, torch_outputs

__all__ = ["AimodelVerifyReport", "narrow_input", "run_aimodel", "verify_aimodel"]

T = TypeVar("T")


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


def _run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    # inside a running loop (a notebook): run on a worker thread with its own loop
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _declared(describe: Callable[[str], Any], names: list[str]) -> dict[str, TensorType]:
    """The types an Apple function descriptor declares for ``names``."""
    return {n: TensorType(describe(n).shape, describe(n).dtype) for n in names}


def _bind(kind: str, types: Mapping[str, TensorType], given: Mapping[str, np.ndarray],
          others: Callable[[], set[str]]) -> tuple[dict[str, np.ndarray], list[str]]:
    """The narrowed arrays for ``types`` and every problem with ``given`` (names, narrowing,
    element types, shapes). ``others()`` gives names that are not this function's but are
    accepted (the state of the asset's other functions)."""
    problems = []
    unknown = [n for n in given if n not in types]
    if unknown:
        accepted = others()
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


async def _run(path: Path, inputs: Mapping[str, np.ndarray], entrypoint: str,
               state: Mapping[str, np.ndarray] | None,
               ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The outputs and the new state of one call of ``entrypoint``."""
    asset = AIModelAsset.load(path)
    async with asset.executable(specialization_options=None) as model:
        if entrypoint not in model.function_names:
            raise KeyError(f"{path} has no function {entrypoint!r}; it has "
                           f"{list(model.function_names)}")
        fn = model.load_function(entrypoint)
        desc = fn.desc

        def other_state() -> set[str]:
            return {k for name in model.function_names
                    for k in model.load_function(name).desc.state_names}

        feeds, problems = _bind("input", _declared(desc.input_descriptor, desc.input_names),
                                inputs, set)
        held, state_problems = _bind("state", _declared(desc.state_descriptor,
                                                        desc.state_names),
                                     state or {}, other_state)
        problems += state_problems
        if state is None and desc.state_names:
            problems.append(f"function {entrypoint!r} has state {desc.state_names}: pass "
                            "state={name: array} (e.g. a copy of program.state); it is "
                            "updated in place with the new state")
        if problems:
            raise RuntimeInputError(f"bad inputs for function {entrypoint!r} of {path} (nothing "
                                    "was run):\n  " + "\n  ".join(problems))
        buffers = {k: NDArray(a) for k, a in held.items()}  # Apple updates these in place
        out = await fn(inputs={k: NDArray(a) for k, a in feeds.items()}, state=buffers)
        arrays = {}
        for name in desc.output_names:
            value = out[name]
            if not isinstance(value, NDArray):
                raise TypeError(f"{path}: output {name!r} is an image, not a tensor")
            arrays[name] = np.array(value.numpy())  # a copy: the model's buffers are freed
        return arrays, {k: np.array(b.numpy()) for k, b in buffers.items()}


def run_aimodel(path: str | os.PathLike[str], inputs: Mapping[str, Any], *,
                entrypoint: str = "main", state: MutableMapping[str, Any] | None = None,
                ) -> dict[str, np.ndarray]:
    """Run ``entrypoint`` of the ``.aimodel`` at ``path`` on Apple's interpreter.

    ``inputs`` maps input names to arrays (int64/float64 arrays are narrowed as on export).
    Returns output name -> array, in the function's output order.

    A function with state needs ``state``, a mapping from state names to arrays, like
    ``Program.run(inputs, state=...)``: it is read and, after a successful call, updated in
    place with the new state, so successive calls (of one function or of several that share
    state names, e.g. ``prefill`` then ``decode``) continue from it. Each new array keeps the
    dtype its entry had (int64 state runs as int32 and is widened back). Names of other
    functions' state are accepted and left alone. Bad inputs or state raise one
    :class:`~coreai_core.RuntimeInputError` listing every problem, before anything runs.
    """
    if state is not None and not isinstance(state, MutableMapping):
        raise TypeError("state must be a mutable mapping (it is updated with the new state), "
                        f"got {type(state).__name__}")
    arrays = {k: to_array(v) for k, v in inputs.items()}
    given = None if state is None else {k: to_array(v) for k, v in state.items()}
    outputs, new_state = _run_coroutine(_run(Path(path), arrays, entrypoint, given))
    if state is not None and given is not None:
        for k, a in new_state.items():
            state[k] = a.astype(given[k].dtype, copy=False)
    return outputs


async def _input_names(path: Path, entrypoint: str) -> list[str]:
    async with AIModelAsset.load(path).executable(specialization_options=None) as model:
        return list(model.load_function(entrypoint).desc.input_names)


@attrs.frozen
class AimodelVerifyReport:
    """The .aimodel's outputs against torch eager and against coreai_core's runtime."""

    against_torch: VerifyReport
    against_runtime: VerifyReport | None

    @property
    def passed(self) -> bool:
        return self.against_torch.passed and (self.against_runtime is None
                                              or self.against_runtime.passed)

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        parts = [".aimodel on Apple's interpreter, " + str(self.against_torch)]
        if self.against_runtime is not None:
            text = str(self.against_runtime).replace("against torch", "against coreai_core's "
                                                     "runtime", 1)
            parts.append(".aimodel on Apple's interpreter, " + text)
        return "\n".join(parts)


def verify_aimodel(model_or_ep: torch.nn.Module | ExportedProgram,
                   path: str | os.PathLike[str], inputs: Any, *, program: Program | None = None,
                   state: MutableMapping[str, Any] | None = None,
                   rtol: float = 1e-3, atol: float = 1e-4,
                   entrypoint: str = "main") -> AimodelVerifyReport:
    """Run the ``.aimodel`` at ``path`` on Apple's interpreter and compare every output with
    torch eager (and, given the ``program`` it was exported from, with our runtime).

    ``inputs`` is what the model takes: a tensor, a sequence, or a mapping by input name.
    Tolerances are :func:`coreai_torch.verify`'s.

    A function with state runs from ``state`` (see :func:`run_aimodel`), which is updated in
    place, so a decode loop can verify step after step; without it, from a copy of
    ``program.state``. Torch eager runs on a copy of the model with its current buffers (so
    advance the model along with ``state``). Our runtime runs from a copy of the same state,
    and the new state (``state:<name>`` in the report) is compared with its new state too.
    """
    if isinstance(inputs, Mapping):
        named = {k: to_array(v) for k, v in inputs.items()}
    else:
        seq = inputs if isinstance(inputs, list | tuple) else (inputs,)
        names = _run_coroutine(_input_names(Path(path), entrypoint))
        if len(seq) != len(names):
            raise ValueError(f"got {len(seq)} inputs, the .aimodel takes {names}")
        named = {n: to_array(v) for n, v in zip(names, seq, strict=True)}
    if state is None and program is not None:
        state = {k: v.copy() for k, v in program.state.items()}
    before = {} if state is None else {k: to_array(v).copy() for k, v in state.items()}
    got = run_aimodel(path, named, entrypoint=entrypoint, state=state)
    expected = torch_outputs(model_or_ep, inputs)
    if len(got) != len(expected):
        raise ValueError(f"the .aimodel has {len(got)} outputs, torch returned {len(expected)}")
    against_torch = VerifyReport([compare(n, g, e, rtol, atol) for (n, g), e
                                  in zip(got.items(), expected, strict=True)], rtol, atol)
    against_runtime = None
    if program is not None:
        ours_state = {k: v.copy() for k, v in before.items()}
        ours = program.run(named, entrypoint=entrypoint, state=ours_state)
        errors = [compare(n, got[n], ours[n], rtol, atol) for n in ours]
        new_state = state or {}  # state is the program's copy or the caller's here
        errors += [compare(f"state:{k}", to_array(new_state[k]), ours_state[k], rtol, atol)
                   for k in program.graphs[entrypoint].state_outputs]
        against_runtime = VerifyReport(errors, rtol, atol)
    return AimodelVerifyReport(against_torch, against_runtime)
