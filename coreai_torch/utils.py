"""Helpers for lowering authors: torch's metadata of the node being lowered, operands, scalars.

A schema-bound lowering reads what torch knows about the node it lowers through
:func:`result_type`, :func:`result_dtype`, :func:`result_meta` (its results),
:func:`arg_meta` (an argument's fake tensor, shape, dtype or symbolic size, by schema name)
and :func:`promoted_dtype` (torch's type promotion of its arguments). :func:`get_operand` and
:func:`get_operands` serve lowerings written in the FX-node form ``fn(values_map, node, loc)``;
the rest serves both forms. The module is also importable under its former name,
``coreai_torch._utils``.
"""

from __future__ import annotations

import contextvars
import difflib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.fx
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from coreai_core import Dim, DType, Location, TensorType, Value
from coreai_core.dialects import coreai
from coreai_torch._schema import bind_arguments, schema_args

__all__ = [
    "get_operand", "get_operands", "get_arg", "result_type", "result_dtype", "node_dtype",
    "scalar_constant", "cast_to", "normalize_dim", "normalize_dims", "to_numpy", "shape_value",
    "dtype_of", "int_list", "ConversionContext", "current_context", "peer_dtype", "scalar_like",
    "tensor_data", "result_meta", "arg_meta", "promoted_dtype", "is_sole_reader",
]


class ConversionContext:
    """Per-conversion facts lowerings may need: dynamic dim symbols and their bounds, the FX
    node being lowered (``node``), ``lower_subgraph(graph_module, args)``, which lowers a
    higher-order op's subgraph inline and returns its outputs, and ``lower_call(like, target,
    args, kwargs, val, values)``, which lowers a call that is not a graph node (the op a
    ``with_effects`` wrapper carries) with the converter's lowering for ``target``."""

    def __init__(self, symbols: Mapping[str, Dim] | None = None) -> None:
        self.symbols: dict[str, Dim] = dict(symbols or {})
        self.sym_values: dict[str, Value] = {}
        self.node: torch.fx.Node | None = None
        self.lower_subgraph: Callable[[torch.fx.GraphModule, Sequence[Value]], list[Value]] = (
            _no_subgraphs)
        self.lower_call: Callable[..., Any] = _no_calls

    def dim(self, size: Any) -> int | Dim:
        """A torch size (int or SymInt) as a Core AI dimension."""
        if isinstance(size, int):
            return size
        if isinstance(size, torch.SymInt):
            expr = size.node.expr
            if getattr(expr, "is_number", False):
                return int(expr)
            name = str(expr)
            return self.symbols.get(name, Dim(name))
        raise TypeError(f"not a tensor size: {size!r}")


def _no_subgraphs(gm: torch.fx.GraphModule, args: Sequence[Value]) -> list[Value]:
    raise RuntimeError("subgraphs can be lowered only during a conversion")


def _no_calls(*args: Any) -> Any:
    raise RuntimeError("wrapped calls can be lowered only during a conversion")


_CONTEXT: contextvars.ContextVar[ConversionContext | None] = contextvars.ContextVar(
    "coreai_torch_conversion", default=None)


def current_context() -> ConversionContext:
    """The running conversion's context (an empty one outside a conversion)."""
    ctx = _CONTEXT.get()
    return ctx if ctx is not None else ConversionContext()


def active_context() -> ConversionContext | None:
    """The running conversion's context, or None outside a conversion."""
    return _CONTEXT.get()


def set_context(ctx: ConversionContext) -> contextvars.Token:
    return _CONTEXT.set(ctx)


def reset_context(token: contextvars.Token) -> None:
    _CONTEXT.reset(token)


# -- dtypes and types ------------------------------------------------------------------------------

# torch's 4-bit integer dtypes have no kernels, but name the logical type of data held in
# int8/uint8 (the ``input_dtype`` of Apple's compression ops)
_FROM_TORCH: dict[torch.dtype, DType] = {
    **{d.torch: d for d in DType if d.torch is not None},
    **{getattr(torch, d.value): d for d in (DType.int4, DType.uint4)},
}


def dtype_of(torch_dtype: torch.dtype) -> DType:
    """The Core AI element type of a torch dtype (unsupported ones are rejected clearly)."""
    try:
        return _FROM_TORCH[torch_dtype]
    except KeyError:
        raise TypeError(f"torch dtype {torch_dtype} has no Core AI element type") from None


