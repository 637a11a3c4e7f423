"""Align two graphs node by node: what is the same, what changed, what was removed or added.

Graphs are ``networkx.DiGraph`` s made by :func:`program_graph` (a Core AI program's graph:
one node per op, id = op id, then one per input and output) or :func:`exported_program_graph`
(one node per FX node). Each node carries its parts (kind, op name, index, types, attributes);
:func:`node_labels` turns them into a :class:`Label`, with weights left out, or in as a digest
of their bytes, as :class:`WeightPolicy` says.

:func:`align` pairs nodes in rounds: nodes whose label and whole upstream (:func:`fingerprints`)
and whole downstream (:func:`co_fingerprints`) agree; then nodes agreeing on one of the two;
then neighbours of paired nodes at the same operand position with the same op. Equal nodes
that cannot be told apart are paired in graph order and reported as an :class:`Ambiguity`.
Pairs whose labels differ are "modified"; what is left is removed (source) or added (target).
"""

from __future__ import annotations

import enum
import hashlib
import logging
from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx  # type: ignore[import-untyped]
import numpy as np
import torch

from coreai_core import Graph, Program, WeightRef
from coreai_torch.debugging.utils import entry_graph

__all__ = ["Alignment", "Ambiguity", "Label", "UNSTABLE_ATTRIBUTES", "WeightPolicy", "align",
           "co_fingerprints", "defining_op", "exported_program_graph", "fingerprints",
           "node_labels", "program_graph", "resource_digests", "responsible_op",
           "structural_labels"]

logger = logging.getLogger(__name__)

# attributes that name things rather than compute: they differ between equal programs
UNSTABLE_ATTRIBUTES = frozenset({"sym_name"})
INLINE_ELEMENTS = 16  # constants up to this size are compared by value under every policy


class WeightPolicy(enum.StrEnum):
    """How weights enter a label: not at all, as a digest of their bytes (``DIGEST``, looked
    up in ``blobs`` by weight name when given), or as a digest of the bytes only
    (``DIGEST_PORTABLE``: the same for equal weights of different programs)."""

    IGNORE = "ignore"
    DIGEST = "digest"
    DIGEST_PORTABLE = "digest_portable"


@dataclass(frozen=True)
class Ambiguity:
    """Source nodes paired by order among equal candidates, and equal nodes left unpaired."""

    paired: frozenset[int] = frozenset()
    removed: frozenset[int] = frozenset()
    added: frozenset[int] = frozenset()

    @property
    def count(self) -> int:
        return len(self.paired) + len(self.removed) + len(self.added)

    def to_dict(self) -> dict[str, Any]:
        return {k: sorted(getattr(self, k)) for k in ("paired", "removed", "added")}


@dataclass
class Alignment:
    """Source node -> target node, and what could not be paired or changed."""

    mapping: dict[int, int] = field(default_factory=dict)
    removed: list[int] = field(default_factory=list)
    added: list[int] = field(default_factory=list)
    modified: list[tuple[int, int]] = field(default_factory=list)
    identical: bool = False
    ambiguity: Ambiguity = field(default_factory=Ambiguity)

    @property
    def changed(self) -> bool:
        return bool(self.removed or self.added or self.modified)

    def to_dict(self) -> dict[str, Any]:
        return {"mapping": {str(k): v for k, v in self.mapping.items()},
                "removed": self.removed, "added": self.added,
                "modified": [list(p) for p in self.modified], "identical": self.identical,
                "ambiguity": self.ambiguity.to_dict()}


@dataclass(frozen=True)
class Label:
    """What a node is, as text: equal labels are equal nodes."""

    kind: str = ""
    op_name: str = ""
    index: str = ""
    value_type: str = ""
    ir_type: str = ""
    attributes: str = ""
    results: str = ""


def _digest(array: Any) -> str:
    a = np.ascontiguousarray(np.asarray(array))
    return hashlib.sha256(f"{a.dtype}{a.shape}".encode() + a.tobytes()).hexdigest()[:16]


