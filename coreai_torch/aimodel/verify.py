"""Run an ``.aimodel`` on Apple's bundled Core AI interpreter and compare it with torch."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

import attrs
import numpy as np
import torch
from coreai.authoring import AIModelAsset
from coreai.runtime import NDArray
from torch.export import ExportedProgram

from coreai_core import DType, Program
from coreai_core.runtime import to_array
from coreai_torch.aimodel._context import NARROWED
from coreai_torch.verify import VerifyReport, compare, torch_outputs

__all__ = ["AimodelVerifyReport", "narrow_input", "run_aimodel", "verify_aimodel"]

T = TypeVar("T")


def narrow_input(name: str, array: np.ndarray) -> np.ndarray:
    """``array`` as the .aimodel takes it: int64 -> int32 (values must fit), float64 -> float32."""
    dtype = DType.of(array.dtype)
    if dtype not in NARROWED:
        return _contiguous(array)
    if dtype is DType.int64 and array.size:
        info = np.iinfo(np.int32)
        if array.min() < info.min or array.max() > info.max:
            raise ValueError(f"input {name!r}: int64 values in [{array.min()}, {array.max()}] "
                             "do not fit the .aimodel's int32 input")
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


async def _run(path: Path, inputs: Mapping[str, np.ndarray], entrypoint: str,
               ) -> dict[str, np.ndarray]:
    asset = AIModelAsset.load(path)
    async with asset.executable(specialization_options=None) as model:
        fn = model.load_function(entrypoint)
        missing = set(fn.desc.input_names) - set(inputs)
        if missing:
            raise ValueError(f"{path}: missing inputs {sorted(missing)}; the function takes "
                             f"{fn.desc.input_names}")
        out = await fn(inputs={k: NDArray(narrow_input(k, v)) for k, v in inputs.items()})
        arrays = {}
        for name in fn.desc.output_names:
            value = out[name]
            if not isinstance(value, NDArray):
                raise TypeError(f"{path}: output {name!r} is an image, not a tensor")
            arrays[name] = np.array(value.numpy())  # a copy: the model's buffers are freed
        return arrays


def run_aimodel(path: str | os.PathLike[str], inputs: Mapping[str, Any], *,
                entrypoint: str = "main") -> dict[str, np.ndarray]:
    """Run ``entrypoint`` of the ``.aimodel`` at ``path`` on Apple's interpreter.

    ``inputs`` maps input names to arrays (int64/float64 arrays are narrowed as on export).
    Returns output name -> array, in the function's output order.
    """
    arrays = {k: to_array(v) for k, v in inputs.items()}
    return _run_coroutine(_run(Path(path), arrays, entrypoint))


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
                   rtol: float = 1e-3, atol: float = 1e-4,
                   entrypoint: str = "main") -> AimodelVerifyReport:
    """Run the ``.aimodel`` at ``path`` on Apple's interpreter and compare every output with
    torch eager (and, given the ``program`` it was exported from, with our runtime).

    ``inputs`` is what the model takes: a tensor, a sequence, or a mapping by input name.
    Tolerances are :func:`coreai_torch.verify`'s.
    """
    if isinstance(inputs, Mapping):
        named = {k: to_array(v) for k, v in inputs.items()}
    else:
        seq = inputs if isinstance(inputs, list | tuple) else (inputs,)
        names = _run_coroutine(_input_names(Path(path), entrypoint))
        if len(seq) != len(names):
            raise ValueError(f"got {len(seq)} inputs, the .aimodel takes {names}")
        named = {n: to_array(v) for n, v in zip(names, seq, strict=True)}
    got = run_aimodel(path, named, entrypoint=entrypoint)
    expected = torch_outputs(model_or_ep, inputs)
    if len(got) != len(expected):
        raise ValueError(f"the .aimodel has {len(got)} outputs, torch returned {len(expected)}")
    against_torch = VerifyReport([compare(n, g, e, rtol, atol) for (n, g), e
                                  in zip(got.items(), expected, strict=True)], rtol, atol)
    against_runtime = None
    if program is not None:
        ours = program.run(named, entrypoint=entrypoint,
                           state={k: v.copy() for k, v in program.state.items()})
        against_runtime = VerifyReport([compare(n, got[n], ours[n], rtol, atol) for n in ours],
                                       rtol, atol)
    return AimodelVerifyReport(against_torch, against_runtime)
