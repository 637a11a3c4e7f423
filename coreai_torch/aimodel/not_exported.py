"""Why the dialect ops without a mapping are not exported: shown in the refusal error and in
the mapping table of docs/coreai-interop.md. An op missing here (e.g. a special function)
gets the generic reason, so a new dialect op needs no entry."""

from __future__ import annotations

__all__ = ["EMPTY_TENSORS", "NOT_EXPORTED", "empty_tensor_reason", "not_exported_reason"]

_LINALG = "Core AI has no linear-algebra decomposition or solve op"
_RANDOM = "Core AI has no random op"

NOT_EXPORTED: dict[str, str] = {
    "coreai.non_zero": "its result's shape depends on the data (exports are static)",
    **{f"coreai.{name}": _LINALG for name in (
        "cholesky", "eig", "eigh", "svd", "geqrf", "householder_product", "lu_factor",
        "lu_solve", "ldl_factor", "ldl_solve", "triangular_solve", "matrix_exp",
        "pivots_to_permutation")},
    **{f"coreai.{name}": _RANDOM for name in (
        "random_uniform", "random_normal", "random_integers", "random_permutation",
        "random_bernoulli", "random_multinomial")},
}


def not_exported_reason(op_name: str) -> str:
    """Why ``op_name`` (a dialect op without a mapping) is not exported."""
    return NOT_EXPORTED.get(op_name, "no Core AI counterpart and no exact expansion")


# Ops exported with zero-size tensors: a scatter of no updates is emitted as the identity; an
# empty slice (an output, test_aimodel_expansions.py) and a concat with empty pieces run right
# on Apple's interpreter. Apple's compiler crashes on others (a scatter_nd of no updates
# killed the process: Chameleon's logits masking) or computes wrong values (a sum over a
# gather of no rows), coreai-core 1.0.0b3.
EMPTY_TENSORS = frozenset({"coreai.constant", "coreai.concat", "coreai.slice",
                           "coreai.scatter_nd", "coreai.scatter_along_axis"})


def empty_tensor_reason(shapes: list[tuple[int, ...]]) -> str:
    """Why an op with a zero-size operand or result (of ``shapes``) is not exported."""
    found = next(s for s in shapes if 0 in s)
    return (f"a zero-size tensor {list(found)}: Apple's Core AI compiler crashes or computes "
            "wrong values on empty tensors; remove the empty computation from the model")
