"""Exception classes of rods_env. Each message says what was wrong and what is allowed."""

from __future__ import annotations


class RodsError(Exception):
    """Base class of every error raised by rods."""


class ToolError(RodsError):
    """A tool call that cannot be carried out; becomes an error observation for the agent.

    Args:
        message: What was wrong, naming the value received.
        hint: What the agent can do instead (allowed values, which tool finds the right value).
    """

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} Hint: {self.hint}" if self.hint else self.message


class InvalidArgumentError(ToolError):
    """A tool argument is missing, unexpected, or of the wrong type or value."""


class UnknownToolError(ToolError):
    """The agent called a tool that does not exist or is not available now."""


class RuleViolationError(ToolError):
    """The call is well-formed but the domain policy forbids it in the current state."""


class NotFoundError(ToolError):
    """An id the agent passed names no record."""


class InternalToolError(ToolError):
    """A tool raised something other than a :class:`ToolError`: a bug in the tool, reported
    to the agent as an error (the call changed nothing) and logged."""


class ParseError(RodsError):
    """The agent's action could not be parsed into a message or tool calls."""


class TaskFileError(RodsError):
    """A task or pool file is unreadable: the message names the file, the line and the problem."""


class UnknownDomainError(RodsError):
    """A domain or environment id that is not registered."""


class ConfigError(RodsError):
    """A configuration value is invalid."""


class BenchmarkUnavailableError(ConfigError):
    """A benchmark's own package is not installed (the message says how to install it)."""


class TrainingError(RodsError):
    """A training run that cannot learn (every episode of a step failed, or nothing was
    trained for several steps although groups had a signal); the message names the cause."""


class Reject(Exception):
    """A synthesis stage's verdict that a candidate task is invalid (not an error of the
    caller: :mod:`rods_env.synthesis` counts the reasons).

    Args:
        reason: A short code counted in summaries (e.g. ``"signature_mismatch"``).
        detail: What exactly was wrong, for logs.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
