"""Coverage of the Core ATen opset and the documented list of what is not lowered.

``python -m coreai_torch.coverage`` prints the Core ATen summary (lowered x/N and what is not
lowered, with the reason). How many lowerings the op database verifies is known only to a
source checkout: ``python tools/coverage_report.py`` passes the op database's targets to
:func:`report` (the library never imports the tests).
"""

from __future__ import annotations

import sys
from collections.abc import Collection

import torch

from coreai_torch.lowerings import default_table

__all__ = ["NOT_LOWERED", "core_aten_ops", "main", "not_lowered", "report"]

# Core ATen ops deliberately left without a lowering, with the reason. A meta test keeps this
# list equal to the ops actually missing.
NOT_LOWERED: dict[str, str] = {
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


def report(verified: Collection[str] | None = None,
           tested_elsewhere: Collection[str] = ()) -> str:
    """The coverage summary: Core ATen lowered x/N, what is not lowered and why, and, given
    the targets an op database verifies (and those dedicated tests cover), how many built-in
    lowerings they account for."""
    core = core_aten_ops()
    missing = not_lowered()
    lines = [f"Core ATen (torch {torch.__version__}): lowered {len(core) - len(missing)}/"
             f"{len(core)}"]
    lines += [f"  not lowered: {name}: {NOT_LOWERED.get(name, 'UNDOCUMENTED')}"
              for name in missing]
    lowered = set(default_table().names())
    if verified is None:
        lines.append(f"built-in lowerings: {len(lowered)} (run tools/coverage_report.py in a "
                     "source checkout to count those the op database verifies)")
    else:
        lines.append(f"built-in lowerings: {len(lowered)}; verified by the op database: "
                     f"{len(lowered & set(verified))}; by dedicated tests: "
                     f"{len(lowered & set(tested_elsewhere))}")
    return "\n".join(lines)


def main() -> int:
    print(report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
