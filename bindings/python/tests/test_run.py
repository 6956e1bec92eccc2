"""run(), arun() and stream() on the demo's order: the real engine and a
real Chromium, the model scripted."""

from __future__ import annotations

import asyncio

import lumen
from lumen._testing import DEMO_ANSWER, DEMO_INSTRUCTION, OfflineEnvironment

from conftest import agent_for


def assert_order_done(result: lumen.RunResult, demo: OfflineEnvironment) -> None:
    assert isinstance(result, lumen.RunResult)
    assert result.status == lumen.RunStatus.SUCCESS
    assert result.status == "success" and result.ok
    assert result.result == DEMO_ANSWER
    assert result.steps == 6
    assert result.usage["inputTokens"] > 0
    assert len(result.history) == 6
    assert result.error is None
    # Chromium really went to the contact page, and every scripted answer
    # was asked for by well-formed requests.
    assert "/contact.html" in demo.site_requests()
    assert demo.pending() == 0
    assert demo.violations() == []


def test_run_drives_the_demo_order_to_success(demo: OfflineEnvironment) -> None:
    with agent_for(demo) as agent:
        assert agent.model == demo.model
        result = agent.run(DEMO_INSTRUCTION, demo.url("index.html"))
    assert_order_done(result, demo)
    # What each step did, with what it changed on the page.
    typed = [
        (done["call"]["action"]["text"], done["execution"]["effect"]["focus"]["name"])
        for step in result.history
        for done in step["actions"]
        if done["call"]["action"]["type"] == "type"
    ]
    assert typed[:2] == [("Ada Lovelace", "Your name"), ("ada@example.com", "Email")], typed


def test_arun_is_awaitable_and_leaves_the_event_loop_free(demo: OfflineEnvironment) -> None:
    async def main() -> lumen.RunResult:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        with agent_for(demo, start_url=demo.url("index.html")) as agent:
            background = asyncio.ensure_future(ticker())
            result = await agent.arun(DEMO_INSTRUCTION)
            background.cancel()
        assert ticks > 5, "the event loop was blocked during the run"
        return result

    assert_order_done(asyncio.run(main()), demo)


def test_stream_yields_the_events_in_order_then_the_result(demo: OfflineEnvironment) -> None:
    with agent_for(demo) as agent:
        items = list(agent.stream(DEMO_INSTRUCTION, demo.url("index.html")))
    *events, result = items
    assert all(isinstance(e, lumen.Event) for e in events)
    assert_order_done(result, demo)
    assert events[0].type == "run_started"
    assert events[0].data["instruction"] == DEMO_INSTRUCTION
    assert events[-1].type == "done"
    assert events[-1].data["status"] == "success"
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and seqs[0] == 0
    started = [e.step for e in events if e.type == "step_started"]
    assert started == list(range(len(started))) and len(started) == 6
    # One result per scripted action, the final answer included.
    assert sum(e.type == "action_result" for e in events) == 10


def test_an_agent_runs_again_after_a_run(demo: OfflineEnvironment) -> None:
    with agent_for(demo) as agent:
        first = agent.run(DEMO_INSTRUCTION, demo.url("index.html"))
        demo.script([[{"done": "again"}]])
        second = agent.run("Say again.")
    assert first.ok and second.ok
    assert (second.result, second.steps) == ("again", 1)
