"""Budgets, the policy and secrets, given as options, take effect."""

from __future__ import annotations

import json
from pathlib import Path

import lumen
from lumen._testing import DEMO_INSTRUCTION, OfflineEnvironment

from conftest import agent_for


def test_max_steps_ends_the_run_with_the_max_steps_status(demo: OfflineEnvironment) -> None:
    with agent_for(demo, max_steps=2) as agent:
        result = agent.run(DEMO_INSTRUCTION, demo.url("index.html"))
    assert result.status == lumen.RunStatus.MAX_STEPS
    assert result.steps == 2
    assert demo.pending() == 4


def test_max_tokens_ends_the_run_with_the_budget_status(demo: OfflineEnvironment) -> None:
    # Each scripted answer bills 1,000 input tokens: the budget is spent
    # after the second model call.
    with agent_for(demo, max_tokens=1500) as agent:
        result = agent.run(DEMO_INSTRUCTION, demo.url("index.html"))
    assert result.status == lumen.RunStatus.BUDGET_EXCEEDED
    assert result.steps == 2
    assert "1500" in (result.result or "").replace(",", "")


def test_the_policy_blocks_a_navigation_to_a_blocked_site(env: OfflineEnvironment) -> None:
    env.script([[{"navigate": "https://blocked.example/"}], [{"done": "gave up"}]])
    policy = {"blocked_domains": ["blocked.example"]}
    with agent_for(env, policy=policy) as agent:
        items = list(agent.stream("Open the blocked site.", env.url("index.html")))
    *events, result = items
    blocked = [e for e in events if e.type == "action_blocked"]
    assert len(blocked) == 1, [e.type for e in events]
    assert "blocked.example" in blocked[0].data["reason"]
    assert result.ok and result.result == "gave up"


SIGN_IN = """<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"></head>
<body><form action="signed-in.html" method="get">
<input name="code" autofocus></form></body></html>
"""


def test_a_secret_reaches_the_page_but_never_the_model_or_the_result(tmp_path: Path) -> None:
    (tmp_path / "sign-in.html").write_text(SIGN_IN)
    (tmp_path / "signed-in.html").write_text("<!doctype html><p>Welcome</p>")
    value = "tok-7f3a-SECRET-91"
    with OfflineEnvironment(str(tmp_path)) as env:
        env.script(
            [
                [{"type": "<secret:code>"}, {"key": "Return"}],
                [{"done": "Signed in."}],
            ]
        )
        with agent_for(env, secrets={"code": value}) as agent:
            items = list(agent.stream("Sign in with the code.", env.url("sign-in.html")))
        # The page received the real value: the form sent it in its URL.
        assert f"/signed-in.html?code={value}" in env.site_requests()
        seen_by_model = "\n".join(env.provider_requests())
    *events, result = items
    assert result.ok
    assert value not in seen_by_model
    assert value not in json.dumps([e.data for e in events])
    assert value not in json.dumps(result.history) + (result.result or "")
    assert "<secret:code>" in json.dumps(result.history)
