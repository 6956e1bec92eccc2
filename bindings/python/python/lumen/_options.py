"""The keyword options of :class:`lumen.Agent`, as a ``TypedDict`` for type
checkers. Each is optional; one left out (or given as ``None``) keeps the
engine's default. They are Lumen's run options (the ones ``lumen run``'s
flags and the server's run body set) spelled in snake_case, plus
``api_key``, ``base_url`` and ``headless``.
"""

from __future__ import annotations

from typing import Dict, List, Literal, TypedDict, Union


class Policy(TypedDict, total=False):
    """The safety policy: Lumen's policy options in snake_case."""

    allowed_domains: List[str]
    """Sites the agent may visit (empty: any site not blocked)."""
    blocked_domains: List[str]
    """Sites the agent must never reach; a block wins over an allow."""
    allowed_actions: List[str]
    """Browser actions the agent may use, by type (``click``…)."""
    allowed_schemes: List[str]
    """URL schemes allowed on top of http and https."""
    block_private_network: bool
    """Refuse private, loopback and link-local addresses."""
    allowed_private_hosts: List[str]
    blocked_local_ports: List[int]
    allow_model_javascript: bool
    """Let the model run JavaScript of its own in the page (off)."""


class Handoff(TypedDict, total=False):
    """When a run hands the browser to a person, and how long it waits."""

    timeout_secs: int
    """How long to wait (default 600); then status ``handoffTimeout``."""
    urls: List[str]
    """Hand over when a step starts on a matching URL (``*`` matches
    anything), once per URL."""
    before_payment: bool
    """Hand over instead of a click or Enter on a page with a payment field."""
    after_rejections: int
    """Hand over once the verifier rejected this many answers."""


class Options(TypedDict, total=False):
    """Every keyword option of :class:`lumen.Agent`."""

    # The model provider (the bindings' own options).
    api_key: str
    """The provider's API key; else its environment variable
    (``ANTHROPIC_API_KEY``…). Never logged."""
    base_url: str
    """The provider's base URL (a proxy, a local server)."""
    headless: bool
    """Run the launched Chromium headless (default ``True``)."""

    # The task.
    start_url: str
    """The page a run opens when ``run()`` is given none."""
    planner_model: str
    fallback_models: List[str]
    """Models to switch to, in order, when the model is retired, not found
    or overloaded after every retry."""
    tools: Literal["computer", "browser"]
    effort: Literal["minimal", "low", "medium", "high", "xhigh", "max"]
    thinking_budget: int
    system_prompt: str
    mode: Literal["agent", "plan", "exec"]
    attempts: int

    # Budgets.
    max_steps: int
    """The step budget (default 30); the run ends with status ``maxSteps``."""
    max_tokens: int
    """Stop (status ``budgetExceeded``) once the run used this many tokens."""
    max_cost: float
    """Stop once the estimated cost reaches this many US dollars."""
    max_failures: int
    """Stop after this many actions in a row failed."""
    max_actions_per_turn: int
    """The most actions one model turn may ask for (1-1000, default 25); the
    rest are answered ``ok: false`` without running."""
    max_wait: int
    """The longest one model call waits in all before its retries, seconds."""

    # Checks and memory.
    verify_url: str
    verifier_model: str
    confidence_gate: int
    checkpoint_interval: int
    site_tips: bool
    workflows: Union[bool, str]
    cache: Union[bool, str]

    # The browser.
    cdp_url: str
    browserbase: bool
    viewport: str
    screenshot_format: Literal["jpeg", "png"]
    screenshot_quality: int
    screenshot_max_edge: int
    images_kept: int
    download_dir: Union[bool, str]
    upload_dir: Union[bool, str]

    # Safety.
    policy: Policy
    """Allowed and blocked sites, actions and schemes."""
    secrets: Dict[str, str]
    """Values the model may type as ``<secret:NAME>`` without ever seeing
    them; they never reach the model, the logs or the result."""
    secret_domains: Dict[str, List[str]]
    """Secret name → the sites it may be typed on."""

    # A person.
    handoff: Handoff
    """Hand the browser to a person when the model asks or a trigger
    fires; :meth:`Agent.finish_handoff` hands it back. See docs/handoff.md."""
