"""Building a plan: a graph turned once into kernel calls over numbered value slots.

:class:`PlanBuilder` resolves every op's kernel, decodes its attributes (weights become
read-only arrays, regions become nested plans, ``invoke`` callees become callable plans),
numbers the values and marks where each value has its last use. It gathers everything that
prevents planning in :class:`Problems` rather than stopping at the first. Running the steps is
:class:`~coreai_core.runtime.plan.Plan`'s part; this module does not import it (a nested plan
is made by the ``sub_plan`` callable the plan passes in).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from coreai_core._ir import Graph, Operation, ProgramData, Value, WeightRef
from coreai_core._opdef import OPS
from coreai_core.errors import CoreAIError, MissingKernelError
from coreai_core.runtime import _plan_time
from coreai_core.runtime._checks import check_result
from coreai_core.runtime._steps import Step
from coreai_core.runtime._table import KernelTable
from coreai_core.runtime.kernels._registry import preparer_of

__all__ = ["KernelError", "PlanBuilder", "PlanError", "Problems", "Region", "SubPlan",
           "describe_op", "kernel_error"]

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


def kernel_error(op: Operation, graph: Graph, e: Exception, when: str = "") -> KernelError:
    """The project error for a kernel's exception: the op, where it is, and the cause."""
    if isinstance(e, MemoryError):
        need = str(e) or "its result types are " + ", ".join(str(r.type) for r in op.results)
        return KernelError(f"{describe_op(op, graph)} ran out of memory{when}: {need}", op)
    return KernelError(f"{describe_op(op, graph)} failed{when}: {type(e).__name__}: {e}", op)


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


class SubPlan(Protocol):
    """What building reads of a region's plan (a :class:`~coreai_core.runtime.plan.Plan`)."""

    graph: Graph
    problems: Problems
    captures: list[Value]
    weights: dict[str, np.ndarray | None]

    def run_arrays(self, arrays: Sequence[np.ndarray],
                   captured: Sequence[np.ndarray] = ()) -> list[np.ndarray]: ...


class Region:
    """A region graph compiled once; calling it with arrays returns the list of its outputs."""

    __slots__ = ("captured", "plan")

    def __init__(self, plan: SubPlan, captured: Sequence[np.ndarray] = ()) -> None:
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
                   regions: list[tuple[str, SubPlan, slice]]) -> Callable[..., Any]:
    """Bind the outer values a region reads (passed after the operands) per call."""

    def call(*flat: Any, **kw: Any) -> Any:
        caps = flat[n_operands:]
        for name, plan, part in regions:
            kw[name] = Region(plan, caps[part])
        return fn(*flat[:n_operands], **kw)

    call.__qualname__ = getattr(fn, "__qualname__", "kernel")
    return call


