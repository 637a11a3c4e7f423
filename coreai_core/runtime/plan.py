"""Plans: a graph compiled once into a flat list of kernel calls over numbered value slots.

Building a plan resolves every op's kernel, decodes its attributes (weights become arrays,
regions become nested plans, ``invoke`` callees become callable plans) and numbers the
values. Running it fills a list of slots: each step reads its operand slots, calls the kernel,
stores the results and clears the slots whose value has had its last use, so a chain of N
ops holds O(1) intermediates.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np

from coreai_core._ir import Graph, Operation, ProgramData, Value, WeightRef
from coreai_core._opdef import OPS
from coreai_core.errors import CoreAIError, MissingKernelError
from coreai_core.runtime._checks import check_result, check_results
from coreai_core.runtime._codegen import CompiledPlan, PlanStats, compile_plan
from coreai_core.runtime._dims import dim_checks
from coreai_core.runtime._inputs import bind_named, bind_state
from coreai_core.runtime._steps import Step
from coreai_core.runtime._table import KernelTable
from coreai_core.runtime.kernels._registry import preparer_of

__all__ = ["KernelError", "Plan", "PlanError", "Region", "Step"]

_ndarray = np.ndarray
_NEVER = 1 << 62  # "last use" of values that are outputs: never released


class KernelError(CoreAIError, RuntimeError):
    """A kernel failed while executing an op; the message names the op and its location.

    The kernel's own exception is chained as ``__cause__``; ``op`` is the failing Operation.
    """

    def __init__(self, message: str, op: Operation | None = None) -> None:
        self.op = op
        super().__init__(message)


class PlanError(CoreAIError, ValueError):
    """A graph cannot be planned: unbound weights, undefined values or unknown callees."""


def describe_op(op: Operation, graph: Graph | None = None) -> str:
    """``coreai.add at loc(...) in graph @main`` for messages."""
    text = op.name
    if op.location.is_known:
        text += f" at {op.location}"
    if graph is not None:
        text += f" in graph @{graph.name}"
    return text


def _kernel_error(op: Operation, graph: Graph, e: Exception, when: str = "") -> KernelError:
    """The project error for a kernel's exception: the op, where it is, and the cause."""
    if isinstance(e, MemoryError):
        need = str(e) or "its result types are " + ", ".join(str(r.type) for r in op.results)
        return KernelError(f"{describe_op(op, graph)} ran out of memory{when}: {need}", op)
    return KernelError(f"{describe_op(op, graph)} failed{when}: {type(e).__name__}: {e}", op)


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


class Problems:
    """Everything that prevents planning, gathered over a graph, its regions and callees."""

    def __init__(self) -> None:
        self.missing: dict[str, list[str]] = {}
        self.unbound: dict[str, None] = {}
        self.other: list[str] = []

    def __bool__(self) -> bool:
        return bool(self.missing or self.unbound or self.other)

    def merge(self, other: Problems) -> None:
        for name, where in other.missing.items():
            known = self.missing.setdefault(name, [])
            known.extend(w for w in where if w not in known)
        self.unbound.update(other.unbound)
        self.other.extend(p for p in other.other if p not in self.other)

    def raise_if_any(self) -> None:
        if not self:
            return
        lines = []
        for name in sorted(self.missing):
            where = self.missing[name]
            lines.append(f"{name}: no kernel ({len(where)} op(s); first: {where[0]})")
        for name in self.unbound:
            lines.append(f"weight @{name} has no data; bind it with program.bind_weights(...) "
                         "before running")
        lines.extend(self.other)
        text = "\n  ".join(lines)
        if self.missing:
            raise MissingKernelError(
                f"cannot run the program; {len(self.missing)} op kind(s) have no kernel:\n  "
                f"{text}\nregister one with Runtime().register_kernel(op_name) and run the "
                "program with that runtime")
        raise PlanError(f"cannot plan the program:\n  {text}")


class Region:
    """A region graph compiled once; calling it with arrays returns the list of its outputs."""

    __slots__ = ("captured", "plan")

    def __init__(self, plan: Plan, captured: Sequence[np.ndarray] = ()) -> None:
        self.plan = plan
        self.captured = captured

    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        return self.plan.run_arrays(arrays, self.captured)

    def __repr__(self) -> str:
        return f"Region(@{self.plan.graph.name})"


def _read_only(a: np.ndarray) -> np.ndarray:
    view = a.view()
    view.flags.writeable = False
    return view


