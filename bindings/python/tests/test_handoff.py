"""Handing a run to a person from Python: the run waits, the caller sees
the hand-over in the stream and on the agent, and finish_handoff() hands
back with a note the model then reads."""

from __future__ import annotations

import lumen
from lumen._testing import OfflineEnvironment

from conftest import agent_for


def test_finish_handoff_hands_back_and_the_model_reads_the_note(env: OfflineEnvironment) -> None:
    env.script([[{"request_human": "Enter the one-time code"}], [{"done": "signed in"}]])
    with agent_for(env, handoff={"timeout_secs": 60}) as agent:
        assert agent.handoff is None
        assert agent.finish_handoff() is False, "nothing waits yet"
        seen = []
        result = None
        for item in agent.stream("Sign in.", env.url("index.html")):
            if isinstance(item, lumen.RunResult):
                result = item
                break
            seen.append(item.type)
            if item.type == "waiting_for_human":
                assert item.data["trigger"] == "model"
                waiting = agent.handoff
                assert waiting is not None
                assert waiting["reason"] == "Enter the one-time code"
                assert agent.finish_handoff("typed it for you") is True
    assert result is not None and result.status == lumen.RunStatus.SUCCESS
    assert seen.index("waiting_for_human") < seen.index("human_done")
    assert any("typed it for you" in body for body in env.provider_requests())


def test_nobody_answering_ends_with_handoff_timeout(env: OfflineEnvironment) -> None:
    env.script([[{"request_human": "Solve the CAPTCHA"}]])
    with agent_for(env, handoff={"timeout_secs": 1}) as agent:
        result = agent.run("Sign in.", env.url("index.html"))
    assert result.status == lumen.RunStatus.HANDOFF_TIMEOUT
    assert "Solve the CAPTCHA" in (result.result or "")


def test_a_misspelt_handoff_key_is_a_config_error(env: OfflineEnvironment) -> None:
    try:
        agent_for(env, handoff={"timeout": 5})
    except lumen.ConfigError as e:
        assert "handoff" in str(e)
    else:
        raise AssertionError("a misspelt key was accepted")
