"""Run an ``.aimodel`` on Apple's bundled Core AI interpreter and compare it with torch."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, MutableMapping
from typing import Any

import attrs
import torch
from torch.export import ExportedProgram

from coreai_core import Program
from coreai_core.runtime import to_array
from coreai_torch.aimodel.loaded import LoadedAimodel, load_aimodel
from coreai_torch.verify import VerifyReport, compare, torch_outputs

__all__ = ["AimodelVerifyReport", "verify_aimodel"]


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
                   path: str | os.PathLike[str] | LoadedAimodel, inputs: Any, *,
                   program: Program | None = None,
                   state: MutableMapping[str, Any] | None = None,
                   rtol: float = 1e-3, atol: float = 1e-4,
                   entrypoint: str = "main", isolated: bool = True) -> AimodelVerifyReport:
    """Run the ``.aimodel`` at ``path`` on Apple's interpreter and compare every output with
    torch eager (and, given the ``program`` it was exported from, with our runtime).

    ``path`` may also be an asset loaded with :func:`load_aimodel` (left open), so that a
    decode loop verifies each step without reloading.

    A path is checked and loaded with ``isolated`` (default True: Apple's interpreter runs in
    a child process, so an asset that makes it abort raises
    :class:`~coreai_torch.aimodel.AimodelInterpreterError` with Apple's message instead of
    ending this process; see :func:`load_aimodel`).

    ``inputs`` is what the model takes: a tensor, a sequence, or a mapping by input name.
    Tolerances are :func:`coreai_torch.verify`'s.

    A function with state runs from ``state`` (see :meth:`LoadedAimodel.run`), which is
    updated in place, so a decode loop can verify step after step; without it, from a copy of
    ``program.state``. Torch eager runs on a copy of the model with its current buffers (so
    advance the model along with ``state``). Our runtime runs from a copy of the same state,
    and the new state (``state:<name>`` in the report) is compared with its new state too.
    """
    if state is None and program is not None:
        state = {k: v.copy() for k, v in program.state.items()}
    before = {} if state is None else {k: to_array(v).copy() for k, v in state.items()}
    opened = (contextlib.nullcontext(path) if isinstance(path, LoadedAimodel)
              else load_aimodel(path, isolated=isolated))
    with opened as asset:
        if isinstance(inputs, Mapping):
            named = {k: to_array(v) for k, v in inputs.items()}
        else:
            seq = inputs if isinstance(inputs, list | tuple) else (inputs,)
            names = asset.input_names(entrypoint)
            if len(seq) != len(names):
                raise ValueError(f"got {len(seq)} inputs, the .aimodel takes {names}")
            named = {n: to_array(v) for n, v in zip(names, seq, strict=True)}
        got = asset.run(named, entrypoint=entrypoint, state=state)
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
