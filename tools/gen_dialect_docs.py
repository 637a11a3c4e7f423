"""Generate docs/dialect.md from the op definitions (``OPS``).

Run ``python tools/gen_dialect_docs.py`` after adding or changing an op;
tests/core/test_docs_sync.py fails while the file differs from :func:`render`.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "dialect.md"


def _one_line(doc: str) -> str:
    """The first paragraph of a docstring, on one line."""
    return " ".join(doc.strip().split("\n\n")[0].split())


_COMPLEX_SEMANTICS = """\
### Complex numbers

- `complex64` holds two `float32` parts, `complex128` two `float64` parts (the parts' type is
  `DType.real_dtype`). The runtime stores them as numpy `complex64`/`complex128`; saved
  artifacts keep them bit for bit.
- There is no `complex32`: torch's `ComplexHalf` (float16 parts) is experimental in torch and
  has no numpy type, so `view_as_complex` or `complex` of float16 parts stops with a type
  error; cast the parts to float32 first (giving `complex64`). No complex type has bfloat16
  parts (torch has none either).
- Text form: a complex element is `(real, imag)`, each part printed like a float of the parts'
  width (shortest round-tripping decimal, `inf`, `nan`, `nan(0x...)`), e.g.
  `dense<[(1.5, -2.0), (0.0, inf)]> : tensor<2xc64>`.
- Promotion follows torch: complex is above float; a complex type meeting a float type gets
  parts wide enough for both (`complex64` with `float64` gives `complex128`).
