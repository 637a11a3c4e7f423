"""The Runtime: a kernel table (an overlay on the defaults) plus cached plans per program."""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from coreai_core._ir import Graph, Operation, ProgramData, Value
from coreai_core.runtime._inputs import writable
from coreai_core.runtime._rng import Seed, seeded
from coreai_core.runtime._table import DEFAULT_TABLE, KernelTable
from coreai_core.runtime._threads import BLAS, RunContext, available_cores
from coreai_core.runtime.kernels._registry import Kernel
from coreai_core.runtime.plan import Plan, Problems, describe_op

__all__ = ["Runtime", "default_runtime", "evaluate_op", "run_graph_collect", "run_program"]

_TOKENS = itertools.count()


class _LazyCallee:
    """A callee whose plan is still being built (recursive ``invoke``): resolved on first call.

    It lives inside a cached plan, so it holds the program weakly (see :class:`_PlanCache`).
    """

    def __init__(self, runtime: Runtime, program: ProgramData, name: str) -> None:
        self._runtime, self._program, self._name = runtime, weakref.ref(program), name
        self._plan: Plan | None = None

    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        if self._plan is None:
            program = self._program()
            if program is None:
                raise RuntimeError(f"invoke @{self._name}: the program no longer exists")
            self._plan = self._runtime.plan(program, self._name)
        return self._plan.run_arrays(arrays)


class _PlanCache:
    """A runtime's plans, per program and entrypoint, that never keep a program alive.

    Keyed by program identity: a program compares structurally and is unhashable, so a
    ``WeakKeyDictionary`` cannot hold it; a weak reference with a callback drops a program's
    entry when the program is collected. Plans refer to their program only weakly (graphs
    point to their program weakly too), so the cache does not keep programs alive. An entry
    is stale once the program's ``generation`` moved on: every edit of the program's IR moves
    it (see :class:`coreai_core._ir.ProgramData`), and so does ``program.invalidate()``.
    """

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref[ProgramData], int, dict[str, Plan]]] = {}
        self._lock = threading.Lock()

    def get(self, program: ProgramData, entrypoint: str) -> Plan | None:
        entry = self._entries.get(id(program))
        if entry is None or entry[0]() is not program or entry[1] != program.generation:
            return None
        return entry[2].get(entrypoint)

    def put(self, program: ProgramData, entrypoint: str, plan: Plan) -> None:
        key = id(program)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0]() is not program:
                entries = self._entries
                ref = weakref.ref(program, lambda _: entries.pop(key, None))
                entry = (ref, program.generation, {})
            elif entry[1] != program.generation:
                entry = (entry[0], program.generation, {})
            entry[2][entrypoint] = plan
            self._entries[key] = entry

    def __len__(self) -> int:
        return sum(len(e[2]) for e in self._entries.values() if e[0]() is not None)


