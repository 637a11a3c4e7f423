"""Which placeholders of an exported program are inputs and which are state, and their names.

Apple's converter semantics (docs/api/TorchConverter.md of ``coreai-torch``, "IO naming"):

- **State** is every buffer mutated in place in ``forward()`` and every ``forward()`` argument
  mutated in place (``y.mul_(2)``), as the graph signature reports them (``BUFFER_MUTATION``
  and ``USER_INPUT_MUTATION`` outputs). There is no opt-out: clone the argument first to keep
  it an input.
- **Inputs** are the ``forward()`` arguments that are not mutated, in signature order.
- **State order**: the mutated buffers (in the order the program lists its buffers, their
  registration order), then the mutated arguments (signature order).
- **Default names**: an input is named after its placeholder (the argument's name), a mutated
  argument's state too; a mutated buffer's state is named after the buffer's fully qualified
  name (``kv_cache``; Apple's converter names it after its placeholder, ``b_kv_cache``).

One state name names both the state a graph reads and the new value it writes.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind, OutputSpec

STATE_KINDS = (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION)


@attrs.frozen
class IONames:
    """The names of one exported program's inputs and state, keyed by FX placeholder name.

    ``inputs`` holds the non-mutated user inputs in signature order; ``state`` the mutated
    buffers and then the mutated user inputs, in Apple's order; ``state_of_output`` maps the
    target of each mutation output spec (a buffer FQN or a user input's name), qualified by
    its kind, to the state it writes.
    """

    inputs: dict[str, str]
    state: dict[str, str]
    state_of_output: dict[tuple[OutputKind, str], str]

    def state_written_by(self, spec: OutputSpec) -> str:
        """The state name a ``BUFFER_MUTATION`` / ``USER_INPUT_MUTATION`` output writes."""
        return self.state_of_output[(spec.kind, str(spec.target))]


def _placeholder_of(ep: ExportedProgram, spec: OutputSpec) -> str:
    """The placeholder a mutation output writes back to."""
    for s in ep.graph_signature.input_specs:
        user = (spec.kind == OutputKind.USER_INPUT_MUTATION and s.kind == InputKind.USER_INPUT
                and s.arg.name == spec.target)
        buffer = (spec.kind == OutputKind.BUFFER_MUTATION and s.kind == InputKind.BUFFER
                  and s.target == spec.target)
        if user or buffer:
            return str(s.arg.name)
    raise ValueError(f"the graph signature's mutation output {spec.arg.name!r} writes "
                     f"{spec.target!r}, which no input of the program is; the exported "
                     "program's signature is inconsistent (re-export the model)")


def mutation_specs(ep: ExportedProgram) -> list[OutputSpec]:
    """The output specs that write state, in Apple's order: mutated buffers in the order the
    program's inputs list them (registration order), then mutated user inputs (signature
    order)."""
    position = {str(s.arg.name): i for i, s in enumerate(ep.graph_signature.input_specs)
                if hasattr(s.arg, "name")}
    specs = [s for s in ep.graph_signature.output_specs if s.kind in STATE_KINDS]
    return sorted(specs, key=lambda s: (s.kind != OutputKind.BUFFER_MUTATION,
                                        position[_placeholder_of(ep, s)]))


def user_input_placeholders(ep: ExportedProgram) -> list[str]:
    """The placeholders of the user inputs that are not mutated (the program's inputs), in
    signature order."""
    mutated = {str(s.target) for s in ep.graph_signature.output_specs
               if s.kind == OutputKind.USER_INPUT_MUTATION}
    return [str(s.arg.name) for s in ep.graph_signature.input_specs
            if s.kind == InputKind.USER_INPUT and str(s.arg.name) not in mutated]


def _describe(ep: ExportedProgram, spec: OutputSpec) -> str:
    if spec.kind == OutputKind.BUFFER_MUTATION:
        return f"buffer {spec.target!r}"
    return f"forward() argument {spec.target!r}, mutated in place"


def io_names(ep: ExportedProgram, input_names: Sequence[str] | None,
             state_names: Sequence[str] | None) -> IONames:
    """Resolve the names of ``ep``'s inputs and state (``None``: the defaults of the module
    docstring); raises ``ValueError`` saying what the program has when a count is wrong or a
    name is both an input's and a state's."""
    inputs = user_input_placeholders(ep)
    mutations = mutation_specs(ep)
    if input_names is not None and len(input_names) != len(inputs):
        mutated = [str(s.target) for s in mutations
                   if s.kind == OutputKind.USER_INPUT_MUTATION]
        note = (f"; the forward() arguments {mutated} are mutated in place, so they are state, "
                "named by state_names (clone an argument before mutating it to keep it an "
                "input)") if mutated else ""
        raise ValueError(f"input_names has {len(input_names)} names but the program has "
                         f"{len(inputs)} user inputs {inputs} (forward() arguments that are "
                         f"not mutated){note}")
    if state_names is not None and len(state_names) != len(mutations):
        listed = ", ".join(_describe(ep, s) for s in mutations) or "none"
        raise ValueError(f"state_names has {len(state_names)} names but the program has "
                         f"{len(mutations)} mutated buffers/inputs (in state order: {listed})")
    in_names = list(input_names) if input_names is not None else inputs
    st_names = (list(state_names) if state_names is not None
                else [str(s.target) for s in mutations])
    for name in sorted(set(in_names) & set(st_names)):
        spec = mutations[st_names.index(name)]
        which = "input_names or state_names" if state_names is None else "input_names"
        raise ValueError(f"{name!r} names both an input and the state of the "
                         f"{_describe(ep, spec)}: a graph's inputs and state need distinct "
                         f"names; pass {which} to rename one")
    repeated = sorted({n for n in st_names if st_names.count(n) > 1})
    if repeated:
        raise ValueError(f"the default state names repeat {repeated} (a buffer and a mutated "
                         "forward() argument of the same name); pass state_names=[...] in "
                         f"state order: {', '.join(_describe(ep, s) for s in mutations)}")
    return IONames(
        inputs=dict(zip(inputs, in_names, strict=True)),
        state={_placeholder_of(ep, s): n for s, n in zip(mutations, st_names, strict=True)},
        state_of_output={(s.kind, str(s.target)): n
                         for s, n in zip(mutations, st_names, strict=True)})
