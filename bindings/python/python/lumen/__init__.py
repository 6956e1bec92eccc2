"""Lumen, a vision-first browser agent engine, from Python.

An instruction and a start URL go in; Lumen drives a real Chromium in one
loop (screenshot, model, actions, screenshot) until the task is done::

    import lumen

    with lumen.Agent("anthropic/claude-sonnet-4-6", max_steps=20) as agent:
        result = agent.run("Find the cheapest book", "https://books.toscrape.com")
        print(result.status, result.result)

See docs/python.md in the repository for the options, streaming, asyncio
and errors.
"""

from ._agent import Agent
from ._native import __version__
from ._options import Handoff, Options, Policy
from ._types import Event, RunResult, RunStatus
from .errors import (
    AgentBusyError,
    BrowserDisconnectedError,
    CancelledError,
    ConfigError,
    InternalError,
    LumenError,
    MaxRetriesExceededError,
    ModelApiError,
    PolicyViolationError,
    SessionTimeoutError,
)

__all__ = [
    "Agent",
    "AgentBusyError",
    "BrowserDisconnectedError",
    "CancelledError",
    "ConfigError",
    "Event",
    "Handoff",
    "InternalError",
    "LumenError",
    "MaxRetriesExceededError",
    "ModelApiError",
    "Options",
    "Policy",
    "PolicyViolationError",
    "RunResult",
    "RunStatus",
    "SessionTimeoutError",
    "__version__",
]
