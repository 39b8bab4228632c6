"""vLLM #45257 (max_num_seqs under async scheduling) and `per-iteration-count` (vLLM PR #45339's
rule), on vLLM's real V1 engine with the sim executor (issue #28 item 4).

`v1-async-seats`: 96 requests of max_tokens=1 (a P/D prefill node's load), max_num_seqs 4,
vLLM's async scheduling (its AsyncScheduler and the engine core's batch queue).
- `--async-scheduling` runs vLLM's AsyncScheduler, and every request still gets exactly its
  max_tokens through the sim's execute_model / sample_tokens split;
- under `off` the requests scheduled in step N hold their seats in step N+1, where vLLM passes
  them by: that step schedules fewer than max_num_seqs while requests wait (under-filled), and
  the seats reason says how many it scheduled; the stall watchdog rightly stays quiet;
- under `per-iteration-count` no step is under-filled and the run takes fewer steps, with
  vLLM's own seat limits back as they were after every step;
- switched on live, the under-filling ends at the switch;
- without async scheduling, or on the gpu backend (a real model runner's batch holds
  max_num_seqs requests, which the rule lets vLLM's running list outgrow), the policy is
  refused in one line, and on a release whose sim runs no async scheduling (0.18, 0.27, 0.29)
  both the option and the policy are.

Needs a V1 release and PYTHONHASHSEED=0 (`PYTHONHASHSEED=0 pytest tests/test_v1_async_seats.py`).
"""

from __future__ import annotations

from typing import Any

import pytest

from engine.adapters.versions import family as installed_family  # noqa: E402
from v1_required import RELEASE, needs_v1, require_hash_seed

pytestmark = needs_v1
require_hash_seed()

from engine.analysis.reasons import reason_text  # noqa: E402
from engine.analysis.seats import scheduled_count, underfill, underfilled  # noqa: E402
from engine.analysis.stall import StallWatch  # noqa: E402
from engine.analysis.summary import summarize  # noqa: E402
from engine.errors import ConfigError  # noqa: E402
from engine.session import Session  # noqa: E402
from engine.spec import preset_spec  # noqa: E402
from engine.stream.records import PolicyChanged, RunFinished, V1StepRecord  # noqa: E402

ASYNC_SIM = (RELEASE is not None and RELEASE.engine == "v1"
             and bool(getattr(installed_family(), "HAS_ASYNC_SIM", False)))  # the family says
"""The releases whose sim runs vLLM's async scheduling (0.33 and later)."""
needs_async = pytest.mark.skipif(not ASYNC_SIM, reason="the async sim needs vLLM 0.33+")
PRESET = "v1-async-seats"
SEATS = preset_spec(PRESET).max_num_seqs
REQUESTS = preset_spec(PRESET).requests

_runs: dict[str, tuple[list, Session]] = {}


def run(**over: Any) -> tuple[list, Session]:
    """Every item one in-process `v1-async-seats` run emits, and its session (cached)."""
    key = repr(sorted(over.items()))
    if key not in _runs:
        items: list = []
        session = Session(preset_spec(PRESET, **over).validated())
        session.subscribe(items.append)
        session.prepare()
        session.run()
        _runs[key] = (items, session)
    return _runs[key]


def steps_of(items: list) -> list[V1StepRecord]:
    return [i for i in items if type(i) is V1StepRecord]


@needs_async
def test_async_scheduling_runs_vllms_async_scheduler_and_every_request_gets_its_tokens():
    items, session = run()
    assert type(session.driver.scheduler).__name__ == "AsyncScheduler"
    steps = steps_of(items)
    assert next(i for i in items if type(i) is RunFinished).reason == "completed"
    assert steps[-1].finished_total == REQUESTS
    assert sum(s.generated_tokens for s in steps) == REQUESTS  # max_tokens=1 each, no more
    sync_items, sync = run(async_scheduling=False)
    assert type(sync.driver.scheduler).__name__ == "Scheduler"
    assert sum(s.generated_tokens for s in steps_of(sync_items)) == REQUESTS


