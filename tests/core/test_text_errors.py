"""Malformed text: every problem is a ParseError at the right line and column, never a crash.

The fuzz tests mutate valid texts (characters and tokens deleted, inserted, replaced, swapped):
each result must parse into a valid, re-printable program or raise ParseError; nothing else.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_core import ParseError, parse
from coreai_core.text import MAX_NESTING
from coreai_core.verifier import verify_graph
from tests.core.op_samples import build_sample, showcase_program

BASE = """coreai.program {
  graph @main(%x: tensor<2xf32>, %p: tensor<i1>) {
    %0 = coreai.neg(%x) : tensor<2xf32>
    coreai.output(y = %0)
  }
}"""
NEG = "%0 = coreai.neg(%x) : tensor<2xf32>"
CONST = "%0 = coreai.constant() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : tensor<2xf32>"

# (case id, text to replace in BASE, replacement, expected message (regex), where it points)
ERRORS = [
    ("unknown op", "coreai.neg", "coreai.negate",
     r"unknown op 'coreai.negate'; did you mean coreai.neg\?", "coreai.negate"),
    ("undefined value", "neg(%x)", "neg(%z)", r"undefined value %z", "%z"),
    ("wrong result type", NEG, "%0 = coreai.neg(%x) : tensor<3xf32>",
     r"coreai.neg: declared result types \['tensor<3xf32>'\] differ from the inferred",
     "coreai.neg"),
    ("result count", NEG, "%0, %1 = coreai.neg(%x) : tensor<2xf32>",
     r"names 2 results but declares 1 result types", "coreai.neg"),
    ("rule rejects attribute", NEG, "%0 = coreai.softmax(%x) {axis = 5} : tensor<2xf32>",
     r"coreai.softmax: axis 5 is out of range for rank 1", "coreai.softmax"),
    ("attribute kind", NEG, '%0 = coreai.softmax(%x) {axis = "a"} : tensor<2xf32>',
     r"coreai.softmax: attribute 'axis' expects int, got 'a'", '"a"'),
    ("unknown attribute", NEG, "%0 = coreai.neg(%x) {bogus = 1} : tensor<2xf32>",
     r"coreai.neg has no attribute 'bogus'", "1}"),
    ("missing attribute", NEG, "%0, %1 = coreai.topk(%x) : tensor<1xf32>, tensor<1xi64>",
     r"coreai.topk needs attribute 'k'", "coreai.topk"),
    ("operand type", NEG, "%0 = coreai.neg(%p) : tensor<i1>",
     r"coreai.neg: operand .x. must be a numeric or complex tensor, got tensor<i1>", "coreai.neg"),
    ("missing terminator", "    coreai.output(y = %0)\n", "",
     r"expected an op or 'coreai.output', found '}'", "}\n}"),
    ("bad element type", "%x: tensor<2xf32>", "%x: tensor<2xf33>",
     r"expected a dimension or an element type", "f33"),
    ("bad dim bounds", "%x: tensor<2xf32>", "%x: tensor<?n[1;2]xf32>",
     r"expected ':' in dimension bounds", ";2]"),
    ("trailing text", "}\n}", "}\n} extra", r"unexpected 'extra' after the end", "extra"),
    ("end of text", "coreai.output(y = %0)\n  }\n}", "coreai.output(y = %0)",
     r"expected '}' after the graph's terminator, found end of text", None),
    ("value defined twice", NEG, NEG + "\n    " + NEG, r"value %0 is defined twice",
     NEG + "\n    coreai.output"),
    ("duplicate input", "%p: tensor<i1>", "%x: tensor<i1>", r"input %x is declared twice",
     "%x: tensor<i1>"),
    ("duplicate output", "(y = %0)", "(y = %0, y = %x)", r"output 'y' is given twice", "y = %x"),
    ("undeclared state", "(y = %0)", "(y = %0) state(s = %0)",
     r"state 's' is not declared by the graph", "s = %0"),
    ("undeclared weight", NEG, "%0 = coreai.constant() {value = @w} : tensor<2xf32>",
     r"weight @w is not declared by the program", "coreai.constant"),
    ("dense shape", NEG, CONST.replace("[1.0, 2.0]", "[1.0, 2.0, 3.0]"),
     r"dense data of shape \[3\] does not match tensor<2xf32>", "dense"),
    ("ragged dense", NEG, CONST.replace("[1.0, 2.0]", "[[1.0], 2.0]"),
     r"dense data is not rectangular", "dense"),
    ("dense element", NEG, CONST.replace("2.0]", "two]"), r"bad float32 element 'two'", "dense"),
    ("dense range", NEG, "%0 = coreai.constant() {value = dense<300> : tensor<u8>} : tensor<u8>",
     r"a dense element is out of range for uint8", "dense"),
    ("nan bits", NEG, "%0 = coreai.constant() {value = dense<nan(0x1)> : tensor<f32>} : "
     "tensor<f32>",
     r"nan\(0x\.\.\.\) bits must encode a NaN", "dense"),
    ("dynamic dense", NEG, "%0 = coreai.constant() {value = dense<1.0> : tensor<?xf32>} : "
     "tensor<?xf32>", r"dense data needs a static type, got tensor<\?xf32>", "dense"),
    ("bad string", "(y = %0)", r'("\q" = %0)', r"bad string literal", r'"\q"'),
    ("region expected", NEG, "%0 = coreai.if(%p, %x) {then_branch = 1, else_branch = 2} : "
     "tensor<2xf32>", r"attribute 'then_branch' of coreai.if must be a region", "1,"),
    ("region capture", NEG, "%0 = coreai.if(%p, %x) {then_branch = graph(%arg0: tensor<2xf32>) "
     "{ coreai.yield(%x) }, else_branch = graph(%arg0: tensor<2xf32>) { coreai.yield(%arg0) }}"
     " : tensor<2xf32>", r"region uses %x of the enclosing graph", "%x) }"),
    ("unknown item", "  graph @main", "  function @main", r"expected 'weight', 'state', 'graph'",
     "function"),
    ("graph twice", "}\n}", "}\n  graph @main() { coreai.output() }\n}",
     r"graph @main is defined twice", "graph @main() {"),
]


@pytest.mark.parametrize("old, new, message, at", [c[1:] for c in ERRORS],
                         ids=[c[0] for c in ERRORS])
def test_parse_errors_name_the_problem_and_position(old, new, message, at):
    assert old in BASE
    text = BASE.replace(old, new, 1)
    with pytest.raises(ParseError, match=message) as info:
        parse(text)
    pos = len(text) if at is None else text.index(at)
    assert (info.value.line, info.value.column) == (text.count("\n", 0, pos) + 1,
                                                     pos - text.rfind("\n", 0, pos))
    assert str(info.value).startswith(f"line {info.value.line}, column {info.value.column}: ")


def test_base_text_is_valid():
    assert str(parse(BASE)) == BASE


def test_non_text_input():
    with pytest.raises(ParseError, match="not UTF-8"):
        parse(b"\xff\xfe")
    assert parse(BASE.encode()) == parse(BASE)
    with pytest.raises(TypeError, match="expects a str"):
        parse(42)


def nested_if_text(depth: int) -> str:
    """``main`` with ``depth`` if-regions nested in each other's then-branch."""
    sig = "(%arg0: tensor<2xf32>, %arg1: tensor<i1>)"

    def body(d: int, terminator: str) -> str:
        if d == 0:
            return f"{terminator}(%arg0, %arg1)"
        return (f"%0, %1 = coreai.if(%arg1, %arg0, %arg1) {{then_branch = graph{sig} {{ "
                f"{body(d - 1, 'coreai.yield')} }}, else_branch = graph{sig} {{ "
                f"coreai.yield(%arg0, %arg1) }}}} : tensor<2xf32>, tensor<i1>\n"
                f"{terminator}(%0, %1)")

    return f"coreai.program {{ graph @main{sig} {{ {body(depth, 'coreai.output')} }} }}"


