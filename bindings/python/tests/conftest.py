"""Shared fixtures: every test drives a real offline run (a site on
127.0.0.1, the scripted mock provider, a real Chromium found as the engine
finds it: ``LUMEN_CHROME``, ``CHROME_PATH``, ``/usr/bin/chromium``)."""

from __future__ import annotations

from typing import Any, Dict, Iterator

import pytest

import lumen
from lumen._testing import OfflineEnvironment, demo_environment


@pytest.fixture
def env() -> Iterator[OfflineEnvironment]:
    """The bakery site with nothing scripted yet."""
    with OfflineEnvironment() as environment:
        yield environment


@pytest.fixture
def demo() -> Iterator[OfflineEnvironment]:
    """The bakery site with the demo's order scripted."""
    with demo_environment() as environment:
        yield environment


def agent_for(env: OfflineEnvironment, **options: Any) -> lumen.Agent:
    """An agent pointed at the environment's mock provider."""
    settings: Dict[str, Any] = {"max_steps": 10, **env.agent_options(), **options}
    return lumen.Agent(env.model, **settings)
