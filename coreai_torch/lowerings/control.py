"""Built-in lowerings (control family): higher-order ops (cond, while_loop, map, scan, grad/autocast
wrappers) and effect tokens (``with_effects``).

Subgraphs are lowered into region graphs of ``coreai.if_`` / ``coreai.while_`` through the
converter's ``lower_subgraph`` (available from the conversion context).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.fx

from coreai_core import DType, Location, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._common import ValuesMap
from coreai_torch.utils import cast_to, current_context, get_operand, result_type

LOWERINGS = LoweringSet("control")
reg = LOWERINGS.register_torch_lowering


def _subgraph(node: torch.fx.Node, arg: Any) -> torch.fx.GraphModule:
    if isinstance(arg, torch.fx.GraphModule):
        return arg
    if isinstance(arg, torch.fx.Node) and arg.op == "get_attr":
        gm = getattr(node.graph.owning_module, str(arg.target))
        if isinstance(gm, torch.fx.GraphModule):
            return gm
    raise TypeError(f"expected a subgraph, got {arg!r}")


def _lower(gm: torch.fx.GraphModule, args: Sequence[Value]) -> list[Value]:
    return current_context().lower_subgraph(gm, list(args))


def _values(values_map: ValuesMap, node: torch.fx.Node, args: Any,
            loc: Location) -> list[Value]:
    out = []
    for a in args:
        if isinstance(a, torch.fx.Node):
            out.append(values_map[a.name])
        else:
            out.append(coreai.constant(a))
    return out


def _predicate(v: Value, loc: Location) -> Value:
    if v.type.element_type is not DType.bool:
        v = coreai.broadcasting_not_equal(v, coreai.constant(0, dtype=v.type.element_type))
    if v.type.rank:
        v = coreai.reshape(v, np.zeros((0,), np.int64))
    return v


@reg("higher_order::cond.default")
def higher_order_cond(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> list[Value]:
    """cond(pred, true_fn, false_fn, operands) -> tuple"""
    _pred, true_fn, false_fn, operands = node.args
    pred_v = _predicate(get_operand(values_map, node, 0), loc)
    args = _values(values_map, node, operands, loc)
    then_gm, else_gm = _subgraph(node, true_fn), _subgraph(node, false_fn)
    return list(coreai.if_(pred_v, args, then_branch=lambda *a: _lower(then_gm, a),
                           else_branch=lambda *a: _lower(else_gm, a)))


@reg("higher_order::while_loop.default")
def higher_order_while_loop(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                            ) -> list[Value]:
    """while_loop(cond_fn, body_fn, carried_inputs, additional_inputs) -> tuple"""
    cond_fn, body_fn, carried, additional = node.args
    cond_gm, body_gm = _subgraph(node, cond_fn), _subgraph(node, body_fn)
    init = _values(values_map, node, carried, loc)
    extra = _values(values_map, node, additional, loc)
    n = len(init)

    def cond(*a: Value) -> Value:
        return _predicate(_lower(cond_gm, a)[0], loc)

    def body(*a: Value) -> list[Value]:
        return [*_lower(body_gm, a), *a[n:]]

    return list(coreai.while_([*init, *extra], cond=cond, body=body))[:n]


@reg("higher_order::wrap_with_set_grad_enabled.default")
def higher_order_wrap_with_set_grad_enabled(values_map: ValuesMap, node: torch.fx.Node,
                                            loc: Location) -> Any:
    """wrap_with_set_grad_enabled(enabled, gm, *args): inlined (inference ignores grad mode)"""
    return _inline(values_map, node, node.args[1], node.args[2:], loc)


@reg("higher_order::wrap_with_autocast.default")
def higher_order_wrap_with_autocast(values_map: ValuesMap, node: torch.fx.Node,
                                    loc: Location) -> Any:
    """wrap_with_autocast(device_type, dtype, enabled, cache_enabled, gm, *args): inlined

    The subgraph already carries the casts autocast inserted at export time.
    """
    return _inline(values_map, node, node.args[4], node.args[5:], loc)


def _inline(values_map: ValuesMap, node: torch.fx.Node, fn: Any, args: Sequence[Any],
            loc: Location) -> Any:
    outs = _lower(_subgraph(node, fn), _values(values_map, node, args, loc))
    return outs if isinstance(node.meta.get("val"), (list, tuple)) else outs[0]


# -- map and scan: a while_ loop over the leading axis ------------------------------------------

def _zeros(node: torch.fx.Node, index: int, loc: Location) -> Value:
    t = result_type(node, index)
    if not t.is_static:
        raise NotImplementedError("map/scan with dynamic output shapes is not supported")
    return coreai.broadcast_to(coreai.constant(0, dtype=t.element_type),
                               list(t.shape))


def _loop_over_leading_axis(node: torch.fx.Node, fn_gm: torch.fx.GraphModule,
                            carries: list[Value], xs: list[Value], extra: list[Value],
                            first_y: int, loc: Location) -> list[Value]:
    """Run ``fn_gm(*carries, *x_slices, *extra) -> (*carries, *ys)`` for each leading index.

    Returns the final carries followed by the stacked ys (output ``first_y + j`` of ``node``
    gives the type of ys[j]).
    """
    if not xs:
        raise NotImplementedError("map/scan without scanned inputs is not supported")
    n_ys = len(node.meta["val"]) - first_y
    buffers = [_zeros(node, first_y + j, loc) for j in range(n_ys)]
    length = coreai.gather(coreai.get_shape(xs[0]),
                           coreai.constant(np.int64(0)), axis=0)
    i0 = coreai.constant(np.int64(0))
    nc, nb = len(carries), len(buffers)
    init = [i0, length, *carries, *buffers, *xs, *extra]

    def cond(i: Value, n: Value, *rest: Value) -> Value:
        return coreai.broadcasting_less(i, n)

    def body(i: Value, n: Value, *rest: Value) -> list[Value]:
        cs, bs = list(rest[:nc]), list(rest[nc:nc + nb])
        scanned, ex = list(rest[nc + nb:nc + nb + len(xs)]), list(rest[nc + nb + len(xs):])
        slices = [coreai.gather(x, i, axis=0) for x in scanned]
        outs = _lower(fn_gm, [*cs, *slices, *ex])
        new_c, ys = outs[:nc], outs[nc:]
        start = coreai.reshape(i, [1])
        nxt = coreai.broadcasting_add(i, coreai.constant(np.int64(1)))
        stop = coreai.reshape(nxt, [1])
        new_b = [coreai.slice_update(b, coreai.expand_dims(cast_to(y, b.type.element_type, loc),
                                                            [0]),
                                     start, stop, axes=[0], strides=[1])
                 for b, y in zip(bs, ys, strict=True)]
        return [nxt, n, *new_c, *new_b, *scanned, *ex]

    out = coreai.while_(init, cond=cond, body=body)
    return list(out[2:2 + nc + nb])


@reg("higher_order::map_impl.default")
def higher_order_map_impl(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                          ) -> list[Value]:
    """map_impl(f, xs, pos_args) -> stacked f(x, *pos_args) over xs' leading axis"""
    fn, xs, pos = node.args
    return _loop_over_leading_axis(node, _subgraph(node, fn), [],
                                   _values(values_map, node, xs, loc),
                                   _values(values_map, node, pos, loc), 0, loc)