def resource_digests(module: Any) -> dict[str, str]:
    """Weight name -> digest of its bytes, for a :class:`coreai_core.Program`."""
    return {name: _digest(w) for name, w in module.weights.items() if w is not None}


def _attribute_text(value: Any) -> tuple[str, str | None, str | None]:
    """(text, digest, weight name) of an attribute; the bytes of big arrays are the digest."""
    if isinstance(value, WeightRef):
        return "weight", None, value.name
    if isinstance(value, Graph):
        return f"graph({len(value.ops)} ops)", None, None
    if isinstance(value, np.ndarray) and value.size > INLINE_ELEMENTS:
        return f"array<{value.dtype}{list(value.shape)}>", _digest(value), None
    if isinstance(value, np.ndarray):
        return f"{value.dtype}{value.tolist()}", None, None
    return repr(value), None, None


def program_graph(program: Program, entry_point: str = "main") -> nx.DiGraph:
    """The graph ``entry_point`` of ``program`` as a DiGraph (see the module docstring)."""
    graph = entry_graph(program, entry_point)
    g = nx.DiGraph(name=graph.name)
    producer: dict[Any, int] = {}
    n_ops = len(graph.ops)
    for k, (name, v) in enumerate({**graph.state_inputs, **graph.inputs}.items()):
        node = n_ops + k
        g.add_node(node, kind="input", op_name="", index=name, value_type=str(v.type),
                   ir_type=str(v.type), attributes={}, results=str(v.type), digest=None,
                   blob=None, order=-1)
        producer[v] = node
    for i, op in enumerate(graph.ops):
        attrs, digest, blob = {}, None, None
        for key, value in op.attributes.items():
            text, d, b = _attribute_text(value)
            attrs[key] = text
            digest, blob = digest or d, blob or b
        types = ", ".join(str(r.type) for r in op.results)
        g.add_node(i, kind="op", op_name=op.name, index="", value_type=types, ir_type=types,
                   attributes=attrs, results=str(len(op.results)), digest=digest, blob=blob,
                   order=i)
        for k, v in enumerate(op.operands):
            if v in producer:
                g.add_edge(producer[v], i, operand=k)
        for r in op.results:
            producer[r] = i
    base = g.number_of_nodes()
    outputs = {**graph.output_values, **graph.state_outputs}
    for k, (name, v) in enumerate(outputs.items()):
        node = base + k
        g.add_node(node, kind="output", op_name="", index=name, value_type=str(v.type),
                   ir_type=str(v.type), attributes={}, results="", digest=None, blob=None,
                   order=n_ops + k)
        if v in producer:
            g.add_edge(producer[v], node, operand=0)
    g.graph["weights"] = program.weights
    return g


def _fx_type(node: torch.fx.Node) -> str:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return f"{str(val.dtype).removeprefix('torch.')}{list(val.shape)}"
    if isinstance(val, (list, tuple)):
        return ",".join(_fx_type_of(v) for v in val)
    return type(val).__name__ if val is not None else ""


def _fx_type_of(val: Any) -> str:
    if isinstance(val, torch.Tensor):
        return f"{str(val.dtype).removeprefix('torch.')}{list(val.shape)}"
    return type(val).__name__


def exported_program_graph(program: torch.export.ExportedProgram) -> nx.DiGraph:
    """An exported program's FX graph as a DiGraph: node id = position in the graph."""
    g = nx.DiGraph(name="exported_program")
    ids = {n: i for i, n in enumerate(program.graph.nodes)}
    user = 0
    for n, i in ids.items():
        if n.op == "placeholder":
            kind, op_name = "input", ""
            spec = next((s for s in program.graph_signature.input_specs
                         if s.arg.name == n.name), None)
            index = str(spec.target) if spec is not None and spec.target else str(user)
            user += spec is None or not spec.target
        elif n.op == "output":
            kind, op_name, index = "output", "", ""
        else:
            kind, op_name, index = "op", str(n.target), ""
        attrs = {f"arg{k}": repr(a) for k, a in enumerate(n.args)
                 if not isinstance(a, (torch.fx.Node, list, tuple))}
        attrs.update({k: repr(v) for k, v in n.kwargs.items() if not isinstance(v, torch.fx.Node)})
        t = _fx_type(n)
        g.add_node(i, kind=kind, op_name=op_name, index=index, value_type=t, ir_type=t,
                   attributes=attrs, results="", digest=None, blob=None, order=i,
                   name=n.name)
        for k, a in enumerate(n.all_input_nodes):
            g.add_edge(ids[a], i, operand=k)
    return g


