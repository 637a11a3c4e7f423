"""Externalized submodules: each instance of a chosen nn.Module class becomes its own graph.

``TorchConverter.add_pytorch_module(model, export_fn, externalize_modules=[RMSNorm, ...])``.

Design. While ``export_fn(model)`` runs, the ``forward`` of every instance of an externalized
class is replaced (on the instance, and restored afterwards) by a call to one placeholder
custom op, ``coreai_ext::call_module(Tensor[] args, str key) -> Tensor[]``. Its arguments are
the call's tensor leaves (pytree-flattened ``args``/``kwargs``) followed by the instance's
parameters and buffers; ``key`` names the instance and the call's non-tensor structure. So
the parent's exported program keeps the call opaque and keeps the weights as its own
parameters (stored once, passed to the call). The placeholder's fake implementation runs the
real ``forward`` on the fake inputs (so shapes, dtypes and dynamic dims propagate) and records
the call's *signature*: the class, the non-tensor structure and each tensor's dtype and shape,
with dynamic dims as wildcards. Each distinct signature is then exported once on its own, as a
function of (inputs, parameters) through :func:`torch.func.functional_call`, with the dynamic
dims exported as ``Dim.AUTO``; externalized modules nested inside it are placeholders again,
so nesting works. The converter lowers every signature's program into a composite graph
(callees before callers) and each placeholder call into ``coreai.invoke`` of its graph.

Why a placeholder op rather than ``preserve_module_call_signature``: the op keeps the call
boundary through ``run_decompositions`` by construction, shares one graph between instances
(their weights are arguments, not constants of the graph) and needs no unflattening.

A session is owned by the converter's staged entry it produced. A torch custom op receives
only tensors and strings, so the op finds its session through a weak index keyed by a
per-session id (the prefix of ``key``): the index owns nothing, a session lives as long as
the converter that staged it, and one converter's modules are never visible to another.
"""

from __future__ import annotations

import inspect
import itertools
import re
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import attrs
import torch
import torch.utils._pytree as pytree
from torch.export import ExportedProgram

from coreai_core import Composite
from coreai_torch.composite_ops._base import plain_attribute

__all__ = ["CALL_MODULE", "ExternalSession", "ExternalizeSpec", "external_program",
           "session_of"]

CALL_MODULE = "coreai_ext::call_module.default"


def _attrs_field(value: Any) -> Any:
    """``composite_attrs`` as given: None, a dict of values, or attribute names (a tuple)."""
    if value is None or isinstance(value, dict):
        return value
    if isinstance(value, str) or not all(isinstance(n, str) for n in value):
        raise TypeError(f"composite_attrs must be a list of attribute names (or a dict of "
                        f"values), got {value!r}")
    return tuple(value)


@attrs.frozen
class ExternalizeSpec:
    """Externalize every instance of ``target_class`` as a composite graph.

    ``composite_op_name`` names the composite (default: the class's ``composite_name``
    attribute, else the class name). ``composite_attrs`` are its declaration's attributes:
    a list of the instance's attribute names, read from each instance (Apple's form:
    ``ExternalizeSpec(RMSNormImpl, "rms_norm", ["axes", "eps"])``), or a dict of values; by
    default the instance's ``composite_attributes()`` if it defines one. Setting
    ``composite_attrs`` needs ``composite_op_name``.
    """

    target_class: type[torch.nn.Module]
    composite_op_name: str | None = None
    composite_attrs: tuple[str, ...] | dict[str, Any] | None = attrs.field(
        default=None, converter=_attrs_field)

    def __attrs_post_init__(self) -> None:
        if not (isinstance(self.target_class, type)
                and issubclass(self.target_class, torch.nn.Module)):
            raise TypeError(f"ExternalizeSpec.target_class must be an nn.Module class, got "
                            f"{self.target_class!r}")
        if self.composite_attrs is not None and self.composite_op_name is None:
            raise ValueError(f"ExternalizeSpec({self.target_class.__name__}): composite_attrs "
                             "needs composite_op_name; name the composite op")

    def name(self) -> str:
        return str(self.composite_op_name or getattr(self.target_class, "composite_name",
                                                     self.target_class.__name__))

    def attributes(self, module: torch.nn.Module) -> dict[str, Any]:
        if isinstance(self.composite_attrs, dict):
            return dict(self.composite_attrs)
        if self.composite_attrs is not None:
            missing = [n for n in self.composite_attrs if not hasattr(module, n)]
            if missing:
                raise AttributeError(
                    f"ExternalizeSpec({type(module).__name__}, {self.name()!r}): the module "
                    f"has no attribute(s) {missing} listed in composite_attrs")
            return {n: plain_attribute(getattr(module, n)) for n in self.composite_attrs}
        fn = getattr(module, "composite_attributes", None)
        return dict(fn()) if callable(fn) else {}


