"""Export a Core AI ``Program`` as an ``.aimodel`` that Apple's Core AI runtime runs.

The walk: check the graph's interface, then emit every op through ``ops.MAPPINGS`` into an Apple
``coreai.authoring.Module``. A graph with state becomes a graph whose state arguments are Core AI
handles, read at its start and written at its end (``_state.py``). An ``invoke`` of a composite
becomes an invoke of a Core AI composite function (``_composites.py``). An op that cannot be
exported exactly is recorded (with a placeholder standing in for its results so that the walk goes
on and finds every other one); if anything was recorded, one
:class:`~coreai_torch.errors.UnexportableOpsError` lists it all and nothing is written.

Writing is atomic and durable (``_write_asset``): the asset is staged in a scratch folder next to
``path`` (``.<name>.export-<16 hex digits>``, locked by its writer), fsynced, then swapped with
the old asset in one step (:func:`coreai_core.durable_fs.replace`), so ``path`` holds the complete
old or the complete new asset at every instant. A scratch folder no live export holds is what a
crash left, and the next export to the same path removes it.
"""

from __future__ import annotations

import contextlib
import errno
import inspect
import keyword
import os
import re
import secrets
import shutil
import stat
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, overload

import numpy as np

from coreai_core import Graph, Operation, Program, TensorType, Value
from coreai_core import durable_fs as fs
from coreai_torch.aimodel._apple import ca, constant, save_program_asset, write_custom_metadata
from coreai_torch.aimodel._composites import CompositeFunctions
from coreai_torch.aimodel._constants import apple_constant
from coreai_torch.aimodel._context import (
    ExportContext,
    Refused,
    apple_shape,
    narrow_constant,
)
from coreai_torch.aimodel._dims import KEY as DIMS_KEY
from coreai_torch.aimodel._dims import dims_metadata
from coreai_torch.aimodel._emit import dims, i32
from coreai_torch.aimodel._locations import apple_location
from coreai_torch.aimodel._state import declare_stateful_graph
from coreai_torch.aimodel.not_exported import (
    EMPTY_TENSORS,
    empty_tensor_reason,
    not_exported_reason,
)
from coreai_torch.aimodel.ops import MAPPINGS
from coreai_torch.errors import AimodelExportError, UnexportableOp, UnexportableOpsError

__all__ = ["build_module", "export_aimodel"]


