"""A graph with state, declared as a Core AI graph whose state arguments are handles.

Core AI keeps state outside the graph: each state variable is an argument of type
``!coreai.handle<tensor<...>>`` named like the state, which the caller binds to a buffer
(``fn(inputs=..., state={name: NDArray})``, updated in place). The graph reads it with
``read_handle`` and writes it with ``write_handle``; each handle's accesses are ordered by a
chain of tokens that starts at ``create_token``, and the graph returns the last token of
every chain (Core AI requires one token result per handle argument).

Apple's supported facade (``coreai.authoring``) declares handle and token *types* but its
``graph`` decorator takes tensor and image arguments only and it has no handle ops, so this
module (and only this one) uses Apple's raw layer (``coreai._compiler``, unversioned): the
graph op, the three handle ops, and the seam between facade and raw values. The body itself
is still emitted with the facade's op builders.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from coreai_torch.aimodel._apple import ca, from_raw, to_raw
from coreai_torch.aimodel._apple import raw_coreai as apple_raw

__all__ = ["StatefulBody", "declare_stateful_graph"]

# (Apple values of the inputs, then of the state read at the start)
#   -> (Apple values of the outputs, the new state values by name)
StatefulBody = Callable[[list[Any]], tuple[list[Any], dict[str, Any]]]


def _token_names(state: Sequence[str], taken: Sequence[str]) -> list[str]:
    """Names for the token results (Core AI names every result; callers never see these)."""
    used = set(taken)
    names = []
    for k in state:
        name = f"{k}.token"
        while name in used:
            name += "_"
        used.add(name)
        names.append(name)
    return names


def declare_stateful_graph(name: str, inputs: Mapping[str, ca.TensorType],
                           state: Mapping[str, ca.TensorType],
                           outputs: Mapping[str, ca.TensorType], body: StatefulBody) -> None:
    """Insert graph ``name`` into the current Apple module.

    Its arguments are ``inputs`` (tensors) then ``state`` (handles of those tensor types),
    its results ``outputs`` then one token per state. Every state is read first; ``body``
    computes the outputs and the new state from the inputs and those reads; each new state
    is written after its read (state ``body`` does not update is only read).
    """
    def raw_type(t: Any) -> Any:
        return to_raw(t)  # the facade-to-raw seam (see the module doc)

    graph = apple_raw.GraphOp(
        name,
        input_types=[raw_type(t) for t in inputs.values()]
        + [raw_type(ca.HandleType(t)) for t in state.values()],
        result_types=[raw_type(t) for t in outputs.values()]
        + [raw_type(ca.TokenType())] * len(state),
        input_names=[*inputs, *state],
        result_names=[*outputs, *_token_names(list(state), [*inputs, *state, *outputs])])
    with graph.block:
        args = list(graph.arguments)
        handles = args[len(inputs):]
        reads, tokens = [], []
        for handle in handles:
            # (value, token); Apple's stubs type the result list as neither iterable nor indexable
            read: Any = apple_raw.read_handle(handle, apple_raw.create_token())
            value, token = read
            reads.append(value)
            tokens.append(token)  # orders later accesses of this handle after the read
        facade = [from_raw(v) for v in [*args[:len(inputs)], *reads]]
        outs, new_state = body(facade)
        for i, k in enumerate(state):
            if k in new_state:
                tokens[i] = apple_raw.write_handle(handles[i], to_raw(new_state[k]),
                                                   tokens[i])
        apple_raw.OutputOp([to_raw(o) for o in outs] + tokens)
