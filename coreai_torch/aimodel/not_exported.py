"""Why the dialect ops without a mapping are not exported: shown in the refusal error and in
the mapping table of docs/coreai-interop.md. An op missing here (e.g. a special function)
gets the generic reason, so a new dialect op needs no entry."""

from __future__ import annotations

__all__ = ["NOT_EXPORTED", "not_exported_reason"]

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
