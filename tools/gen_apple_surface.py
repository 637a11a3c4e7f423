"""Record the public surface of Apple's ``coreai-torch`` for ``tests/test_apple_surface.py``.

Run it with the Python of a separate environment that has Apple's package (never this
project's)::

    python3 -m venv /work/venvs/apple
    /work/venvs/apple/bin/pip install 'torch==2.13.0' coreai-torch==0.4.3 coreai-core==1.0.0b3
    /work/venvs/apple/bin/python tools/gen_apple_surface.py tests/apple_surface.json

The public names of a module are its ``__all__`` when it has one, else every name without a
leading underscore that the module defines itself: classes and functions whose ``__module__``
is a ``coreai_torch`` module, values assigned at the module's top level (read from its source),
and the package's own submodules. For each name the record holds its kind, its
``inspect.signature`` (as text and as parameters: name, kind, default) and whether it is a
coroutine function; for a class defined in ``coreai_torch`` also its public members
(``__init__``, methods, class and static methods, properties, nested classes, enum members).
A class is recorded with its members once, in the module that defines it when that module is
walked, else in the first walked module that exports it.
"""

from __future__ import annotations

import ast
import enum
import importlib
import inspect
import json
import os
import pkgutil
import re
import sys
import typing
from pathlib import Path
from typing import Any

TOP_MODULES = ["coreai_torch", "coreai_torch.converter", "coreai_torch.composite_ops",
               "coreai_torch.externalize"]
DEBUGGING = "coreai_torch.debugging"
# names a module imports for type checking only, not part of what it offers
IGNORED = {"TYPE_CHECKING", "annotations"}


def modules() -> list[str]:
    package = importlib.import_module(DEBUGGING)
    found = sorted(f"{DEBUGGING}.{m.name}" for m in pkgutil.iter_modules(package.__path__))
    return [*TOP_MODULES, DEBUGGING, *found]


def _default(value: Any) -> str | None:
    if value is inspect.Parameter.empty:
        return None
    if callable(value) and not isinstance(value, (type, enum.Enum)):
        return "<callable>"  # a function's repr holds its address
    if isinstance(value, (set, frozenset)):  # their order depends on the hash seed
        items = ", ".join(sorted(repr(v) for v in value))
        return f"{type(value).__name__}({{{items}}})" if value else f"{type(value).__name__}()"
    text = repr(value)
    return "<factory>" if text == "<factory>" else text


def _signature(obj: Any) -> dict[str, Any]:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return {"signature": None, "parameters": None}
    params = [{"name": p.name, "kind": p.kind.name, "default": _default(p.default)}
              for p in sig.parameters.values()]
    return {"signature": re.sub(r" at 0x[0-9a-f]+", "", str(sig)), "parameters": params}


def _is_async(obj: Any) -> bool:
    return inspect.iscoroutinefunction(obj) or inspect.isasyncgenfunction(obj)


def _top_level_assignments(module: Any) -> set[str]:
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        return set()
    names: set[str] = set()
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign))
                   else [])
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def public_names(module: Any) -> list[str]:
    explicit = getattr(module, "__all__", None)
    if explicit:
        return [n for n in explicit if not n.startswith("_")]
    assigned = _top_level_assignments(module)
    out = []
    for name, value in vars(module).items():
        if name.startswith("_") or name in IGNORED:
            continue
        if inspect.ismodule(value):
            if value.__name__ == f"{module.__name__}.{name}":
                out.append(name)
        elif inspect.isclass(value) or inspect.isfunction(value):
            if getattr(value, "__module__", "") == module.__name__:
                out.append(name)
        elif name in assigned:
            out.append(name)
    return out


def _kind(value: Any) -> str:
    if inspect.ismodule(value):
        return "module"
    if isinstance(value, typing.TypeVar):
        return "typevar"
    if inspect.isclass(value):
        return "enum" if issubclass(value, enum.Enum) else "class"
    if inspect.isroutine(value):
        return "function"
    if callable(value) or typing.get_origin(value) is not None:
        return "alias"
    return "value"


def _entry(module: str, name: str, kind: str, obj: Any = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"module": module, "name": name, "kind": kind,
                             "is_async": False, "signature": None, "parameters": None}
    if kind in ("function", "method", "classmethod", "staticmethod", "class", "enum"):
        entry.update(_signature(obj))
        entry["is_async"] = _is_async(obj)
    return entry


def class_members(module: str, qualname: str, cls: type) -> list[dict[str, Any]]:
    out = []
    if issubclass(cls, enum.Enum):
        for member in cls:
            out.append({**_entry(module, f"{qualname}.{member.name}", "enum_member"),
                        "value": repr(member.value)})
        return out
    for name, raw in vars(cls).items():
        if name.startswith("_") and name != "__init__":
            continue
        where = f"{qualname}.{name}"
        if isinstance(raw, classmethod):
            out.append(_entry(module, where, "classmethod", getattr(cls, name)))
        elif isinstance(raw, staticmethod):
            out.append(_entry(module, where, "staticmethod", raw.__func__))
        elif isinstance(raw, property) or type(raw).__name__ == "cached_property":
            out.append(_entry(module, where, "property"))
        elif inspect.isfunction(raw):
            out.append(_entry(module, where, "method", raw))
        elif inspect.isclass(raw) and raw.__qualname__ == f"{cls.__qualname__}.{name}":
            out.append(_entry(module, where, "enum" if issubclass(raw, enum.Enum) else "class",
                              raw))
            out += class_members(module, where, raw)
        elif inspect.isclass(raw) or typing.get_origin(raw) is not None:
            out.append(_entry(module, where, "alias"))
    return out


def surface() -> list[dict[str, Any]]:
    names = modules()
    entries: list[dict[str, Any]] = []
    recorded: set[type] = set()
    for module_name in names:
        module = importlib.import_module(module_name)
        entries.append(_entry(module_name, "", "module"))
        for name in public_names(module):
            value = getattr(module, name)
            kind = _kind(value)
            entries.append(_entry(module_name, name, kind, value))
            defined_in = getattr(value, "__module__", "")
            walked_elsewhere = defined_in != module_name and defined_in in names
            if (kind in ("class", "enum") and value not in recorded and not walked_elsewhere
                    and defined_in.startswith("coreai_torch")):
                recorded.add(value)
                entries += class_members(module_name, name, value)
    return entries


def main(path: Path) -> None:
    import coreai_torch

    data = {"package": "coreai-torch", "version": coreai_torch.__version__,
            "generator": "tools/gen_apple_surface.py", "entries": surface()}
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{len(data['entries'])} entries written to {path}")


if __name__ == "__main__":
    if os.environ.get("PYTHONHASHSEED") != "0":  # set reprs in the signature text: one order
        os.execve(sys.executable, [sys.executable, *sys.argv],
                  {**os.environ, "PYTHONHASHSEED": "0"})
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/apple_surface.json"))
