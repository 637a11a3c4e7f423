"""Exceptions raised by coreai_core. Each names the op and location involved when known."""

from __future__ import annotations

from typing import Any


class CoreAIError(Exception):
    """Base class of every coreai_core error."""


class TypeRuleError(CoreAIError, TypeError):
    """An op's operands or attributes do not satisfy its definition.

    Raised by type rules; builders and the verifier add the op name and location.
    """

    def __init__(self, message: str, *, op: str | None = None, location: Any = None) -> None:
        self.message = message
        self.op = op
        self.location = location
        super().__init__(self._format())

    def _format(self) -> str:
        where = ""
        if self.op:
            where = self.op
            if self.location is not None and getattr(self.location, "is_known", False):
                where += f" at {self.location}"
            where += ": "
        return where + self.message

    def located(self, op: str, location: Any) -> TypeRuleError:
        return type(self)(self.message, op=op, location=location)


class VerificationError(CoreAIError):
    """A program is ill-formed: every problem found is listed."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("program failed verification:\n  " + "\n  ".join(problems))


class ParseError(CoreAIError, ValueError):
    """Malformed text form, with the line and column of the problem."""

    def __init__(self, message: str, line: int, column: int) -> None:
        self.line = line
        self.column = column
        self.message = message
        super().__init__(f"line {line}, column {column}: {message}")


class RuntimeInputError(CoreAIError, ValueError):
    """Inputs given to ``Program.run`` do not match the graph's inputs."""


class MissingKernelError(CoreAIError, NotImplementedError):
    """Ops in a graph have no runtime kernel (all of them are listed)."""


class ArtifactError(CoreAIError, ValueError):
    """A saved program is truncated, tampered with or inconsistent."""