def _val(node: torch.fx.Node) -> Any:
    if "val" not in node.meta:
        raise ValueError(f"FX node {node.name!r} has no meta['val']; export with torch.export")
    return node.meta["val"]


def _node_or_current(node: torch.fx.Node | None, what: str = "result_type()/result_dtype() "
                     "without a node") -> torch.fx.Node:
    if node is not None:
        return node
    current = current_context().node
    if current is None:
        raise RuntimeError(f"{what} work only while a lowering runs")
    return current


def result_type(node: torch.fx.Node | None = None, index: int | None = None) -> TensorType:
    """The Core AI type of ``node``'s result (``index`` selects one of several results).

    Without ``node``, the node being lowered.
    """
    val = _val(_node_or_current(node))
    if index is not None:
        val = val[index]
    return type_of_value(val)


def type_of_value(val: Any) -> TensorType:
    """The Core AI type of a value torch recorded for a node (``node.meta["val"]``): a (fake)
    tensor, or a Python or symbolic bool, int or float (a scalar of bool, int64, float64)."""
    if isinstance(val, torch.Tensor):
        ctx = current_context()
        return TensorType(tuple(ctx.dim(s) for s in val.shape), dtype_of(val.dtype))
    if isinstance(val, (bool, torch.SymBool)):
        return TensorType((), DType.bool)
    if isinstance(val, (int, torch.SymInt)):
        return TensorType((), DType.int64)
    if isinstance(val, (float, torch.SymFloat)):
        return TensorType((), DType.float64)  # Python floats are doubles
    raise TypeError(f"no Core AI type for {type(val).__name__} value {val!r}")


def result_dtype(node: torch.fx.Node | None = None, index: int | None = None) -> DType:
    """The element type of :func:`result_type`."""
    return result_type(node, index).element_type


# -- torch's metadata of the node being lowered ----------------------------------------------------

def result_meta() -> Any:
    """torch's (fake) value of the node being lowered, ``node.meta["val"]``: a tensor, a tuple
    of them for several results (None for a result torch does not compute, as where a
    backward op's ``output_mask`` is False), or a SymInt/SymFloat/SymBool."""
    return _val(_node_or_current(None, "result_meta()"))


def _argument(name: str) -> tuple[torch.fx.Node, Any]:
    """The node being lowered and its raw FX argument ``name`` (Python or schema name)."""
    node = _node_or_current(None, "arg_meta()/promoted_dtype()/is_sole_reader()")
    raw = bind_arguments(node)
    if name in raw:
        return node, raw[name]
    for spec in schema_args(node.target):
        if spec.schema_name == name:
            return node, raw[spec.name]
    close = difflib.get_close_matches(name, list(raw), n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"its arguments: {', '.join(raw)}"
    raise KeyError(f"{name!r} is not an argument of {getattr(node.target, '_schema', node)} "
                   f"({hint})")


def _meta_of(arg: Any) -> Any:
    if isinstance(arg, torch.fx.Node):
        return _val(arg)
    if isinstance(arg, (list, tuple)):
        return [_meta_of(a) for a in arg]
    return arg


def arg_meta(name: str) -> Any:
    """torch's value of the argument ``name`` of the node being lowered, as traced at export.

    ``name`` is the schema argument's name (``self``, ``dim``, ...). A tensor argument gives
    its fake tensor (``.shape`` holds a SymInt for each dynamic size; ``.dtype``,
    ``.stride()``, ``.is_contiguous()``), a symbolic scalar its SymInt/SymFloat/SymBool, a
    list a list of these, any other argument its Python value (the schema default when the
    call leaves it out).
    """
    return _meta_of(_argument(name)[1])


def _promotion_operand(meta: Any) -> Any:
    """A stand-in with the same type-promotion category as ``meta`` (torch.result_type rules:
    a dimensioned tensor, a 0-d tensor and a Python number weigh differently)."""
    if isinstance(meta, torch.Tensor):
        return torch.empty([1] * meta.dim(), dtype=meta.dtype, device="meta")
    if isinstance(meta, torch.SymBool):
        return True
    if isinstance(meta, torch.SymInt):
        return 1
    if isinstance(meta, torch.SymFloat):
        return 1.0
    return meta


def promoted_dtype(name: str, *names: str) -> DType:
    """torch's promoted dtype of arguments of the node being lowered, by schema name: the
    dtype torch computes an elementwise op in (``torch.result_type`` rules, wrapped numbers
    included, so ``int_tensor < 2.5`` compares in float32). Name the operands: a scale such
    as ``add``'s ``alpha`` takes no part in torch's promotion.
    """
    names = (name, *names)
    operands = [_promotion_operand(arg_meta(n)) for n in names]
    operands = [o for o in operands if o is not None]
    if not operands:
        raise ValueError(f"promoted_dtype{names}: no tensor or number among these arguments")
    if not any(isinstance(o, torch.Tensor) for o in operands):  # numbers only
        operands[0] = torch.tensor(operands[0], device="meta")
    _, dtype = elementwise_dtypes(
        *operands, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.NO_OPMATH)
    return dtype_of(dtype)


def is_sole_reader(name: str) -> bool:
    """True if the argument ``name`` is a graph input (a parameter, buffer, constant or user
    input) that only the node being lowered reads: a lowering may then retype that input's
    weight in place instead of keeping a converted copy."""
    node, arg = _argument(name)
    return (isinstance(arg, torch.fx.Node) and arg.op == "placeholder"
            and set(arg.users) == {node})


def node_dtype(arg: Any) -> DType | None:
    """Element type of an FX node argument (None for Python scalars)."""
    if isinstance(arg, torch.fx.Node):
        val = arg.meta.get("val")
        if isinstance(val, torch.Tensor):
            return dtype_of(val.dtype)
        if isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool):
            return DType.int64
        if isinstance(val, (torch.SymFloat, float)):
            return DType.float64
        if isinstance(val, (torch.SymBool, bool)):
            return DType.bool
    return None