@needs_async
def test_off_under_fills_while_the_seats_look_full():
    steps = steps_of(run()[0])
    under = [s for s in steps if underfilled(s, SEATS)]
    assert len(under) >= len(steps) // 3, (len(under), len(steps))
    for s in under:
        assert s.head_reason == "seats" and s.head_limit == SEATS
        assert scheduled_count(s) < SEATS and s.waiting > 0
        assert reason_text(s) == (f"seats (max_num_seqs {SEATS} reached, "
                                  f"{scheduled_count(s)} scheduled)")
    watch = StallWatch()
    for s in steps:
        watch.add(s)
    assert watch.longest is None  # vLLM counts every seat taken: not an admission stall
    summary = summarize(run()[0])  # what `run --json` says
    assert summary.underfilled_steps == len(under) and summary.longest_stall_steps == 0
    assert summary.longest_underfilled_steps == underfill(steps, SEATS).longest >= 1
    # without async scheduling nothing is in flight: the same load never under-fills
    sync = steps_of(run(async_scheduling=False)[0])
    assert underfill(sync, SEATS).steps == 0


@needs_async
def test_per_iteration_count_fills_every_step_and_puts_vllms_limits_back():
    items, session = run(policy="per-iteration-count")
    steps = steps_of(items)
    assert underfill(steps, SEATS).steps == 0 and summarize(items).underfilled_steps == 0
    off = steps_of(run()[0])
    assert len(steps) < len(off) * 0.6, (len(steps), len(off))
    assert steps[-1].sim_s < off[-1].sim_s
    assert steps[-1].finished_total == REQUESTS
    assert next(i for i in items if type(i) is RunFinished).reason == "completed"
    scheduler = session.driver.scheduler
    assert (scheduler.max_num_running_reqs, scheduler.max_num_active_reqs) == (SEATS, SEATS)
    # vLLM admitted while the seats it counts were held by finals in flight
    assert any(len(s.new) == SEATS and s.step > 0 for s in steps)


@needs_async
def test_switched_on_live_the_under_filling_ends_at_the_switch():
    items, _ = run(toggles=[(10, "per-iteration-count")])
    changes = [i for i in items if type(i) is PolicyChanged]
    assert [(c.step, c.new) for c in changes] == [(10, "per-iteration-count")]
    steps = steps_of(items)
    before = [s for s in steps if s.step < 10 and underfilled(s, SEATS)]
    after = [s for s in steps if s.step >= 10 and underfilled(s, SEATS)]
    assert len(before) >= 3 and after == [], ([s.step for s in before], [s.step for s in after])
    assert steps[-1].finished_total == REQUESTS


def test_without_async_scheduling_the_policy_is_refused_in_one_line():
    for over in ({"policy": "per-iteration-count"}, {"toggles": [(5, "per-iteration-count")]}):
        with pytest.raises(ConfigError, match="acts only under async scheduling") as caught:
            preset_spec(PRESET, async_scheduling=False, **over).validated()
        assert "\n" not in str(caught.value)
    # a real model runner's batch holds max_num_seqs requests: the rule never goes near one
    with pytest.raises(ConfigError, match="runs on the sim backend only"):
        preset_spec(PRESET, backend="gpu", policy="per-iteration-count").validated()


@pytest.mark.skipif(ASYNC_SIM, reason="this release's sim runs async scheduling")
def test_a_release_without_the_async_sim_refuses_it_in_one_line():
    session = Session(preset_spec(PRESET, max_steps=3).validated())
    with pytest.raises(ConfigError, match="--async-scheduling runs on the sim from vLLM 0.33"):
        session.prepare()
    session = Session(preset_spec(PRESET, max_steps=3, policy="per-iteration-count").validated())
    with pytest.raises(ConfigError, match="which the sim runs from vLLM 0.33") as caught:
        session.prepare()
    assert "\n" not in str(caught.value)
    assert session.driver is None  # refused before the engine was built


@needs_async
def test_asked_live_on_a_synchronous_engine_it_is_refused_and_nothing_changes():
    """A client's switch (the session's command) and engine.attach's (the hook's set_policy)
    are refused in one line on an engine without async scheduling, before anything changes:
    a recording never names a policy that cannot act."""
    items: list = []
    replies: list[tuple[bool, str]] = []
    session = Session(preset_spec(PRESET, async_scheduling=False, max_steps=5).validated())
    session.subscribe(items.append)
    session.prepare()
    with pytest.raises(ConfigError, match="acts only under async scheduling") as caught:
        session.driver.hook.set_policy("per-iteration-count")
    assert "\n" not in str(caught.value)
    session.set_policy("per-iteration-count",
                       done=lambda ok, text, step: replies.append((ok, text)))
    session.run()
    assert replies and replies[0][0] is False, replies
    assert "acts only under async scheduling" in replies[0][1]
    assert not [i for i in items if type(i) is PolicyChanged]
    assert str(session.driver.hook.policy) == "off"
    assert next(i for i in items if type(i) is RunFinished).reason == "max_steps"
