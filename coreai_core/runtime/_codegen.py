"""Compiled plans: a plan's steps turned once into one generated Python function.

The function has one local variable per value, calls each kernel directly with its attributes
bound as constants, checks each result's dtype and rank inline and deletes a value after its
last use. Elementwise ops whose kernel is exactly a numpy ufunc for the operands' dtypes call
the ufunc directly; such chains write into a dead operand's buffer (``out=``) or into a
buffer another elementwise result no longer needs, so a chain of N ops allocates O(1) arrays.
Every ufunc computes the same bits whether or not it writes into a given buffer, so the
compiled plan gives bit-identical results to the interpreted one. A ``coreai.split`` with the
default kernel is written as the basic slices its kernel takes (the same views, without a
call and per-piece checks: an LSTM step splits its gates once per time step).

``explain()`` of the returned :class:`CompiledPlan` is the generated source with per-plan stats.
"""

from __future__ import annotations

import itertools
import keyword
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import CodeType, TracebackType
from typing import Any

import numpy as np

from coreai_core._ir import Operation, TensorType, Value
from coreai_core.runtime._checks import check_result, check_results
from coreai_core.runtime._steps import Step, StepProgram
from coreai_core.runtime.kernels import elementwise, tensor

__all__ = ["CompiledPlan", "compile_plan"]

_HALF = elementwise.HALF


@dataclass
class PlanStats:
    """Figures of one compiled plan (not of the plans of its regions or callees)."""

    steps: int = 0
    direct_ufunc_calls: int = 0
    in_place: int = 0  # results written into a dead operand's buffer
    reused_buffers: int = 0  # results written into the buffer of an earlier dead value
    peak_intermediate_bytes: int = 0  # of op results with static shapes, live at once
    unsized_values: int = 0  # op results with dynamic shapes (not in the peak)

    def __str__(self) -> str:
        return (f"{self.steps} steps, {self.direct_ufunc_calls} direct ufunc calls "
                f"({self.in_place} in place, {self.reused_buffers} into reused buffers), "
                f"peak intermediate bytes {self.peak_intermediate_bytes}"
                + (f" (+{self.unsized_values} dynamically shaped values)"
                   if self.unsized_values else ""))


@dataclass
class CompiledPlan:
    """The generated function of a plan: ``fn(*inputs, *state, *captures)`` returns the
    outputs then the state outputs, as a tuple."""

    fn: Callable[..., tuple[Any, ...]]
    source: str
    code: CodeType
    line_steps: dict[int, int]  # generated line number -> step index
    stats: PlanStats = field(default_factory=PlanStats)

    def failing_step(self, tb: TracebackType | None) -> int | None:
        """The step whose line raised, found in the traceback of an exception."""
        while tb is not None:
            if tb.tb_frame.f_code is self.code:
                return self.line_steps.get(tb.tb_lineno)
            tb = tb.tb_next
        return None


@dataclass
class _Direct:
    """A step that calls a ufunc directly: ``ufunc(*operands, *extra)``."""

    ufunc: np.ufunc
    extra: np.ndarray | None


# numpy >= 2.4 warns when these take their output as a third positional argument
_OUT_BY_KEYWORD = frozenset({np.maximum, np.minimum})


def _static_nbytes(t: Any) -> int | None:
    numel = t.numel if isinstance(t, TensorType) else None
    return None if numel is None else numel * t.element_type.numpy.itemsize


