"""Offline doubles for tests: not part of the public API.

:class:`OfflineEnvironment` serves a site on 127.0.0.1 (by default the
bakery of ``lumen demo``) and starts a mock model provider that speaks
Anthropic's Messages wire format and answers with turns you script. An
:class:`~lumen.Agent` pointed at it (``env.model`` and
``**env.agent_options()``) runs the real engine in a real Chromium with no
network and no API key::

    from lumen._testing import demo_environment

    with demo_environment() as env:
        agent = lumen.Agent(env.model, **env.agent_options())
        result = agent.run(DEMO_INSTRUCTION, env.url("index.html"))

A scripted turn is a list of steps, each a dict with one key:
``{"navigate": url}``, ``{"key": "Tab"}`` (xdotool key names),
``{"type": "text"}``, ``{"click": [x, y]}`` (CSS pixels) or
``{"done": "answer"}``. Chromium is found as the engine finds it
(``LUMEN_CHROME``, ``CHROME_PATH``, then the usual install paths).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from . import _native

DEMO_INSTRUCTION = (
    "Open the bakery's contact page and send a cake order as Ada Lovelace "
    "(ada@example.com): one chocolate cake for Saturday."
)
"""The task of the demo's trajectory (the same as ``lumen demo``'s)."""

DEMO_ANSWER = "Sent: one chocolate cake for Saturday, for Ada Lovelace."
"""The answer the demo's trajectory ends with."""


class OfflineEnvironment:
    """A site and a scripted mock provider on 127.0.0.1; see the module."""

    def __init__(self, site_dir: Optional[str] = None) -> None:
        self._native = _native.MockEnvironment(site_dir)

    @property
    def model(self) -> str:
        """The model to give the agent (the mock speaks its protocol)."""
        return self._native.model

    def agent_options(self) -> Dict[str, Any]:
        """``api_key`` and ``base_url`` pointing an agent at the mock."""
        return {"api_key": self._native.api_key, "base_url": self._native.base_url}

    def url(self, path: str) -> str:
        """The URL of ``path`` on the site."""
        return self._native.url(path)

    def script(self, turns: List[List[Dict[str, Any]]]) -> None:
        """Queues model turns, answered in order one per model call."""
        self._native.script(turns)

    def fail_next(self, status: int, kind: str, message: str) -> None:
        """Makes the next model call fail with this provider error."""
        self._native.fail_next(status, kind, message)

    def pending(self) -> int:
        """Scripted answers not asked for yet."""
        return self._native.pending()

    def site_requests(self) -> List[str]:
        """Every request the site served (``/path`` or ``/path?query``)."""
        return self._native.site_requests()

    def provider_requests(self) -> List[str]:
        """The JSON body of every request the model provider received."""
        return self._native.provider_requests()

    def violations(self) -> List[str]:
        """Requests the mock found malformed for the provider's API."""
        return self._native.violations()

    def script_demo_order(self) -> None:
        """Queues the demo's order on the bakery site, by keyboard: open the
        contact page, fill name, email and message, send, answer."""
        self.script(demo_turns(self.url("contact.html")))

    def close(self) -> None:
        """Stops the site and the mock."""
        self._native.close()

    def __enter__(self) -> OfflineEnvironment:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def demo_turns(contact_url: str) -> List[List[Dict[str, Any]]]:
    """The demo's trajectory. The contact page's first focusable element is
    the name field, so Tab walks name, email, message and the Send button."""
    return [
        [{"navigate": contact_url}],
        [{"key": "Tab"}, {"type": "Ada Lovelace"}],
        [{"key": "Tab"}, {"type": "ada@example.com"}],
        [{"key": "Tab"}, {"type": "One chocolate cake for Saturday, please."}],
        [{"key": "Tab"}, {"key": "Return"}],
        [{"done": DEMO_ANSWER}],
    ]


def demo_environment() -> OfflineEnvironment:
    """The bakery site with the demo's order scripted."""
    env = OfflineEnvironment()
    env.script_demo_order()
    return env
