"""Sphinx configuration of the documentation site (guides, tutorials, API reference).

Build from the repository root (the README names this command)::

    python -m sphinx -W --keep-going -c docs . build/docs

The source directory is the repository root so that ``docs/`` (guides, API reference) and
``tutorials/`` (notebooks, executed during the build) are one site without copies; only the
two folders are read (``include_patterns``). Notebook results are cached by jupyter-cache under
``build/.jupyter_cache``, so a rebuild re-executes only the notebooks that changed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # document the checkout being built, not another install

project = "coreai-torch"
author = "the coreai-torch authors"
copyright = "2026, the coreai-torch authors"

extensions = [
    "myst_nb",  # Markdown guides (MyST) and executed notebooks
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinxcontrib.mermaid",  # program.to_mermaid() pictures in the tutorials
]

root_doc = "docs/index"
include_patterns = ["docs/**", "tutorials/*.ipynb"]
exclude_patterns = ["docs/_build/**", "docs/_extra/**", "**/.ipynb_checkpoints/**"]
html_extra_path = ["_extra"]  # the site root's index.html sends a visitor to docs/index.html

# MyST: heading anchors so that guide links such as runtime.md#threads resolve
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
myst_fence_as_directive = ["mermaid"]  # a ```mermaid block (also a notebook's output) is drawn

# Notebooks: executed during the build, results cached; a failing cell fails the build.
nb_render_markdown_format = "myst"  # Markdown outputs (the mermaid pictures) as MyST
# the kernels inherit this: torch.export's internal deprecation warning (also filtered in
# pyproject.toml's pytest settings) is not the tutorials' output
# (PYTHONWARNINGS splits filters at commas: the message is matched by its prefix)
os.environ["PYTHONWARNINGS"] = "ignore:`isinstance(treespec:FutureWarning"
nb_execution_mode = os.environ.get("COREAI_DOCS_EXECUTE", "cache")
nb_execution_cache_path = str(ROOT / "build" / ".jupyter_cache")
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_allow_errors = False

# API reference: signatures and docstrings of the public names (``__all__``)
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_class_signature = "separated"
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# Cross-references are checked: every reference to one of our names must resolve. Names of
# other libraries (numpy, torch, attrs, Apple's coreai) are not documented here and would
# need the network (intersphinx) to resolve; they are accepted by this pattern.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(np|numpy|torch|attrs?|collections|typing|types|pathlib|os|io|enum|abc"
               r"|threading|contextvars|coreai|ml_dtypes|safetensors|onnx|fx|_?typeshed"
               r"|concurrent|argparse|dataclasses)\..*"),
    (r"py:.*", r"(NDArray|ArrayLike|DTypeLike|Path|PathLike|Callable|Iterable|Iterator|Mapping"
               r"|Sequence|MutableMapping|Any|Literal|Self|TypeAlias|ndarray|dtype|Tensor"
               r"|ExportedProgram|Node|GraphModule|Module|Generator|Lock|RLock|Enum|ContextVar"
               r"|TextIO|Buffer|Collection|Hashable|Set|MutableSet|AbstractSet|Never|NoReturn)"),
    # private helper types in public signatures (``coreai_core._ir.ProgramData``) and type
    # variables (``Registry[T]``) are implementation details, not pages of the reference
    (r"py:.*", r"(.*\._\w.*|coreai_core\.registry\.[TR]|.*\.P)"),
    # a type alias in Plan's signatures (the problems found while planning), not an API
    (r"py:class", r"coreai_core\.runtime\.plan\.Problems"),
    # Program's private base class (the IR data without the user-facing methods)
    (r"py:class", r"ProgramData"),
]

html_theme = "furo"
html_title = "coreai-torch"
html_show_sourcelink = False
html_theme_options = {"navigation_with_keys": True}
pygments_style = "friendly"