def test_nesting_is_capped():
    p = parse(nested_if_text(MAX_NESTING - 2))
    assert parse(p.to_text()) == p
    with pytest.raises(ParseError, match="nested more than"):
        parse(nested_if_text(MAX_NESTING + 5))
    deep_list = "[" * 5000 + "1" + "]" * 5000
    with pytest.raises(ParseError, match="nested more than"):
        parse(BASE.replace("coreai.neg(%x)", "coreai.softmax(%x) {axis = " + deep_list + "}"))
    deep_dense = "dense<" + "[" * 5000 + "1.0" + "]" * 5000 + ">"
    with pytest.raises(ParseError, match="unexpected '\\['"):
        parse(BASE.replace(NEG, CONST.replace("dense<[1.0, 2.0]>", deep_dense)))


# -- fuzzing -------------------------------------------------------------------------------------

FUZZ_BASES = [
    showcase_program().to_text(full=True, locations=True),
    showcase_program().to_text(),
    *(build_sample(n).to_text(full=True, locations=True) for n in (
        "coreai.while", "coreai.invoke", "coreai.constant", "coreai.maxpool", "coreai.slice",
        "coreai.interpolate", "coreai.concat", "coreai.quantize")),
]
TOKEN = re.compile(r"\s+|[A-Za-z_][A-Za-z0-9_.$]*|\d+|\"(?:[^\"\\]|\\.)*\"|.", re.S)
VOCAB = ["{", "}", "(", ")", "[", "]", "<", ">", "%", "@", ":", "=", ",", '"', "?", "x", "0",
         "9", "-1", ".", "\n", " ", "tensor<", "dense<", "graph", "coreai.if", "%0", "%x", "f32",
         "i1", "nan", "inf", "loc(", "state", "none", "true", "\\", "//", "e9", "1e400"]