@reg("higher_order::scan.default")
def higher_order_scan(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> list[Value]:
    """scan(combine_fn, init, xs, additional_inputs) -> (*final_carry, *stacked_ys)"""
    fn, init, xs, additional = node.args
    carries = _values(values_map, node, init, loc)
    return _loop_over_leading_axis(node, _subgraph(node, fn), carries,
                                   _values(values_map, node, xs, loc),
                                   _values(values_map, node, additional, loc), len(carries), loc)


# -- effect tokens ---------------------------------------------------------------------------------

@reg("higher_order::with_effects.default")
def higher_order_with_effects(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                              ) -> list[Value | None]:
    """with_effects(token, op, *args, **kwargs) -> (token, *op results)

    torch.export wraps effectful ops (``aten._print``, custom ops registered with an effect)
    so a token orders them. The wrapped op is lowered with its own lowering (a print is
    dropped: a Core AI program has no side effects) and the token passes through unchanged:
    Core AI keeps the program order of ops, so nothing needs to thread it further.
    """
    token, op, *args = node.args
    if not isinstance(token, torch.fx.Node):
        raise TypeError(f"with_effects: expected a token node, got {token!r}")
    val = node.meta.get("val")
    results = list(val[1:]) if isinstance(val, (list, tuple)) else [None]
    single = len(results) == 1
    lowered = current_context().lower_call(node, op, args, dict(node.kwargs),
                                           results[0] if single else tuple(results), values_map)
    rest = [lowered] if single else list(lowered or [None] * len(results))
    return [values_map[token.name], *rest]
