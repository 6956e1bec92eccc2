"""Lumen's errors as Python exceptions.

Every exception the engine raises is a :class:`LumenError` whose ``code`` is
the stable code of the Rust error (the same code the server API and the
traces use). Catch ``LumenError`` for all of them, or a subclass for one
kind::

    try:
        agent.run("…")
    except lumen.ModelApiError as e:
        print(e.code, e.retryable)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional, Type

if TYPE_CHECKING:
    from ._types import RunResult


class LumenError(Exception):
    """A fatal error of Lumen.

    Attributes:
        code: the stable error code, e.g. ``"CONFIG_ERROR"``.
        message: what went wrong and, where it can, what to change.
        retryable: whether trying the same call again may succeed.
        result: for a run that started and then ended with this error, its
            result so far (steps, usage); otherwise ``None``.
    """

    code: str = "LUMEN_ERROR"

    def __init__(
        self,
        message: str,
        *,
        code: Optional[str] = None,
        retryable: bool = False,
        result: Optional[RunResult] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.retryable = retryable
        self.result = result

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


class ConfigError(LumenError):
    """An option or setting is invalid; the message names it."""

    code = "CONFIG_ERROR"


class ModelApiError(LumenError):
    """The model provider answered with an error, or could not be reached."""

    code = "MODEL_API_ERROR"


class BrowserDisconnectedError(LumenError):
    """The browser connection is gone (the browser crashed or was closed)."""

    code = "BROWSER_DISCONNECTED"


class SessionTimeoutError(LumenError):
    """A time limit ran out."""

    code = "SESSION_TIMEOUT"


class MaxRetriesExceededError(LumenError):
    """Retries of a retryable failure ran out."""

    code = "MAX_RETRIES_EXCEEDED"


class PolicyViolationError(LumenError):
    """The safety policy forbade an operation outside the loop (inside the
    loop a blocked action is reported to the model instead)."""

    code = "POLICY_VIOLATION"


class CancelledError(LumenError):
    """The run was cancelled (``Agent.cancel()``, Ctrl-C, a cancelled task)."""

    code = "CANCELLED"


class AgentBusyError(LumenError):
    """The agent is running a task already, or is closed."""

    code = "AGENT_BUSY"


class InternalError(LumenError):
    """The engine panicked: a bug in Lumen, caught before it could reach the
    interpreter. Please report it with the message."""

    code = "INTERNAL_ERROR"


_BY_CODE: Dict[str, Type[LumenError]] = {
    cls.code: cls
    for cls in (
        ConfigError,
        ModelApiError,
        BrowserDisconnectedError,
        SessionTimeoutError,
        MaxRetriesExceededError,
        PolicyViolationError,
        CancelledError,
        AgentBusyError,
        InternalError,
    )
}


def _from_native(
    code: str, message: str, retryable: bool, result: Optional[Dict[str, Any]]
) -> LumenError:
    """The exception for an error the native module reports (called from
    Rust); codes without a class of their own get ``LumenError``."""
    from ._types import RunResult

    cls = _BY_CODE.get(code, LumenError)
    parsed = RunResult._from_dict(result) if result is not None else None
    return cls(message, code=code, retryable=retryable, result=parsed)
