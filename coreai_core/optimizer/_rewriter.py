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
- **Weights are never edited in place.** Data computed from a weight goes into a new constant
  (:meth:`Rewriter.derived_constant`); when the source weight ends up unreferenced, the new
  weight takes over its name at the end of the pass. A reader of the old data that is still
  live (a user the sweep has not reached yet, or one that kept its operand) never sees the
  new data.
- **Heavy ops are never duplicated.** A rewrite that inserts a heavy op (one whose definition
  carries the ``heavy`` trait, or one with regions) is accepted only if at least as many heavy
  ops die with the op it replaces (:meth:`Rewriter.sweep` checks this for every rule of every
  pass).

Preconditions. A rule states what it assumes in its docstring and checks it with the queries
of :class:`Rewriter`, which see the whole sweep: :meth:`Rewriter.use_count` counts the uses
of a value *including* the uses of values already replaced by it whose users the sweep has not
reached yet (a plain operand count misses them, which once let a fold rewrite a conv that a
later user still read); :meth:`Rewriter.single_use_producer` is the op a rule may fold into its
one user (its name, a single result and a single use checked); :meth:`Rewriter.producer` the
op it may read through (name and a single result checked); :meth:`Rewriter.const` the data of
a bound constant operand.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from coreai_core._builder import INLINE_LIMIT, insertion_point
from coreai_core._ir import Graph, Location, Operation, ProgramData, Value, WeightRef
from coreai_core._opdef import OPS, build_operation
from coreai_core.errors import TypeRuleError
from coreai_core.optimizer._context import PassContext
from coreai_core.optimizer._pass import PassStats, RewriteObserver
from coreai_core.optimizer._predicates import is_constant, is_heavy, is_pure
from coreai_core.optimizer._program_walk import all_graphs

Visit = Callable[[Operation, "Rewriter"], "Value | Sequence[Value] | None"]


