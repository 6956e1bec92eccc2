"""The :class:`Agent`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterator, Optional, Union

from . import _native
from ._types import Event, RunResult

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._options import Options


class Agent:
    """A browser agent: a model driving a real Chromium until the task is
    done.

    ``model`` names the model (``"anthropic/claude-sonnet-4-6"``,
    ``"openai/…"``, ``"google/…"``, or a model of an OpenAI-compatible
    server at ``base_url``); ``options`` are the keyword options of
    :class:`lumen.Options` (budgets, policy, secrets, browser…). Every
    option is checked here: a bad one raises :class:`~lumen.ConfigError`
    naming it. Nothing connects until the first run.

    Each run is a new task in the same browser (which stays where the last
    run left it). One run at a time: a second call while a run goes on
    raises :class:`~lumen.AgentBusyError`. Use the agent as a context
    manager, or call :meth:`close`, to close the browser.

    A run that ends with a fatal error (the provider refused the key, the
    browser crashed) raises the :class:`~lumen.LumenError` for its code,
    with the result so far as ``.result``. Budgets and a model giving up are
    not errors: they come back as the result's ``status``.
    """

    def __init__(self, model: str, **options: Unpack[Options]) -> None:
        self._native = _native.Agent(model, **options)

    @property
    def model(self) -> str:
        """The model id."""
        return self._native.model

    def run(self, instruction: str, start_url: Optional[str] = None) -> RunResult:
        """Runs a task to its end and returns its result.

        ``start_url`` is opened first (else the ``start_url`` option, else
        the page the browser shows). Blocks the calling thread, not the
        others; Ctrl-C cancels the run and raises ``KeyboardInterrupt``.
        """
        return RunResult._from_dict(self._native.run(instruction, start_url))

    async def arun(self, instruction: str, start_url: Optional[str] = None) -> RunResult:
        """:meth:`run` for asyncio: the run goes on in Lumen's own threads
        while the event loop is free. Cancelling the awaiting task cancels
        the run."""
        raw = await self._native.arun(instruction, start_url)
        return RunResult._from_dict(raw)

    def stream(
        self, instruction: str, start_url: Optional[str] = None
    ) -> Iterator[Union[Event, RunResult]]:
        """Runs a task and yields its :class:`Event`\\ s as they happen, then
        its :class:`RunResult` as the last item.

        The run starts at once, in agent mode. Leaving the loop early (or
        closing the iterator) cancels the run.
        """
        return _iterate(self._native.stream(instruction, start_url))

    @property
    def handoff(self) -> Optional[Dict[str, Any]]:
        """The hand-over the running task waits on (``{"id", "reason",
        "trigger"}``), or ``None``. A task hands over only with the
        ``handoff`` option; see docs/handoff.md."""
        return self._native.handoff

    def finish_handoff(self, note: Optional[str] = None) -> bool:
        """Says the person is done with the hand-over the task waits on
        (after acting in the browser, e.g. through ``lumen serve``'s live
        view, or when nothing was needed); ``note`` goes to the model.
        Returns ``False`` when nothing waits. Call it from another thread
        than the one in :meth:`run`, or while iterating :meth:`stream`."""
        return self._native.finish_handoff(note)

    def cancel(self) -> None:
        """Cancels the running task, which ends with status ``cancelled``.
        The agent cannot run again after a cancel."""
        self._native.cancel()

    def close(self) -> None:
        """Closes the browser. The agent cannot run again."""
        self._native.close()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Agent(model={self.model!r})"


def _iterate(native: _native.Stream) -> Iterator[Union[Event, RunResult]]:
    finished = False
    try:
        for kind, raw in native:
            if kind == "event":
                yield Event._from_dict(raw)
            else:
                finished = True
                yield RunResult._from_dict(raw)
    finally:
        if not finished:
            native.cancel()