# -- operands ------------------------------------------------------------------------------

def get_arg(node: torch.fx.Node, index: int, name: str | None = None, default: Any = None) -> Any:
    """``node.args[index]``, or the keyword argument ``name``, or ``default``."""
    if index < len(node.args):
        return node.args[index]
    if name is not None and name in node.kwargs:
        return node.kwargs[name]
    return default


def peer_dtype(node: torch.fx.Node) -> DType | None:
    """The dtype of the node's first tensor argument: what a Python scalar next to it adopts."""
    for a in node.args:
        d = node_dtype(a)
        if d is not None and isinstance(a, torch.fx.Node) and isinstance(
                a.meta.get("val"), torch.Tensor):
            return d
    return None


def scalar_constant(value: Any, peer: DType | None, loc: Location | None = None) -> Value:
    """A 0-d constant for a Python scalar next to a tensor of type ``peer``.

    Follows PyTorch's wrapped-number promotion: a scalar adopts the tensor's type within the
    same category (bool < int < float), otherwise the default type of its own category.
    """
    if isinstance(value, bool):
        dtype = DType.bool
    elif isinstance(value, int):
        dtype = peer if peer is not None and peer is not DType.bool else DType.int64
    elif isinstance(value, float):
        dtype = peer if peer is not None and (peer.is_float or peer.is_complex) \
            else dtype_of(torch.get_default_dtype())
    elif isinstance(value, complex):
        dtype = peer if peer is not None and peer.is_complex \
            else dtype_of(torch.get_default_dtype()).complex_dtype
    else:
        raise TypeError(f"expected a Python scalar, got {value!r}")
    return coreai.constant(value, dtype=dtype, loc=loc)


def get_operand(values_map: Mapping[str, Value], node: torch.fx.Node, index: int,
                loc: Location | None = None, dtype: Any = None) -> Value:
    """The Value for ``node.args[index]``.

    FX nodes (tensors and SymInts) are looked up in ``values_map``; Python scalars become
    0-d constants (of ``dtype`` if given, else promoted against the node's first tensor
    operand); lists of ints/SymInts become a 1-d int64 tensor.
    """
    return _to_value(values_map, node, node.args[index], loc, dtype)


def get_operands(values_map: Mapping[str, Value], node: torch.fx.Node, indices: Sequence[int],
                 loc: Location | None = None) -> list[Value]:
    """``[get_operand(values_map, node, i, loc) for i in indices]``."""
    return [get_operand(values_map, node, i, loc) for i in indices]


