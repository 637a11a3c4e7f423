"""``Program``: the program data of :mod:`coreai_core._ir` plus what users do with it.

Design: the IR module holds plain data (``ProgramData``) and imports nothing above it; the
layers that act on a program (builders, runtime, optimizer, verifier, printer, drawing,
serialization) import the data classes, never the other way round, as MLIR and xDSL keep
module data apart from passes and interpreters. This module sits on top of all of them and
defines :class:`Program` as a subclass that adds the user conveniences (``graph``, ``run``,
``explain_plan``, ``optimize``, ``to_precision``, ``verify``, ``to_text``/``str``, ``to_dot``,
``to_mermaid``, ``save``, ``save_asset``, ``to_aiprogram``, ``bind_weights``), each a thin call
into its layer. A subclass, rather than attaching functions to the data class at import time,
keeps the methods visible to type checkers and to ``help()``; the price is that whoever creates
programs for users creates this class: ``Program()`` directly, and :func:`parse` and
:func:`load` here, which hand an empty ``Program`` to the parser and the artifact reader (they
fill any ``ProgramData``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np

from coreai_core import assets, draw, serialization
from coreai_core._builder import insertion_point
from coreai_core._ir import Composite, Graph, ProgramData
from coreai_core._text_parser import DEFAULT_MAX_BYTES, parse_into
from coreai_core.optimizer import Check, OptimizeReport, Pass, optimize
from coreai_core.precision import to_precision
from coreai_core.runtime import Runtime, Seed, default_runtime, run_program
from coreai_core.text import print_program
from coreai_core.verifier import verify

__all__ = ["Program", "load", "parse"]


class Program(ProgramData):
    """A Core AI program: entrypoint graphs, named weights and named state.

    ``weights`` maps names to numpy arrays (``None`` for a weight not yet bound);
    ``initial_state`` holds the state's initial values and ``state`` its current values.
    """

    # -- building -------------------------------------------------------------------------
    @contextlib.contextmanager
    def graph(self, name: str = "main", inputs: Mapping[str, Any] | None = None,
              state: Mapping[str, Any] | None = None, *, composite: Composite | None = None,
              before: str | None = None) -> Iterator[Graph]:
        """Create entrypoint ``name`` and make it the insertion point for builders.

        ``state`` maps state names to initial numpy arrays; the graph reads them via
        ``g[name]`` and writes the new values with ``g.outputs(..., state={name: v})``.
        ``composite`` declares the graph a composite op (called with ``coreai.invoke``);
        ``before`` places the graph ahead of an existing one (callees precede callers).
        """
        if name in self.graphs:
            raise ValueError(f"program already has a graph named {name!r}")
        if composite is not None and state:
            raise ValueError(f"composite graph {name!r} cannot have state")
        g = Graph(name, program=self, composite=composite)
        for k, t in (inputs or {}).items():
            g.add_input(k, t)
        for k, init in (state or {}).items():
            self.declare_state(g, k, init)
        self.add_graph(g, before=before)
        with insertion_point(g):
            yield g

    # -- behaviour (implemented in the layers below) ----------------------------------------
    def run(self, inputs: Mapping[str, Any] | Sequence[Any] | None = None,
            entrypoint: str = "main", state: MutableMapping[str, Any] | None = None, *,
            seed: Seed = None) -> dict[str, np.ndarray]:
        """Execute ``entrypoint`` with the numpy reference runtime.

        Returns a dict output name -> array, in output order. Without ``state`` the program's
        own state is read and updated (like calling a torch module with buffers); with
        ``state`` that mapping is used and updated in place instead. ``seed`` (an int, a
        numpy ``SeedSequence`` or ``Generator``) makes the random ops reproducible; None
        draws fresh entropy.
        """
        return run_program(self, inputs, entrypoint=entrypoint, state=state, seed=seed)

    def explain_plan(self, entrypoint: str = "main") -> str:
        """The Python source ``run`` executes for ``entrypoint`` (and its regions and callees),
        each headed by its stats: see ``Runtime.explain_plan``."""
        return default_runtime().explain_plan(self, entrypoint)

    def optimize(self, passes: Sequence[str | Pass] | None = None, *,
                 check: Check | bool | Mapping[str, Any] | None = None,
                 runtime: Runtime | None = None) -> OptimizeReport:
        """Run the optimizer pipeline in place and return its per-pass report.

        ``check`` (``True`` for random inputs, a dict of inputs, or a ``Check``) compares the
        results after every pass with the unoptimized program's and raises
        ``OptimizationMismatchError`` naming the first pass, rewrite, op and location that
        changed them (see :mod:`coreai_core.optimizer.validate`). ``runtime`` is the runtime
        the program will run with: constant folding computes with its kernels.
        """
        return optimize(self, passes, check=check, runtime=runtime)

    def to_precision(self, dtype: Any = "float16", keep: str | Iterable[str] | None = None, *,
                     keep_io_types: bool = True) -> Program:
        """A new program computing in ``dtype`` (``"float16"`` or ``"bfloat16"``) like a device.

        Weights and activations are ``dtype``; every op rounds its result to ``dtype`` while
        reductions, matmuls and convolutions accumulate in float32. Inputs and outputs keep
        their declared types through casts at the boundary (``keep_io_types=False`` declares
        float32 ones in ``dtype``). ``keep`` names ops that stay float32: printed result names
        (``"%12"``), op kinds (``"coreai.softmax"``), source locations (``"model.py:12"``) or
        module paths (``"encoder.layers.0"``). See :mod:`coreai_core.precision` and
        docs/float16.md.
        """
        reduced = to_precision(self, dtype, keep, keep_io_types=keep_io_types)
        assert isinstance(reduced, Program)
        return reduced

    def verify(self) -> None:
        """Raise :class:`VerificationError` if any op does not satisfy its definition."""
        verify(self)

    def to_text(self, *, locations: bool = False, full: bool = False) -> str:
        """The text form. ``full`` prints weight data; ``locations`` prints op locations."""
        return print_program(self, locations=locations, full=full)

    def __str__(self) -> str:
        return self.to_text()

    def to_dot(self, entrypoint: str | None = None, *, collapse: int | None = None) -> str:
        """Graphviz dot text; ``collapse=k`` draws each module-path prefix of depth k as one
        node."""
        return draw.to_dot(self, entrypoint, collapse=collapse)

    def to_mermaid(self, entrypoint: str | None = None, *, collapse: int | None = None) -> str:
        """Mermaid flowchart text (same options as :meth:`to_dot`)."""
        return draw.to_mermaid(self, entrypoint, collapse=collapse)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Save as an artifact folder, atomically (text form + weights in safetensors +
        checksums; see docs/saving.md)."""
        serialization.save(self, path)

    def save_asset(self, path: str | os.PathLike[str], **options: Any) -> Any:
        """Write a deployable asset with the writer registered for ``path``'s suffix and
        return it: ``program.save_asset("model.aimodel")`` writes Apple's ``.aimodel`` and
        returns a ``coreai.authoring.AIModelAsset`` (registered by ``coreai_torch``; needs
        the ``coreai`` extra). See :mod:`coreai_core.assets`."""
        return assets.save_asset(self, path, **options)

    def to_aiprogram(self, **options: Any) -> Any:
        """Apple's ``coreai.authoring.AIProgram`` of this program, built by the ``.aimodel``
        exporter's lowering (registered by ``coreai_torch``; needs the ``coreai`` extra), for
        Apple's tools that take one: coreai-opt's ``coreai_utils`` passes, Apple's
        ``AIProgram.save_asset``. ``entrypoints=[...]`` picks graphs as in ``save_asset``.
        See :mod:`coreai_core.assets` and docs/coreai-interop.md."""
        return assets.convert_program(self, "aiprogram", **options)

    def bind_weights(self, source: Any, *, strict: bool = True) -> None:
        """Bind unbound weights from a state dict, an .npz or a .safetensors file."""
        serialization.bind_weights(self, source, strict=strict)