def _direct_call(op: Operation, fn: Any, layout_plain: bool) -> _Direct | None:
    """The ufunc the kernel of ``op`` reduces to for its operand dtypes, if it is one."""
    entry = elementwise.UFUNCS.get(op.name)
    if entry is None or not layout_plain or len(op.results) != 1:
        return None
    if fn is not elementwise.KERNELS.get(op.name):  # overridden: call what the user gave
        return None
    ufunc, kinds, extra = entry
    types = [v.type for v in op.operands]
    result = op.results[0].type
    if not all(isinstance(t, TensorType) for t in (*types, result)) or result.rank == 0:
        return None  # a 0-d ufunc result is a numpy scalar; the kernel path wraps it
    dtypes = {t.element_type.numpy for t in types}
    if len(dtypes) != 1:
        return None
    dt = dtypes.pop()
    if dt in _HALF or dt.kind not in kinds:
        return None
    n_in = len(types) + (extra is not None)
    if n_in != ufunc.nin:
        return None
    try:
        resolved = ufunc.resolve_dtypes((dt,) * n_in + (None,) * ufunc.nout)
    except (TypeError, ValueError):
        return None
    if ufunc.nout != 1 or resolved[-1] != result.element_type.numpy:
        return None
    return _Direct(ufunc, None if extra is None else np.asarray(extra, dt))


def _split_views(op: Operation, fn: Any, layout_plain: bool, kw: dict[str, Any],
                 source: str) -> str | None:
    """``source``'s pieces as slice expressions when ``op`` is a split run by the default
    kernel (which takes exactly these basic slices), else None."""
    if (op.name != "coreai.split" or not layout_plain
            or fn is not tensor.KERNELS.get(op.name)):
        return None
    operand = op.operands[0].type
    if not isinstance(operand, TensorType) or operand.rank == 0:
        return None
    sizes, axis = kw.get("split_sizes"), kw.get("axis")
    if (not isinstance(axis, int) or not isinstance(sizes, (tuple, list))
            or not all(isinstance(n, int) for n in sizes) or len(sizes) != len(op.results)):
        return None
    head = ":, " * (axis % operand.rank)
    bounds = itertools.pairwise(itertools.accumulate(sizes, initial=0))
    return ", ".join(f"{source}[{head}{a}:{b}]" for a, b in bounds)


def _literal(a: Any) -> str | None:
    """Source text for a plain attribute value, or None to bind it as a constant."""
    if a is None or isinstance(a, (bool, str)):
        return repr(a)
    if isinstance(a, int):
        return repr(a)
    if isinstance(a, float) and math.isfinite(a):
        return repr(a)
    if isinstance(a, (tuple, list)) and all(_literal(x) is not None for x in a):
        inner = ", ".join(_literal(x) for x in a)  # type: ignore[misc]
        if isinstance(a, tuple):
            return f"({inner},)" if len(a) == 1 else f"({inner})"
        return f"[{inner}]"
    return None