class _Refusals:
    """Refusals grouped by (op, reason): a count and the first location."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()
        self.first: dict[tuple[str, str], str] = {}

    def add(self, op: str, reason: str, location: str) -> None:
        key = (op, reason)
        self.counts[key] += 1
        self.first.setdefault(key, location)

    def raise_if_any(self) -> None:
        if self.counts:
            raise UnexportableOpsError([UnexportableOp(op, reason, n, self.first[(op, reason)])
                                        for (op, reason), n in self.counts.items()])


def _where(op: Operation, graph: Graph) -> str:
    loc = op.location
    return f"{loc} (graph {graph.name!r})" if loc.is_known else f"graph {graph.name!r}"


def _apple_type(t: TensorType, name: str | None = None) -> Any:
    """Core AI's type for ``t``: a dynamic dimension is Core AI's ``?`` (its bounds go into
    the asset's metadata)."""
    return ca.TensorType(apple_shape(t), ExportContext.apple_dtype(t), name=name)


def _check_interface(graph: Graph, refusals: _Refusals) -> None:
    here = f"graph {graph.name!r}"
    stateless = not graph.state_inputs
    interface = [("input", graph.inputs), ("state", graph.state_inputs),
                 ("output", graph.output_values)]
    for kind, values in interface:
        for name, value in values.items():
            # Core AI's graph decorator names inputs after parameters; a stateful graph is
            # declared without it (see _state.py) and takes any name
            if kind == "input" and stateless and (not name.isidentifier()
                                                  or keyword.iskeyword(name)):
                refusals.add("input", f"name {name!r} is not a Python identifier (Core AI's "
                             "graph builder names inputs after parameters); rename it when "
                             "converting", here)
            try:
                _apple_type(value.type)
                if kind == "state" and value.type.static_shape is None:
                    raise Refused(f"dynamic shape {value.type}: state is exported with static "
                                  "shapes only (its buffer keeps one size from call to call)")
            except Refused as e:
                refusals.add(kind, f"{name!r}: {e.reason}", here)
            if value.type.element_type.is_complex:
                refusals.add(kind, f"{name!r}: complex {kind}s are not exported (inside "
                             "graphs only); pass the parts (view_as_real) instead", here)


def _placeholder(value: Value) -> Any:
    """A stand-in for a refused op's result, so that the walk can go on (of its rank: the
    mappings of the ops it feeds index its axes)."""
    shape = tuple(d if isinstance(d, int) else 1 for d in value.type.shape)
    try:
        dtype = ExportContext.apple_dtype(value)
    except Refused:
        dtype = np.float32
    return ca.broadcast_to(constant(np.zeros((), dtype)), np.asarray(shape, np.int32))


def _check_results(op: Operation, emitted: list[Any]) -> None:
    if len(emitted) != len(op.results):
        raise Refused(f"exporter bug: {len(emitted)} results for {len(op.results)}")
    for ours, theirs in zip(op.results, emitted, strict=True):
        want = _apple_type(ours.type)
        # a size either side leaves dynamic is known only at run time: not a mismatch
        apart = len(theirs.type.shape) != len(want.shape) or any(
            a >= 0 and b >= 0 and a != b for a, b in zip(theirs.type.shape, want.shape))
        if apart or str(theirs.type.dtype) != str(want.dtype):
            raise Refused(f"exporter bug: Core AI produced {theirs.type}, expected {want} "
                          "(please report)")


class _Values(Sequence[Any]):
    """Our values' Apple counterparts. A constant is emitted when first used as an Apple value:
    one read at export time only (a slice bound, a shape) never reaches the .aimodel, so it
    need not fit 32 bits."""

    def __init__(self, ctx: ExportContext, graph: Graph, refusals: _Refusals,
                 values: list[Value] | None = None, table: dict[int, Any] | None = None,
                 ) -> None:
        self.ctx, self.graph, self.refusals = ctx, graph, refusals
        self.values = values or []
        self.table: dict[int, Any] = {} if table is None else table

    def operands(self, values: list[Value]) -> _Values:
        return _Values(self.ctx, self.graph, self.refusals, values, self.table)

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self.get(v) for v in self.values[index]]
        return self.get(self.values[index])

    def get(self, value: Value) -> Any:
        found = self.table.get(id(value))
        if found is None and value.owner is not None and value.owner.name == "coreai.constant":
            op = value.owner
            try:
                found = apple_constant(narrow_constant(self.ctx.constant_array(value)))
            except Refused as e:
                self.refusals.add(op.name, e.reason, _where(op, self.graph))
                found = _placeholder(value)
            self.table[id(value)] = found
        if found is None:  # not bound: only after a refusal, which stops the export
            found = self.table[id(value)] = _placeholder(value)
        return found


def _emit_op(ctx: ExportContext, op: Operation, values: _Values) -> list[Any]:
    mapping = MAPPINGS.get(op.name)
    if mapping is None:
        raise Refused(not_exported_reason(op.name))
    for v in [*op.operands, *op.results]:
        _apple_type(v.type)
    shapes = [v.type.static_shape or () for v in [*op.operands, *op.results]]
    if op.name not in EMPTY_TENSORS and any(0 in s for s in shapes):
        raise Refused(empty_tensor_reason(shapes))
    emitted = mapping.emit(ctx, op, values.operands(op.operands))
    _check_results(op, emitted)
    return [_refined(a, ours) for a, ours in zip(emitted, op.results, strict=True)]


def _refined(apple: Any, ours: Value) -> Any:
    """``apple`` with the static sizes ``ours`` knows and Core AI's inference lost (a slice
    with bounds computed at run time is dynamic on every axis): a reshape to our shape, when
    at most one of its sizes is dynamic (the reshape's -1)."""
    want = apple_shape(ours)
    if dims(apple) == want or sum(d < 0 for d in want) > 1:
        return apple
    return ca.reshape(apple, i32(want))