def node_labels(graph: nx.DiGraph, policy: WeightPolicy = WeightPolicy.IGNORE,
                blobs: Mapping[str, str] | None = None,
                ignore_attributes: Collection[str] = UNSTABLE_ATTRIBUTES) -> dict[int, Label]:
    """Each node's label under ``policy`` (``blobs``: weight name -> digest, for DIGEST)."""
    weights = graph.graph.get("weights") or {}
    out = {}
    for node, data in graph.nodes(data=True):
        attrs = {k: v for k, v in data["attributes"].items() if k not in ignore_attributes}
        if policy is not WeightPolicy.IGNORE:
            digest = data["digest"]
            blob = data["blob"]
            if blob is not None:
                if policy is WeightPolicy.DIGEST and blobs is not None and blob in blobs:
                    digest = blobs[blob]
                elif weights.get(blob) is not None:
                    digest = _digest(weights[blob])
            if digest is not None:
                attrs["#weights"] = digest
        out[node] = Label(data["kind"], data["op_name"], data["index"], data["value_type"],
                          data["ir_type"], repr(sorted(attrs.items())), data["results"])
    return out


def structural_labels(graph: nx.DiGraph,
                      ignore_attributes: Collection[str] = UNSTABLE_ATTRIBUTES,
                      ) -> dict[int, Label]:
    """Labels without weights."""
    return node_labels(graph, WeightPolicy.IGNORE, None, ignore_attributes)


def defining_op(graph: nx.DiGraph, node_id: int) -> int | None:
    """The op node that defines ``node_id``'s value: itself for an op, the producer for an
    output, None for an input."""
    kind = graph.nodes[node_id]["kind"]
    if kind == "op":
        return node_id
    if kind == "output":
        return next(iter(graph.predecessors(node_id)), None)
    return None


def responsible_op(graph: nx.DiGraph, node_id: int) -> int | None:
    """The op node a change at ``node_id`` is charged to: its defining op, else (an input)
    its first consumer."""
    op = defining_op(graph, node_id)
    if op is not None:
        return op
    return min(graph.successors(node_id), default=None)


def _by_operand(graph: nx.DiGraph, node: int, incoming: bool) -> list[tuple[int, int]]:
    edges = graph.in_edges(node, data=True) if incoming else graph.out_edges(node, data=True)
    return sorted(((d.get("operand", 0), u if incoming else v) for u, v, d in edges))


def _hash(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:24]


def fingerprints(graph: nx.DiGraph, labels: dict[int, Label]) -> dict[int, str]:
    """Each node's label hashed with its operands' fingerprints, in operand order: equal
    fingerprints are equal nodes computed from equal upstream graphs."""
    out: dict[int, str] = {}
    for node in nx.topological_sort(graph):
        ins = [f"{k}:{out[u]}" for k, u in _by_operand(graph, node, True)]
        out[node] = _hash(repr(labels[node]), *ins)
    return out


def co_fingerprints(graph: nx.DiGraph, labels: dict[int, Label]) -> dict[int, str]:
    """Like :func:`fingerprints`, downstream: a node's label with its users' co-fingerprints
    and the operand position it takes in each."""
    out: dict[int, str] = {}
    for node in reversed(list(nx.topological_sort(graph))):
        users = sorted(f"{k}:{out[v]}" for k, v in _by_operand(graph, node, False))
        out[node] = _hash(repr(labels[node]), *users)
    return out