def parse(text: str, weights: Mapping[str, Any] | None = None, *,
          max_bytes: int | None = DEFAULT_MAX_BYTES) -> Program:
    """Parse the text form back into a Program (``weights`` binds elided weight data).

    ``max_bytes`` (default ``coreai_core.text.DEFAULT_MAX_BYTES``, 1 GiB) bounds the bytes of
    tensor data the text may make the parser allocate, in total over its dense literals, checked
    before allocating (a :class:`ParseError` saying how to raise it); None removes the bound.
    Large splats ``dense<v>`` cost nothing (read-only broadcast views); ``weights`` data is not
    counted. See docs/saving.md, "Limits on untrusted text".
    """
    program = Program()
    parse_into(program, text, weights, max_bytes=max_bytes)
    return program


def load(path: str | os.PathLike[str], *,
         max_bytes: int | None = DEFAULT_MAX_BYTES) -> Program:
    """Load a program saved with ``Program.save`` (never unpickles; verifies checksums).

    ``max_bytes`` bounds the tensor data the artifact's program text may make the parser
    allocate, as in :func:`parse` (``None``: no limit, for artifacts you trust); weights are
    memory-mapped from the weights file and do not count.
    """
    program = Program()
    serialization.load_into(program, path, max_bytes=max_bytes)
    return program