def as_spec(item: type[torch.nn.Module] | ExternalizeSpec) -> ExternalizeSpec:
    if isinstance(item, ExternalizeSpec):
        return item
    if isinstance(item, type) and issubclass(item, torch.nn.Module):
        return ExternalizeSpec(item)
    raise TypeError(f"externalize_modules takes nn.Module classes or ExternalizeSpec objects, "
                    f"got {item!r}")


# ---------------------------------------------------------------------------- placeholder op

# The op's way from a key to its session (see the module docstring): weak, never an owner.
_OP_INDEX: weakref.WeakValueDictionary[str, ExternalSession] = weakref.WeakValueDictionary()
_IDS = itertools.count()


def session_of(key: str) -> tuple[ExternalSession, str]:
    """The session a ``call_module`` key belongs to, and the call site's key within it."""
    sid, _, rest = key.partition("/")
    session = _OP_INDEX.get(sid)
    if session is None:
        raise RuntimeError(f"coreai_ext::call_module {key!r}: its converter is gone; the "
                           "placeholder op runs only while its TorchConverter exists")
    return session, rest


def external_program(key: str) -> ExportedProgram | None:
    """The exported program a ``call_module`` key's call runs (None if not known)."""
    try:
        session, rest = session_of(key)
    except RuntimeError:
        return None
    name = session.site_graph.get(rest)
    return next((e.program for e in session.by_signature.values() if e.graph_name == name),
                None)


@torch.library.custom_op("coreai_ext::call_module", mutates_args=())
def call_module(args: list[torch.Tensor], key: str) -> list[torch.Tensor]:
    """Placeholder for the call of an externalized module (see the module docstring)."""
    session, rest = session_of(key)
    return session.call(rest, args)


@call_module.register_fake
def _call_module_fake(args: list[torch.Tensor], key: str) -> list[torch.Tensor]:
    session, rest = session_of(key)
    return session.call(rest, args, record=True)


# ---------------------------------------------------------------------------- the session

@attrs.define
class _Site:
    """One instance called with one non-tensor structure."""

    module: torch.nn.Module
    spec: ExternalizeSpec
    in_spec: Any  # pytree spec of (args, kwargs) with tensors as leaves
    consts: list[Any]  # the non-tensor leaves (_TENSOR where a tensor goes)
    n_user: int
    param_names: list[str]
    input_names: list[str]
    out_spec: Any = None
    signature: Any = None


@attrs.define
class External:
    """One distinct signature: its exported program and the composite it becomes."""

    graph_name: str
    composite: Composite
    program: ExportedProgram | None
    input_names: list[str]
    calls: list[str] = attrs.field(factory=list)  # graph names it invokes


class _TensorSlot:
    def __repr__(self) -> str:
        return "<tensor>"


_TENSOR = _TensorSlot()


