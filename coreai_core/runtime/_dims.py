"""Relations between dynamic dimensions, checked when a graph runs.

A dynamic :class:`~coreai_core.Dim` is named by a symbol (``?batch``, ``?s0``) or by an integer
expression over symbols (``?"2*s0"``, ``?"s0 + 1"``, ``?"s0*s1"``): the names torch.export gives
derived dims (``Dim`` arithmetic, or sizes it proved equal to an expression). A dim named by an
expression is a *relation*: its size must equal the expression evaluated at the sizes of its
symbols. The name is the relation, so it survives printing, parsing, saving and loading.

Expressions use integers, symbol names, ``+ - * // %``, small constant powers (``s0**2``),
unary minus and ``Mod(a, b)``, ``Max(a, b, ...)``, ``Min(a, b, ...)`` (sympy's spelling). A
name that is not such an expression is an opaque symbol (sizes sharing it must agree).
"""

from __future__ import annotations

import ast
import functools
import operator
from collections.abc import Callable, Iterable, Mapping

import attrs

from coreai_core._ir import Dim, TensorType

__all__ = ["DimChecks", "Relation", "check_dims", "dim_checks", "relation_of"]

Env = Mapping[str, int]
_BINARY: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_CALLS: dict[str, Callable[..., int]] = {"Mod": operator.mod, "Max": max, "Min": min}


class _NotAnExpression(Exception):
    pass


def _compile(node: ast.AST, symbols: set[str]) -> Callable[[Env], int]:
    """An evaluator of ``node`` (raising ``_NotAnExpression`` for anything else)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        value = node.value
        return lambda env: value
    if isinstance(node, ast.Name):
        name = node.id
        symbols.add(name)
        return lambda env: env[name]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _compile(node.operand, symbols)
        sign = -1 if isinstance(node.op, ast.USub) else 1
        return lambda env: sign * inner(env)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and not (
            isinstance(node.right, ast.Constant) and type(node.right.value) is int
            and 0 <= node.right.value <= 8):
        raise _NotAnExpression  # only small constant powers (s0**2): sizes stay ints
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        fn = _BINARY[type(node.op)]
        lhs, rhs = _compile(node.left, symbols), _compile(node.right, symbols)
        return lambda env: fn(lhs(env), rhs(env))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in _CALLS and node.args and not node.keywords):
        fn = _CALLS[node.func.id]
        args = [_compile(a, symbols) for a in node.args]
        return lambda env: fn(*(a(env) for a in args))
    raise _NotAnExpression


@attrs.frozen
class Relation:
    """A dim named by an expression: ``size == expression(symbols)``."""

    name: str
    symbols: frozenset[str]
    evaluate: Callable[[Env], int] = attrs.field(eq=False, repr=False)

    def solve(self, size: int, env: Env) -> dict[str, int] | None:
        """The value of the one unknown symbol that makes the expression ``size``, when the
        expression is affine in it (``a*s + b``) and such an integer exists; else None."""
        unknown = [s for s in self.symbols if s not in env]
        if len(unknown) != 1:
            return None
        s = unknown[0]
        try:
            b = self.evaluate({**env, s: 0})
            a = self.evaluate({**env, s: 1}) - b
            if a == 0 or self.evaluate({**env, s: 2}) != 2 * a + b:
                return None  # not affine in s
        except (ZeroDivisionError, ValueError):
            return None
        q, r = divmod(size - b, a)
        return {s: q} if r == 0 else {}


@functools.lru_cache(maxsize=1024)
def relation_of(name: str) -> Relation | None:
    """The relation a dim name states, or None for a plain symbol or an opaque name."""
    if name == "?" or name.isidentifier():
        return None
    try:
        tree = ast.parse(name, mode="eval")
        symbols: set[str] = set()
        evaluate = _compile(tree.body, symbols)
    except (SyntaxError, ValueError, RecursionError, _NotAnExpression):
        return None
    return Relation(name, frozenset(symbols), evaluate) if symbols else None


def _dims(types: Iterable[TensorType]) -> list[Dim]:
    return [d for t in types for d in t.shape if isinstance(d, Dim) and d.name != "?"]


class DimChecks:
    """The relations among the dynamic dims of a graph's inputs and state, checked per run.

    Built once per plan. :meth:`problems` takes the size each dim name was bound to (and the
    input that bound it) and returns one message per broken relation: a derived dim whose
    size is not its expression's value, or whose size no integer value of its one unknown
    symbol explains (``2*s0`` must be even), or that gives a symbol a value outside the
    symbol's bounds.
    """

    def __init__(self, types: Iterable[TensorType]) -> None:
        dims = _dims(types)
        self.bounds: dict[str, Dim] = {d.name: d for d in dims if relation_of(d.name) is None}
        found = (relation_of(d.name) for d in dims)
        self.relations: list[Relation] = list({r.name: r for r in found if r is not None}
                                              .values())

    def __bool__(self) -> bool:
        return bool(self.relations)

    def problems(self, bound: Mapping[str, tuple[int, str]]) -> list[str]:
        env = {k: size for k, (size, _) in bound.items() if relation_of(k) is None}
        where = {k: src for k, (_, src) in bound.items()}
        pending = [r for r in self.relations if r.name in bound]
        out: list[str] = []
        while pending:  # solve for unknown symbols while that makes progress
            progress = False
            for r in list(pending):
                size, src = bound[r.name]
                if r.symbols <= env.keys():
                    pending.remove(r)
                    progress = True
                    out += self._compare(r, size, src, env, where)
                    continue
                solved = r.solve(size, env)
                if solved is None:
                    continue
                pending.remove(r)
                progress = True
                if not solved:
                    out.append(f"{src!r}: dimension {_quoted(r.name)} = {size}, which "
                               f"{r.name} equals for no integer {_unknown(r, env)}")
                    continue
                ((s, value),) = solved.items()
                dim = self.bounds.get(s)
                if dim is not None and not dim.admits(value):
                    out.append(f"{src!r}: dimension {_quoted(r.name)} = {size} gives "
                               f"{s} = {value}, outside the bounds of {dim}")
                env[s], where[s] = value, src
            if not progress:
                break
        return out

    @staticmethod
    def _compare(r: Relation, size: int, src: str, env: Env,
                 where: Mapping[str, str]) -> list[str]:
        try:
            want = r.evaluate(env)
        except (ZeroDivisionError, ValueError) as e:
            return [f"{src!r}: dimension {_quoted(r.name)} cannot be evaluated: {e}"]
        if want == size:
            return []
        given = ", ".join(f"{s} = {env[s]} (from {where.get(s, '?')!r})"
                          for s in sorted(r.symbols))
        return [f"{src!r}: dimension {_quoted(r.name)} = {size}, but {r.name} = {want} "
                f"with {given}"]


def _quoted(name: str) -> str:
    return str(Dim(name))  # as the text form spells it: ?"2*s0"


def _unknown(r: Relation, env: Env) -> str:
    return next(s for s in sorted(r.symbols) if s not in env)


def check_dims(checks: DimChecks | None, bound: Mapping[str, tuple[int, str]],
               problems: list[str]) -> None:
    """Append the broken relations of ``checks`` (when there are any) to ``problems``."""
    if checks:
        problems.extend(checks.problems(bound))


def dim_checks(types: Iterable[TensorType]) -> DimChecks | None:
    """The relations among ``types``' dims, or None when they state none."""
    checks = DimChecks(types)
    return checks if checks else None

