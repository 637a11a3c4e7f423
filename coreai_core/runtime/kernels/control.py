"""Kernels of the control-flow ops.

Regions arrive as callables (``Region``: a nested plan built once) taking arrays and
returning the list of the region's outputs; ``invoke``'s ``callee`` arrives as the callee
graph's plan, called the same way.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from coreai_core.runtime.kernels._registry import KernelSet

KERNELS = KernelSet("control")
kernel = KERNELS.register

RegionFn = Callable[..., list[np.ndarray]]


def _truth(pred: np.ndarray) -> bool:
    return bool(np.asarray(pred).reshape(-1)[0])


@kernel("coreai.if")
def if_(pred: np.ndarray, operands: list[np.ndarray], *, then_branch: RegionFn,
        else_branch: RegionFn) -> list[np.ndarray]:
    """Run one branch on the operands."""
    return (then_branch if _truth(pred) else else_branch)(*operands)


@kernel("coreai.while")
def while_(init: list[np.ndarray], *, cond: RegionFn, body: RegionFn) -> list[np.ndarray]:
    """carried = body(*carried) while cond(*carried)."""
    carried = list(init)
    while _truth(cond(*carried)[0]):
        carried = body(*carried)
    return carried


@kernel("coreai.invoke")
def invoke(args: list[np.ndarray], *, callee: RegionFn) -> list[np.ndarray]:
    """Call another entrypoint graph of the program."""
    return callee(*args)
