"""`--pace`: a sim run held to N steps per second so that a person can follow and steer it.

The pace is wall clock only: a paced run makes the same decisions as an unpaced one, and a
command sent while the loop waits for the next due step applies at once (the wait is spent
blocked on the command queue, not asleep). The waits here are made very long on purpose: a run
that sleeps through its wait instead of being woken would hang on them, and fail at the guard.
"""

from __future__ import annotations

import threading

import msgspec
import pytest

from engine.session import Session
from engine.spec import preset_spec
from engine.stream.records import Header, LogLine, PolicyChanged, RunFinished, StepRecord

GUARD_S = 120  # a failure guard, not a timing target: a woken wait ends long before it
VERY_SLOW = 1e-4  # steps per second: one step every 2.8 hours


def _fields(item) -> dict:
    """A record's fields but the measured ones (`wall_s`, `exec_s`), which differ run to run."""
    data = msgspec.structs.asdict(item)
    for name in ("wall_s", "exec_s"):
        data.pop(name, None)
    return {"type": type(item).__name__, **data}


def _run(pace: float | None) -> list:
    spec = preset_spec("demo", policy="off", max_steps=120,
                       toggles=[(40, "reserve")]).validated()
    items: list = []
    session = Session(spec, pace=pace)
    session.subscribe(items.append)
    session.run()
    # LogLines are vLLM's own chatter (import-time warnings come only in the first run)
    return [_fields(item) for item in items if not isinstance(item, (Header, LogLine))]


def test_a_paced_run_makes_the_same_records_as_an_unpaced_one() -> None:
    unpaced, paced = _run(None), _run(2000.0)
    assert paced[-1]["type"] == "RunFinished" and paced[-1]["steps"] == 120
    assert paced == unpaced


class _Watched:
    """A paced demo session on its own thread, with an event per step record."""

    def __init__(self, pace: float, **overrides) -> None:
        self.items: list = []
        self.stepped: dict[int, threading.Event] = {i: threading.Event() for i in range(200)}
        self.finished = threading.Event()
        self.session = Session(preset_spec("demo", policy="off", **overrides).validated(),
                               pace=pace)
        self.session.subscribe(self._on_item)
        self.session.start()

    def _on_item(self, item) -> None:
        self.items.append(item)
        if isinstance(item, StepRecord) and item.step in self.stepped:
            self.stepped[item.step].set()
        if isinstance(item, RunFinished):
            self.finished.set()

    def end(self) -> RunFinished:
        assert self.finished.wait(GUARD_S), "the paced wait was not woken by the command"
        self.session.join(GUARD_S)
        return self.items[-1]


def test_a_stop_sent_during_a_paced_wait_applies_before_the_next_step() -> None:
    run = _Watched(VERY_SLOW)
    assert run.stepped[0].wait(GUARD_S)
    run.session.stop()
    finished = run.end()
    assert (finished.reason, finished.steps) == ("stopped", 1)
    assert [i.step for i in run.items if isinstance(i, StepRecord)] == [0]


def test_a_policy_switch_during_a_paced_wait_applies_at_once() -> None:
    run = _Watched(VERY_SLOW)
    assert run.stepped[0].wait(GUARD_S)
    applied = threading.Event()
    run.session.set_policy("reserve", done=lambda ok, message, step: applied.set())
    assert applied.wait(GUARD_S), "the policy switch waited for the next due step"
    run.session.stop()
    finished = run.end()
    assert finished.steps == 1
    changes = [i for i in run.items if isinstance(i, PolicyChanged)]
    assert [(c.step, c.new) for c in changes] == [(1, "reserve")]


def test_lifting_the_pace_mid_wait_runs_on() -> None:
    run = _Watched(VERY_SLOW, max_steps=5)
    assert run.stepped[0].wait(GUARD_S)
    assert run.session.pace == VERY_SLOW
    run.session.set_pace(0)
    finished = run.end()
    assert (finished.reason, finished.steps) == ("max_steps", 5)
    assert run.session.pace is None


@pytest.mark.parametrize("pace", [-1.0, float("nan"), float("inf")])
def test_a_bad_pace_is_refused(pace: float) -> None:
    with pytest.raises(ValueError, match="pace must be a positive number"):
        Session(preset_spec("demo").validated(), pace=pace)


def test_live_runs_a_v0_sim_as_fast_as_it_goes_by_default() -> None:
    from engine.adapters.versions import installed_version, release_for
    from tui.cli.live import default_pace

    release = release_for(installed_version())
    if release is None or release.engine != "v0":
        pytest.skip("needs a V0 vLLM")
    assert default_pace(preset_spec("demo")) == 0.0


def test_the_pace_command_lifts_a_paced_wait_and_says_the_new_pace() -> None:
    from engine.host import EngineHost
    from engine.stream.protocol import SetPace

    host = EngineHost(preset_spec("demo", policy="off", max_steps=5), None, pace=VERY_SLOW)
    first = threading.Event()
    host.subscribe(lambda item: first.set() if isinstance(item, StepRecord) else None)
    acks: list = []
    host.start()
    try:
        assert first.wait(GUARD_S)
        host.submit(SetPace(id=1, scale=2.0), "t", acks.append)  # the keys keep to MIN_PACE
        assert acks[-1].ok and acks[-1].message == "paced 1 steps/s"
        host.submit(SetPace(id=2, scale=1e12), "t", acks.append)  # past MAX_PACE: no pace
        assert acks[-1].ok and acks[-1].message == "as fast as it goes"
        assert host.done.wait(GUARD_S), "lifting the pace did not wake the paced wait"
    finally:
        host.stop()
        host.join()
    assert (host.finished.reason, host.finished.steps) == ("max_steps", 5)


def test_slowing_an_unpaced_run_starts_from_its_speed_so_far() -> None:
    from engine.session import MAX_PACE, MIN_PACE

    session = Session(preset_spec("demo", policy="off", max_steps=50).validated())
    session.run()
    assert session.scale_pace(2.0) is None  # already as fast as it goes
    half = session.scale_pace(0.5)
    assert half is not None and MIN_PACE <= half <= MAX_PACE
    assert session.scale_pace(2.0) == round(half * 2, 3)
    assert session.scale_pace(1e-9) == MIN_PACE