def _emit_graph(ctx: ExportContext, graph: Graph, args: Sequence[Any], refusals: _Refusals,
                ) -> tuple[list[Any], dict[str, Any]]:
    """Emit ``graph``'s ops; ``args`` are the Apple values of its inputs, then of its state.
    Returns the Apple values of its outputs and of its new state (by name)."""
    values = _Values(ctx, graph, refusals)
    params = [*graph.inputs.values(), *graph.state_inputs.values()]
    values.table.update({id(v): a for v, a in zip(params, args, strict=True)})
    for op in graph.ops:
        if op.name == "coreai.constant":
            continue  # emitted where it is used (see _Values)
        try:
            with apple_location(op.location):  # the op's debug info (see _locations.py)
                emitted = _emit_op(ctx, op, values)
        except Refused as e:
            refusals.add(op.name, e.reason, _where(op, graph))
            emitted = [_placeholder(r) for r in op.results]
        except (TypeError, ValueError, RuntimeError) as e:  # Apple's builders rejected it
            refusals.add(op.name, f"Core AI's builder rejected the mapping: {e}",
                         _where(op, graph))
            emitted = [_placeholder(r) for r in op.results]
        except (LookupError, ArithmeticError, AttributeError, AssertionError) as e:
            refusals.add(op.name, f"exporter bug: its mapping raised {type(e).__name__}: {e} "
                         "(please report)", _where(op, graph))
            emitted = [_placeholder(r) for r in op.results]
        for r, a in zip(op.results, emitted, strict=True):
            values.table[id(r)] = a
    return ([values.get(v) for v in graph.output_values.values()],
            {k: values.get(v) for k, v in graph.state_outputs.items()})


def _graph_function(ctx: ExportContext, graph: Graph, refusals: _Refusals) -> Any:
    """A function whose signature is the graph's (Apple's ``graph`` decorator reads it)."""
    def body(*args: Any) -> Any:
        outs, _ = _emit_graph(ctx, graph, args, refusals)
        return outs[0] if len(outs) == 1 else tuple(outs)

    params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
              for n in graph.inputs]
    body.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    results = [Annotated[ca.Value, _apple_type(v.type, name)]
               for name, v in graph.output_values.items()]
    body.__annotations__ = {
        **{n: Annotated[ca.Value, _apple_type(v.type)]
           for n, v in graph.inputs.items()},
        "return": results[0] if len(results) == 1 else tuple[tuple(results)],  # type: ignore[misc]
    }
    body.__name__ = body.__qualname__ = graph.name
    return body


def _declare_graph(ctx: ExportContext, graph: Graph, refusals: _Refusals) -> None:
    """Insert ``graph`` into the current Apple module (with its state as handles)."""
    if not graph.state_inputs:
        ca.graph(_graph_function(ctx, graph, refusals))
        return
    declare_stateful_graph(
        graph.name, {k: _apple_type(v.type) for k, v in graph.inputs.items()},
        {k: _apple_type(v.type) for k, v in graph.state_inputs.items()},
        {k: _apple_type(v.type, k) for k, v in graph.output_values.items()},
        lambda args: _emit_graph(ctx, graph, args, refusals))


def _entrypoints(program: Program, entrypoints: Sequence[str] | None) -> list[str]:
    # a composite is declared where it is first invoked (see _composites.py), not an entrypoint
    names = ([n for n, g in program.graphs.items() if g.composite is None]
             if entrypoints is None else list(entrypoints))
    unknown = [n for n in names if n not in program.graphs]
    if unknown:
        raise AimodelExportError(f"program has no entrypoint(s) {unknown}; it has "
                                 f"{list(program.graphs)}")
    return names