class Rewriter:
    """Sweeps one graph front to back; ``visit(op, rw)`` may return replacement results.

    New ops made during a visit (``replacement``, ``constant``, ``insert``) go just before the
    op being visited. Use counts are kept up to date as operands are substituted and dead ops
    are removed; rules read them through :meth:`use_count`, which also counts the uses the
    sweep has not moved yet.
    """

    def __init__(self, ctx: PassContext, graph: Graph) -> None:
        self.ctx = ctx
        self.program = ctx.program
        self.graph = graph
        self.stats = ctx.stats
        self.uses: Counter[int] = Counter()  # operand and output uses as they stand now
        self._subst: dict[int, Value] = {}
        self._subst_from: dict[int, list[Value]] = {}
        self._sweeping = True
        self._out: list[Operation] = []
        self._removed: set[int] = set()
        self._inserted: list[Operation] = []
        self._inserted_ids: set[int] = set()
        self._replaced: list[Operation] = []
        self._moved: set[int] = set()

    # -- queries (the preconditions rules check) ----------------------------------------------
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
        """The weight a constant ``v`` references, or None (inline data or not a constant)."""
        op = v.owner
        if op is not None and op.name == "coreai.constant" and \
                isinstance(op.attributes["value"], WeightRef):
            return op.attributes["value"].name
        return None

    def origin_weight_name(self, v: Value) -> str | None:
        """The weight behind ``v``, or the original weight it was derived from in this pass
        run (:meth:`derived_constant`): the name new weights are named after."""
        name = self.weight_name(v)
        while name is not None and name in self.ctx.derived_from:
            name = self.ctx.derived_from[name]
        return name

    def use_count(self, v: Value) -> int:
        """How many uses ``v`` has: as an operand, a graph output, and -- while the sweep
        runs -- through values already replaced by ``v`` whose users it has not reached yet
        (they will read ``v``). May over-count (a user that keeps its old operand), never
        under-count, so "one use" really means one."""
        total = 0
        work = [v]
        while work:
            u = work.pop()
            total += self.uses[id(u)]
            if self._sweeping:
                work.extend(self._subst_from.get(id(u), ()))
        return total

    def has_single_use(self, v: Value) -> bool:
        """True when exactly one operand or output reads ``v`` (see :meth:`use_count`)."""
        return self.use_count(v) == 1

    def producer(self, v: Value, *names: str) -> Operation | None:
        """The op computing ``v`` if it is one of ``names`` (any op when none are given) and
        has exactly one result: the op a rule may read through, leaving it to its other
        users."""
        op = v.owner
        if op is None or len(op.results) != 1 or (names and op.name not in names):
            return None
        return op

    def single_use_producer(self, v: Value, *names: str) -> Operation | None:
        """:meth:`producer`, and ``v`` has no other use: a rule may fold this op into the one
        op reading ``v``, since it dies when that op is replaced."""
        op = self.producer(v, *names)
        return op if op is not None and self.has_single_use(v) else None

    def exclusive_weight(self, v: Value, user: Operation) -> str | None:
        """The weight behind ``v`` if ``user`` is its only reader anywhere in the program
        (pending uses included, see :meth:`use_count`)."""
        name = self.weight_name(v)
        if name is None or self.ctx.refs[name] != 1:
            return None
        if self.use_count(v) != sum(1 for o in user.operands if o is v):
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
                 location: Location | None = None, *, weight: bool = False) -> Value:
        """Insert a constant; data with more than INLINE_LIMIT elements (or any data when
        ``weight``) becomes a program weight named after ``hint``."""
        data = np.asarray(data)
        value: Any = data
        name = None
        if weight or data.size > INLINE_LIMIT:
            name = self.program.unique_weight_name(hint)
            value = self.program.add_weight(name, data)
            self.ctx.refs[name] += 1
            self.ctx.created.add(name)
            self.stats.weights_added += 1
        op = build_operation(OPS["coreai.constant"], [], {"value": value},
                             location or Location())
        if name is not None:
            self.ctx.created_by[name] = op
        return self.insert(op).result

    def derived_constant(self, source: Value, data: np.ndarray,
                         location: Location | None = None) -> Value:
        """A new constant holding ``data`` computed from the constant ``source`` (a conv
        weight times a batch-norm scale, ...).

        The source is never edited in place: another reader may still need its data. A
        weight stays a weight; if the source weight is unreferenced at the end of the pass,
        the new one takes over its name (:meth:`PassContext.finish`).
        """
        source_name = self.weight_name(source)
        if source_name is None:
            return self.constant(data, "folded", location)
        hint = f"{self.origin_weight_name(source)}.folded"
        new = self.constant(data, hint, location, weight=True)
        new_name = self.weight_name(new)
        if new_name is not None:
            self.ctx.derived_from[new_name] = source_name
        return new

    # -- the sweep ----------------------------------------------------------------------------
    def sweep(self, visit: Visit) -> None:
        """Visit every op in order, applying the replacements ``visit`` returns.

        A replacement is applied only if it keeps the framework's invariants (see
        :meth:`acceptable`); otherwise the op stays and what the visit inserted is removed
        again as dead code.
        """
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
                mark = len(self._inserted)
                new = visit(op, self) if observer is None or observer.visiting(op) else None
                self._out.append(op)
                if new is not None and self.acceptable(op, self._inserted[mark:]):
                    new = [new] if isinstance(new, Value) else list(new)
                    if observer is not None:
                        observer.rewrote(op, new)
                    self._replace(op, new)
        g.ops = self._out
        g.output_values = {k: self._resolve_use(v) for k, v in g.output_values.items()}
        g.state_outputs = {k: self._resolve_use(v) for k, v in g.state_outputs.items()}
        self._remove_dead()

    def acceptable(self, op: Operation, inserted: Sequence[Operation]) -> bool:
        """Whether replacing ``op`` with results built from the ops ``inserted`` by its visit
        is allowed: it must not add heavy ops (a fold that copies a conv whose old copy
        still has other readers costs more than it saves)."""
        made = sum(1 for o in inserted if is_heavy(o))
        return made == 0 or made <= self._heavy_ops_dying_with(op, made)

    def _heavy_ops_dying_with(self, op: Operation, enough: int) -> int:
        """How many heavy ops die when ``op`` is replaced: ``op`` and the producers that only
        dying ops read (counting stops at ``enough``)."""
        inside: Counter[int] = Counter()  # uses of a value by dying ops
        dying, seen = [op], {id(op)}
        heavy = 0
        for dead in dying:  # grows while iterated: a breadth-first walk up the operands
            heavy += is_heavy(dead)
            if heavy >= enough:
                break
            for v in dead.operands:
                p = v.owner
                if p is None or id(p) in seen or id(p) in self._removed or not is_pure(p):
                    continue
                inside[id(v)] += 1
                if all(inside[id(r)] == self.use_count(r) for r in p.results):
                    seen.add(id(p))
                    dying.append(p)
        return heavy

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
        if any(n is not o and is_constant(n) for n, o in zip(new, op.operands)) \
                and not self._same_types(op, new):
            # The op's type depends on the substituted constant data: keep those operands.
            # Other substitutions still move (a type never depends on a computed value's
            # data), so the ops they replace still die.
            new = [o if n is not o and is_constant(n) else n for n, o in zip(new, op.operands)]
            if not self._same_types(op, new):
                return
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

        Runs eagerly during the sweep, so use counts never count readers that are already
        dead; an op whose results have pending uses (:meth:`use_count`) stays.
        """
        work = [op]
        while work:
            op = work.pop()
            if id(op) in self._removed or not is_pure(op):
                continue
            if any(self.use_count(r) > 0 for r in op.results):
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
