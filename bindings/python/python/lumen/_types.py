"""What runs give back: :class:`RunResult`, :class:`Event` and
:class:`RunStatus`.

They are plain Python objects made from the engine's JSON form (the one its
event log and server API use): the fields are snake_case attributes, and the
nested data (history steps, usage, event fields) stays as dicts and lists
with the JSON spelling, e.g. ``usage["inputTokens"]``.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Dict, List, Optional, Union


class RunStatus(str, enum.Enum):
    """How a run ended. A member equals its string: ``RunStatus.SUCCESS ==
    "success"``."""

    SUCCESS = "success"
    """The task was done (and the verifier, if any, agreed)."""
    FAILURE = "failure"
    """The model gave up, or a fatal error ended the run."""
    MAX_STEPS = "maxSteps"
    """The step budget (``max_steps``) ran out."""
    CANCELLED = "cancelled"
    """The run was cancelled."""
    BUDGET_EXCEEDED = "budgetExceeded"
    """A budget (``max_tokens``, ``max_cost``, ``max_failures``) was reached."""
    HANDOFF_TIMEOUT = "handoffTimeout"
    """The run handed the browser to a person and nobody finished in time."""

    def __str__(self) -> str:
        return self.value


def _status(value: str) -> Union[RunStatus, str]:
    try:
        return RunStatus(value)
    except ValueError:
        # A status newer than these bindings: keep its string.
        return value


@dataclasses.dataclass(frozen=True)
class RunResult:
    """The result of a run."""

    status: Union[RunStatus, str]
    """How it ended."""
    result: Optional[str]
    """The answer, or the reason for a failure, as the model gave it."""
    steps: int
    """Steps taken."""
    usage: Dict[str, Any]
    """Tokens used by every model call of the run (``inputTokens``,
    ``outputTokens``…)."""
    usage_by_source: Dict[str, Any]
    """The same tokens by where they were spent (main loop, verifier…)."""
    cost_usd: Optional[float]
    """Estimated cost at list prices, when the model's price is known."""
    history: List[Dict[str, Any]]
    """Every step: what the model saw, said and did, and what happened."""
    state: Optional[Dict[str, Any]]
    """The task state the model wrote, if any."""
    error: Optional[Dict[str, Any]]
    """The fatal error that ended the run (``code``, ``message``), if any;
    ``run()`` raises it as a :class:`~lumen.LumenError` instead."""
    cost_note: Optional[str] = None
    """Why ``cost_usd`` is missing, when the model registry could say (a
    model it does not know, or an unconfirmed price)."""

    @property
    def ok(self) -> bool:
        """Whether the run succeeded."""
        return self.status == RunStatus.SUCCESS

    @classmethod
    def _from_dict(cls, raw: Dict[str, Any]) -> RunResult:
        return cls(
            status=_status(raw["status"]),
            result=raw.get("result"),
            steps=raw.get("steps", 0),
            usage=raw.get("usage") or {},
            usage_by_source=raw.get("usageBySource") or {},
            cost_usd=raw.get("costUsd"),
            history=raw.get("history") or [],
            state=raw.get("state"),
            error=raw.get("error"),
            cost_note=raw.get("costNote"),
        )


@dataclasses.dataclass(frozen=True)
class Event:
    """Something that happened during a run, as it happened.

    ``type`` is one of the engine's event types: ``run_started``,
    ``step_started``, ``screenshot``, ``thinking``, ``action``,
    ``action_result``, ``action_blocked``, ``step_completed``, ``error``,
    ``done`` and others; ``data`` holds its fields with their JSON names
    (``data["call"]``, ``data["status"]``…).
    """

    type: str
    """The kind of event."""
    seq: int
    """Its position in the run's event log, from 0."""
    timestamp_ms: int
    """When it happened, in milliseconds since the Unix epoch."""
    data: Dict[str, Any]
    """Its fields."""

    @property
    def step(self) -> Optional[int]:
        """The step the event belongs to, if any."""
        step = self.data.get("step")
        return step if isinstance(step, int) else None

    @classmethod
    def _from_dict(cls, raw: Dict[str, Any]) -> Event:
        data = dict(raw)
        return cls(
            type=data.pop("type"),
            seq=data.pop("seq"),
            timestamp_ms=data.pop("timestampMs"),
            data=data,
        )
