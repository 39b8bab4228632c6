"""A pytest plugin that attaches the observatory to every V1 Scheduler vLLM's own tests build.

Load it into a run of vLLM 0.33.0's `tests/v1/core/test_scheduler.py` (see run.py):

    PYTHONPATH=REPO:REPO/tests/fidelity_v1 pytest -p observatory_fidelity_plugin \
        --noconftest --observatory-policy off TEST_FILE

At start it wraps `__init__` of `vllm.v1.core.sched.scheduler.Scheduler` and of every subclass
the release defines in that package (AsyncScheduler; DiffusionScheduler from 0.33). When the outermost of those returns (a
subclass's own `__init__` has finished too), the instance is attached with the public
`engine.attach(scheduler, policy)`, as a user attaches a V1 Scheduler: the policy hooks
(engine/adapters/v1/hooks.py) and the tap that builds a step record at every
`update_from_output` (engine/adapters/v1/attach.py). Nothing else of vLLM or of its tests
changes. The observatory's guard keeps a failing hook from harming vLLM (it detaches and warns),
so a test could pass over a broken hook: the plugin lists every test during which a guard broke.

vLLM's top-level `tests/conftest.py` imports test-only packages (tblib, HF runners) that a
runtime install does not have, so the run skips conftests (`--noconftest`) and this plugin
provides the two fixtures of it that the scheduler tests use, as vLLM defines them:
`temporary_enable_log_propagate` and `caplog_vllm`.

At the end it prints one line, `observatory fidelity: attached to N of M schedulers (policy P)`,
which run.py checks: a run in which nothing was attached proves nothing.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any, Callable

import pytest

_state: dict[str, Any] = {"built": 0, "attached": 0, "handles": [], "broken": []}
_depth = threading.local()
_policy = "off"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--observatory-policy", default=None,
                     help="attach the observatory with this V1 policy to every Scheduler "
                          "(off, full-isl, whole-context, least-computed, A+B); default: "
                          "do not attach (vLLM bare)")


def _all_subclasses(cls: type) -> list[type]:
    out = [cls]
    for sub in cls.__subclasses__():
        out.extend(c for c in _all_subclasses(sub) if c not in out)
    return out


def _wrap(cls: type, attach: Callable[[Any, str], Any]) -> None:
    original = cls.__dict__.get("__init__")
    if original is None:  # inherits its parent's (already wrapped) __init__
        return

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, N807
        depth = getattr(_depth, "n", 0)
        _depth.n = depth + 1
        try:
            original(self, *args, **kwargs)
        finally:
            _depth.n = depth
        if depth == 0:  # the outermost __init__ of this instance has returned
            _state["built"] += 1
            _state["handles"].append(attach(self, _policy))
            _state["attached"] += 1

    cls.__init__ = __init__


def pytest_configure(config: pytest.Config) -> None:
    global _policy
    policy = config.getoption("--observatory-policy")
    config.addinivalue_line("markers", "optional: vLLM's optional tests")
    # vLLM's CPU platform, bare and attached alike, as the observatory's sims run it: a release
    # that does not choose it from VLLM_TARGET_DEVICE (0.18) gets it from its family
    from engine.adapters.v1.platform import install_sim_platform

    install_sim_platform()
    if policy is None:
        return
    _policy = policy
    import importlib
    import pkgutil

    import vllm.v1.core.sched as sched
    from vllm.v1.core.sched.scheduler import Scheduler

    # import every subclass the release has: every module of vLLM's scheduler package (0.29
    # has AsyncScheduler; 0.33 adds DiffusionScheduler)
    for module in pkgutil.iter_modules(sched.__path__, f"{sched.__name__}."):
        importlib.import_module(module.name)

    from engine import attach

    for cls in _all_subclasses(Scheduler):
        _wrap(cls, attach)
    config._observatory_policy = policy  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Note the test if any attached scheduler's guard broke while it ran."""
    yield
    handles = _state["handles"]
    if any(h.tap.guard.broken for h in handles):
        _state["broken"].append(item.nodeid)
    handles.clear()  # each test builds its own schedulers


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int,
                            config: pytest.Config) -> None:
    policy = getattr(config, "_observatory_policy", None)
    if policy is not None:
        terminalreporter.write_line(
            f"observatory fidelity: attached to {_state['attached']} of {_state['built']} "
            f"schedulers (policy {policy}), a hook failed in {len(_state['broken'])} tests")
        for nodeid in _state["broken"]:
            terminalreporter.write_line(f"observatory fidelity: hook failed in {nodeid}")


@pytest.fixture()
def temporary_enable_log_propagate(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM 0.33's tests/conftest.py fixture of the same name, as it defines it."""
    from vllm.logger import DEFAULT_LOGGING_CONFIG

    monkeypatch.setitem(DEFAULT_LOGGING_CONFIG["loggers"]["vllm"], "propagate", True)
    monkeypatch.setattr(logging.getLogger("vllm"), "propagate", True)


@pytest.fixture()
def caplog_vllm(temporary_enable_log_propagate: None, caplog: pytest.LogCaptureFixture):
    """vLLM 0.33's tests/conftest.py fixture of the same name, as it defines it."""
    with caplog.at_level(logging.INFO):
        yield caplog
