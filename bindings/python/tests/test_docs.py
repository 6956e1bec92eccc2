"""The example of docs/python.md runs, as written, against the offline
environment (the provider's address and key come from the environment
variables the example relies on; the shop's address is the local site)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from lumen._testing import demo_environment

DOC = Path(__file__).resolve().parents[3] / "docs" / "python.md"


def example() -> str:
    text = DOC.read_text()
    blocks = re.findall(r"<!-- tested -->\n```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "docs/python.md marks exactly one example as tested"
    return blocks[0]


def test_the_example_is_about_ten_lines() -> None:
    lines = [line for line in example().splitlines() if line.strip()]
    assert 8 <= len(lines) <= 14, len(lines)


def test_the_docs_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    code = example()
    assert "https://bakery.example/" in code
    with demo_environment() as env:
        options = env.agent_options()
        monkeypatch.setenv("ANTHROPIC_API_KEY", options["api_key"])
        monkeypatch.setenv("ANTHROPIC_BASE_URL", options["base_url"])
        code = code.replace("https://bakery.example/", env.url("index.html"))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(DOC), "exec"), {"__name__": "docs_example"})
        assert env.pending() == 0
    printed = out.getvalue()
    assert "success" in printed, printed
