"""TorchConverter: stages exported programs and lowers them into one Core AI Program."""

from __future__ import annotations

import difflib
import enum
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
import torch
import torch.fx
from torch.export import ExportedProgram
from torch.export.graph_signature import OutputKind

from coreai_core import Program
from coreai_torch._binding import LoweringForm
from coreai_torch._io_names import io_names
from coreai_torch._locations import describe, recording
from coreai_torch._lowerer import (
    GraphLowerer,
    Staged,
    WeightStore,
    all_call_nodes,
    handled_without_lowering,
)
from coreai_torch._table import LoweringTable, qualified_name
from coreai_torch.composite_declaration import generate_composite_decl
from coreai_torch.composite_lowering import CompositeBuilder
from coreai_torch.decompositions import decompose_unsupported
from coreai_torch.decompositions import torch_decomposition as _torch_decomposition
from coreai_torch.errors import UnsupportedOp, UnsupportedOpsError
from coreai_torch.externalize import ExternalizeSpec, ExternalSession, as_spec
from coreai_torch.lowerings import default_table
from coreai_torch.metal import TorchMetalKernel
from coreai_torch.utils import get_operand

# Apple's module exposes these names too (code imports them from coreai_torch.converter)
__all__ = ["Context", "ExternalizeSpec", "TorchConverter", "TorchMetalKernel",
           "generate_composite_decl", "get_operand"]


class Context:
    """Apple's ``coreai_torch.converter.Context``: there, the MLIR context (with an unknown
    default location) that a converter builds its program in, entered with ``with``. Programs
    here are plain Python objects built without one, so entering a ``Context`` does nothing;
    it exists so that code written for Apple's package (``with converter.context: ...``)
    runs unchanged. ``TorchConverter.context`` is one."""

    def __init__(self) -> None:
        pass  # nothing to hold: Apple's constructor takes no arguments either

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *args: object) -> None:
        return None