class Runtime:
    """Executes programs with numpy kernels.

    A runtime's kernel table is an overlay on the process-wide default table: kernels
    registered with :meth:`register_kernel` are visible to this runtime only (never to the
    defaults or to other runtimes, also across threads) and take priority over defaults.
    ``Program.run`` uses the default runtime; to use custom kernels::

        rt = Runtime()

        @rt.register_kernel("my_lib.scaled_add")
        def scaled_add(x, y, *, alpha):
            return x + alpha * y

        outputs = rt.run(program, {"x": x})

    ``kernels`` registers several kernels at once (overriding defaults needs
    ``allow_override``); ``base=None`` makes a runtime with only its own kernels.
    Plans run as generated Python functions (see :meth:`explain_plan`); ``compiled=False``
    interprets them step by step instead (for debugging; both give identical results).
    Large kernels (matrix products, convolutions, the float64 blocks of GELU/SiLU/sigmoid)
    run in blocks fixed by the shapes, spread over ``threads`` threads (the calling thread
    and a pool of ``threads - 1``): by default every core the process may use (its CPU
    affinity and cgroup quota); ``threads=n`` caps it. Results are bit-identical whatever the
    thread count. BLAS runs on one thread during a run (the caller's setting is restored
    afterwards): the runtime's blocks are the only parallelism, with no oversubscription.
    Plans are built once per (program, entrypoint) and cached in the runtime, without keeping
    the program alive; any edit of the program's IR makes them stale (``program.invalidate()``
    is needed only after writing into a weight's or attribute's array in place).
    """

    def __init__(self, kernels: Mapping[str, Kernel] | None = None, *,
                 allow_override: bool = False, base: KernelTable | None = DEFAULT_TABLE,
                 compiled: bool = True, threads: int | None = None) -> None:
        if threads is None:
            threads = available_cores()
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
            raise ValueError(f"Runtime(threads=...) must be a positive int or None (every "
                             f"available core), got {threads!r}")
        self.kernels = KernelTable(parent=base)
        self.compiled = compiled
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid = 0  # the process that made the pool: a forked child makes its own
        self._pool_lock = threading.Lock()
        self._token = next(_TOKENS)
        self._plans = _PlanCache()
        self._building = threading.local()
        for name, fn in (kernels or {}).items():
            self.kernels.register(name, fn, allow_override=allow_override)

    # -- kernels -----------------------------------------------------------------------------
    def register_kernel(self, op_name: str, fn: Kernel | None = None, *,
                        allow_override: bool = False) -> Any:
        """Register a kernel for ``op_name`` on this runtime only (decorator or direct call).

        The kernel is called with the op's operands in parameter order (a variadic operand as
        a list, a missing optional one as None), then its attributes as keyword arguments,
        and returns one array or a tuple of arrays. Overriding an existing kernel (a default
        one included) needs ``allow_override=True``.
        """
        return self.kernels.register(op_name, fn, allow_override=allow_override)

    def kernel_for(self, op_name: str) -> Kernel | None:
        """The kernel this runtime uses for ``op_name``, or None."""
        return self.kernels.get(op_name)

    # -- planning ----------------------------------------------------------------------------
    def plan(self, program: ProgramData, entrypoint: str = "main") -> Plan:
        """The cached plan of ``entrypoint``, built on first use (and after invalidation).

        Raises ``MissingKernelError`` listing every op without a kernel (in the graph, its
        regions and the graphs it invokes), or ``PlanError`` for unbound weights.
        """
        plan = self._plans.get(program, entrypoint)
        if plan is not None and self._is_current(plan, program, entrypoint):
            return plan
        plan = self._build(program, entrypoint)
        plan.problems.raise_if_any()
        self._plans.put(program, entrypoint, plan)
        return plan

    def _is_current(self, plan: Plan, program: ProgramData, entrypoint: str) -> bool:
        return (plan.generation == self.kernels.generation
                and program.graphs.get(entrypoint) is plan.graph)

    def _build(self, program: ProgramData, entrypoint: str) -> Plan:
        graph = program.entry_graph(entrypoint)
        building: set[str] = getattr(self._building, "names", None) or set()
        self._building.names = building
        building.add(entrypoint)
        program_ref = weakref.ref(program)  # the plan is cached: it must not keep the program

        def resolve_callee(name: str, problems: Problems) -> Callable[..., Any]:
            p = program_ref()
            if p is None:  # pragma: no cover - plans are built while the program is in use
                raise RuntimeError(f"invoke @{name}: the program no longer exists")
            return self._callee(p, name, problems)

        try:
            return Plan(graph, self.kernels, program, resolve_callee=resolve_callee,
                        compiled=self.compiled)
        finally:
            building.discard(entrypoint)

    def _callee(self, program: ProgramData, name: str, problems: Problems) -> Callable[..., Any]:
        if name not in program.graphs:
            problems.other.append(f"invoke: program has no graph @{name}")
            return _LazyCallee(self, program, name)
        if name in getattr(self._building, "names", ()):
            return _LazyCallee(self, program, name)
        cached = self._plans.get(program, name)
        if cached is not None and self._is_current(cached, program, name):
            return cached
        plan = self._build(program, name)
        problems.merge(plan.problems)
        if not plan.problems:
            self._plans.put(program, name, plan)
        return plan

    def _thread_pool(self) -> ThreadPoolExecutor | None:
        if self.threads <= 1:
            return None
        pool = self._pool
        if pool is not None and self._pool_pid == os.getpid():
            return pool
        with self._pool_lock:
            # a child forked after the pool started has the pool without its threads: work
            # submitted there would wait forever, so the child makes a pool of its own
            if self._pool is None or self._pool_pid != os.getpid():
                # the calling thread runs blocks too: the pool adds threads - 1
                self._pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="coreai")
                self._pool_pid = os.getpid()
            return self._pool

    def explain_plan(self, program: ProgramData, entrypoint: str = "main") -> str:
        """The generated Python source ``entrypoint`` runs as, with that of its regions and
        ``invoke`` callees, each headed by its stats (steps, direct ufunc calls, buffers
        reused, peak intermediate bytes)."""
        return self.plan(program, entrypoint).explain()

    # -- running -----------------------------------------------------------------------------
    def run(self, program: ProgramData, inputs: Mapping[str, Any] | Sequence[Any] | None = None,
            entrypoint: str = "main", state: MutableMapping[str, Any] | None = None, *,
            seed: Seed = None) -> dict[str, np.ndarray]:
        """Run ``entrypoint``; returns a dict output name -> array in output order.

        ``inputs`` is a dict by name or a positional sequence of numpy arrays, torch tensors
        or Python scalars/lists. Without ``state`` the program's own state is read and updated
        after a successful call; with ``state`` that mapping is read and updated instead.
        Bad inputs raise one ``RuntimeInputError`` before anything runs; a failing kernel
        raises ``KernelError`` naming the op and its location.

        ``seed`` (an int, a numpy ``SeedSequence`` or ``Generator``) seeds the generator the
        random ops draw from: the same seed gives the same numbers; None draws fresh entropy.
        """
        _check_state_arg(state)
        plan = self.plan(program, entrypoint)
        # a run of nothing but ufuncs never reaches BLAS: no thread count to hold
        with RunContext(self._thread_pool(), self.threads,
                        not plan.calls_only_ufuncs):
            if seed is None:  # random ops draw fresh entropy (or an enclosing seeded block's)
                return plan.run(inputs, state)
            with seeded(seed):
                return plan.run(inputs, state)

    def run_collect(self, program: ProgramData,
                    inputs: Mapping[str, Any] | Sequence[Any] | None = None,
                    entrypoint: str = "main", state: MutableMapping[str, Any] | None = None,
                    *, seed: Seed = None,
                    ) -> tuple[dict[str, np.ndarray], dict[Value, np.ndarray]]:
        """Like :meth:`run`, also returning every op result of the entrypoint graph.

        The second dict maps each result Value of the graph's ops (not of nested regions) to
        its array, in execution order: the raw material of first-divergence debugging.
        """
        _check_state_arg(state)
        record: dict[Value, np.ndarray] = {}
        plan = self.plan(program, entrypoint)
        with RunContext(self._thread_pool(), self.threads), seeded(seed):
            outputs = plan.run(inputs, state, record=record)
        return outputs, record

    def profile(self, program: ProgramData,
                inputs: Mapping[str, Any] | Sequence[Any] | None = None,
                entrypoint: str = "main", state: MutableMapping[str, Any] | None = None, *,
                seed: Seed = None,
                ) -> tuple[dict[str, np.ndarray], list[tuple[Operation, float]]]:
        """Like :meth:`run`, also returning the wall time of each op of the entrypoint graph.

        The second item lists ``(op, seconds)`` per kernel call, in execution order; the time
        of an op with regions or an ``invoke`` includes what they run. The plan runs
        interpreted (as with ``compiled=False``: the same kernels and results, but elementwise
        ufuncs allocate their results instead of reusing dead buffers), so the sum is a few
        percent above a compiled run's time. :meth:`run` has no timing code at all.
        """
        _check_state_arg(state)
        timings: list[tuple[Operation, float]] = []
        plan = self.plan(program, entrypoint)
        with RunContext(self._thread_pool(), self.threads), seeded(seed):
            outputs = plan.run(inputs, state, timings=timings)
        return outputs, timings

    def evaluate_op(self, op: Operation, arrays: Sequence[Any],
                    program: ProgramData | None = None) -> list[np.ndarray]:
        """Run one op's kernel on concrete operand arrays; returns one array per result.

        ``program`` resolves weight references and ``invoke`` callees. Used by constant
        folding, so it behaves exactly like the op inside a running plan.
        """
        graph = Graph("evaluate_op")  # a scratch graph: not the program's, so no edit of it
        operands = [Value(v.type, name=f"arg{i}") for i, v in enumerate(op.operands)]
        graph.inputs = {f"arg{i}": v for i, v in enumerate(operands)}
        copy = Operation(op.name, operands, op.attributes, [], op.location)
        copy.results = [Value(r.type, copy, i) for i, r in enumerate(op.results)]
        graph.ops.append(copy)
        graph.output_values = {f"out{i}": r for i, r in enumerate(copy.results)}
        plan = Plan(graph, self.kernels, program,
                    resolve_callee=lambda name, problems: self._callee(program, name, problems)
                    if program is not None else _missing_program(name, problems),
                    compiled=False)
        plan.problems.raise_if_any()
        converted = [np.asarray(a) if not isinstance(a, np.ndarray) else a for a in arrays]
        if len(converted) != len(operands):
            raise ValueError(f"{describe_op(op)} takes {len(operands)} operands, "
                             f"got {len(converted)}")
        with np.errstate(all="ignore"), BLAS:
            return [writable(a) for a in plan.run_arrays(converted)]

    def __repr__(self) -> str:
        return f"<Runtime #{self._token}: {len(self.kernels.own_names())} own kernel(s)>"