class ExternalSession:
    """The externalization state of one converter: sites, signatures and their programs."""

    def __init__(self, specs: Sequence[ExternalizeSpec], taken: Iterable[str] = ()) -> None:
        self.id = f"s{next(_IDS)}"
        self.specs = list(specs)
        self.taken = set(taken)  # graph names used elsewhere in the conversion
        self.sites: dict[str, _Site] = {}
        self.by_signature: dict[Any, External] = {}
        self.site_graph: dict[str, str] = {}  # site key -> graph name
        self._bypass: set[int] = set()
        self._depth = 0
        self._recording: list[list[str]] = []
        _OP_INDEX[self.id] = self

    def callee(self, key: str) -> str | None:
        """The graph a ``call_module`` key of this session invokes (None: not this session's
        call, or a call site never exported)."""
        sid, _, site = key.partition("/")
        return self.site_graph.get(site) if sid == self.id else None

    # -- during export ---------------------------------------------------------------------
    @contextmanager
    def patched(self, model: torch.nn.Module) -> Iterator[None]:
        """Replace the forward of every externalized instance inside ``model``."""
        patched = []
        matched: set[int] = set()
        for _, m in model.named_modules():
            spec = next((s for s in self.specs if isinstance(m, s.target_class)), None)
            if spec is not None and "forward" not in m.__dict__:
                m.forward = self._placeholder(m, spec)
                patched.append(m)
                matched.add(id(spec))
        for spec in self.specs:
            if id(spec) not in matched:  # a superset of specs across model variants is fine
                warnings.warn(f"externalize_modules: no submodule of {type(model).__name__} is "
                              f"a {spec.target_class.__name__}; nothing is externalized for "
                              "it", UserWarning, stacklevel=4)
        try:
            yield
        finally:
            for m in patched:
                del m.forward

    def _placeholder(self, m: torch.nn.Module, spec: ExternalizeSpec) -> Callable[..., Any]:
        original = type(m).forward

        def forward(*args: Any, **kwargs: Any) -> Any:
            if id(m) in self._bypass:
                return original(m, *args, **kwargs)
            leaves, in_spec = pytree.tree_flatten((args, kwargs))
            tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
            consts = [_TENSOR if isinstance(x, torch.Tensor) else x for x in leaves]
            state = dict(itertools.chain(m.named_parameters(), m.named_buffers()))
            shapes = tuple(_tensor_sig(t) for t in [*tensors, *state.values()])
            # one site per instance, call structure and tensor signature: an instance called
            # with two shapes is two sites, each invoking the graph of its own signature
            key = f"{id(m)}:{in_spec}:{consts!r}:{shapes}"
            if key not in self.sites:
                # the declared attributes (eps, is_causal, ...) are baked into the exported
                # graph: instances declaring different values must not share one
                signature = (type(m).__qualname__, spec.name(), str(in_spec), repr(consts),
                             repr(sorted(spec.attributes(m).items())), shapes)
                self.sites[key] = _Site(m, spec, in_spec, consts, len(tensors), list(state),
                                        _input_names(original, m, args, kwargs, leaves),
                                        signature=signature)
            outs = call_module([*tensors, *state.values()], f"{self.id}/{key}")
            return pytree.tree_unflatten(outs, self.sites[key].out_spec)

        return forward

    def call(self, key: str, args: list[torch.Tensor], record: bool = False,
             ) -> list[torch.Tensor]:
        site = self.sites[key]
        if record and self._depth == 0 and self._recording:
            self._recording[-1].append(key)
        self._depth += 1
        try:
            out = self._run(site, args)
        finally:
            self._depth -= 1
        leaves, site.out_spec = pytree.tree_flatten(out)
        if not all(isinstance(x, torch.Tensor) for x in leaves):
            raise TypeError(f"externalized {type(site.module).__name__} returns a non-tensor "
                            "value; an externalized module must return tensors only")
        inputs = {id(t) for t in args}
        return [x.clone() if id(x) in inputs else x for x in leaves]

    def _run(self, site: _Site, args: list[torch.Tensor]) -> Any:
        user, params = args[:site.n_user], args[site.n_user:]
        it = iter(user)
        leaves = [next(it) if c is _TENSOR else c for c in site.consts]
        call_args, call_kwargs = pytree.tree_unflatten(leaves, site.in_spec)
        self._bypass.add(id(site.module))
        try:
            return torch.func.functional_call(site.module, dict(zip(site.param_names, params)),
                                              tuple(call_args), dict(call_kwargs))
        finally:
            self._bypass.discard(id(site.module))

    def export(self, model: torch.nn.Module, export_fn: Callable[[torch.nn.Module],
                                                                 ExportedProgram],
               decompose: Callable[[ExportedProgram], ExportedProgram]) -> ExportedProgram:
        """Export ``model`` with placeholders, then every new signature found, recursively."""
        with self.patched(model):
            ep, calls = self._recorded(lambda: decompose(export_fn(model)))
            pending = list(calls)
            while pending:
                key = pending.pop(0)
                site = self.sites[key]
                if site.signature in self.by_signature:
                    self.site_graph[key] = self.by_signature[site.signature].graph_name
                    continue
                name = self._graph_name(site.spec.name())
                ext = External(name, Composite(site.spec.name(), 1,
                                               site.spec.attributes(site.module)),
                               None, site.input_names + site.param_names)
                self.by_signature[site.signature] = ext
                self.site_graph[key] = name
                sub, inner = self._recorded(
                    lambda site=site: decompose(self._export_site(site)))  # type: ignore[misc]
                ext.program = sub
                ext.calls = inner
                pending.extend(inner)
        for ext in self.by_signature.values():
            ext.calls = [self.site_graph[k] for k in ext.calls]
        return ep

    def _recorded(self, fn: Callable[[], ExportedProgram]) -> tuple[ExportedProgram, list[str]]:
        self._recording.append([])
        try:
            ep = fn()
        finally:
            calls = self._recording.pop()
        return ep, list(dict.fromkeys(calls))

    def _export_site(self, site: _Site) -> ExportedProgram:
        examples, dynamic = [], []
        for t in site.signature[-1]:
            shape, dtype, dyn = t
            examples.append(_example(shape, dtype))
            dynamic.append({i: torch.export.Dim.AUTO for i in dyn} or None)
        wrapper = _SiteCall(self, site)
        return torch.export.export(wrapper, tuple(examples), dynamic_shapes=(tuple(dynamic),))

    def _graph_name(self, base: str) -> str:
        taken = self.taken | {e.graph_name for e in self.by_signature.values()}
        name, i = base, 1
        while name in taken:
            name, i = f"{base}_{i}", i + 1
        return name

    def ordered(self) -> list[External]:
        """Signatures in an order where every graph comes after the graphs it invokes."""
        by_name = {e.graph_name: e for e in self.by_signature.values()}
        out: list[External] = []
        seen: set[str] = set()

        def visit(e: External) -> None:
            if e.graph_name in seen:
                return
            seen.add(e.graph_name)
            for c in e.calls:
                visit(by_name[c])
            out.append(e)

        for e in by_name.values():
            visit(e)
        return out


