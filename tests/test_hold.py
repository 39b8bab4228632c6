"""Time to react: the live monitor's engine holds at each sign of trouble (engine.host.attention).

On the seed the groups vLLM admits in its first steps commit more KV blocks than GPU + CPU hold;
on 0.5.0.post1 the first group swaps out at step 454 and `reserve` switched on up to ~175 steps
later saves the run (on 0.6.3.post1 only before step 3), and an unpaced sim engine covers those
steps in well under a second. A person who sees the sign and presses `f` three seconds later was
too late. Now the engine holds there: the `f` applies at the step it was held at, and the run
goes on under the fix.

A hold is wall clock only: the held run's recording verifies, and its steps equal those of a
headless run that switched the same policy at the same step (`--toggle-at`). No test here waits
on a sleep: each waits on an event (a state the engine published, a record that arrived) or on
the app's own state; the one fixed pause is the person's three seconds, after which the engine
must still be held.
"""

from __future__ import annotations

import threading

import msgspec
import pytest
from test_tui_live import wait_for  # the app's own state, no fixed sleeps

from engine.adapters.versions import installed_engine
from engine.analysis.verify import verify_file
from engine.host import EngineHost
from engine.host.attention import HOLD_S
from engine.spec import preset_spec
from engine.stream.protocol import StateChanged
from engine.stream.reader import load
from engine.stream.records import PolicyChanged
from tui.launch import live_app
from tui.live.live_screen import LiveScreen
from tui.widgets.status_bar import StatusBar

V1 = installed_engine() == "v1"
v0_only = pytest.mark.skipif(V1, reason="the seed's presets run on a V0 release of vLLM")
GUARD_S = 300.0  # a failure guard (the engine imports vLLM on a loaded machine), not a target
REACTION_S = 3.0  # the person's reaction time: the acceptance's "wait 3 s, press f"


def _steps(path) -> list[dict]:
    """The recording's step records, but their measured times (`wall_s`, `exec_s`)."""
    out = []
    for step in load(path).steps:
        data = msgspec.structs.asdict(step)
        data.pop("wall_s"), data.pop("exec_s")
        out.append(data)
    return out


def _run_to_end(host: EngineHost) -> None:
    host.start()
    assert host.done.wait(GUARD_S), "the run did not end"


@v0_only
def test_a_held_run_switched_at_the_hold_equals_a_headless_toggle_and_verifies(tmp_path):
    spec = preset_spec("demo", policy="off").validated()
    held_path = tmp_path / "held.jsonl.zst"
    host = EngineHost(spec, str(held_path), hold_s=GUARD_S)  # only `f` ends this hold
    holds: list[StateChanged] = []
    acked = threading.Event()

    def on_item(item) -> None:
        if isinstance(item, StateChanged) and item.hold_s:
            holds.append(item)  # what the screen is told: paused, why, for how long
            host.command("policy", "reserve", "tui", lambda ack: acked.set())

    host.subscribe(on_item)
    _run_to_end(host)
    assert acked.is_set()
    assert [(h.state, h.hold_s) for h in holds] == [("paused", GUARD_S)]  # f ends the holding
    assert holds[0].why.startswith("the committed demand outgrew GPU + CPU")
    held = load(held_path)
    change = held.policy_changes[0]
    sign = next(s.step for s in held.steps if s.overcommitted)
    # the fix governs the step right after the sign showed: where the run was held
    assert change.step == holds[0].step == sign + 1 and change.new == "reserve"
    assert held.abort is None and held.finished.reason == "completed"

    headless_path = tmp_path / "headless.jsonl.zst"
    headless = preset_spec("demo", policy="off", toggles=[(change.step, "reserve")]).validated()
    _run_to_end(EngineHost(headless, str(headless_path)))
    assert _steps(held_path) == _steps(headless_path)
    assert verify_file(str(held_path)).ok