- Values are physical: there is no lazy conjugate or negative bit; `coreai.conj` computes the
  conjugate (torch's `_conj` and `resolve_conj` lower to it and to the identity).
- `cast` from complex to a real type keeps the real part (to `bool`: nonzero if either part is
  nonzero); from real to complex the imaginary part is +0.
- Elementwise functions use the principal branch (numpy's and torch's); `abs` returns the
  modulus as a float of the parts' type; `isnan`/`isinf` test both parts; `equal`/`not_equal`
  compare both parts. Ordered comparisons, `maximum`/`minimum`, rounding, `sign`, `relu`,
  `floor_divide`/`modulo`/`remainder`/`atan2`, bitwise ops and the special functions reject
  complex operands (as torch does).
- Reductions: `reduce_sum`, `reduce_product` and `reduce_mean` accept complex tensors; data
  movement ops (reshape, transpose, concat, slice, gather, pad, ...) accept every element type.
"""


def _element_types() -> list[str]:
    """The element types, their text names, and the complex-number semantics, with the
    elementwise ops that accept complex operands found by running their type rules."""
    from coreai_core import DType, TensorType, Value
    from coreai_core._dtypes import SHORT_NAME
    from coreai_core._opdef import OPS, normalize_attr
    from coreai_core.errors import TypeRuleError

    names = ", ".join(f"`{d.value}` (`{SHORT_NAME[d]}`)" for d in DType)
    accepting = []
    for opdef in OPS.values():
        if not opdef.traits & {"unary", "binary"}:
            continue
        if not opdef.rule.__module__.startswith("coreai_core."):
            continue  # an op a user defined at run time
        if any(not p.has_default and p.kind != "choice" for p in opdef.attributes):
            continue
        operands = {p.name: Value(TensorType((2,), DType.complex64)) for p in opdef.operands}
        # an attribute without a default takes its first choice (e.g. special's ``fn``)
        attributes = {p.name: normalize_attr(p, p.default if p.has_default else p.choices[0],
                                             opdef.name) for p in opdef.attributes}
        try:
            opdef.infer(operands, attributes)
        except TypeRuleError:
            continue
        accepting.append(f"`{opdef.name.removeprefix('coreai.')}`")
    from coreai_core.dialects import _fft

    # the transforms' definition is the fft family's docstring, after its title line
    fft_doc = inspect.cleandoc(_fft.__doc__ or "").split("\n", 1)[1].strip()
    return ["", "## Element types", "",
            f"Tensor element types and their short names in the text form: {names}.", "",
            _COMPLEX_SEMANTICS,
            "Unary and binary elementwise ops that accept complex operands: "
            + ", ".join(accepting) + ".", "", "### Fourier transforms", "", fft_doc]


def _paragraphs(doc: str) -> list[str]:
    """Every paragraph of a docstring, each on one line, separated by blank lines."""
    paragraphs = [" ".join(p.split()) for p in inspect.cleandoc(doc).split("\n\n") if p.strip()]
    return [line for p in paragraphs for line in (p, "")][:-1]


def render() -> str:
    """The text of docs/dialect.md: every op grouped by the module defining it."""
    from coreai_core._opdef import OPS
    from coreai_core.dialects import coreai

    builders = {}  # op name -> the Python names that build it
    for name, fn in vars(coreai).items():
        opdef = getattr(fn, "opdef", None)
        if opdef is not None and not name.startswith("_"):
            builders.setdefault(opdef.name, []).append(name)
    # only the dialect's own ops: ops users define (e.g. in the guides) are not documented here
    dialect = [d for d in OPS.values() if d.rule.__module__.startswith("coreai_core.")]
    families: dict[str, list] = {}
    for opdef in dialect:
        families.setdefault(opdef.rule.__module__, []).append(opdef)
    lines = [
        "<!-- Generated by tools/gen_dialect_docs.py from the op definitions; do not edit. -->",
        "# The coreai dialect",
        "",
        "Every op is defined once, by its type rule in `coreai_core/dialects/`; the builder "
        "`coreai.<name>` (from `coreai_core.dialects import coreai`) has the rule's signature "
        "plus an optional `loc=`. Operands are listed first (`x?` optional, `*xs` variadic), "
        "then attributes with their kind and default.",
        "",
        f"{len(dialect)} ops in {len(families)} families.",
        *_element_types(),
    ]
    for module, opdefs in families.items():
        mod = sys.modules[module]
        title = module.rsplit(".", 1)[-1].strip("_").replace("_", " ").capitalize()
        # a family's first docstring paragraph introduces it; further ones document semantics
        # shared by its ops (e.g. how random ops are seeded)
        intro, *rest = _paragraphs(mod.__doc__ or "") or [""]
        lines += ["", f"## {title}", "", intro, f"Defined in `{module.replace('.', '/')}.py`.",
                  *(["", *rest[1:]] if rest else []), ""]
        for opdef in opdefs:
            names = builders.get(opdef.name) or [opdef.rule.__name__.lstrip("_")]
            traits = f" *[{', '.join(sorted(opdef.traits))}]*" if opdef.traits else ""
            lines.append(f"- `{opdef.signature_text()}` — builder "
                         f"{', '.join(f'`{n}`' for n in names)}{traits}. {_one_line(opdef.doc)}")
        # a family may document attribute values in tables: {title: {value: meaning}}
        for caption, table in getattr(mod, "DOC_TABLES", {}).items():
            lines += ["", caption, "", "| value | meaning |", "|---|---|"]
            lines += [f"| `{k}` | {v} |" for k, v in table.items()]
    helpers = [(n, fn) for n, fn in vars(coreai).items() if callable(fn)
               and not hasattr(fn, "opdef") and n in coreai.__all__ and n != "OPS"]
    lines += ["", "## Other builders", "",
              "Conveniences that build the ops above (or terminate a graph).", ""]
    for name, fn in sorted(helpers):
        sig = inspect.signature(fn)  # annotations are strings here; the names say enough
        sig = sig.replace(return_annotation=sig.empty, parameters=[
            p.replace(annotation=p.empty) for p in sig.parameters.values()])
        lines.append(f"- `{name}{sig}`: {_one_line(fn.__doc__ or '')}")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Write docs/dialect.md."""
    sys.path.insert(0, str(ROOT))
    OUTPUT.parent.mkdir(exist_ok=True)
    OUTPUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
