"""Graph-editing machinery shared by the passes: a forward sweep with value substitution.

Invariants every rewrite keeps:

- **Types never change.** A value is only ever replaced by a value of the same type, and a user
  whose type rule reads constant operand data (``reshape``'s shape, ``slice``'s bounds, ...)
  keeps its old operand when the substitution would change its inferred type.
- **Regions are isolated.** A region graph only uses its own inputs, so every graph (top level
  or region) is swept on its own.
- Ops made dead by a rewrite are removed at the end of the sweep (only those; unrelated dead
  code is left to the ``dce`` pass), and weights no longer referenced by any constant are
  dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs
import numpy as np

from coreai_core._builder import INLINE_LIMIT, insertion_point
from coreai_core._ir import Graph, Location, Operation, ProgramData, TensorType, Value, WeightRef
from coreai_core._opdef import OPS, build_operation
from coreai_core.errors import TypeRuleError

# Traits that mark an op as having an effect beyond its results: such ops are never folded,
# merged or deleted. No dialect op has one today; the check keeps the passes honest when one
# (or a custom op) does.
IMPURE_TRAITS = frozenset({"impure", "side_effects"})

# Traits of ops whose results differ from one execution to the next (random draws): such an op
# may be removed when dead, but never folded or merged, and neither may an op whose regions
# or callee contain one.
NONDETERMINISTIC_TRAITS = frozenset({"random"})


@attrs.define
class PassStats:
    """What one pass run did: ops removed, added and rewritten, weights removed and added."""

    removed: int = 0
    added: int = 0
    rewritten: int = 0
    weights_removed: int = 0
    weights_added: int = 0

    @property
    def changed(self) -> bool:
        return any(attrs.astuple(self))

    def __iadd__(self, other: PassStats) -> PassStats:
        for f in attrs.fields(PassStats):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self


def is_pure(op: Operation) -> bool:
    """True when ``op`` only computes its results (ops without a definition are not)."""
    opdef = OPS.get(op.name)
    return opdef is not None and not (opdef.traits & IMPURE_TRAITS)


def is_deterministic(op: Operation, program: ProgramData | None = None,
                     memo: dict[int, bool] | None = None) -> bool:
    """True when ``op`` is pure and gives the same results for the same operands.

    Random ops are not, nor is an op with a random op anywhere in its regions or, for
    ``invoke``, in its callee graph (resolved in ``program``). ``memo`` caches the answer per
    graph across calls of one pass.
    """
    if not is_pure(op):
        return False
    if OPS[op.name].traits & NONDETERMINISTIC_TRAITS:
        return False
    memo = {} if memo is None else memo
    graphs = list(op.regions.values())
    if op.name == "coreai.invoke":
        callee = program.graphs.get(op.attributes["callee"]) if program is not None else None
        if callee is None:
            return False  # unknown callee: assume the worst
        graphs.append(callee)
    return all(_graph_is_deterministic(g, program, memo) for g in graphs)


def _graph_is_deterministic(graph: Graph, program: ProgramData | None,
                            memo: dict[int, bool]) -> bool:
    known = memo.get(id(graph))
    if known is None:
        memo[id(graph)] = True  # a recursive invoke adds nothing new while we look
        known = all(is_deterministic(o, program, memo) for o in graph.ops)
        memo[id(graph)] = known
    return known


def all_graphs(program: ProgramData) -> list[Graph]:
    """Every graph of ``program``: entrypoints and, recursively, the regions of their ops."""
    out: list[Graph] = []

    def visit(g: Graph) -> None:
        out.append(g)
        for op in g.ops:
            for region in op.regions.values():
                visit(region)

    for g in program.graphs.values():
        visit(g)
    return out


def weight_refs(program: ProgramData) -> Counter[str]:
    """How many constant ops (in all graphs and regions) reference each weight."""
    refs: Counter[str] = Counter()
    for g in all_graphs(program):
        for op in g.ops:
            if op.name == "coreai.constant" and isinstance(op.attributes["value"], WeightRef):
                refs[op.attributes["value"].name] += 1
    return refs


def count_ops(program: ProgramData) -> int:
    return sum(len(g.ops) for g in all_graphs(program))


def drop_unreferenced_weights(program: ProgramData, refs: Counter[str]) -> int:
    """Delete the weights that no constant references; return how many."""
    dropped = 0
    for name in list(program.weights):
        if refs.get(name, 0) <= 0:
            del program.weights[name]
            program.weight_types.pop(name, None)
            dropped += 1
    return dropped


def weight_hint(name: str, suffix: str) -> str:
    """A readable name for a weight derived from ``name`` (``conv.weight`` -> ``conv.bias``)."""
    if suffix == "bias" and name.endswith("weight"):
        return name[: -len("weight")] + "bias"
    return f"{name}.{suffix}"


class RewriteObserver(Protocol):
    """Watches the rewrites of one pass run (translation validation bisects with it).

    ``visiting(op)`` is asked before each op is visited: False leaves the op unvisited (a
    budget that stops a pass after a number of visits); ``rewrote(op, new)`` hears of each
    replacement a visit returned.
    """

    def visiting(self, op: Operation) -> bool: ...

    def rewrote(self, op: Operation, new: list[Value]) -> None: ...


class PassContext:
    """Program-wide bookkeeping of one pass run: statistics and weight reference counts."""

    def __init__(self, program: ProgramData, observer: RewriteObserver | None = None) -> None:
        self.program = program
        self.observer = observer
        self.stats = PassStats()
        self.refs = weight_refs(program)
        self.released: set[str] = set()
        self.created: set[str] = set()

    def finish(self) -> PassStats:
        """Drop weights this run made unreferenced; invalidate run plans if anything changed."""
        for name in sorted(self.released):
            if name in self.program.weights and self.refs.get(name, 0) <= 0:
                del self.program.weights[name]
                self.program.weight_types.pop(name, None)
                if name in self.created:  # made and dropped again: no net change
                    self.stats.weights_added -= 1
                else:
                    self.stats.weights_removed += 1
        if self.stats.changed:
            self.program.invalidate()
        return self.stats


Visit = Callable[[Operation, "Rewriter"], "Value | Sequence[Value] | None"]


class Rewriter:
    """Sweeps one graph front to back; ``visit(op, rw)`` may return replacement results.

    New ops made during a visit (``replacement``, ``constant``, ``insert``) go just before the
    op being visited. Use counts (``uses``) are kept up to date as operands are substituted
    and dead ops are removed.
    """

    def __init__(self, ctx: PassContext, graph: Graph) -> None:
        self.ctx = ctx
        self.program = ctx.program
        self.graph = graph
        self.stats = ctx.stats
        self.uses: Counter[int] = Counter()
        self._subst: dict[int, Value] = {}
        self._subst_from: dict[int, list[Value]] = {}
        self._sweeping = True
        self._out: list[Operation] = []
        self._removed: set[int] = set()
        self._inserted: list[Operation] = []
        self._inserted_ids: set[int] = set()
        self._replaced: list[Operation] = []
        self._moved: set[int] = set()

    # -- queries ------------------------------------------------------------------------------
    def const(self, v: Value) -> np.ndarray | None:
        """The data of ``v`` if it is produced by a constant (and its weight is bound)."""
        op = v.owner
        if op is None or op.name != "coreai.constant":
            return None
        data = op.attributes["value"]
        if isinstance(data, WeightRef):
            return self.program.weights.get(data.name)
        return data

    def weight_name(self, v: Value) -> str | None:
        op = v.owner
        if op is not None and op.name == "coreai.constant" and \
                isinstance(op.attributes["value"], WeightRef):
            return op.attributes["value"].name
        return None

    def exclusive_weight(self, v: Value, user: Operation) -> str | None:
        """The weight behind ``v`` if ``user`` is its only reader anywhere in the program."""
        name = self.weight_name(v)
        if name is None or self.ctx.refs[name] != 1:
            return None
        if self.uses[id(v)] != sum(1 for o in user.operands if o is v):
            return None
        return name

    # -- building -----------------------------------------------------------------------------
    def make(self, name: str, operands: Sequence[Value], attributes: dict[str, Any],
             location: Location) -> Operation | None:
        """A new op (not yet inserted), or None if its type rule rejects the operands."""
        try:
            return build_operation(OPS[name], list(operands), attributes, location)
        except TypeRuleError:
            return None

    def insert(self, op: Operation) -> Operation:
        """Insert ``op`` before the op being visited."""
        for v in op.operands:
            self.uses[id(v)] += 1
        self._out.append(op)
        self._inserted.append(op)
        self._inserted_ids.add(id(op))
        return op

    def replacement(self, like: Operation, name: str, operands: Sequence[Value],
                    attributes: dict[str, Any]) -> list[Value] | None:
        """Insert a new op standing for ``like`` if its result types equal ``like``'s."""
        op = self.make(name, operands, attributes, like.location)
        if op is None or [r.type for r in op.results] != [r.type for r in like.results]:
            return None
        return self.insert(op).results

    def constant(self, data: np.ndarray, hint: str = "folded",
                 location: Location | None = None) -> Value:
        """Insert a constant; data with more than INLINE_LIMIT elements becomes a weight."""
        data = np.asarray(data)
        value: Any = data
        if data.size > INLINE_LIMIT:
            name = self.program.unique_weight_name(hint)
            value = self.program.add_weight(name, data)
            self.ctx.refs[name] += 1
            self.ctx.created.add(name)
            self.stats.weights_added += 1
        op = build_operation(OPS["coreai.constant"], [], {"value": value},
                             location or Location())
        return self.insert(op).result

    def set_weight_data(self, name: str, data: np.ndarray) -> None:
        """Replace the data of weight ``name`` (same type) with a new array."""
        t = self.program.weight_types[name]
        data = np.asarray(data)
        if data.shape != t.shape or data.dtype != t.element_type.numpy:
            raise AssertionError(f"weight @{name}: new data {data.dtype}{data.shape} != {t}")
        self.program.weights[name] = data

    # -- the sweep ----------------------------------------------------------------------------
    def sweep(self, visit: Visit) -> None:
        g = self.graph
        if g.program is None:  # a region made outside a program: type rules need the program
            g.program = self.program
        for op in g.ops:
            for v in op.operands:
                self.uses[id(v)] += 1
        for v in (*g.output_values.values(), *g.state_outputs.values()):
            self.uses[id(v)] += 1
        with insertion_point(g):
            for op in g.ops:
                if self._subst and any(id(v) in self._subst for v in op.operands):
                    self._remap(op)
                observer = self.ctx.observer
                new = visit(op, self) if observer is None or observer.visiting(op) else None
                self._out.append(op)
                if new is not None:
                    new = [new] if isinstance(new, Value) else list(new)
                    if observer is not None:
                        observer.rewrote(op, new)
                    self._replace(op, new)
        g.ops = self._out
        g.output_values = {k: self._resolve_use(v) for k, v in g.output_values.items()}
        g.state_outputs = {k: self._resolve_use(v) for k, v in g.state_outputs.items()}
        self._remove_dead()

    def _resolve(self, v: Value) -> Value:
        while id(v) in self._subst:
            v = self._subst[id(v)]
        return v

    def _resolve_use(self, v: Value) -> Value:
        new = self._resolve(v)
        if new is not v:
            self._transfer(v, new)
        return new

    def _transfer(self, old: Value, new: Value) -> None:
        self.uses[id(old)] -= 1
        self.uses[id(new)] += 1
        if old.owner is not None:
            self._moved.add(id(old.owner))
            if self.uses[id(old)] == 0:
                self._kill(old.owner)

    def _remap(self, op: Operation) -> None:
        new = [self._resolve(v) for v in op.operands]
        if any(n is not o and n.owner is not None and n.owner.name == "coreai.constant"
               for n, o in zip(new, op.operands)) and not self._same_types(op, new):
            return  # the op's type depends on the substituted data: keep the old operands
        for old, n in zip(op.operands, new):
            if n is not old:
                self._transfer(old, n)
        op.operands = new

    def _same_types(self, op: Operation, operands: list[Value]) -> bool:
        opdef = OPS.get(op.name)
        if opdef is None:
            return True
        try:
            inferred = opdef.infer(opdef.split_operands(operands), op.attributes)
        except TypeRuleError:
            return False
        return inferred == [r.type for r in op.results]

    def _replace(self, op: Operation, new: list[Value]) -> None:
        if len(new) != len(op.results):
            raise AssertionError(f"{op.name}: {len(new)} replacements for "
                                 f"{len(op.results)} results")
        changed = False
        for old, n in zip(op.results, map(self._resolve, new)):
            if n is old:
                continue
            if n.type != old.type:
                raise AssertionError(f"{op.name}: replacement {n.type} != {old.type}")
            self._subst[id(old)] = n
            self._subst_from.setdefault(id(n), []).append(old)
            if n.name is None and n.owner is not None:
                n.name = old.name  # debug names (FX nodes) follow the value that replaces them
            changed = True
        if changed:
            self._replaced.append(op)

    def is_removed(self, op: Operation) -> bool:
        """True when ``op`` was found dead during this sweep and removed."""
        return id(op) in self._removed

    def _kill(self, op: Operation) -> None:
        """Remove ``op`` if it is pure and unused, then its producers that become unused.

        Runs eagerly during the sweep, so use counts (and ``exclusive_weight``) never count
        readers that are already dead.
        """
        work = [op]
        while work:
            op = work.pop()
            if id(op) in self._removed or not is_pure(op):
                continue
            if any(self.uses[id(r)] > 0 or (self._sweeping and self._pending_uses(r))
                   for r in op.results):
                continue
            self._removed.add(id(op))
            if id(op) not in self._inserted_ids:
                self.stats.removed += 1 + sum(1 for r in op.regions.values() for _ in r.walk())
            ref = op.attributes.get("value") if op.name == "coreai.constant" else None
            if isinstance(ref, WeightRef):
                self.ctx.refs[ref.name] -= 1
                self.ctx.released.add(ref.name)
            for v in op.operands:
                self.uses[id(v)] -= 1
                if self.uses[id(v)] == 0 and v.owner is not None:
                    work.append(v.owner)

    def _pending_uses(self, v: Value) -> bool:
        # Uses of values substituted by ``v`` whose users the sweep has not remapped yet:
        # they will move to ``v``, so ``v`` is not dead even if its count is zero now. (Once
        # the sweep is over, uses left on an old value belong to users that kept it.)
        return any(self.uses[id(old)] > 0 or self._pending_uses(old)
                   for old in self._subst_from.get(id(v), ()))

    def _remove_dead(self) -> None:
        """Remove the ops made dead by this sweep and settle the statistics.

        Only net changes count: an inserted op nobody ended up using (e.g. because every user
        kept its old operand) is removed again without being counted, and a replacement
        counts as a rewrite only if some use actually moved to the new value.
        """
        self._sweeping = False
        for op in [*self._replaced, *self._inserted]:
            self._kill(op)
        if self._removed:
            self.graph.ops = [op for op in self.graph.ops if id(op) not in self._removed]
        self.stats.added += sum(1 for op in self._inserted if id(op) not in self._removed)
        self.stats.rewritten += sum(1 for op in self._replaced if id(op) in self._moved)


class RewritePass:
    """Base of the passes that sweep every graph once: subclasses implement ``visit``."""

    name = "rewrite"

    def run(self, program: ProgramData, observer: RewriteObserver | None = None) -> PassStats:
        """Sweep every graph (regions included) and return what changed; ``observer`` (see
        :class:`RewriteObserver`) may watch and stop the rewrites."""
        ctx = PassContext(program, observer)
        self.begin(ctx)
        for g in all_graphs(program):
            Rewriter(ctx, g).sweep(self.visit)
        return ctx.finish()

    def begin(self, ctx: PassContext) -> None:
        """Hook run once per pass run before any graph is swept."""

    def visit(self, op: Operation, rw: Rewriter) -> Value | Sequence[Value] | None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def at_most_one_dynamic(t: TensorType) -> bool:
    """A type whose shape is fixed by its element count (at most one unknown dimension)."""
    return sum(1 for d in t.shape if not isinstance(d, int)) <= 1
