"""Drift guards: every dialect op has a default kernel whose signature mirrors the op."""

from __future__ import annotations

import inspect

import pytest

from coreai_core._opdef import OPS
from coreai_core.registry import frozen_union
from coreai_core.runtime import DEFAULT_TABLE, KernelTable
from coreai_core.runtime.kernels import FAMILIES
from coreai_core.runtime.kernels._registry import KernelSet

CORE_OPS = sorted(n for n in OPS if n.startswith("coreai."))


def test_every_dialect_op_has_a_default_kernel():
    missing = [n for n in CORE_OPS if n not in DEFAULT_TABLE]
    assert not missing, f"ops without a kernel in the default table: {missing}"


def test_every_default_kernel_belongs_to_a_dialect_op():
    stray = sorted(n for n in DEFAULT_TABLE if n not in OPS)
    assert not stray, f"kernels for ops that do not exist: {stray}"


def test_default_table_is_exactly_the_families() -> None:
    assert DEFAULT_TABLE.parent is None
    for family in FAMILIES:
        for name, kernel in family.own_items():
            assert DEFAULT_TABLE.get(name) is kernel, (name, family.family)
    assert len(DEFAULT_TABLE) == sum(len(family.own_names()) for family in FAMILIES)


@pytest.mark.parametrize("op_name", CORE_OPS)
def test_kernel_signature_mirrors_the_op(op_name):
    """Operands are positional (in order), attributes are keyword arguments by name."""
    opdef = OPS[op_name]
    fn = DEFAULT_TABLE.get(op_name)
    params = inspect.signature(fn).parameters.values()
    positional = [p for p in params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    takes_var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
    keywords = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    assert len(positional) == len(opdef.operands), (
        f"{op_name}: kernel takes {len(positional)} positional parameters, the op has "
        f"operands {[p.name for p in opdef.operands]}")
    for attr in opdef.attributes:
        assert takes_var_kw or attr.name in keywords, (
            f"{op_name}: kernel does not accept attribute {attr.name!r}")


def test_a_kernel_defined_by_two_families_is_an_error() -> None:
    twin = KernelSet("twin")
    twin.register("coreai.relu")(lambda x: x)
    with pytest.raises(ValueError, match=r"coreai\.relu.*elementwise.*twin"):
        frozen_union(KernelTable(owner="a twin table"), (*FAMILIES, twin))