def _missing_program(name: str, problems: Problems) -> Callable[..., Any]:
    problems.other.append(f"invoke @{name}: evaluate_op needs program= to resolve callees")
    return lambda *a: []


def _check_state_arg(state: Any) -> None:
    if state is not None and not isinstance(state, MutableMapping):
        raise TypeError("state must be a mutable mapping (it is updated with the new state), "
                        f"got {type(state).__name__}")


_DEFAULT = Runtime()


def default_runtime() -> Runtime:
    """The runtime ``Program.run`` uses: the default kernel table, no overlay."""
    return _DEFAULT


def run_program(program: ProgramData, inputs: Mapping[str, Any] | Sequence[Any] | None = None,
                entrypoint: str = "main", state: MutableMapping[str, Any] | None = None, *,
                runtime: Runtime | None = None, seed: Seed = None) -> dict[str, np.ndarray]:
    """Run ``program`` with ``runtime`` (the default runtime when None). See Runtime.run."""
    return (runtime or _DEFAULT).run(program, inputs, entrypoint, state, seed=seed)


def run_graph_collect(program: ProgramData,
                      inputs: Mapping[str, Any] | Sequence[Any] | None = None,
                      entrypoint: str = "main", state: MutableMapping[str, Any] | None = None,
                      *, runtime: Runtime | None = None, seed: Seed = None,
                      ) -> tuple[dict[str, np.ndarray], dict[Value, np.ndarray]]:
    """Run and also return every op result, keyed by its Value. See Runtime.run_collect."""
    return (runtime or _DEFAULT).run_collect(program, inputs, entrypoint, state, seed=seed)


def evaluate_op(op: Operation, arrays: Sequence[Any], program: ProgramData | None = None, *,
                runtime: Runtime | None = None) -> list[np.ndarray]:
    """Run one op's kernel on concrete arrays (default runtime). See Runtime.evaluate_op."""
    return (runtime or _DEFAULT).evaluate_op(op, arrays, program)

