"""Errors are Python exceptions carrying Lumen's error codes."""

from __future__ import annotations

import pytest

import lumen
from lumen._testing import OfflineEnvironment

from conftest import agent_for


def test_a_bad_value_is_a_config_error_naming_the_option() -> None:
    with pytest.raises(lumen.ConfigError) as caught:
        lumen.Agent("anthropic/claude-sonnet-4-6", max_steps=0)
    assert caught.value.code == "CONFIG_ERROR"
    assert isinstance(caught.value, lumen.LumenError)
    assert "`max_steps` must be at least 1" in caught.value.message


def test_an_unknown_option_is_a_config_error_listing_the_options() -> None:
    with pytest.raises(lumen.ConfigError) as caught:
        lumen.Agent("anthropic/claude-sonnet-4-6", max_step=3)
    assert "unknown option `max_step`" in str(caught.value)
    assert "max_steps" in str(caught.value)


def test_a_value_of_the_wrong_type_is_a_config_error() -> None:
    with pytest.raises(lumen.ConfigError, match="max_cost"):
        lumen.Agent("anthropic/claude-sonnet-4-6", max_cost="lots")


def test_a_bad_secret_is_refused_without_quoting_it() -> None:
    with pytest.raises(lumen.ConfigError) as caught:
        lumen.Agent("anthropic/claude-sonnet-4-6", secrets={"pin": 918273})
    assert "918273" not in str(caught.value)


def test_a_provider_refusing_the_key_raises_model_api_error(env: OfflineEnvironment) -> None:
    env.fail_next(401, "authentication_error", "invalid x-api-key")
    with agent_for(env) as agent:
        with pytest.raises(lumen.ModelApiError) as caught:
            agent.run("Anything.", env.url("index.html"))
    error = caught.value
    assert error.code == "MODEL_API_ERROR"
    assert error.retryable is False
    assert "invalid x-api-key" in error.message
    assert error.result is not None and error.result.status == lumen.RunStatus.FAILURE


def test_an_unreachable_provider_raises_once_the_retries_ran_out() -> None:
    # Port 9 (discard) has no listener: every attempt is refused, and the
    # engine retries with backoff (about six seconds) before giving up.
    closed = "http://127.0.0.1:9"
    with lumen.Agent("anthropic/claude-sonnet-4-6", api_key="k", base_url=closed) as agent:
        with pytest.raises(lumen.MaxRetriesExceededError) as caught:
            agent.run("Anything.", "about:blank")
    assert caught.value.code == "MAX_RETRIES_EXCEEDED"
    assert "Connection refused" in caught.value.message


def test_a_closed_agent_refuses_to_run(env: OfflineEnvironment) -> None:
    agent = agent_for(env)
    agent.close()
    with pytest.raises(lumen.AgentBusyError, match="closed"):
        agent.run("Anything.")
