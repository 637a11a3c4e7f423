"""Export -> decompose -> convert -> run -> compare with torch eager, shared by torch tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from coreai_core import Program
from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch._table import qualified_name


class FnModule(torch.nn.Module):
    """Calls ``fn`` with the module inputs placed among fixed non-tensor arguments."""

    def __init__(self, fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]):
        super().__init__()
        self.fn = fn
        self.template = list(args)
        self.slots = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        self.kwargs = kwargs

    def forward(self, *tensors: torch.Tensor) -> Any:
        args = list(self.template)
        for i, t in zip(self.slots, tensors, strict=True):
            args[i] = t
        return self.fn(*args, **self.kwargs)


def flatten(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in flatten(o)]
    if hasattr(out, "to_tuple"):
        return flatten(out.to_tuple())
    if isinstance(out, dict):
        return [t for o in out.values() for t in flatten(o)]
    if isinstance(out, (int, float, bool)):
        return [torch.tensor(out)]
    raise TypeError(f"unexpected output {type(out).__name__}")


def to_numpy(t: torch.Tensor) -> np.ndarray:
    from coreai_torch.utils import to_numpy as converter_to_numpy

    return converter_to_numpy(t)  # bfloat16/float8 as ml_dtypes arrays


def call_targets(ep: torch.export.ExportedProgram) -> set[str]:
    """Qualified names of every call in the program, subgraphs included."""
    out = set()

    def walk(gm: torch.fx.GraphModule) -> None:
        for n in gm.graph.nodes:
            if n.op == "call_function":
                out.add(qualified_name(n.target))
            elif n.op == "get_attr" and isinstance(getattr(gm, str(n.target), None),
                                                   torch.fx.GraphModule):
                walk(getattr(gm, str(n.target)))

    walk(ep.graph_module)
    return out


def export(module: torch.nn.Module, args: Sequence[Any], dynamic_shapes: Any = None,
           ) -> torch.export.ExportedProgram:
    ep = torch.export.export(module, tuple(args), dynamic_shapes=dynamic_shapes)
    return ep.run_decompositions(get_decomp_table())


def convert(ep: torch.export.ExportedProgram, converter: TorchConverter | None = None,
            **names: Any) -> Program:
    return (converter or TorchConverter()).add_exported_program(ep, **names).to_coreai()


def assert_matches(expected: Sequence[torch.Tensor], got: Sequence[np.ndarray], *,
                   atol: float, rtol: float, what: str = "") -> None:
    """Shape, then dtype, then values (NaN where torch has NaN)."""
    assert len(expected) == len(got), f"{what}: {len(got)} outputs, torch has {len(expected)}"
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        g = np.asarray(g)
        tag = f"{what} output {i}"
        assert tuple(g.shape) == tuple(e.shape), f"{tag}: shape {g.shape} != torch {e.shape}"
        want = to_numpy(e)
        assert g.dtype == want.dtype, f"{tag}: dtype {g.dtype} != torch {want.dtype}"
        if want.dtype.kind in "biu":
            np.testing.assert_array_equal(g, want, err_msg=tag)
        else:
            # complex: |got - want| <= atol + rtol * |want|, and NaN in the same parts
            wide = np.complex128 if want.dtype.kind == "c" else np.float64
            np.testing.assert_allclose(g.astype(wide), want.astype(wide),
                                       atol=atol, rtol=rtol, equal_nan=True, err_msg=tag)
            if wide is np.complex128:
                for part in (np.real, np.imag):
                    np.testing.assert_array_equal(np.isnan(part(g)), np.isnan(part(want)),
                                                  err_msg=f"{tag}: NaN parts differ")