class _Emitter:
    """Builds the source and the namespace it runs in."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {}
        self._ids: dict[int, str] = {}

    def bind(self, obj: Any, hint: str) -> str:
        name = self._ids.get(id(obj))
        if name is None:
            name = f"{hint}_{len(self._ids)}"
            self._ids[id(obj)] = name
            self.namespace[name] = obj
        return name


def compile_plan(plan: StepProgram) -> CompiledPlan:
    """Generate and compile the function of ``plan`` (see the module docstring)."""
    em = _Emitter()
    em.namespace.update(_nd=np.ndarray, _check=check_result, _check_all=check_results)
    steps = plan.steps
    # the slots held in local variables (any other slot a step reads is a constant)
    locals_: set[int] = set(plan.parameter_slots)
    for step in steps:
        locals_.update(step.out if isinstance(step.out, tuple) else (step.out,))

    def ref(s: int) -> str:
        return f"v{s}" if s in locals_ else em.bind(plan.constant(s), f"c{s}")

    buffers = _Buffers(plan.slot_values, len(steps))
    direct, exclusive = _direct_steps(steps)
    targets, reused = _buffer_targets(steps, direct, exclusive, buffers.key)
    lines: list[tuple[str, int | None]] = []
    for i, step in enumerate(steps):
        lines.extend(_step_lines(em, i, step, [ref(s) for s in step.ins], direct[i],
                                 targets[i], buffers))
        for s in step.free:
            if s in locals_ and s not in reused:  # a reused one dies where it is taken
                lines.append((f"del v{s}", None))
                buffers.release(s)
    results = [ref(s) for s in plan.result_slots]
    lines.append((f"return ({', '.join(results)}{',' if len(results) == 1 else ''})", None))
    return _function(plan, em, lines, buffers.stats)


class _Buffers:
    """Which buffer each live value is on, and the bytes live at once (for the stats)."""

    def __init__(self, slot_value: Mapping[int, Value], n_steps: int) -> None:
        self.stats = PlanStats(steps=n_steps)
        self._slot_value = slot_value
        self._buffer_of: dict[int, int] = {}  # slot -> the slot whose result allocated it
        self._holders: dict[int, int] = {}  # buffer -> number of live slots on it
        self._nbytes: dict[int, int] = {}
        self._live = 0

    def key(self, s: int) -> tuple[Any, ...] | None:
        """What a buffer must match to be reused for ``s``: static shape and dtype."""
        t = self._slot_value[s].type if s in self._slot_value else None
        if not isinstance(t, TensorType) or not t.is_static:
            return None
        return (tuple(t.shape), t.element_type.numpy)

    def allocate(self, s: int) -> None:
        n = _static_nbytes(self._slot_value[s].type)
        self.stats.unsized_values += n is None
        self._buffer_of[s], self._holders[s], self._nbytes[s] = s, 1, n or 0
        self._live += n or 0

    def share(self, s: int, target: int) -> None:
        """``s`` is written into the buffer of ``target``."""
        self._buffer_of[s] = self._buffer_of[target]
        self._holders[self._buffer_of[s]] += 1

    def release(self, s: int) -> None:
        b = self._buffer_of.pop(s, None)
        if b is not None:
            self._holders[b] -= 1
            if not self._holders[b]:
                self._live -= self._nbytes.pop(b)

    def note_peak(self) -> None:
        self.stats.peak_intermediate_bytes = max(self.stats.peak_intermediate_bytes,
                                                 self._live)


def _direct_steps(steps: Sequence[Step]) -> tuple[list[_Direct | None], dict[int, bool]]:
    """Which steps call a ufunc directly, and which values only such steps read (so their
    buffer may be overwritten once they are dead: nothing else holds a view of them)."""
    direct: list[_Direct | None] = []
    for step in steps:
        plain = step.call is step.kernel and len(step.ins) == len(step.op.operands)
        direct.append(_direct_call(step.op, step.call, plain)
                      if isinstance(step.out, int) else None)
    exclusive: dict[int, bool] = {}
    for i, step in enumerate(steps):
        for s in step.ins:
            exclusive[s] = exclusive.get(s, True) and direct[i] is not None
    return direct, exclusive


def _buffer_targets(steps: Sequence[Step], direct: list[_Direct | None],
                    exclusive: dict[int, bool],
                    buffer_key: Callable[[int], tuple[Any, ...] | None],
                    ) -> tuple[list[int | None], set[int]]:
    """Where each direct call writes: into a dead operand (in place), into the buffer of a
    value that died earlier (reuse), or into a new array (None); and the dead values whose
    buffer a later step takes."""
    targets: list[int | None] = []
    reused: set[int] = set()
    owned: set[int] = set()  # results of direct calls: fresh buffers nobody else views
    pool: dict[tuple[Any, ...], list[int]] = {}
    for i, (_call, ins, _kw, out, _e, free, _op, _fn) in enumerate(steps):
        target = None
        direct_out = out if direct[i] is not None and isinstance(out, int) else None
        key = buffer_key(direct_out) if direct_out is not None else None
        if key is not None:
            for s in ins:
                if s in owned and s in free and exclusive.get(s) and buffer_key(s) == key:
                    target = s
                    break
            if target is None and pool.get(key):
                target = pool[key].pop()
                reused.add(target)
        targets.append(target)
        if direct_out is not None:
            owned.add(direct_out)
        for s in free:
            key = buffer_key(s)
            if s in owned and exclusive.get(s) and key is not None and s != target:
                pool.setdefault(key, []).append(s)
    return targets, reused


def _step_lines(em: _Emitter, i: int, step: Step, args: list[str], d: _Direct | None,
                target: int | None, buffers: _Buffers) -> list[tuple[str, int | None]]:
    """The lines of step ``i`` (each with the step it runs, or None), before its frees."""
    call, ins, kw, out, expect, _free, op, kernel_fn = step
    lines: list[tuple[str, int | None]] = []
    if d is not None:
        assert isinstance(out, int)
        buffers.stats.direct_ufunc_calls += 1
        call_args = [*args, em.bind(d.extra, "k")] if d.extra is not None else args
        if target is None:
            buffers.allocate(out)
        else:
            # positional out is cheaper to parse, but numpy deprecates it for maximum/minimum
            keyword = d.ufunc in _OUT_BY_KEYWORD
            call_args = [*call_args, f"out=v{target}" if keyword else f"v{target}"]
            buffers.share(out, target)
            if target in ins:
                buffers.stats.in_place += 1
            else:
                buffers.stats.reused_buffers += 1
        lines.append((f"v{out} = {em.bind(d.ufunc, d.ufunc.__name__)}"
                      f"({', '.join(call_args)})", i))
        if target is not None and target not in ins:
            lines.append((f"del v{target}", None))  # its buffer is now v{out}'s
            buffers.release(target)
    else:
        plain = call is kernel_fn and len(ins) == len(op.operands)
        views = (_split_views(op, call, plain, kw, args[0]) if isinstance(out, tuple)
                 else None)
        if views is not None:
            assert isinstance(out, tuple)
            lines.append((f"{', '.join(f'v{s}' for s in out)}, = {views},", i))
        else:
            lines.extend((text, i) for text in _kernel_call(em, call, kw, args, out,
                                                             expect, op.name))
        for s in out if isinstance(out, tuple) else (out,):
            buffers.allocate(s)
    buffers.note_peak()
    return lines


def _function(plan: StepProgram, em: _Emitter, lines: list[tuple[str, int | None]],
              stats: PlanStats) -> CompiledPlan:
    """The function whose body is ``lines``, compiled in the emitter's namespace."""
    name = f"plan_{_ident(plan.graph.name)}"
    body = [f"def {name}({', '.join(f'v{s}' for s in plan.parameter_slots)}):"]
    line_steps: dict[int, int] = {}
    for text, at in lines:
        body.append("    " + text)
        if at is not None:
            line_steps[len(body)] = at
    source = "\n".join(body) + "\n"
    exec(compile(source, f"<coreai plan @{plan.graph.name}>", "exec"), em.namespace)
    fn = em.namespace[name]
    return CompiledPlan(fn, source, fn.__code__, line_steps, stats)


