"""The two runtimes a bundle runs on, behind one step interface: the numpy reference runtime
(the saved program) and Apple's interpreter (the ``.aimodel``, loaded once)."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, Protocol

import numpy as np

from coreai_torch.llm.bundle import LLMBundle
from coreai_torch.llm.errors import BundleError

__all__ = ["RUNTIMES", "Backend", "open_backend"]

RUNTIMES = ("reference", "aimodel")


class Backend(Protocol):
    def new_state(self) -> dict[str, np.ndarray]: ...

    def step(self, entrypoint: str, ids: np.ndarray, start: int,
             state: MutableMapping[str, np.ndarray]) -> np.ndarray: ...

    def close(self) -> None: ...


def _inputs(ids: np.ndarray, start: int) -> dict[str, np.ndarray]:
    return {"input_ids": ids.reshape(1, -1).astype(np.int64),
            "cache_position": np.arange(start, start + ids.size, dtype=np.int64)}


class ReferenceBackend:
    """The bundle's ``program.coreai`` on the numpy reference runtime."""

    def __init__(self, bundle: LLMBundle) -> None:
        from coreai_core import load

        path = bundle.file("program")
        if path is None or not path.exists():
            raise BundleError(f"{bundle.path}: the bundle has no program to run")
        self.program = load(path)

    def new_state(self) -> dict[str, np.ndarray]:
        return {k: v.copy() for k, v in self.program.initial_state.items()}

    def step(self, entrypoint: str, ids: np.ndarray, start: int,
             state: MutableMapping[str, np.ndarray]) -> np.ndarray:
        out = self.program.run(_inputs(ids, start), entrypoint=entrypoint, state=state)
        return np.asarray(out["logits"])[0]

    def close(self) -> None:
        pass


class AimodelBackend:
    """The bundle's ``model.aimodel`` on Apple's interpreter, loaded once for every step."""

    def __init__(self, bundle: LLMBundle) -> None:
        path = bundle.file("aimodel")
        if path is None or not path.exists():
            why = bundle.manifest.get("aimodel_missing") or "it is missing"
            raise BundleError(f"{bundle.path}: the bundle has no .aimodel ({why}); run it "
                              f"with runtime='reference'")
        from coreai_torch.aimodel import load_aimodel

        self.shapes = {name: (tuple(s["shape"]), np.dtype(s["dtype"]))
                       for name, s in bundle.manifest["state"].items()}
        self.asset = load_aimodel(path)

    def new_state(self) -> dict[str, np.ndarray]:
        # the cache starts as zeros (transformers' StaticCache does)
        return {name: np.zeros(shape, dtype) for name, (shape, dtype) in self.shapes.items()}

    def step(self, entrypoint: str, ids: np.ndarray, start: int,
             state: MutableMapping[str, np.ndarray]) -> np.ndarray:
        out = self.asset.run(_inputs(ids, start), entrypoint=entrypoint, state=state)
        return np.asarray(out["logits"])[0]

    def close(self) -> None:
        close: Any = getattr(self.asset, "close", None)
        if close is not None:
            close()


def open_backend(bundle: LLMBundle, runtime: str) -> Backend:
    if runtime == "reference":
        return ReferenceBackend(bundle)
    if runtime == "aimodel":
        return AimodelBackend(bundle)
    raise ValueError(f"runtime={runtime!r}: pass one of {', '.join(RUNTIMES)}")
