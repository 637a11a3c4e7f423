"""Turning user inputs (numpy, Python scalars/lists, torch tensors) into checked arrays."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from coreai_core._dtypes import DType
from coreai_core._ir import TensorType
from coreai_core.errors import RuntimeInputError
from coreai_core.runtime._dims import DimChecks, check_dims

__all__ = ["bind_named", "bind_state", "input_type_problems", "to_array", "writable"]


def writable(a: np.ndarray) -> np.ndarray:
    """``a``, or a copy when it is a read-only view (of a weight or a broadcast)."""
    return a if a.flags.writeable else a.copy()


def _is_torch_tensor(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def _from_torch(t: Any) -> np.ndarray:
    """A numpy view of a CPU torch tensor (bfloat16 through an int16 view)."""
    # torch is imported only when torch is asked for: importing coreai_core never loads it
    import torch

    what = f"a torch tensor ({t.dtype}, device {t.device.type}, layout {t.layout})"
    if t.device.type == "meta":
        raise TypeError(f"{what} has no data (a meta tensor only describes a shape); pass a "
                        "tensor with values, e.g. torch.zeros(shape)")
    if t.layout in (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr,
                    torch.sparse_bsc):
        # refused, not densified: the dense copy may need far more memory than the tensor
        # holds, and torch's sparse ops give unspecified entries their own meaning
        # (torch.sparse.softmax takes them as -inf, not 0): the caller says which is meant
        raise TypeError(f"{what}: sparse tensors are not accepted (the runtime computes on "
                        "dense arrays); pass x.to_dense() if its dense values (unspecified "
                        "entries 0) are what you mean")
    try:
        t = t.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        if t.layout != torch.strided:  # e.g. mkldnn: dense values in another memory layout
            t = t.to_dense()
        t = t.resolve_conj().resolve_neg()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(DType.bfloat16.numpy)
        return t.numpy()
    except (RuntimeError, TypeError, ValueError, NotImplementedError) as e:
        raise TypeError(f"{what} cannot be read as a numpy array: {e}") from None


_KIND_OK = {"b": "b", "i": "biu", "u": "biu", "f": "biuf", "c": "biufc"}


def to_array(x: Any, expected: TensorType | None = None) -> np.ndarray:
    """Convert ``x`` to a numpy array without copying when possible.

    numpy arrays and torch tensors keep their dtype; Python scalars and lists take the
    ``expected`` element type when their kind fits (a bool, int or float list for a float
    input; any number for a complex input; a bool or int list for an int input; bools for
    bool).
    """
    if isinstance(x, np.ma.MaskedArray):
        # the values under the mask are arbitrary: taking .data silently would compute on them
        raise TypeError("numpy masked arrays are not accepted; pass x.filled(value) (masked "
                        "entries replaced by value) or x.data (the raw values) instead")
    if isinstance(x, np.ndarray):
        if type(x) is not np.ndarray:
            x = np.asarray(x)  # a subclass (np.matrix, ...) computes as a plain array
        return x if x.dtype.isnative else x.astype(x.dtype.newbyteorder("="))
    if isinstance(x, np.generic):
        return np.asarray(x)
    if _is_torch_tensor(x):
        return _from_torch(x)
    if isinstance(x, (bool, int, float, complex, list, tuple)):
        try:
            arr = np.asarray(x)
        except (ValueError, OverflowError) as e:
            raise TypeError(f"cannot make a tensor from this {type(x).__name__}: "
                            f"{_ragged_reason(e)}") from None
        if arr.dtype == object or arr.dtype.kind not in "biufc":
            raise TypeError(f"cannot make a tensor from {type(x).__name__} {x!r}")
        if expected is None:
            return arr
        target = expected.element_type.numpy
        want = "f" if expected.element_type.is_float else target.kind
        if arr.dtype.kind not in _KIND_OK.get(want, want):
            raise TypeError(f"a Python {type(x).__name__} of {arr.dtype.kind!r}-kind values "
                            f"cannot be given as {expected.element_type}")
        if arr.dtype.kind in "fc" or arr.size == 0:
            return arr.astype(target)
        return np.asarray(x, dtype=target)
    raise TypeError(f"expected a numpy array, a torch tensor or a Python scalar/list, "
                    f"got {type(x).__name__}")


def _ragged_reason(e: Exception) -> str:
    if isinstance(e, OverflowError):
        return f"a number does not fit in any integer type ({e})"
    return ("its nested lists have different lengths (a ragged list); every row must have "
            "the same length")


def _dtype_name(a: np.ndarray) -> str:
    return str(DType.of(a.dtype) if a.dtype in _KNOWN else a.dtype)


def _describe(a: np.ndarray) -> str:
    return f"{_dtype_name(a)} array of shape {a.shape}"


_KNOWN = {d.numpy for d in DType}


def input_type_problems(name: str, a: np.ndarray, t: TensorType,
                        dims: dict[str, tuple[int, str]]) -> list[str]:
    """Why array ``a`` cannot be input ``name`` of type ``t``: one line (empty if it can).

    ``dims`` maps each named dynamic dimension to (its size, the input that fixed it) and is
    filled as inputs are checked, so a size must agree across inputs. ``run()`` and the CLI
    use this check before running anything.
    """
    reasons = []
    if a.dtype != t.element_type.numpy:
        reasons.append(f"element type {_dtype_name(a)}, expected {t.element_type}")
    if a.ndim != t.rank:
        reasons.append(f"rank {a.ndim}, expected {t.rank}")
    else:
        for axis, (want, got) in enumerate(zip(t.shape, a.shape, strict=True)):
            if isinstance(want, int):
                if want != got:
                    reasons.append(f"axis {axis} is {got}, expected {want}")
            elif not want.admits(got):
                reasons.append(f"axis {axis} = {got} is outside the bounds of {want}")
            elif want.name != "?":
                seen = dims.setdefault(want.name, (got, name))
                if seen[0] != got:
                    reasons.append(f"dimension ?{want.name} = {got} here but {seen[0]} in "
                                   f"{seen[1]!r}")
    if not reasons:
        return []
    return [f"{name!r}: expected {t}, got {_describe(a)} ({'; '.join(reasons)})"]


def _convert(name: str, x: Any, t: TensorType, problems: list[str]) -> np.ndarray | None:
    try:
        return to_array(x, t)
    except TypeError as e:
        problems.append(f"{name!r}: expected {t}: {e}")
        return None


def _raise(kind: str, graph: str, problems: list[str]) -> None:
    raise RuntimeInputError(f"bad {kind} for entrypoint @{graph} (nothing was run):\n  "
                            + "\n  ".join(problems))


def _names_problems(kind: str, expected: Sequence[str], given: Sequence[str],
                    extra_ok: Sequence[str] = ()) -> list[str]:
    problems = []
    missing = [n for n in expected if n not in given]
    extra = [n for n in given if n not in expected and n not in extra_ok]
    for n in extra:
        if not isinstance(n, str):
            problems.append(f"{kind} names must be strings, got {n!r}")
            continue
        close = difflib.get_close_matches(n, missing or list(expected), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        problems.append(f"unknown {kind} {n!r}{hint} (expected {list(expected)})")
    for n in missing:
        problems.append(f"missing {kind} {n!r}")
    return problems


def bind_named(graph: str, types: Mapping[str, TensorType],
               inputs: Mapping[str, Any] | Sequence[Any] | None,
               dims: dict[str, tuple[int, str]] | None = None,
               checks: DimChecks | None = None) -> list[np.ndarray]:
    """Check ``inputs`` (a dict by name or a positional sequence) against ``types``.

    Returns the arrays in input order, or raises one ``RuntimeInputError`` listing every
    problem (names, element types, ranks, static sizes, dynamic bounds, shared symbols, and
    the relations between dims in ``checks``). ``dims`` collects the size bound to each
    dynamic symbol (pass it on to ``bind_state``).
    """
    names = list(types)
    if inputs is None:
        inputs = {}
    if _is_torch_tensor(inputs) or isinstance(inputs, np.ndarray):
        inputs = [inputs]
    if isinstance(inputs, Mapping):
        problems = _names_problems("input", names, list(inputs))
        problems += [f"{n!r}: expected {types[n]}, got None" for n in names
                     if n in inputs and inputs[n] is None]
        given = [inputs.get(n) for n in names]
    elif isinstance(inputs, Sequence) and not isinstance(inputs, str):
        problems = []
        if len(inputs) != len(names):
            problems.append(f"expected {len(names)} positional inputs {names}, "
                            f"got {len(inputs)}")
        problems += [f"{n!r}: expected {types[n]}, got None"
                     for n, x in zip(names, inputs) if x is None]
        given = list(inputs)[:len(names)] + [None] * (len(names) - len(inputs))
    else:
        raise TypeError(f"inputs must be a dict by name or a sequence, got {type(inputs)}")
    return _checked_arrays("inputs", graph, [None if x is None else (n, x, types[n])
                                             for n, x in zip(names, given, strict=True)],
                           problems, dims, checks)


def bind_state(graph: str, types: Mapping[str, TensorType], state: Mapping[str, Any],
               known: Sequence[str] = (),
               dims: dict[str, tuple[int, str]] | None = None,
               checks: DimChecks | None = None) -> list[np.ndarray]:
    """The state arrays of a graph, in declaration order, checked like inputs.

    Names in ``state`` that are neither this graph's state nor in ``known`` (the program's
    other state) are reported as misspelt. ``dims`` holds the sizes the inputs bound to
    dynamic symbols (state typed like a mutated input shares them).
    """
    problems = [_missing_state_hint(p, types) if p.startswith("missing state ") else p
                for p in _names_problems("state", list(types), list(state), extra_ok=known)]
    # state given as None is converted (and reported); state not given stays None
    return _checked_arrays("state", graph, [(f"state {n}", state[n], t) if n in state else None
                                            for n, t in types.items()],
                           problems, dims, checks)


def _missing_state_hint(problem: str, types: Mapping[str, TensorType]) -> str:
    """``missing state 'n'`` with the state's type and how to give it."""
    name = next(n for n in types if problem == f"missing state {n!r}")
    return f"{problem} ({types[name]}): pass state={{name: array}} holding every state of the graph"


def _checked_arrays(what: str, graph: str,
                    given: Sequence[tuple[str, Any, TensorType] | None], problems: list[str],
                    dims: dict[str, tuple[int, str]] | None,
                    checks: DimChecks | None) -> list[Any]:
    """Each given ``(label, value, type)`` converted to an array and checked against its type
    (None where nothing is given); raises one ``RuntimeInputError`` listing ``problems`` and
    every problem found here. ``dims`` collects the sizes bound to dynamic symbols."""
    arrays: list[Any] = []
    dims = {} if dims is None else dims
    for entry in given:
        if entry is None:
            arrays.append(None)
            continue
        label, x, t = entry
        a = _convert(label, x, t, problems)
        if a is not None:
            problems += input_type_problems(label, a, t, dims)
        arrays.append(a)
    if not problems:
        check_dims(checks, dims, problems)
    if problems:
        _raise(what, graph, problems)
    return arrays
