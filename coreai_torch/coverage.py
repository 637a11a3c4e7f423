"""Coverage of the Core ATen opset and the documented list of what is not lowered.

``python -m coreai_torch.coverage`` prints the summary (Core ATen lowered x/N, op-database
verified y) when run from a source checkout.
"""

from __future__ import annotations

import sys

import torch

from coreai_torch.lowerings import default_table

__all__ = ["NOT_LOWERED", "core_aten_ops", "main", "not_lowered"]

_RANDOM = ("random: a deterministic program cannot reproduce torch's generator; the converter's "
           "preflight error reports it (export in eval mode, or pass the noise as an input)")

# Core ATen ops deliberately left without a lowering, with the reason. A meta test keeps this
# list equal to the ops actually missing.
NOT_LOWERED: dict[str, str] = {
    "aten::rand.default": _RANDOM,
    "aten::randn.default": _RANDOM,
    "aten::randperm.default": _RANDOM,
}


def core_aten_ops() -> list[str]:
    """Qualified names of the functional Core ATen overloads of the installed torch.

    Enumerated from every registered schema (``dir(torch.ops.aten)`` only lists the op packets
    loaded so far, so it would depend on what ran before).
    """
    names = {s.name.split("::", 1)[1] for s in torch._C._jit_get_all_schemas()
             if s.name.startswith("aten::")}
    out = []
    for name in sorted(names):
        try:
            packet = getattr(torch.ops.aten, name)
        except (AttributeError, RuntimeError):
            continue
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if torch.Tag.core not in op.tags or op._schema.is_mutable:
                continue
            if any(a.alias_info is not None and a.alias_info.is_write
                   for a in op._schema.arguments):
                continue  # out= variants write into an argument
            out.append(f"aten::{name}.{overload}")
    return sorted(out)


def not_lowered() -> list[str]:
    """Core ATen ops without a built-in lowering."""
    lowered = set(default_table().names())
    return [n for n in core_aten_ops() if n not in lowered]


def main() -> int:
    core = core_aten_ops()
    missing = not_lowered()
    print(f"Core ATen (torch {torch.__version__}): lowered {len(core) - len(missing)}/{len(core)}")
    for name in missing:
        print(f"  not lowered: {name}: {NOT_LOWERED.get(name, 'UNDOCUMENTED')}")
    try:
        from tests.torch import op_db
    except ImportError:
        print("op database: not available (run from a source checkout)")
        return 0
    lowered = default_table().names()
    verified = {e.target for e in op_db.ENTRIES}
    print(f"built-in lowerings: {len(lowered)}; verified by the op database: "
          f"{len(verified & set(lowered))}; by dedicated tests: "
          f"{len(set(op_db.COVERED_ELSEWHERE) & set(lowered))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
