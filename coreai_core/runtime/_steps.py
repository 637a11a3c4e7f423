"""A plan's steps as typed records, and the part of a plan that code generation reads.

:mod:`coreai_core.runtime._planner` builds the steps; :mod:`coreai_core.runtime._codegen`
turns a :class:`StepProgram` (which a plan is) into one Python function. Neither module
imports the other's internals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

from coreai_core._ir import Graph, Operation, Value

__all__ = ["Step", "StepProgram"]


class Step(NamedTuple):
    """One kernel call of a plan, over numbered value slots.

    A NamedTuple: the interpreter unpacks it as fast as a plain tuple.
    """

    call: Callable[..., Any]  # the kernel adapted to the flat operand list (and captures)
    ins: tuple[int, ...]  # operand slots, then the slots of values regions capture
    kw: dict[str, Any]  # decoded attributes, passed as keywords
    out: int | tuple[int, ...]  # the result slot; a tuple for multi-result ops
    expect: tuple[tuple[np.dtype, int], ...]  # (dtype, rank) of each result
    free: tuple[int, ...]  # slots whose value has its last use in this step
    op: Operation  # the op this step runs (for messages and recording)
    kernel: Callable[..., Any]  # the registered kernel, before adapting


class StepProgram(Protocol):
    """What code generation reads of a plan: its steps and how slots enter and leave.

    The generated function takes ``parameter_slots`` in order and returns the values of
    ``result_slots``; any other slot a step reads holds the plan's ``constant(slot)``.
    """

    @property
    def graph(self) -> Graph: ...

    @property
    def steps(self) -> Sequence[Step]: ...

    @property
    def parameter_slots(self) -> tuple[int, ...]: ...

    @property
    def result_slots(self) -> tuple[int, ...]: ...

    @property
    def slot_values(self) -> Mapping[int, Value]: ...

    def constant(self, slot: int) -> Any: ...
