"""A pytest plugin that runs vLLM's own scheduler tests with the observatory attached.

Why: the hooks (engine.adapters.v0.hooks) wrap methods of a live `vllm.core.scheduler.Scheduler`
instance. Under policy ``off`` they must change nothing vLLM's own tests can see, and under a
policy that acts (strict, watermark, reserve) every test that changes outcome must do so for a
reason the policy explains. This plugin lets vLLM's tests, unmodified, say which.

Loaded with ``-p engine.adapters.v0.upstream_plugin`` (the repo root on PYTHONPATH):

- ``--observatory-policy P`` attaches `hooks.attach(scheduler, P)` to every Scheduler built
  while the tests run (it wraps `Scheduler.__init__` for the session; without the option
  nothing is attached: bare vLLM);
- ``--observatory-outcomes FILE`` writes each test's outcome (passed, failed, skipped, error)
  and its failure's last line as JSON, {nodeid: [outcome, line]}.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("observatory")
    group.addoption("--observatory-policy", default=None,
                    help="attach the observatory's hooks with this policy to every Scheduler")
    group.addoption("--observatory-outcomes", default=None,
                    help="write {nodeid: [outcome, failure line]} as JSON to this file")


def pytest_configure(config: Any) -> None:
    policy = config.getoption("--observatory-policy")
    if policy is not None:
        config.pluginmanager.register(_Attacher(policy), "observatory-attacher")
    path = config.getoption("--observatory-outcomes")
    if path:
        config.pluginmanager.register(_Outcomes(Path(path)), "observatory-outcomes")


class _Attacher:
    """Wraps `Scheduler.__init__` for the session so that every instance gets the hooks."""

    def __init__(self, policy: str) -> None:
        from engine.policy import parse_policy

        self.policy = parse_policy(policy)
        self.attached = 0

    @pytest.hookimpl(hookwrapper=True)
    def pytest_sessionstart(self, session: Any):
        yield
        from vllm.core.scheduler import Scheduler

        from engine.adapters.v0.hooks import attach

        original = Scheduler.__init__
        plugin = self

        def init(scheduler: Any, *args: Any, **kwargs: Any) -> None:
            original(scheduler, *args, **kwargs)
            attach(scheduler, plugin.policy)
            plugin.attached += 1

        Scheduler.__init__ = init  # type: ignore[method-assign]
        self._restore = (Scheduler, original)

    def pytest_sessionfinish(self, session: Any) -> None:
        scheduler_class, original = getattr(self, "_restore", (None, None))
        if scheduler_class is not None:
            scheduler_class.__init__ = original

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.write_line(
            f"observatory: policy {self.policy} attached to {self.attached} schedulers")


class _Outcomes:
    """Collects each test's outcome; a test that fails in setup or teardown is an error."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.outcomes: dict[str, list[str]] = {}

    def pytest_runtest_logreport(self, report: Any) -> None:
        line = ""
        if report.failed and report.longrepr is not None:
            crash = getattr(report.longrepr, "reprcrash", None)
            if crash is not None:
                line = f"line {crash.lineno}: {crash.message.splitlines()[0]}"
            else:
                line = str(report.longrepr).splitlines()[-1]
        if report.when == "call" or report.skipped:
            if report.nodeid not in self.outcomes or report.failed:
                self.outcomes[report.nodeid] = [report.outcome, line]
        elif report.failed:
            self.outcomes[report.nodeid] = ["error", line]

    def pytest_sessionfinish(self, session: Any) -> None:
        self.path.write_text(json.dumps(self.outcomes, indent=1, sort_keys=True))