def build_module(program: Program, entrypoints: Sequence[str] | None = None) -> Any:
    """The Apple ``coreai.authoring.Module`` of ``program`` (nothing is written).

    Each of ``entrypoints`` (default: every graph but composites) becomes a Core AI graph of
    the same name; each composite invoked from them becomes a private Core AI composite
    function (or is inlined where invoked when its declaration does not map, see
    ``_composites.py``).
    Raises :class:`~coreai_torch.errors.UnexportableOpsError` listing every op that cannot be
    exported exactly.
    """
    names = _entrypoints(program, entrypoints)
    graphs = [program.graphs[n] for n in names]
    refusals = _Refusals()
    for graph in graphs:
        _check_interface(graph, refusals)
    if any(op in ("input", "state", "output") for op, _ in refusals.counts):
        refusals.raise_if_any()  # without a signature there is no graph to walk

    def inline(graph: Graph, args: Sequence[Any]) -> list[Any]:
        outputs, _ = _emit_graph(ctx, graph, tuple(args), refusals)
        return outputs

    module = ca.Module.create()
    composites = CompositeFunctions(module, inline, names)
    ctx = ExportContext(program, inline, composites.invoke)
    try:
        with module:
            for graph in graphs:
                _declare_graph(ctx, graph, refusals)
            refusals.raise_if_any()  # inside: Apple's rewrite passes do not run on a failure
    except RuntimeError as e:
        raise AimodelExportError(f"Core AI rejected the exported graphs {names} (an exporter "
                                 f"bug, please report): {e}") from e
    return module


try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: leftovers are not recognised
    fcntl = None  # type: ignore[assignment]

# room a save needs beyond the weights' bytes before it writes straight to the disk
_MARGIN = 256 << 20


def _scratch_name(target: Path) -> re.Pattern[str]:
    return re.compile(rf"\.{re.escape(target.name)}\.export-[0-9a-f]{{16}}")


# what an export before this layout staged in: tempfile.mkdtemp(prefix=".<name>.") holding
# <name> (the new asset) and/or previous.aimodel (the old one, renamed aside)
_APPLE_FILES = frozenset({"main.mlirb", "main.hash", "metadata.json"})


def _is_old_scratch(target: Path, name: str) -> bool:
    if not re.fullmatch(rf"\.{re.escape(target.name)}\.[a-z0-9_]{{8}}", name):
        return False
    folder = target.parent / name
    try:
        entries = os.listdir(folder)
        return stat.S_ISDIR(os.lstat(folder).st_mode) and all(
            entry in (target.name, "previous.aimodel")
            and stat.S_ISDIR(os.lstat(folder / entry).st_mode)
            and all(f in _APPLE_FILES and stat.S_ISREG(os.lstat(folder / entry / f).st_mode)
                    for f in os.listdir(folder / entry))
            for entry in entries)
    except OSError:
        return False


def _try_lock(folder: Path) -> int | None:
    """An fd holding an exclusive lock on ``folder``, or None if another process holds it."""
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    if fcntl is None:  # pragma: no cover
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _remove_leftovers(target: Path) -> None:
    """Remove the scratch folders of exports to ``target`` that died (by their exact name
    pattern, and only when no live export holds their lock), and those an earlier release
    left (by their name and exactly the asset folders it wrote in them); failures are
    ignored."""
    pattern = _scratch_name(target)
    with contextlib.suppress(OSError):
        for name in os.listdir(target.parent):
            folder = target.parent / name
            if _is_old_scratch(target, name):  # left by an export of an earlier release
                with contextlib.suppress(OSError):
                    fs.remove_tree(folder)
                continue
            if not pattern.fullmatch(name) or not stat.S_ISDIR(os.lstat(folder).st_mode):
                continue
            with contextlib.suppress(OSError):
                fd = _try_lock(folder)
                if fd is not None:
                    try:
                        fs.remove_tree(folder)
                    finally:
                        os.close(fd)


def _through_memory(program: Program, folder: Path) -> bool:
    """Whether to serialize through memory (see ``save_program_asset``): when the disk's
    free space is not well above what the weights need."""
    need = sum((t.numel or 0) * t.element_type.itemsize for t in program.weight_types.values())
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return True
    return free < 2 * need + _MARGIN