def _kernel_call(em: _Emitter, call: Any, kw: dict[str, Any], args: list[str], out: Any,
                 expect: Any, op_name: str) -> list[str]:
    """Lines calling a kernel with its attributes as constants, then checking the results."""
    kw_text = []
    splat: dict[str, Any] = {}
    for name, a in kw.items():
        if not name.isidentifier() or keyword.iskeyword(name):
            splat[name] = a
            continue
        lit = _literal(a)
        kw_text.append(f"{name}={lit if lit is not None else em.bind(a, name)}")
    if splat:
        kw_text.append(f"**{em.bind(splat, 'kw')}")
    text = f"{em.bind(call, 'k_' + op_name.rpartition('.')[2])}({', '.join(args + kw_text)})"
    if isinstance(out, int):
        dtype, ndim = expect[0]
        e, dt = em.bind(expect[0], "e"), em.bind(dtype, "dt")
        return [f"v{out} = {text}",
                f"if v{out}.__class__ is not _nd or v{out}.dtype is not {dt} "
                f"or v{out}.ndim != {ndim}: v{out} = _check(v{out}, {e})"]
    names = ", ".join(f"v{s}" for s in out)
    return [f"{names}, = _check_all({text}, {em.bind(expect, 'e')})"]


def _ident(name: str) -> str:
    text = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return text if text and not text[0].isdigit() else f"g_{text}"