class TorchConverter:
    """Converts decomposed ``torch.export`` programs to a Core AI :class:`~coreai_core.Program`.

    Each converter owns a lowering table layered over the built-in one: lowerings registered
    with :meth:`register_torch_lowering` apply to this converter only and win over built-ins.

    ``progress`` shows a progress bar on large graphs (``None``: only when stderr is a
    terminal). Weights keep their dtypes exactly; nothing is narrowed. ``composites=True``
    lowers the ops of :data:`coreai_torch.composite_lowering.COMPOSITE_OPS` (layer_norm, tanh gelu,
    sdpa) into composite graphs called with ``coreai.invoke``; by default everything is flat.

    ``mode`` (Apple's argument) is how much source information each op keeps:
    ``Mode.DEBUG`` (the default) its user's file and line, nn.Module path, op id (the FX
    node's name) and full call stack; ``Mode.RELEASE`` the op id only, for smaller programs
    and assets. Both compute the same results (docs/coreai-interop.md, "Converter modes").
    """

    class Mode(enum.Enum):
        """How much source information a converted program keeps (see ``TorchConverter``)."""

        DEBUG = "debug"
        RELEASE = "release"

    def __init__(self, *, mode: TorchConverter.Mode = Mode.DEBUG, progress: bool | None = None,
                 composites: bool = False) -> None:
        if not isinstance(mode, TorchConverter.Mode):
            try:
                mode = TorchConverter.Mode(mode)
            except ValueError:
                raise TypeError(f"mode must be TorchConverter.Mode.DEBUG or .RELEASE, got "
                                f"{mode!r}") from None
        if progress is not None and not isinstance(progress, bool):
            raise TypeError(f"progress must be True, False or None, got {progress!r}")
        if not isinstance(composites, bool):
            raise TypeError(f"composites must be True or False, got {composites!r}")
        self.mode = mode
        self.context = Context()
        self.composites = composites
        self._table = LoweringTable(default_table())
        self._staged: dict[str, Staged] = {}
        self.progress = progress
        self.conversion_log: list[str] = []

    # -- lowering table ------------------------------------------------------------------------
    def register_torch_lowering(self, qualified_name: str, allow_override: bool = False, *,
                                form: LoweringForm | None = None,
                                ) -> Callable[[Callable], Callable]:
        """Decorator: lower FX nodes calling ``qualified_name`` with the decorated function.

        ``qualified_name`` is ``"namespace::op_name.overload"``. The function returns a Value
        or a list of Values. It is **schema-bound** (its parameters are named after the op's
        schema arguments and receive Values and Python values) unless its parameters are
        exactly ``(values_map, node, loc)`` or ``form="node"`` is passed: then it is called as
        ``fn(values_map, node, loc)`` with the FX node (see :mod:`coreai_torch._binding`).
        The form is decided here, once, and stored with the function. Replacing an existing
        (built-in or user) lowering requires ``allow_override=True``. The built-in families
        register with the same verb (:class:`~coreai_torch._table.LoweringSet`).
        """
        return self._table.register_torch_lowering(qualified_name, allow_override, form=form)

    def register_custom_kernels(self, kernels: Sequence[Any]) -> TorchConverter:
        """Apple's registration of ``TorchMetalKernel`` objects: custom Metal kernels need
        macOS with Metal (see :mod:`coreai_torch.metal`), so any kernel raises
        :class:`~coreai_torch.errors.MetalUnavailableError`; an empty list is a no-op."""
        from coreai_torch.metal import metal_unavailable

        if list(kernels):
            raise metal_unavailable("TorchConverter.register_custom_kernels")
        return self

    def lowering_for(self, qualified_name: str) -> Callable | None:
        """The function this converter lowers ``qualified_name`` with (None if unsupported):
        the one registered, a user's own or the built-in."""
        entry = self._table.get(qualified_name)
        return None if entry is None else entry.fn

    def supported_ops(self) -> list[str]:
        """Every qualified name this converter lowers (built-in and user), sorted."""
        return self._table.names()

    @property
    def user_lowerings(self) -> list[str]:
        return self._table.own_names()

    # -- staging -------------------------------------------------------------------------------
    def add_exported_program(self, exported_program: ExportedProgram,
                             input_names: Sequence[str] | None = None,
                             output_names: Sequence[str] | None = None,
                             state_names: Sequence[str] | None = None,
                             entrypoint_name: str = "main") -> TorchConverter:
        """Stage ``exported_program`` as entrypoint ``entrypoint_name``; returns ``self``."""
        return self._stage(exported_program, input_names, output_names, state_names,
                           entrypoint_name, None)

    def _stage(self, exported_program: ExportedProgram, input_names: Sequence[str] | None,
               output_names: Sequence[str] | None, state_names: Sequence[str] | None,
               entrypoint_name: str, session: ExternalSession | None) -> TorchConverter:
        if not isinstance(exported_program, ExportedProgram):
            raise TypeError(f"expected a torch.export.ExportedProgram, got "
                            f"{type(exported_program).__name__}; export the model with "
                            "torch.export.export first (or use add_pytorch_module)")
        _check_name("entrypoint_name", entrypoint_name)
        if entrypoint_name in self._staged:
            raise ValueError(f"entrypoint {entrypoint_name!r} is already staged; choose another "
                             "entrypoint_name or call clear([name]) first")
        input_names, output_names, state_names = (
            _names("input_names", input_names), _names("output_names", output_names),
            _names("state_names", state_names))
        shared = sorted(set(input_names or ()) & set(state_names or ()))
        if shared:
            raise ValueError(f"input_names and state_names share {shared}: a graph's inputs and "
                             "state need distinct names")
        # inputs are the forward() args not mutated in place; mutated ones are state (Apple's
        # rule): io_names checks both counts and that no name is an input's and a state's
        io_names(exported_program, input_names, state_names)
        user_outputs = sum(s.kind == OutputKind.USER_OUTPUT
                           for s in exported_program.graph_signature.output_specs)
        if output_names is not None and len(output_names) != user_outputs:
            raise ValueError(f"output_names has {len(output_names)} names but the program has "
                             f"{user_outputs} user outputs")
        self._staged[entrypoint_name] = Staged(exported_program, input_names, output_names,
                                               state_names, session=session)
        return self

    def add_pytorch_module(self, model: torch.nn.Module,
                           export_fn: Callable[[torch.nn.Module], ExportedProgram] | None = None,
                           externalize_modules: Sequence[type[torch.nn.Module] | ExternalizeSpec]
                           | None = None,
                           input_names: Sequence[str] | None = None,
                           output_names: Sequence[str] | None = None,
                           state_names: Sequence[str] | None = None,
                           entrypoint_name: str = "main", *, args: tuple = (),
                           kwargs: Mapping[str, Any] | None = None,
                           decompose: bool = True) -> TorchConverter:
        """Export ``model`` (with ``export_fn(model)`` or ``torch.export.export(model,
        args, kwargs)``), decompose it with :func:`get_decomp_table` and stage it. The first
        parameter is named ``model`` as in Apple's converter (pass it by position or by that
        name).

        ``externalize_modules`` lists nn.Module classes (or :class:`ExternalizeSpec` objects):
        each instance of one becomes a call (``coreai.invoke``) of a composite graph exported
        once per distinct signature and shared by every call site; its weights stay in the
        calling graph, stored once (see :mod:`coreai_torch.externalize`). The names are those
        of :meth:`add_exported_program`.
        """
        from coreai_torch.decompositions import get_decomp_table

        _check_module_args(model, export_fn, args, kwargs, decompose)

        def export(m: torch.nn.Module) -> ExportedProgram:
            if export_fn is None:
                return torch.export.export(m, tuple(args), kwargs=dict(kwargs or {}))
            ep = export_fn(m)
            if not isinstance(ep, ExportedProgram):
                raise TypeError(f"export_fn returned {type(ep).__name__}, not a "
                                "torch.export.ExportedProgram; it must return the result of "
                                "torch.export.export(module, args)")
            return ep

        def decomposed(ep: ExportedProgram) -> ExportedProgram:
            return ep.run_decompositions(get_decomp_table()) if decompose else ep

        if not externalize_modules:
            return self.add_exported_program(decomposed(export(model)), input_names,
                                             output_names, state_names, entrypoint_name)
        taken = {*self._staged, entrypoint_name}
        for other in self._staged.values():
            if other.session is not None:
                taken.update(e.graph_name for e in other.session.by_signature.values())
        session = ExternalSession([as_spec(x) for x in externalize_modules], taken)
        ep = session.export(model, export, decomposed)
        return self._stage(ep, input_names, output_names, state_names, entrypoint_name,
                           session)

    def clear(self, entrypoints: Sequence[str] | None = None) -> None:
        """Unstage the given entrypoints (all when None)."""
        if entrypoints is None:
            self._staged.clear()
            return
        for name in _names("entrypoints", entrypoints) or []:
            if name not in self._staged:
                raise KeyError(f"entrypoint {name!r} is not staged; staged: {list(self._staged)}")
            del self._staged[name]

    def __repr__(self) -> str:
        staged = ", ".join(f"{k}: {len(v.program.graph.nodes)} nodes"
                           for k, v in self._staged.items()) or "nothing"
        user = ", ".join(self.user_lowerings) or "none"
        return f"<TorchConverter staged=[{staged}] user_lowerings=[{user}]>"

    # -- conversion ----------------------------------------------------------------------------
    def to_coreai(self, entrypoints: Sequence[str] | None = None) -> Program:
        """Convert the staged programs (or just ``entrypoints``) into one Program."""
        if not self._staged:
            raise ValueError("nothing to convert: stage a program with add_exported_program "
                             "or add_pytorch_module first")
        names = list(self._staged) if entrypoints is None else _names("entrypoints", entrypoints)
        assert names is not None
        if not names:
            raise ValueError("entrypoints is empty: name the entrypoints to convert, or pass "
                             f"None to convert every staged one ({list(self._staged)})")
        for n in names:
            if n not in self._staged:
                close = difflib.get_close_matches(n, list(self._staged), 1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise KeyError(f"entrypoint {n!r} is not staged{hint}")
        self.conversion_log = []
        staged = {n: self._decompose_unsupported(n, self._staged[n]) for n in names}
        externals: dict[str, Staged] = {}
        for n in names:
            session = self._staged[n].session
            for ext in session.ordered() if session is not None else []:
                assert ext.program is not None
                if ext.graph_name in names:
                    raise ValueError(f"entrypoint {ext.graph_name!r} has the name of an "
                                     "externalized module's graph; stage it under another "
                                     "entrypoint_name")
                externals[ext.graph_name] = self._decompose_unsupported(ext.graph_name, Staged(
                    ext.program, ext.input_names, None, None, composite=ext.composite,
                    session=session))
        self._preflight([s.program for s in [*externals.values(), *staged.values()]])
        program = Program()
        weights = WeightStore(program)
        builder = CompositeBuilder(program) if self.composites else None
        with recording(self.mode.value):
            for n, ext_staged in externals.items():
                GraphLowerer(self._table, self.progress, program, weights, n, ext_staged,
                             composites=builder).run()
            for n in names:
                GraphLowerer(self._table, self.progress, program, weights, n, staged[n],
                             composites=builder).run()
        return program

    def _unsupported(self, ep: ExportedProgram) -> tuple[Counter[str], dict[str, torch.fx.Node]]:
        counts: Counter[str] = Counter()
        examples: dict[str, torch.fx.Node] = {}
        for node in all_call_nodes(ep.graph_module):
            if handled_without_lowering(node) is not None:
                continue
            qn = qualified_name(node.target)
            if qn in self._table:
                continue
            counts[qn] += 1
            examples.setdefault(qn, node)
        return counts, examples

    def _decompose_unsupported(self, name: str, staged: Staged) -> Staged:
        """Auto-decomposition fallback: ops with no lowering but a torch decomposition are
        decomposed now (see :func:`~coreai_torch.decompositions.decompose_unsupported`)."""
        # _torch_decomposition is read here, at call time: tests substitute it on this module
        ep = decompose_unsupported(staged.program, self._unsupported, entrypoint=name,
                                   log=self.conversion_log, find=_torch_decomposition)
        return attrs.evolve(staged, program=ep)

    def _preflight(self, programs: Sequence[ExportedProgram]) -> None:
        counts: Counter[str] = Counter()
        examples: dict[str, torch.fx.Node] = {}
        for ep in programs:
            c, e = self._unsupported(ep)
            counts.update(c)
            for k, v in e.items():
                examples.setdefault(k, v)
        if counts:
            raise UnsupportedOpsError([
                UnsupportedOp(qn, c, examples[qn].name, describe(examples[qn]))
                for qn, c in sorted(counts.items())])


def _check_name(arg: str, name: Any) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{arg} must be a str, got {type(name).__name__} {name!r}")
    if not name:
        raise ValueError(f"{arg} must not be empty")


def _names(arg: str, names: Any) -> list[str] | None:
    """``names`` (None or an iterable of distinct, non-empty str) as a list; a clear error for
    a single string (iterating it would give its characters) or anything else."""
    if names is None:
        return None
    if isinstance(names, (str, bytes)):
        raise TypeError(f"{arg} must be a list of names, got the string {names!r}; "
                        f"write {arg}=[{names!r}]")
    if not isinstance(names, Iterable) or isinstance(names, Mapping):
        raise TypeError(f"{arg} must be a list of names, got {type(names).__name__}")
    out = list(names)
    for n in out:
        _check_name(f"every entry of {arg}", n)
    repeated = sorted(n for n, count in Counter(out).items() if count > 1)
    if repeated:
        raise ValueError(f"{arg} repeats {repeated}: {out}")
    return out


def _check_module_args(module: Any, export_fn: Any, args: Any, kwargs: Any, decompose: Any,
                       ) -> None:
    """Clear errors for misuse of ``add_pytorch_module``, before anything is exported."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"add_pytorch_module expects a torch.nn.Module, got "
                        f"{type(module).__name__}; stage an ExportedProgram with "
                        "add_exported_program")
    if export_fn is not None and not callable(export_fn):
        raise TypeError(f"export_fn must be a function module -> ExportedProgram, got "
                        f"{type(export_fn).__name__}; pass example inputs as args=(...)")
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"args must be a tuple of example inputs, got {type(args).__name__}; "
                        "write args=(x,) for a single input")
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise TypeError(f"kwargs must be a mapping of example keyword inputs, got "
                        f"{type(kwargs).__name__}")
    if not isinstance(decompose, bool):
        raise TypeError(f"decompose must be True or False, got {decompose!r}")