class PlanBuilder:
    """The steps and slots of one graph, built on construction (then only read).

    Slots are numbered in definition order: the inputs, the state inputs, then each op's
    results (a value of an enclosing graph that a nested graph reads gets a slot where it is
    first used, and becomes one of ``captures``). ``template`` holds what each slot holds
    before a run: a planned constant, else None.
    """

    def __init__(self, graph: Graph, table: KernelTable, program: ProgramData | None, *,
                 resolve_callee: Callable[[str, Problems], Callable[..., Any]] | None,
                 nested: bool, sub_plan: Callable[[Graph], SubPlan]) -> None:
        self.graph = graph
        self.problems = Problems()
        self.captures: list[Value] = []
        self.weights: dict[str, np.ndarray | None] = {}
        self.nested_plans: list[SubPlan] = []  # of regions, for explain()
        self.slots: dict[Value, int] = {}
        self.template: list[Any] = []
        self.capture_slots: list[int] = []
        self.steps: list[Step] = []
        self.constants: list[tuple[Value, int]] = []  # placed in the template when planning
        self._constant_slots: set[int] = set()
        self._table = table
        self._program = program
        self._resolve_callee = resolve_callee
        self._nested = nested
        self._sub_plan = sub_plan
        self.input_slots = [self._define(v) for v in graph.inputs.values()]
        self.state_inputs = [(k, self._define(v)) for k, v in graph.state_inputs.items()]
        for op in graph.ops:
            self._plan_op(op)
        self.outputs = [(k, self._use(v, f"output {k!r}"))
                        for k, v in graph.output_values.items()]
        self.state_outputs = [(k, self._use(v, f"state output {k!r}"))
                              for k, v in graph.state_outputs.items()]
        self._release_after_last_use()

    def _define(self, v: Value) -> int:
        slot = len(self.template)
        self.slots[v] = slot
        self.template.append(None)
        return slot

    def _use(self, v: Value, what: str) -> int:
        slot = self.slots.get(v)
        if slot is not None:
            return slot
        if self._nested:  # a value of an enclosing graph: becomes an extra input
            self.captures.append(v)
            slot = self._define(v)
            self.capture_slots.append(slot)
            return slot
        self.problems.other.append(f"graph @{self.graph.name}: {what} uses {v!r}, which is not "
                                   "defined before it in this graph")
        return self._define(v)

    def _weight(self, ref: WeightRef) -> np.ndarray | None:
        program = self._program
        data = program.weights.get(ref.name) if program is not None else None
        if data is None:
            self.problems.unbound[ref.name] = None
            return None
        self.weights[ref.name] = data
        return _read_only(np.asarray(data))

    def _operand_spec(self, op: Operation) -> tuple[Any, list[Any]]:
        """The op's definition (None if unknown) and its operands grouped as its parameters."""
        opdef = OPS.get(op.name)
        if opdef is None:
            return None, list(op.operands)
        try:
            parts = opdef.split_operands(op.operands)
            return opdef, [parts[p.name] for p in opdef.operands]
        except CoreAIError as e:
            self.problems.other.append(f"{describe_op(op, self.graph)}: {e}")
            return opdef, list(op.operands)

    def _plan_op(self, op: Operation) -> None:
        fn = self._table.get(op.name)
        if fn is None:
            self.problems.missing.setdefault(op.name, []).append(describe_op(op, self.graph))
        opdef, spec = self._operand_spec(op)
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
        captured: list[tuple[str, SubPlan, slice]] = []
        for name, a in op.attributes.items():
            if isinstance(a, Graph):
                sub = self._sub_plan(a)
                self.problems.merge(sub.problems)
                self.nested_plans.append(sub)
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
        call = self._prepared(fn, spec, kw)
        if any(n != -1 for n in layout):
            call = _restructure(call, tuple(layout))
        if captured:
            call = _with_captures(call, n_operands, captured)
        expect = tuple((r.type.element_type.numpy, r.type.rank) for r in op.results)
        multi = len(results) != 1 or (opdef is not None and "multi_result" in opdef.traits)
        out: int | tuple[int, ...] = tuple(results) if multi else results[0]
        if (op.name == "coreai.constant" and not ins) or _plan_time.folds_at_plan_time(
                op, opdef, ins, self._constant_slots):
            # a constant, or a weight rebuilt once instead of per run (see _plan_time)
            operands = [self.template[s] for s in ins]
            self.template[results[0]] = self._constant(op, call, kw, expect[0], operands)
            self.constants.append((op.results[0], results[0]))
            self._constant_slots.add(results[0])
            return
        widened = _plan_time.widened_half_matmul(op, fn, ins, self.template,
                                                 self._constant_slots)
        if widened is not None:
            call = widened
        self.steps.append(Step(call, tuple(ins), kw, out, expect, (), op, fn))

    @staticmethod
    def _prepared(fn: Callable[..., Any], spec: list[Any],
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
                  expect: tuple[np.dtype, int], operands: Sequence[Any] = ()) -> np.ndarray:
        try:
            value = check_result(call(*operands, **kw), expect)
        except Exception as e:
            raise kernel_error(op, self.graph, e, " while planning") from e
        return value if not value.flags.writeable else _read_only(value)

    def _release_after_last_use(self) -> None:
        """Mark in each step the slots whose value has its last use there (outputs never)."""
        last: dict[int, int] = {}
        for i, step in enumerate(self.steps):
            for s in step.ins:
                last[s] = i
            outs = step.out if isinstance(step.out, tuple) else (step.out,)
            for s in outs:
                last.setdefault(s, i)  # never read: released right after being made
        for _, s in self.outputs + self.state_outputs:
            last[s] = _NEVER
        free: list[list[int]] = [[] for _ in self.steps]
        for s, i in last.items():
            if i != _NEVER:
                free[i].append(s)
        self.steps = [step._replace(free=tuple(sorted(f)))
                      for step, f in zip(self.steps, free, strict=True)]