def assert_parses_or_fails_cleanly(text: str) -> None:
    try:
        p = parse(text)
    except ParseError as e:
        assert 1 <= e.line <= text.count("\n") + 1 and e.column >= 1
        return
    for g in p.graphs.values():
        assert verify_graph(g) == []
    assert parse(p.to_text(full=True, locations=True)) == p


@st.composite
def mutated_texts(draw):
    text = draw(st.sampled_from(FUZZ_BASES))
    for _ in range(draw(st.integers(1, 3))):
        tokens = [m.span() for m in TOKEN.finditer(text)]
        i, j = tokens[draw(st.integers(0, len(tokens) - 1))]
        k, m = tokens[draw(st.integers(0, len(tokens) - 1))]
        snippet = draw(st.sampled_from(VOCAB) | st.text(max_size=2))
        kind = draw(st.sampled_from(["delete char", "insert", "replace char", "delete token",
                                     "replace token", "duplicate token", "swap tokens"]))
        if kind == "delete char":
            text = text[:i] + text[i + 1:]
        elif kind == "insert":
            text = text[:i] + snippet + text[i:]
        elif kind == "replace char":
            text = text[:i] + snippet + text[i + 1:]
        elif kind == "delete token":
            text = text[:i] + text[j:]
        elif kind == "replace token":
            text = text[:i] + snippet + text[j:]
        elif kind == "duplicate token":
            text = text[:i] + text[i:j] + text[i:]
        elif i < k:
            text = text[:i] + text[k:m] + text[j:k] + text[i:j] + text[m:]
    return text


@settings(max_examples=200)  # cheap examples: more than the CI profile's default
@given(mutated_texts())
def test_mutated_text_parses_or_raises_parse_error(text):
    assert_parses_or_fails_cleanly(text)


def _tokens(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in TOKEN.finditer(text) if not m.group().isspace()]


def test_every_single_token_deletion():
    text = FUZZ_BASES[0]
    for i, j in _tokens(text):
        assert_parses_or_fails_cleanly(text[:i] + text[j:])


def test_every_truncation_is_a_clean_error():
    text = FUZZ_BASES[0]
    for i, j in _tokens(text):
        for cut in (i, (i + j) // 2):
            with pytest.raises(ParseError):
                parse(text[:cut])
