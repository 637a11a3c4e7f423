"""Every public name of Apple's coreai-torch 0.4.3 exists here, call-compatible.

``tests/apple_surface.json`` is Apple's surface as ``tools/gen_apple_surface.py`` recorded it
from the package installed from the registry (in a separate environment): each module of
``coreai_torch``, ``coreai_torch.converter``, ``coreai_torch.composite_ops``,
``coreai_torch.externalize`` and ``coreai_torch.debugging``, each public name with its kind,
and each class's public members. A name passes when it exists in the same module, is of a
compatible kind, accepts every call Apple's accepts with the same meaning (see
``call_problems``: parameter names, positions, kinds and defaults) and is a coroutine function
exactly where Apple's is. The signature is read the way the generator reads it, so
the two sides are normalized alike.
"""

from __future__ import annotations

import enum
import importlib
import importlib.util
import inspect
import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECORD = json.loads((Path(__file__).resolve().parent / "apple_surface.json").read_text())


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_apple_surface",
                                                  ROOT / "tools" / "gen_apple_surface.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()
ENTRIES = RECORD["entries"]


def _id(entry: dict[str, Any]) -> str:
    return f"{entry['module']}:{entry['name'] or '<module>'}"


def _resolve(entry: dict[str, Any]) -> tuple[Any, Any]:
    """(the object, the raw class attribute or None) for a recorded name."""
    obj: Any = importlib.import_module(entry["module"])
    raw = None
    if not entry["name"]:
        return obj, None
    parts = entry["name"].split(".")
    for i, part in enumerate(parts):
        if i == len(parts) - 1 and inspect.isclass(obj):
            raw = next((vars(c)[part] for c in obj.__mro__ if part in vars(c)), None)
        if not hasattr(obj, part):
            raise AssertionError(f"{entry['module']} has no {'.'.join(parts[:i + 1])} "
                                 f"(Apple's is a {entry['kind']}"
                                 + (f" {entry['signature']}" if entry["signature"] else "")
                                 + ")")
        obj = getattr(obj, part)
    return obj, raw


POSITIONAL = ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")
VARIADIC = ("VAR_POSITIONAL", "VAR_KEYWORD")


def call_problems(apple: list[dict[str, Any]], ours: list[dict[str, Any]]) -> list[str]:
    """Why a call valid for Apple's parameters would fail or mean something else here.

    Apple's positional parameters come first here, in order and by name; a keyword-only one
    of Apple's may be keyword-only or positional here; a default of Apple's is the same
    default here; a parameter here that Apple lacks has a default (or is ``*args`` /
    ``**kwargs``). Apple's private parameters (a leading underscore) are not a caller's.
    """
    problems = []
    by_name = {p["name"]: p for p in ours}
    ours_positional = [p["name"] for p in ours if p["kind"] in POSITIONAL]
    apple_positional = [p["name"] for p in apple if p["kind"] in POSITIONAL]
    if ours_positional[:len(apple_positional)] != apple_positional:
        problems.append(f"positional parameters {ours_positional} here, Apple's "
                        f"{apple_positional}")
    for p in apple:
        if p["name"].startswith("_") and p["kind"] not in VARIADIC:
            continue
        mine = by_name.get(p["name"])
        if p["kind"] in VARIADIC:
            if not any(q["kind"] == p["kind"] for q in ours):
                problems.append(f"no {'*' if p['kind'] == 'VAR_POSITIONAL' else '**'}"
                                f"{p['name']} here")
            continue
        if mine is None:
            problems.append(f"no parameter {p['name']!r} here")
            continue
        if p["kind"] == "KEYWORD_ONLY" and mine["kind"] not in ("KEYWORD_ONLY",
                                                              "POSITIONAL_OR_KEYWORD"):
            problems.append(f"{p['name']!r} is {mine['kind']} here, Apple's is KEYWORD_ONLY")
        if p["default"] is not None and mine["default"] != p["default"]:
            problems.append(f"{p['name']!r} defaults to {mine['default']} here, Apple's to "
                            f"{p['default']}")
    apple_names = {p["name"] for p in apple}
    for q in ours:
        if q["name"] not in apple_names and q["default"] is None and q["kind"] not in VARIADIC:
            problems.append(f"{q['name']!r} is required here, Apple has no such parameter")
    return problems


def _check_callable(entry: dict[str, Any], obj: Any) -> None:
    ours = GEN._signature(obj)
    where = _id(entry)
    if entry["parameters"] is not None:
        assert ours["parameters"] is not None, f"{where}: no signature here"
        problems = call_problems(entry["parameters"], ours["parameters"])
        assert not problems, (f"{where}: {'; '.join(problems)} (here {ours['signature']}, "
                              f"Apple's {entry['signature']})")
    assert GEN._is_async(obj) == entry["is_async"], (
        f"{where}: Apple's is {'a coroutine function' if entry['is_async'] else 'synchronous'}"
        f", this one is {'a coroutine function' if GEN._is_async(obj) else 'synchronous'}")


@pytest.mark.parametrize("entry", ENTRIES, ids=[_id(e) for e in ENTRIES])
def test_apple_name_is_here(entry: dict[str, Any]) -> None:
    obj, raw = _resolve(entry)
    kind, where = entry["kind"], _id(entry)
    if kind == "module":
        assert inspect.ismodule(obj), where
    elif kind in ("class", "enum"):
        assert inspect.isclass(obj), f"{where} is not a class"
        if kind == "enum":
            assert issubclass(obj, enum.Enum), f"{where} is not an Enum"
        _check_callable(entry, obj)
    elif kind == "enum_member":
        assert isinstance(obj, enum.Enum), f"{where} is not an enum member"
        assert repr(obj.value) == entry["value"], f"{where}: value {obj.value!r}"
    elif kind in ("function", "method"):
        assert callable(obj), f"{where} is not callable"
        if kind == "method":
            assert inspect.isfunction(raw), f"{where} is not a plain method here"
        _check_callable(entry, obj)
    elif kind == "classmethod":
        assert isinstance(raw, classmethod), f"{where} is not a classmethod here"
        _check_callable(entry, obj)
    elif kind == "staticmethod":
        assert isinstance(raw, staticmethod), f"{where} is not a staticmethod here"
        _check_callable(entry, raw.__func__)
    elif kind == "property":
        assert isinstance(raw, property) or type(raw).__name__ == "cached_property", (
            f"{where} is not a property here")
    # typevar, alias and value: being there is what a caller relies on


def test_record_is_apples_release() -> None:
    assert RECORD["package"] == "coreai-torch" and RECORD["version"] == "0.4.3"
    modules = {e["module"] for e in ENTRIES if e["kind"] == "module"}
    assert {"coreai_torch", "coreai_torch.converter", "coreai_torch.composite_ops",
            "coreai_torch.externalize", "coreai_torch.debugging.validator",
            "coreai_torch.debugging.timing_diff"} <= modules
