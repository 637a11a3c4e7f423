"""Apple's Core AI interpreter driven for one asset: in this process, or in a child process.

:class:`LocalInterpreter` runs the asset here. Apple's runtime is asynchronous: the asset is
loaded inside an ``async with`` block and its functions are awaited; the block is kept open on
an event loop of the interpreter's own, run in the calling thread (Apple's runtime driven from
another thread aborts the process at exit now and then); inside a running event loop (a
notebook) a call runs that loop on a worker thread. A call at other input sizes than the last
loads the asset afresh (coreai-core 1.0.0b3 aborts the process now and then when a loaded model
runs at several sizes). While Apple loads, file descriptor 2 goes through a filter that drops
the line the interpreter announces each function with and passes everything else on at once,
so that a message Apple writes just before it aborts the process still reaches the console.

:class:`ChildInterpreter` runs a :class:`LocalInterpreter` in a child process (this file run
as a script: it imports only Apple's package and numpy, not torch), so that an abort or a crash
of Apple's becomes an exception carrying what Apple wrote to its stderr. Requests and replies
are pickled over the child's stdin and stdout (both ends are this module's own code). Apple's
names come from ``_apple.py``, the one door to Apple's package; the child imports that file
alone, not the ``coreai_torch`` package (so not torch).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

__all__ = ["ChildInterpreter", "LocalInterpreter", "Signature", "without_load_announcements"]

T = TypeVar("T")
# (inputs {name: (shape, dtype)}, outputs [name], state {name: (shape, dtype)}); a dynamic
# size is negative, a dtype is numpy's name
Signature = tuple[dict[str, tuple[tuple[int, ...], str]], list[str],
                  dict[str, tuple[tuple[int, ...], str]]]

# The line Apple's interpreter writes to stderr for each function it loads.
LOAD_ANNOUNCEMENT = re.compile(rb"^ODIE \[[^\]]*\]: Loading function '[^']*'\r?$")
_GREP_PATTERN = "^ODIE \\[[^]]*\\]: Loading function '[^']*'\r?$"
# fd 2 is the process's: one redirection at a time
_STDERR_LOCK = threading.Lock()
_KEPT_STDERR = 64 << 10  # the tail of a child's stderr an error message carries


@contextlib.contextmanager
def without_load_announcements() -> Iterator[None]:
    """Runs the block with file descriptor 2 going through ``grep -v`` (a process of its
    own, so what Apple writes is passed on even if Apple then aborts this process), which
    drops the interpreter's load announcements. Without grep, or when ``sys.stderr`` is not
    fd 2 (a notebook shows ``sys.stderr``), fd 2 is captured in a file and what is kept is
    written to ``sys.stderr`` after the block (then a message written right before an abort
    is lost)."""
    grep = shutil.which("grep")
    with _STDERR_LOCK:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            if grep is None or not _stderr_is_fd2():
                with _captured():
                    yield
                return
            read, write = os.pipe()
            try:
                filt = subprocess.Popen([grep, "-v", "-E", "--line-buffered", _GREP_PATTERN],
                                        stdin=read, stdout=saved, stderr=saved)
            finally:
                os.close(read)
            os.dup2(write, 2)
            os.close(write)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)  # closes the pipe's last write end: grep ends
                try:
                    filt.wait(10)
                except subprocess.TimeoutExpired:  # a child started in the block holds fd 2
                    filt.kill()
                    filt.wait()
        finally:
            os.close(saved)


def _stderr_is_fd2() -> bool:
    try:
        return sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):
        return False


@contextlib.contextmanager
def _captured() -> Iterator[None]:
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
                sink.seek(0)
                kept = [line for line in sink.read().splitlines(keepends=True)
                        if not LOAD_ANNOUNCEMENT.match(line.rstrip(b"\n"))]
                if kept:
                    sys.stderr.write(b"".join(kept).decode(errors="replace"))
    finally:
        os.close(saved)


def _adapter() -> Any:
    """``coreai_torch.aimodel._apple``; in the child process, the same file imported alone
    (its folder is on ``sys.path`` there)."""
    name = "coreai_torch.aimodel._apple" if __package__ else "_apple"
    return importlib.import_module(name)


def _size(s: Any) -> int:
    return -1 if s is None or s < 0 else int(s)


class LocalInterpreter:
    """The asset at ``path`` loaded on Apple's interpreter in this process."""

    def __init__(self, path: Path, filter_stderr: bool = True) -> None:
        apple = _adapter()
        self._ca, self._ndarray = apple.ca, apple.NDArray
        self.path = path
        self._filter = filter_stderr
        self._loop = asyncio.new_event_loop()
        self._executable: Any = None
        self._model: Any = None
        self._calls: dict[str, Any] = {}
        self._shapes: dict[str, tuple[tuple[int, ...], ...]] = {}
        self._signatures: dict[str, Signature] = {}
        self.function_names: list[str] = []
        try:
            self._open()
        except BaseException:
            self._loop.close()
            raise

    @property
    def closed(self) -> bool:
        return self._model is None

    def _quiet(self) -> contextlib.AbstractContextManager[None]:
        return without_load_announcements() if self._filter else contextlib.nullcontext()

    def _open(self) -> None:
        with self._quiet():
            self._model = self._await(self._enter())

    async def _enter(self) -> Any:
        self._executable = self._ca.AIModelAsset.load(self.path).executable(
            specialization_options=None)
        model = await self._executable.__aenter__()
        self.function_names = list(model.function_names)
        return model

    def _await(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._loop.run_until_complete(coro)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(self._loop.run_until_complete, coro).result()

    def _call(self, entrypoint: str) -> Any:
        call = self._calls.get(entrypoint)
        if call is None:
            with self._quiet():
                call = self._calls[entrypoint] = self._model.load_function(entrypoint)
        return call

    def signature(self, entrypoint: str) -> Signature:
        """The declared inputs, outputs and state of ``entrypoint`` (which must exist)."""
        found = self._signatures.get(entrypoint)
        if found is None:
            found = self._signatures[entrypoint] = self._signature(entrypoint)
        return found

    def _signature(self, entrypoint: str) -> Signature:
        desc = self._call(entrypoint).desc

        def types(describe: Any, names: Any) -> dict[str, tuple[tuple[int, ...], str]]:
            out = {}
            for n in names:
                d = describe(n)
                out[str(n)] = (tuple(_size(s) for s in d.shape), str(d.dtype))
            return out

        return (types(desc.input_descriptor, desc.input_names),
                [str(n) for n in desc.output_names],
                types(desc.state_descriptor, desc.state_names))

    def run(self, entrypoint: str, feeds: dict[str, Any], state: dict[str, Any],
            ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Run ``entrypoint`` on checked ``feeds`` and ``state`` (C-contiguous arrays of the
        declared types); returns its outputs and its new state (arrays of their own)."""
        import numpy as np

        shapes = tuple(a.shape for a in feeds.values())
        last = self._shapes.get(entrypoint)
        if last is not None and last != shapes:
            self._release()  # see the module docstring: a new size loads the asset afresh
            self._open()
        self._shapes[entrypoint] = shapes
        fn = self._call(entrypoint)
        outputs = self.signature(entrypoint)[1]
        buffers = {k: self._ndarray(a) for k, a in state.items()}  # updated in place

        async def call() -> dict[str, Any]:
            out = await fn(inputs={k: self._ndarray(a) for k, a in feeds.items()}, state=buffers)
            arrays = {}
            for name in outputs:
                value = out[name]
                if not isinstance(value, self._ndarray):
                    raise TypeError(f"{self.path}: output {name!r} is an image, not a tensor")
                arrays[name] = np.array(value.numpy())  # a copy: the model reuses its buffers
            return arrays

        arrays = self._await(call())
        return arrays, {k: np.array(b.numpy()) for k, b in buffers.items()}

    def _release(self) -> None:
        # in the order Apple's own ``async with`` block has: the model is released while its
        # functions are alive, then they go
        executable, calls = self._executable, list(self._calls.values())
        self._model, self._executable = None, None
        self._calls.clear()
        self._shapes.clear()
        self._await(executable.__aexit__(None, None, None))
        del calls

    def close(self) -> None:
        if self._model is None:
            return
        try:
            self._release()
        finally:
            self._loop.close()


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class ChildInterpreter:
    """The asset at ``path`` loaded on Apple's interpreter in a child process of its own.

    Every call is one request and one reply. If the child dies (Apple aborts or crashes),
    the call raises ``error(message, stderr)`` with what the child wrote to its stderr, and
    the interpreter is closed. What the child writes to stderr, except load announcements,
    is passed on to this process's ``sys.stderr`` as it comes.
    """

    def __init__(self, path: Path, error: type[Exception]) -> None:
        self.path = path
        self._error = error
        self._stderr = bytearray()
        self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._drain = threading.Thread(target=self._pass_on, args=(self._proc.stderr,),
                                       daemon=True)
        self._drain.start()
        self.function_names: list[str] = self._request("loading", ())

    @property
    def closed(self) -> bool:
        return self._proc is None

    def _pass_on(self, stream: IO[bytes]) -> None:
        for line in iter(stream.readline, b""):
            self._stderr += line
            del self._stderr[:-_KEPT_STDERR]
            if not LOAD_ANNOUNCEMENT.match(line.rstrip(b"\n")):
                with contextlib.suppress(Exception):
                    sys.stderr.write(line.decode(errors="replace"))
                    sys.stderr.flush()

    def _request(self, what: str, request: tuple[Any, ...]) -> Any:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise ValueError(f"{self.path} was closed; load it again with load_aimodel")
        try:
            if request:
                pickle.dump(request, proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                proc.stdin.flush()
            kind, value = pickle.load(proc.stdout)
        except (EOFError, OSError, pickle.UnpicklingError):
            self._died(what)
        if kind == "error":
            raise self._error(f"{self.path}: Apple's Core AI interpreter failed while "
                              f"{what}: {value}", self._stderr.decode(errors="replace"))
        return value

    def _died(self, what: str) -> Any:
        proc = self._proc
        assert proc is not None
        self._proc = None
        try:
            code = proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        self._drain.join(10)
        err = self._stderr.decode(errors="replace")
        kept = "\n".join(line for line in err.splitlines()
                         if not LOAD_ANNOUNCEMENT.match(line.encode())).strip()
        raise self._error(
            f"{self.path}: Apple's Core AI interpreter process died ({_describe_exit(code)}) "
            f"while {what}; it wrote: {kept or '(nothing)'}. The asset may be damaged "
            "(export it again) or hit a bug of Apple's interpreter", err)

    def signature(self, entrypoint: str) -> Signature:
        result: Signature = self._request(f"loading function {entrypoint!r}",
                                          ("signature", entrypoint))
        return result

    def run(self, entrypoint: str, feeds: dict[str, Any], state: dict[str, Any],
            ) -> tuple[dict[str, Any], dict[str, Any]]:
        result: tuple[dict[str, Any], dict[str, Any]] = self._request(
            f"running function {entrypoint!r}", ("run", entrypoint, feeds, state))
        return result

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            assert proc.stdin is not None
            proc.stdin.close()  # the child ends at the end of its input
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self._drain.join(10)
        if proc.stdout is not None:
            proc.stdout.close()


def _serve(path: str) -> None:
    """The child: load ``path``, then answer requests until stdin ends."""
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything native code prints goes to stderr, not into the replies
    requests = sys.stdin.buffer

    def reply(kind: str, value: Any) -> None:
        pickle.dump((kind, value), replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()

    try:
        interpreter = LocalInterpreter(Path(path), filter_stderr=False)
    except Exception as e:
        reply("error", f"{type(e).__name__}: {e}")
        return
    reply("ok", interpreter.function_names)
    while True:
        try:
            request = pickle.load(requests)
        except EOFError:
            break
        try:
            if request[0] == "signature":
                reply("ok", interpreter.signature(request[1]))
            else:
                reply("ok", interpreter.run(*request[1:]))
        except Exception as e:
            reply("error", f"{type(e).__name__}: {e}")
    interpreter.close()


if __name__ == "__main__":
    # this file's folder is first on sys.path when it runs as a script: only _apple.py is
    # imported from it (by _adapter), the other modules there are not top-level modules
    _adapter()
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent]
    _serve(sys.argv[1])
