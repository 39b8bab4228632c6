"""#31731's head-of-line blocking and `skip-and-continue` (vLLM PR #35852's waiting-phase rule),
on vLLM's real V1 engine with the sim executor (issue #28 item 4).

`v1-head-of-line`: vLLM's full-ISL check refuses the second request's whole context while the
first runs, and vLLM's scan stops there, step after step, with lighter requests behind it.
- under `off` the watchdog sees a stall from the first steps, naming the blocks the head needs;
- under `skip-and-continue` vLLM's scan passes the refused request by, the lighter ones are
  admitted past it, no stall is seen, and every request still finishes (the head is tried
  again once its blocks are free, and vLLM decides);
- switched on live, the stall ends within a few steps of the switch (vLLM refuses the head
  once more under the policy, and its scan passes it by from the next step);
- on a release whose scan has no skip path (0.18, 0.29) the policy is refused in one line,
  before the engine is built and when asked for live, and the run goes on.

Needs a V1 release and PYTHONHASHSEED=0 (`PYTHONHASHSEED=0 pytest tests/test_v1_head_of_line.py`).
"""

from __future__ import annotations

from typing import Any

import pytest

from engine.adapters.versions import family as installed_family  # noqa: E402
from v1_required import RELEASE, needs_v1, require_hash_seed

pytestmark = needs_v1
require_hash_seed()

from engine.analysis.stall import StallWatch  # noqa: E402
from engine.errors import ConfigError  # noqa: E402
from engine.session import Session  # noqa: E402
from engine.spec import preset_spec  # noqa: E402
from engine.stream.records import PolicyChanged, RunFinished, V1StepRecord  # noqa: E402

SCAN_SKIP = (RELEASE is not None and RELEASE.engine == "v1"
             and bool(getattr(installed_family(), "HAS_SCAN_SKIP", False)))  # the family says
"""The releases whose waiting scan can pass a request by (0.33 added the path)."""
needs_scan_skip = pytest.mark.skipif(not SCAN_SKIP, reason="skip-and-continue needs vLLM 0.33+")

_runs: dict[tuple, list] = {}


def run(**over: Any) -> list:
    """Every item one in-process `v1-head-of-line` run emits (cached per settings)."""
    key = repr(sorted(over.items()))
    if key not in _runs:
        items: list = []
        session = Session(preset_spec("v1-head-of-line", **over).validated())
        session.subscribe(items.append)
        session.prepare()
        session.run()
        _runs[key] = items
    return _runs[key]


def steps_of(items: list) -> list[V1StepRecord]:
    return [i for i in items if type(i) is V1StepRecord]


def longest_stall(steps: list[V1StepRecord]):
    watch = StallWatch()
    for s in steps:
        watch.add(s)
    return watch.longest


def admitted(steps: list[V1StepRecord]) -> set[str]:
    """The ids of the requests admitted for the first time in `steps` (`new` holds (id,
    tokens scheduled))."""
    return {entry[0] for s in steps for entry in s.new}


def order(steps: list[V1StepRecord]) -> list[str]:
    """The request ids in the order they were first admitted."""
    return [entry[0] for s in steps for entry in s.new]


@needs_scan_skip
def test_off_stalls_behind_the_head_from_the_first_steps():
    steps = steps_of(run(max_steps=700))
    stall = longest_stall(steps)
    assert stall is not None and stall.since <= 2 and stall.steps >= 600, stall
    assert stall.reason.startswith("KV blocks (needs "), stall.reason
    last = next(s for s in steps if s.step == stall.step)
    assert last.head_reason == "kv_blocks" and last.head_need > last.head_limit
    assert last.waiting >= 10  # the lighter requests wait behind it
    assert len(admitted(steps)) <= 2


@needs_scan_skip
def test_skip_and_continue_admits_past_the_refused_head_and_finishes_everyone():
    items = run(policy="skip-and-continue")
    steps = steps_of(items)
    assert longest_stall(steps) is None
    off = steps_of(run(max_steps=700))
    assert len(admitted(steps[:700])) >= len(admitted(off)) + 3
    # vLLM admits in queue order (FCFS) under off; here the scan went past the refused head
    assert order(off) == sorted(order(off), key=int)
    skipped = order(steps)
    assert skipped.index("1") >= 3 and skipped.index("1") > skipped.index("2"), skipped
    end = next(i for i in items if type(i) is RunFinished)
    assert end.reason == "completed"
    assert len(admitted(steps)) == preset_spec("v1-head-of-line").requests


@needs_scan_skip
def test_switched_on_live_the_stall_ends_at_the_switch():
    items = run(max_steps=700, toggles=[(300, "skip-and-continue")])
    changes = [i for i in items if type(i) is PolicyChanged]
    assert [(c.step, c.new) for c in changes] == [(300, "skip-and-continue")]
    steps = steps_of(items)
    stall = longest_stall(steps)
    # from the switch, vLLM refuses the head once more, then its scan passes it by
    assert stall is not None and stall.since <= 2 and 298 <= stall.step <= 305, stall
    assert any(s.new for s in steps if 300 <= s.step <= 306)


@needs_scan_skip
def test_off_leaves_vllms_scan_as_it_is():
    """The skip gate is on the scheduler only while the policy is in force."""
    session = Session(preset_spec("v1-head-of-line", max_steps=3).validated())
    session.prepare()
    scheduler = session.driver.hook.scheduler
    assert "_handle_blocked_waiting_request" not in vars(scheduler)
    session.driver.hook.set_policy("skip-and-continue")
    session.run()
    assert "_handle_blocked_waiting_request" in vars(scheduler)


@pytest.mark.skipif(SCAN_SKIP, reason="this release's scan can pass a request by")
def test_a_release_without_the_skip_path_refuses_it_in_one_line():
    for over in ({"policy": "skip-and-continue"}, {"toggles": [(5, "full-isl+skip-and-continue")]}):
        session = Session(preset_spec("v1-head-of-line", max_steps=3, **over).validated())
        with pytest.raises(ConfigError, match="needs vLLM 0.33 or later") as caught:
            session.prepare()
        assert "\n" not in str(caught.value)
        assert session.driver is None  # refused before the engine was built
    # asked for live: refused in the reply, and the run goes on under its policy
    items: list = []
    replies: list = []
    session = Session(preset_spec("v1-head-of-line", max_steps=20).validated())
    session.subscribe(items.append)
    session.prepare()
    session.set_policy("skip-and-continue", done=lambda ok, text, step: replies.append((ok, text)))
    session.run()
    assert replies and replies[0][0] is False and "needs vLLM 0.33" in replies[0][1]
    assert not [i for i in items if type(i) is PolicyChanged]
    assert next(i for i in items if type(i) is RunFinished).reason == "max_steps"