def _restructure(fn: Callable[..., Any], layout: tuple[int | None, ...]) -> Callable[..., Any]:
    """Adapt a flat operand list to the op's parameters (None: missing, -1: one, n: a list)."""

    def call(*flat: Any, **kw: Any) -> Any:
        args: list[Any] = []
        i = 0
        for n in layout:
            if n is None:
                args.append(None)
            elif n < 0:
                args.append(flat[i])
                i += 1
            else:
                args.append(list(flat[i:i + n]))
                i += n
        return fn(*args, **kw)

    call.__qualname__ = getattr(fn, "__qualname__", "kernel")
    return call


def _with_captures(fn: Callable[..., Any], n_operands: int,
                   regions: list[tuple[str, Plan, slice]]) -> Callable[..., Any]:
    """Bind the outer values a region reads (passed after the operands) per call."""

    def call(*flat: Any, **kw: Any) -> Any:
        caps = flat[n_operands:]
        for name, plan, part in regions:
            kw[name] = Region(plan, caps[part])
        return fn(*flat[:n_operands], **kw)

    call.__qualname__ = getattr(fn, "__qualname__", "kernel")
    return call


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
        self._nested_plans: list[Plan] = []  # of regions, for explain()
        # weak: runtimes cache plans per program, and a cache must not keep its key alive
        self._program = None if program is None else weakref.ref(program)
        self.generation = table.generation
        self.problems = Problems()
        self.captures: list[Value] = []
        self.weights: dict[str, np.ndarray | None] = {}
        self._table = table
        self._resolve_callee = resolve_callee
        self._nested = nested
        self._slots: dict[Value, int] = {}
        self._template: list[Any] = []
        self._input_slots = [self._define(v) for v in graph.inputs.values()]
        self._state_inputs = [(k, self._define(v)) for k, v in graph.state_inputs.items()]
        self._capture_slots: list[int] = []
        self._steps: list[Step] = []
        self._constants: list[tuple[Value, int]] = []  # placed in the template when planning
        for op in graph.ops:
            self._plan_op(op)
        self._outputs = [(k, self._use(v, f"output {k!r}"))
                         for k, v in graph.output_values.items()]
        self._state_outputs = [(k, self._use(v, f"state output {k!r}"))
                               for k, v in graph.state_outputs.items()]
        self._output_slots = [s for _, s in self._outputs]
        self._release_after_last_use()
        self.input_types = {k: v.type for k, v in graph.inputs.items()}
        static = all(t.is_static for t in self.input_types.values())
        self._static_inputs = [(k, t.element_type.numpy, tuple(t.shape))
                               for k, t in self.input_types.items()] if static else []
        self.state_types = {k: v.type for k, v in graph.state_inputs.items()}
        # relations between the dims of inputs and state (derived dims), checked per run
        self.dim_checks = dim_checks([*self.input_types.values(), *self.state_types.values()])
        self.output_names = [k for k, _ in self._outputs]

    @property
    def program(self) -> ProgramData | None:
        """The program this plan was built from (None once it was garbage-collected)."""
        return None if self._program is None else self._program()

    # -- building ---------------------------------------------------------------------------
    def _define(self, v: Value) -> int:
        slot = len(self._template)
        self._slots[v] = slot
        self._template.append(None)
        return slot

    def _use(self, v: Value, what: str) -> int:
        slot = self._slots.get(v)
        if slot is not None:
            return slot
        if self._nested:  # a value of an enclosing graph: becomes an extra input
            self.captures.append(v)
            slot = self._define(v)
            self._capture_slots.append(slot)
            return slot
        self.problems.other.append(f"graph @{self.graph.name}: {what} uses {v!r}, which is not "
                                   "defined before it in this graph")
        return self._define(v)

    def _weight(self, ref: WeightRef) -> np.ndarray | None:
        data = self.program.weights.get(ref.name) if self.program is not None else None
        if data is None:
            self.problems.unbound[ref.name] = None
            return None
        self.weights[ref.name] = data
        return _read_only(np.asarray(data))

    def _plan_op(self, op: Operation) -> None:
        opdef = OPS.get(op.name)
        fn = self._table.get(op.name)
        if fn is None:
            self.problems.missing.setdefault(op.name, []).append(describe_op(op, self.graph))
        if opdef is not None:
            try:
                parts = opdef.split_operands(op.operands)
                spec: list[Any] = [parts[p.name] for p in opdef.operands]
            except CoreAIError as e:
                self.problems.other.append(f"{describe_op(op, self.graph)}: {e}")
                spec = list(op.operands)
        else:
            spec = list(op.operands)
        layout: list[int | None] = []
        ins: list[int] = []
        for item in spec:
            if item is None:
                layout.append(None)
            elif isinstance(item, list):
                layout.append(len(item))
                ins.extend(self._use(v, f"{op.name} operand") for v in item)
            else:
                layout.append(-1)
                ins.append(self._use(item, f"{op.name} operand"))
        n_operands = len(ins)
        kw: dict[str, Any] = {}
        captured: list[tuple[str, Plan, slice]] = []
        for name, a in op.attributes.items():
            if isinstance(a, Graph):
                sub = Plan(a, self._table, self.program, resolve_callee=self._resolve_callee,
                           nested=True, compiled=self.compiled)
                self.problems.merge(sub.problems)
                self._nested_plans.append(sub)
                if sub.captures:
                    start = len(ins)
                    ins.extend(self._use(v, f"{op.name} region {name!r}") for v in sub.captures)
                    captured.append((name, sub, slice(start - n_operands, len(ins) - n_operands)))
                else:
                    kw[name] = Region(sub)
                self.weights.update(sub.weights)
            elif isinstance(a, WeightRef):
                kw[name] = self._weight(a)
            elif isinstance(a, np.ndarray):
                kw[name] = _read_only(a)
            else:
                kw[name] = a
        if op.name == "coreai.invoke":
            if self._resolve_callee is None:
                self.problems.other.append(f"{describe_op(op, self.graph)}: invoke needs the "
                                           "program's graphs")
            else:
                kw["callee"] = self._resolve_callee(op.attributes["callee"], self.problems)
        results = [self._define(r) for r in op.results]
        if fn is None or self.problems:
            return  # keep gathering problems; nothing of this plan will run
        call = self._prepared(op, fn, spec, kw)
        if any(n != -1 for n in layout):
            call = _restructure(call, tuple(layout))
        if captured:
            call = _with_captures(call, n_operands, captured)
        expect = tuple((r.type.element_type.numpy, r.type.rank) for r in op.results)
        multi = len(results) != 1 or (opdef is not None and "multi_result" in opdef.traits)
        out: int | tuple[int, ...] = tuple(results) if multi else results[0]
        if op.name == "coreai.constant" and not ins:
            self._template[results[0]] = self._constant(op, call, kw, expect[0])
            self._constants.append((op.results[0], results[0]))
            return
        self._steps.append(Step(call, tuple(ins), kw, out, expect, (), op, fn))

    def _prepared(self, op: Operation, fn: Callable[..., Any], spec: list[Any],
                  kw: dict[str, Any]) -> Callable[..., Any]:
        """The kernel specialized for this op by its ``prepare`` (see ``prepared_by``), or
        the kernel itself. A ``prepare`` that rejects the op leaves the kernel in place: it
        then raises at run time, naming the op."""
        prepare = preparer_of(fn)
        if prepare is None:
            return fn
        types = [None if item is None else [v.type for v in item] if isinstance(item, list)
                 else item.type for item in spec]
        try:
            prepared = prepare(types, **kw)
        except (CoreAIError, ValueError, TypeError, ZeroDivisionError):
            return fn
        return fn if prepared is None else prepared

    def _constant(self, op: Operation, call: Callable[..., Any], kw: dict[str, Any],
                  expect: tuple[np.dtype, int]) -> np.ndarray:
        try:
            value = check_result(call(**kw), expect)
        except Exception as e:
            raise _kernel_error(op, self.graph, e, " while planning") from e
        return value if not value.flags.writeable else _read_only(value)

    def _release_after_last_use(self) -> None:
        last: dict[int, int] = {}
        for i, step in enumerate(self._steps):
            for s in step.ins:
                last[s] = i
            outs = step.out if isinstance(step.out, tuple) else (step.out,)
            for s in outs:
                last.setdefault(s, i)  # never read: released right after being made
        for s in self._output_slots + [s for _, s in self._state_outputs]:
            last[s] = _NEVER
        free: list[list[int]] = [[] for _ in self._steps]
        for s, i in last.items():
            if i != _NEVER:
                free[i].append(s)
        self._steps = [step._replace(free=tuple(sorted(f)))
                       for step, f in zip(self._steps, free, strict=True)]
        # the interpreter's loop reads plain tuples: CPython unpacks an exact tuple on a fast
        # path that a NamedTuple (a subclass) misses, ~45 ns per step
        self._calls: list[tuple[Any, ...]] = [tuple(step[:6]) for step in self._steps]

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
            raise _kernel_error(self._steps[i].op, self.graph, e) from e

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
            raise _kernel_error(self._steps[i].op, self.graph, e) from e

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