@v0_only
def test_without_a_key_each_hold_ends_by_itself_and_run_never_holds(tmp_path):
    """A hold goes on by itself after its seconds, and the next kind of sign holds again (the
    demo: its demand outgrows GPU + CPU, then its first group swaps out at step 100); a
    headless host (`run`) never holds."""
    spec = preset_spec("demo", policy="off", max_steps=150).validated()
    states: list[StateChanged] = []
    host = EngineHost(spec, None, hold_s=0.2)
    host.subscribe(lambda item: isinstance(item, StateChanged) and states.append(item))
    _run_to_end(host)
    held = [s for s in states if s.hold_s]
    assert [h.why.split(" (")[0] for h in held] == [
        "the committed demand outgrew GPU + CPU", "first swapped group"]
    assert held[1].step == 101
    for hold in held:
        after = states[states.index(hold) + 1]
        assert (after.state, after.step) == ("running", hold.step)  # it went on by itself
    assert host.finished.reason == "max_steps"

    states.clear()
    headless = EngineHost(spec, None)
    headless.subscribe(lambda item: isinstance(item, StateChanged) and states.append(item))
    _run_to_end(headless)
    assert not [s for s in states if s.state == "paused"]


@v0_only
async def test_f_three_seconds_after_the_first_sign_saves_the_seed(tmp_path):
    """The acceptance, through the pilot: `observatory live` with no flags (the seed, live's
    default hold): the status shows the warning and says which key; three seconds later the
    engine is still there; one `f` switches reserve on and the run passes step 1,600."""
    spec = preset_spec("seed-5578", max_steps=1700).validated()
    app = live_app(spec, None, hold_s=HOLD_S)
    async with app.run_test(size=(120, 40)) as pilot:
        screen: LiveScreen = app.main_screen  # type: ignore[assignment]
        await wait_for(pilot, lambda: screen.hold is not None, "the hold")
        status = screen.query_one(StatusBar)
        await wait_for(pilot, lambda: "f switches reserve on" in status.render().plain,
                       "the hint")
        step = screen.view.last_step
        assert screen.view.current.overcommitted and screen.engine_state == "paused"
        assert "⚠ commit" in status.render().plain
        await pilot.pause(REACTION_S)  # the person notices, and reaches for the key
        assert screen.view.last_step == step and screen.hold is not None  # still held
        await pilot.press("f")
        await wait_for(pilot, lambda: screen.view.finished is not None, "the end of the run")
        view = screen.view
        assert view.abort is None and view.finished.reason == "max_steps"
        assert view.last_step >= 1600
        changes = [i for i in view.items if isinstance(i, PolicyChanged)]
        assert [(c.step, c.new) for c in changes] == [(step + 1, "reserve")]
        await pilot.press("q")


@pytest.mark.skipif(not V1, reason="needs a V1 release of vLLM (e.g. the vllm033 extra)")
async def test_v1_head_of_line_holds_at_the_stall_and_f_ends_it():
    """v1-head-of-line's 612-step stall was over in two seconds at 300 steps/s: the engine now
    holds once the watchdog speaks, and `f` switches skip-and-continue on there, which admits
    the requests behind the head at once. Where this vLLM has no skip path (before 0.33) the
    picker and `f` say so instead of sending a switch the engine would refuse."""
    spec = preset_spec("v1-head-of-line", max_steps=1500).validated()
    app = live_app(spec, None, hold_s=HOLD_S, pace=300)
    async with app.run_test(size=(120, 40)) as pilot:
        screen: LiveScreen = app.main_screen  # type: ignore[assignment]
        # the engine says what it cannot take as soon as it is built, before its first step
        await wait_for(pilot, lambda: screen.refused or screen.view.header, "the engine")
        assert screen.fix == "skip-and-continue"
        if "skip-and-continue" in screen.refused:  # 0.18 to 0.29: no skip path to go by
            await pilot.press("f")
            assert screen.pending_policy is None and screen.view.policy == "off"
            await wait_for(pilot, lambda: "F picks a fix" in
                           screen.query_one(StatusBar).render().plain, "the hint")
            await pilot.press("q")
            return
        await wait_for(pilot, lambda: screen.hold is not None, "the hold")
        assert screen.hold.why.startswith("no admission for 100 steps")
        held_at = screen.hold.step
        await pilot.press("f")
        await wait_for(pilot, lambda: screen.view.policy_changes, "the switch")
        assert screen.view.policy_changes[0].step == held_at
        await wait_for(pilot, lambda: any(s.new for s in screen.view.steps[held_at:]),
                       "an admission")
        first = next(s.step for s in screen.view.steps[held_at:] if s.new)
        assert first - held_at <= 10  # under off it lasted 612 steps (3 here on 0.34)
        await pilot.press("q")