class _SiteCall(torch.nn.Module):
    """``forward(*inputs, *params)``: one site as a function; the module is not registered
    as a child, so its weights are arguments of the export, never constants."""

    def __init__(self, session: ExternalSession, site: _Site) -> None:
        super().__init__()
        self.__dict__["_site"] = site
        self.__dict__["_session"] = session

    def forward(self, *args: torch.Tensor) -> list[torch.Tensor]:
        session: ExternalSession = self.__dict__["_session"]
        out = session._run(self.__dict__["_site"], list(args))
        return list(pytree.tree_leaves(out))


def _tensor_sig(t: torch.Tensor) -> tuple[tuple[int, ...], torch.dtype, tuple[int, ...]]:
    shape: list[int] = []
    dyn: list[int] = []
    for i, d in enumerate(t.shape):
        if isinstance(d, torch.SymInt) and not _is_static(d):
            dyn.append(i)
            shape.append(_hint(d))
        else:
            shape.append(int(d))
    return tuple(shape), t.dtype, tuple(dyn)


def _is_static(d: torch.SymInt) -> bool:
    return bool(getattr(d.node.expr, "is_number", False))


def _hint(d: torch.SymInt) -> int:
    hint = d.node.hint
    if hint is None:
        hint = d.node.shape_env.size_hint(d.node.expr)
    return int(hint)


def _example(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, dtype=dtype)
    if dtype == torch.bool:
        return torch.ones(shape, dtype=dtype)
    return torch.zeros(shape, dtype=dtype)


def _input_names(forward: Callable[..., Any], m: torch.nn.Module, args: tuple,
                 kwargs: dict[str, Any], leaves: list[Any]) -> list[str]:
    """Readable names of the call's tensor leaves: the forward's parameter names."""
    try:
        bound = inspect.signature(forward).bind(m, *args, **kwargs).arguments
        bound.pop(next(iter(bound)))  # self
        paths = pytree.tree_flatten_with_path(dict(bound))[0]
        names = [_clean(pytree.keystr(p)) for p, x in paths if isinstance(x, torch.Tensor)]
    except (TypeError, ValueError):
        names = []
    n = sum(isinstance(x, torch.Tensor) for x in leaves)
    if len(names) != n or len(set(names)) != n:
        names = [f"input_{i}" for i in range(n)]
    return names


def _clean(keystr: str) -> str:
    return re.sub(r"\W+", "_", keystr).strip("_") or "input"