def _pair_groups(source: dict[int, str], target: dict[int, str], src_order: dict[int, int],
                 tgt_order: dict[int, int], mapping: dict[int, int], ambiguous: set[int],
                 allow_ambiguous: bool) -> None:
    groups_s: dict[str, list[int]] = defaultdict(list)
    groups_t: dict[str, list[int]] = defaultdict(list)
    mapped_t = set(mapping.values())
    for n, key in source.items():
        if n not in mapping:
            groups_s[key].append(n)
    for n, key in target.items():
        if n not in mapped_t:
            groups_t[key].append(n)
    for key, ss in groups_s.items():
        ts = groups_t.get(key, [])
        if not ts:
            continue
        if len(ss) == 1 and len(ts) == 1:
            mapping[ss[0]] = ts[0]
        elif allow_ambiguous:
            for s, t in zip(sorted(ss, key=src_order.__getitem__),
                            sorted(ts, key=tgt_order.__getitem__), strict=False):
                mapping[s] = t
                ambiguous.add(s)


def align(source_graph: nx.DiGraph, target_graph: nx.DiGraph,
          weights: WeightPolicy = WeightPolicy.IGNORE,
          ignore_attributes: Collection[str] = UNSTABLE_ATTRIBUTES) -> Alignment:
    """Pair the nodes of two graphs (see the module docstring)."""
    ls = node_labels(source_graph, weights, None, ignore_attributes)
    lt = node_labels(target_graph, weights, None, ignore_attributes)
    fs, ft = fingerprints(source_graph, ls), fingerprints(target_graph, lt)
    cs, ct = co_fingerprints(source_graph, ls), co_fingerprints(target_graph, lt)
    so = {n: d["order"] for n, d in source_graph.nodes(data=True)}
    to = {n: d["order"] for n, d in target_graph.nodes(data=True)}
    mapping: dict[int, int] = {}
    ambiguous: set[int] = set()
    both_s = {n: fs[n] + cs[n] for n in fs}
    both_t = {n: ft[n] + ct[n] for n in ft}
    _pair_groups(both_s, both_t, so, to, mapping, ambiguous, allow_ambiguous=True)
    _pair_groups(fs, ft, so, to, mapping, ambiguous, allow_ambiguous=False)
    _pair_groups(cs, ct, so, to, mapping, ambiguous, allow_ambiguous=False)
    _propagate(source_graph, target_graph, ls, lt, mapping)
    mapped_t = set(mapping.values())
    removed = sorted(n for n in source_graph if n not in mapping)
    added = sorted(n for n in target_graph if n not in mapped_t)
    modified = sorted((s, t) for s, t in mapping.items() if ls[s] != lt[t])
    identical = not removed and not added and not modified
    amb = Ambiguity(paired=frozenset(ambiguous))
    return Alignment(mapping, removed, added, modified, identical, amb)


def _same_op(a: Label, b: Label) -> bool:
    return a.kind == b.kind and a.op_name == b.op_name and (a.kind == "op" or a.index == b.index)


def _propagate(sg: nx.DiGraph, tg: nx.DiGraph, ls: dict[int, Label], lt: dict[int, Label],
               mapping: dict[int, int]) -> None:
    """Pair unpaired neighbours of paired nodes at the same operand position, same op."""
    changed = True
    while changed:
        changed = False
        mapped_t = set(mapping.values())
        for s, t in list(mapping.items()):
            for incoming in (True, False):
                ns = dict(_by_operand(sg, s, incoming))
                nt = dict(_by_operand(tg, t, incoming))
                for k, a in ns.items():
                    b = nt.get(k)
                    if (b is not None and a not in mapping and b not in mapped_t
                            and _same_op(ls[a], lt[b])):
                        mapping[a] = b
                        mapped_t.add(b)
                        changed = True