def _to_value(values_map: Mapping[str, Value], node: torch.fx.Node, arg: Any,
              loc: Location | None, dtype: Any = None) -> Value:
    if isinstance(arg, torch.fx.Node):
        try:
            value = values_map[arg.name]
        except KeyError:
            raise KeyError(f"FX node {arg.name!r} (argument of {node.name!r}) has no lowered "
                           "value; multi-output results are stored as 'name#i'") from None
        return cast_to(value, dtype, loc) if dtype is not None else value
    if isinstance(arg, (list, tuple)):
        if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in arg):
            return coreai.constant(np.asarray(arg, dtype=np.int64).reshape(len(arg)),
                                   dtype=dtype or DType.int64, loc=loc)
        if any(isinstance(a, torch.fx.Node) for a in arg):
            return shape_value(values_map, node, arg, loc)
        return coreai.constant(np.asarray(arg), dtype=dtype, loc=loc)
    if isinstance(arg, (bool, int, float, complex)):
        if dtype is not None:
            return coreai.constant(np.asarray(arg), dtype=dtype, loc=loc)
        return scalar_constant(arg, peer_dtype(node), loc)
    if isinstance(arg, torch.Tensor):
        return coreai.constant(tensor_data(arg), loc=loc)
    raise TypeError(f"cannot turn argument {arg!r} of FX node {node.name!r} into a tensor")


def shape_value(values_map: Mapping[str, Value], node: torch.fx.Node, sizes: Sequence[Any],
                loc: Location | None = None) -> Value:
    """A 1-d int64 tensor from a list of ints and SymInt FX nodes (e.g. a view's shape)."""
    if all(isinstance(s, int) for s in sizes):
        return coreai.constant(np.asarray(sizes, dtype=np.int64).reshape(len(sizes)), loc=loc)
    pieces = []
    for s in sizes:
        if isinstance(s, torch.fx.Node):
            v = cast_to(values_map[s.name], DType.int64, loc)
            pieces.append(coreai.reshape(v, [1], loc=loc))
        else:
            pieces.append(coreai.constant(np.asarray([int(s)], dtype=np.int64), loc=loc))
    return coreai.concat(pieces, axis=0, loc=loc)


def int_list(arg: Any, node: torch.fx.Node, what: str = "argument") -> list[int]:
    """A list of static ints (SymInt FX nodes are rejected with a clear message)."""
    if isinstance(arg, int):
        return [arg]
    out = []
    for a in arg:
        if isinstance(a, torch.fx.Node):
            raise NotImplementedError(f"{what} of {node.name!r} must be static, got symbolic "
                                      f"{a.name!r}")
        out.append(int(a))
    return out


def cast_to(value: Value | bool | int | float, dtype: Any, loc: Location | None = None,
            ) -> Value:
    """``value`` as ``dtype``: a Value is cast (no op when it already has that type), a Python
    scalar becomes a 0-d constant of ``dtype``."""
    target = DType.of(dtype)
    if not isinstance(value, Value):
        return coreai.constant(value, dtype=target, loc=loc)
    if value.type.element_type is target:
        return value
    return coreai.cast(value, target, loc=loc)


def scalar_like(value: Any, like: Value, loc: Location | None = None) -> Value:
    """A 0-d constant holding ``value`` in ``like``'s element type."""
    return coreai.constant(value, dtype=like.type.element_type, loc=loc)


def normalize_dim(dim: int, rank: int) -> int:
    """A possibly negative dim as a non-negative axis (rank 0 admits 0 and -1 like torch)."""
    r = max(rank, 1)
    if not -r <= dim < r:
        raise IndexError(f"dim {dim} is out of range for a tensor of rank {rank}")
    return dim % r


def normalize_dims(dims: Any, rank: int) -> list[int]:
    if dims is None:
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({normalize_dim(d, rank) for d in dims})


def to_numpy(tensor: torch.Tensor) -> np.ndarray | None:
    """A numpy view of a CPU tensor (no copy when contiguous); None for meta/fake tensors."""
    t = tensor.detach()
    if t.is_meta or type(t).__name__ == "FakeTensor":
        return None
    if t.is_sparse or t.is_quantized:
        raise TypeError(f"{t.layout} / quantized tensors are not supported as weights")
    t = t.resolve_conj().resolve_neg()  # numpy cannot view torch's lazy conjugate/negative bits
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    if t.dtype == torch.float8_e8m0fnu:  # power-of-two scales: float32 holds each one exactly
        return t.to(torch.float32).numpy()
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):  # numpy has no float8: bits
        return t.contiguous().view(torch.uint8).numpy().view(DType.of(t.dtype).numpy)
    return t.contiguous().numpy()



def tensor_data(tensor: torch.Tensor) -> np.ndarray:
    """:func:`to_numpy` of a tensor that must hold data (not a meta or fake tensor)."""
    data = to_numpy(tensor)
    if data is None:
        raise ValueError(f"a {tuple(tensor.shape)} constant tensor has no data (meta or fake)")
    return data