def _check_target(target: Path) -> None:
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise AimodelExportError(f"{target} is a symlink; not exporting through it (export "
                                 "to the path it points to)")
    if not ca.AIModelAsset.is_valid(target):
        raise AimodelExportError(f"{target} exists and is not an .aimodel asset; not "
                                 "overwriting it")


def _swap_in(staged: Path, target: Path, scratch: Path) -> None:
    """Make ``target`` the staged asset in one atomic step (the old one, if any, ends in
    ``scratch``). On a filesystem that cannot swap two folders atomically (some network
    filesystems), the old asset is renamed aside first: the one case with a moment where
    ``target`` is missing."""
    try:
        fs.replace(staged, target)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP) \
                or not os.path.isdir(target):
            raise
        fs.replace(target, scratch / "previous.aimodel")
        fs.replace(staged, target)


def _write_asset(program: Program, module: Any, target: Path, dims: dict[str, Any]) -> None:
    """Stage, fsync and swap in the asset (see the module docstring)."""
    _remove_leftovers(target)
    scratch = target.parent / f".{target.name}.export-{secrets.token_hex(8)}"
    fs.make_dir(scratch)
    lock = _try_lock(scratch)
    try:
        staged = scratch / target.name
        try:
            save_program_asset(module, staged,
                               through_memory=_through_memory(program, target.parent))
            if dims:
                write_custom_metadata(staged, DIMS_KEY, dims)
            fs.fsync_tree(staged)
        except (OSError, RuntimeError) as e:
            cause = e.__cause__ if isinstance(e.__cause__, OSError) else e
            reason = cause.strerror if isinstance(cause, OSError) and cause.strerror else cause
            free = shutil.disk_usage(target.parent).free
            raise AimodelExportError(
                f"cannot write {target}: {reason} ({free} bytes free on its disk); nothing "
                "was replaced, and the partial copy was removed") from e
        _swap_in(staged, target, scratch)
    finally:
        with contextlib.suppress(OSError):
            fs.remove_tree(scratch)
        if lock is not None:
            os.close(lock)


def export_aimodel(program: Program, path: str | os.PathLike[str], *,
                   entrypoints: Sequence[str] | None = None) -> Path:
    """Write ``program`` as an ``.aimodel`` asset that Apple's Core AI runtime runs.

    Each of ``entrypoints`` (default: every graph of the program but composites) becomes a
    function of the asset with the same name, inputs and outputs. A composite they invoke
    becomes a Core AI composite (a private function with its declaration, invoked at each call
    site) where its declaration maps; otherwise its ops are inlined where it is invoked. A
    graph's state becomes Core AI state of the same names, which the caller binds and which is
    updated in place on each call (``run_aimodel(..., state=...)``); entrypoints that share
    state names share the state when called with the same mapping (a prefill then decode
    steps).

    Every op must map exactly onto Core AI ops (see docs/coreai-interop.md); otherwise one
    :class:`~coreai_torch.errors.UnexportableOpsError` lists every op that does not, with a
    count, a location and the reason, and nothing is written. int64 and float64 tensors become
    int32 and float32 (constants are checked to fit; inputs and state must fit at run time).
    A dynamic dimension becomes Core AI's dynamic dimension; its name and bounds are kept in
    the asset's metadata and checked by :func:`load_aimodel`'s ``run``.
    Writing is atomic and durable: ``path`` holds the complete old or the complete new asset at
    every instant, also if the export fails or the process is killed, and the files are
    fsynced. An existing ``.aimodel`` there is replaced; any other existing file (or a
    symlink) is left alone and an error raised. A write that fails (a full disk) raises
    :class:`~coreai_torch.errors.AimodelExportError` and leaves nothing behind. Returns the
    path written.
    """
    target = Path(path)
    if target.suffix != ".aimodel":
        raise AimodelExportError(f"{target}: an .aimodel path must end in '.aimodel'")
    _check_target(target)
    module = build_module(program, entrypoints)
    target.parent.mkdir(parents=True, exist_ok=True)
    dims = dims_metadata([program.graphs[n] for n in _entrypoints(program, entrypoints)])
    _write_asset(program, module, target, dims)
    return target
