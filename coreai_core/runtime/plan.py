"""Plans: a graph compiled once into a flat list of kernel calls over numbered value slots.

Building a plan (:mod:`coreai_core.runtime._planner`) resolves every op's kernel, decodes its
attributes (weights become arrays, regions become nested plans, ``invoke`` callees become
callable plans) and numbers the values. Running it fills a list of slots: each step reads its
operand slots, calls the kernel, stores the results and clears the slots whose value has had
its last use, so a chain of N ops holds O(1) intermediates.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np

from coreai_core._ir import Graph, Operation, ProgramData, Value
from coreai_core.runtime._checks import check_result, check_results
from coreai_core.runtime._codegen import CompiledPlan, PlanStats, compile_plan
from coreai_core.runtime._dims import dim_checks
from coreai_core.runtime._inputs import bind_named, bind_state
from coreai_core.runtime._planner import (
    KernelError,
    PlanBuilder,
    PlanError,
    Problems,
    Region,
    describe_op,
    kernel_error,
)
from coreai_core.runtime._steps import Step
from coreai_core.runtime._table import KernelTable

__all__ = ["KernelError", "Plan", "PlanError", "Region", "Step"]

_ndarray = np.ndarray


def _own_copy(a: np.ndarray, what: str, producer: Operation | None,
              graph: Graph) -> np.ndarray:
    """A copy of ``a`` (an output or new state value), or a clear error when it does not fit
    in memory (a broadcast view of a huge shape is cheap until copied)."""
    try:
        return a.copy()
    except MemoryError as e:
        size = a.size * a.itemsize
        where = f", the result of {describe_op(producer)}" if producer is not None else ""
        raise KernelError(f"{what} of graph @{graph.name}{where} does not fit in memory: "
                          f"{size / 2**30:.2f} GiB for shape {a.shape} of {a.dtype} ({e})",
                          producer) from e


class Plan:
    """A graph compiled for execution: obtain one with ``Runtime.plan(program, entrypoint)``.

    ``run(inputs, state=...)`` validates and runs; ``run_arrays(arrays)`` is the unchecked
    positional form used for regions and ``invoke``. A plan is immutable once built and may be
    run from several threads at once.
    """

    def __init__(self, graph: Graph, table: KernelTable, program: ProgramData | None = None, *,
                 resolve_callee: Callable[[str, Problems], Callable[..., Any]] | None = None,
                 nested: bool = False, compiled: bool = True) -> None:
        self.graph = graph
        self.compiled = compiled
        self._compiled: CompiledPlan | None = None
        self._only_ufuncs: bool | None = None
        # weak: runtimes cache plans per program, and a cache must not keep its key alive
        self._program = None if program is None else weakref.ref(program)
        self.generation = table.generation

        def sub_plan(region: Graph) -> Plan:
            return Plan(region, table, program, resolve_callee=resolve_callee, nested=True,
                        compiled=compiled)

        built = PlanBuilder(graph, table, program, resolve_callee=resolve_callee,
                            nested=nested, sub_plan=sub_plan)
        self.problems = built.problems
        self.captures = built.captures
        self.weights = built.weights
        self._nested_plans = built.nested_plans  # of regions, for explain()
        self._slots = built.slots
        self._template = built.template
        self._input_slots = built.input_slots
        self._state_inputs = built.state_inputs
        self._capture_slots = built.capture_slots
        self._steps = built.steps
        self._constants = built.constants
        self._outputs = built.outputs
        self._state_outputs = built.state_outputs
        self._output_slots = [s for _, s in self._outputs]
        # the interpreter's loop reads plain tuples: CPython unpacks an exact tuple on a fast
        # path that a NamedTuple (a subclass) misses, ~45 ns per step
        self._calls: list[tuple[Any, ...]] = [tuple(step[:6]) for step in self._steps]
        self.input_types = {k: v.type for k, v in graph.inputs.items()}
        static = all(t.is_static for t in self.input_types.values())
        self._static_inputs = [(k, t.element_type.numpy, tuple(t.shape))
                               for k, t in self.input_types.items()] if static else []
        self.state_types = {k: v.type for k, v in graph.state_inputs.items()}
        self._static_state = [(k, t.element_type.numpy, tuple(t.shape))
                              for k, t in self.state_types.items()
                              ] if all(t.is_static for t in self.state_types.values()) else None
        # relations between the dims of inputs and state (derived dims), checked per run
        self.dim_checks = dim_checks([*self.input_types.values(), *self.state_types.values()])
        self.output_names = [k for k, _ in self._outputs]

    @property
    def program(self) -> ProgramData | None:
        """The program this plan was built from (None once it was garbage-collected)."""
        return None if self._program is None else self._program()

    # -- what code generation reads (a StepProgram) -----------------------------------------
    @property
    def steps(self) -> tuple[Step, ...]:
        """The kernel calls of one run, in order."""
        return tuple(self._steps)

    @property
    def parameter_slots(self) -> tuple[int, ...]:
        """The slots of the inputs, then the state inputs, then the captured outer values:
        the parameters of the compiled function, in order."""
        return (*self._input_slots, *(s for _, s in self._state_inputs), *self._capture_slots)

    @property
    def result_slots(self) -> tuple[int, ...]:
        """The slots of the outputs, then of the state outputs, in order."""
        return tuple(s for _, s in self._outputs + self._state_outputs)

    @property
    def slot_values(self) -> dict[int, Value]:
        """The Value each slot holds."""
        return {s: v for v, s in self._slots.items()}

    def constant(self, slot: int) -> Any:
        """What ``slot`` holds before a run: a planned constant, else None."""
        return self._template[slot]

    # -- running ----------------------------------------------------------------------------
    def run(self, inputs: Mapping[str, Any] | Sequence[Any] | None = None,
            state: MutableMapping[str, Any] | None = None, *,
            record: dict[Value, np.ndarray] | None = None,
            timings: list[tuple[Operation, float]] | None = None) -> dict[str, np.ndarray]:
        """Validate ``inputs`` (and ``state``), run, write the new state back, return outputs.

        ``state`` defaults to ``program.state``; runs that read and update the program's own
        state hold ``program.state_lock`` from reading it to writing it back, so concurrent
        runs never lose an update. New state never shares memory with the inputs or outputs
        of the call. With ``record`` (a dict), every op result of this graph is stored in it
        keyed by its Value. With ``timings`` (a list), the plan runs interpreted and appends
        (op, seconds) for each step of this graph, in order (a step's regions and callees
        count in its time). Nothing runs when an input is bad.
        """
        arrays = self._exact_inputs(inputs)
        dims: dict[str, tuple[int, str]] = {}  # symbol -> size; the exact path binds none
        if arrays is None:
            arrays = bind_named(self.graph.name, self.input_types, inputs, dims,
                                self.dim_checks)
        if not self._state_inputs:
            return self._outputs_of(self._execute_with(arrays, (), record, timings))
        program = self.program
        if state is None and program is None:
            raise RuntimeError(f"graph @{self.graph.name} has state: pass state=..., the plan's "
                               "program no longer exists")
        if state is not None:
            return self._run_stateful(arrays, state, program, dims, record, timings)
        assert program is not None
        with program.state_lock:
            return self._run_stateful(arrays, program.state, program, dims, record, timings)

    def _run_stateful(self, arrays: Sequence[np.ndarray], state_map: MutableMapping[str, Any],
                      program: ProgramData | None, dims: dict[str, tuple[int, str]],
                      record: dict[Value, np.ndarray] | None,
                      timings: list[tuple[Operation, float]] | None) -> dict[str, np.ndarray]:
        state_arrays = self._exact_state(state_map)
        if state_arrays is None:
            known = program.state_names if program is not None else ()
            state_arrays = bind_state(self.graph.name, self.state_types, state_map, known, dims,
                                      self.dim_checks)
        results = self._execute_with(arrays, state_arrays, record, timings)
        outputs = self._outputs_of(results)
        # the new state is the program's (or the state mapping's) own: a copy wherever it
        # would share memory with an array the caller holds (an input it passed, an output
        # it gets back) or with another state entry
        held: list[np.ndarray] = [*arrays, *outputs.values()]
        for (k, _), a in zip(self._state_outputs, results[len(self._outputs):], strict=True):
            if not a.flags.writeable or any(np.may_share_memory(a, b) for b in held):
                a = _own_copy(a, f"new state {k!r}", self.graph.state_outputs[k].owner,
                              self.graph)
            held.append(a)
            state_map[k] = a
        return outputs

    def _execute_with(self, arrays: Sequence[np.ndarray], state_arrays: Sequence[np.ndarray],
                      record: dict[Value, np.ndarray] | None,
                      timings: list[tuple[Operation, float]] | None = None) -> tuple[Any, ...]:
        """Run on checked arrays; the outputs, then the new state values, in order."""
        if self.compiled and record is None and timings is None:
            with np.errstate(all="ignore"):
                return self._call_compiled(*arrays, *state_arrays)
        env = self._template.copy()
        for s, a in zip(self._input_slots, arrays, strict=True):
            env[s] = a
        for (_, s), a in zip(self._state_inputs, state_arrays):
            env[s] = a
        with np.errstate(all="ignore"):
            if timings is None:
                self._execute(env, record)
            else:
                self._execute_timed(env, timings)
        return tuple(env[s] for _, s in self._outputs + self._state_outputs)

    def _outputs_of(self, results: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        """The outputs by name, each writable (read-only views of weights and broadcasts
        copied)."""
        return {k: a if a.flags.writeable else
                _own_copy(a, f"output {k!r}", self.graph.output_values[k].owner, self.graph)
                for (k, _), a in zip(self._outputs, results)}

    def _exact_inputs(self, inputs: Any) -> list[np.ndarray] | None:
        """The arrays of a dict giving every input with exactly its static type (the common
        case, checked cheaply), else None: ``bind_named`` then converts or explains."""
        if inputs.__class__ is not dict or len(inputs) != len(self._static_inputs):
            return None
        arrays = []
        for name, dtype, shape in self._static_inputs:
            a = inputs.get(name)
            if a.__class__ is not _ndarray or a.dtype is not dtype or a.shape != shape:
                return None
            arrays.append(a)
        return arrays

    def _exact_state(self, state_map: Mapping[str, Any]) -> list[np.ndarray] | None:
        """The state arrays when ``state_map`` holds exactly this graph's static state, each
        an array of its exact type (the common case, checked cheaply; static types have no
        dims to relate), else None: ``bind_state`` then converts or explains."""
        static = self._static_state
        if static is None or len(state_map) != len(static):
            return None
        arrays = []
        for name, dtype, shape in static:
            a = state_map.get(name)
            if a.__class__ is not _ndarray or a.dtype is not dtype or a.shape != shape:
                return None
            arrays.append(a)
        return arrays

    def run_arrays(self, arrays: Sequence[np.ndarray],
                   captured: Sequence[np.ndarray] = ()) -> list[np.ndarray]:
        """Run on positional input arrays without validation; returns outputs in order."""
        if self.compiled:
            return list(self._call_compiled(*arrays, *captured)[:len(self._outputs)])
        env = self._template.copy()
        for s, a in zip(self._input_slots, arrays, strict=True):
            env[s] = a
        for s, a in zip(self._capture_slots, captured, strict=True):
            env[s] = a
        self._execute(env, None)
        return [env[s] for s in self._output_slots]

    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        return self.run_arrays(arrays)

    # -- compiled form ----------------------------------------------------------------------
    def compile(self) -> CompiledPlan:
        """The generated function of this plan (built on first use, then kept)."""
        if self._compiled is None:
            self._compiled = compile_plan(self)
        return self._compiled

    @property
    def stats(self) -> PlanStats:
        """Step count, direct ufunc calls, buffers reused and peak intermediate bytes."""
        return self.compile().stats

    @property
    def calls_only_ufuncs(self) -> bool:
        """Whether a compiled run calls nothing but numpy ufuncs (every step a direct ufunc
        call): such a run never reaches BLAS, so it need not hold BLAS's thread count."""
        if self._only_ufuncs is None:
            self._only_ufuncs = self.compiled and self.stats.direct_ufunc_calls == len(self._steps)
        return self._only_ufuncs

    def explain(self, _seen: set[int] | None = None) -> str:
        """The generated source of this plan, its regions and its callees, with stats."""
        seen = _seen if _seen is not None else set()
        seen.add(id(self))
        parts = [f"# plan @{self.graph.name}: {self.stats}\n{self.compile().source}"]
        callees = [step.kw.get("callee") for step in self._steps]
        for sub in [*self._nested_plans, *callees]:
            if isinstance(sub, Plan) and id(sub) not in seen:
                parts.append(sub.explain(seen))
        return "\n".join(parts)

    def _call_compiled(self, *args: np.ndarray) -> tuple[Any, ...]:
        compiled = self._compiled or self.compile()
        try:
            return compiled.fn(*args)
        except Exception as e:
            i = compiled.failing_step(e.__traceback__)
            if i is None:
                raise
            raise kernel_error(self._steps[i].op, self.graph, e) from e

    def _execute(self, env: list[Any], record: dict[Value, np.ndarray] | None,
                 only: int | None = None) -> None:
        """Run the steps (only step ``only`` if given) on ``env``, the slot values."""
        if record is not None:
            record.update((v, env[s]) for v, s in self._constants)
        calls = enumerate(self._calls) if only is None else [(only, self._calls[only])]
        i = -1
        try:
            for i, (call, ins, kw, out, expect, free) in calls:
                r = call(*[env[s] for s in ins], **kw)
                if out.__class__ is int:
                    dtype, ndim = expect[0]
                    if r.__class__ is not _ndarray or r.dtype is not dtype or r.ndim != ndim:
                        r = check_result(r, expect[0])
                    env[out] = r
                    if record is not None:
                        record[self._steps[i].op.results[0]] = r
                else:
                    rs = check_results(r, expect)
                    for s, v in zip(out, rs, strict=True):
                        env[s] = v
                    if record is not None:
                        record.update(zip(self._steps[i].op.results, rs, strict=True))
                for s in free:
                    env[s] = None
        except Exception as e:
            if i < 0:
                raise
            raise kernel_error(self._steps[i].op, self.graph, e) from e

    def _execute_timed(self, env: list[Any], timings: list[tuple[Operation, float]]) -> None:
        """``_execute`` one step at a time, timing each (the plain loop stays free of clock
        calls)."""
        clock = time.perf_counter
        for i, step in enumerate(self._steps):
            t0 = clock()
            self._execute(env, None, i)
            timings.append((step.op, clock() - t0))

    def __repr__(self) -> str:
        return f"<Plan @{self.graph.name}: {len(self._steps)} steps>"
