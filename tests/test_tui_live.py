"""The live monitor, headless, on the real sim engine (demo preset: a second or two per run)."""

from __future__ import annotations

import time
from typing import Callable

import pytest

from engine.stream.reader import load
from engine.stream.records import PolicyChanged
from engine.spec import preset_spec
from tui.abort_banner import AbortBanner
from tui.event_log import EventLog
from tui.launch import live_app
from tui.live_screen import HINT_OFF, LiveScreen
from tui.status_bar import StatusBar

SIZE = (160, 50)
TIMEOUT_S = 60.0


async def wait_for(pilot, condition: Callable[[], bool], what: str) -> None:
    """Let the app run until `condition` holds (no fixed sleeps)."""
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def status_text(app) -> str:
    return app.main_screen.query_one(StatusBar).render().plain  # type: ignore[union-attr]


async def test_f_switches_the_policy_and_the_recording_has_the_event(tmp_path):
    # strict with more requests runs long enough to press keys during the run
    spec = preset_spec("demo", policy="strict", requests=256).validated()
    path = tmp_path / "live.jsonl"
    app = live_app(spec, str(path))
    async with app.run_test(size=SIZE) as pilot:
        screen: LiveScreen = app.main_screen  # type: ignore[assignment]
        await wait_for(pilot, lambda: len(screen.view.steps) > 5, "the first steps")
        assert screen.session.policy == "strict"
        await pilot.press("f")
        await wait_for(pilot, lambda: screen.view.policy_changes, "the policy change")
        assert screen.session.policy == "watermark:0.5"
        await pilot.press("q")
    changes = [i for i in load(path).items if isinstance(i, PolicyChanged)]
    assert [(c.old, c.new, c.source) for c in changes] == [("strict", "watermark:0.5", "tui")]
    recording = load(path)
    governed = recording.step(changes[0].step)
    assert governed.policy == "watermark:0.5"
    assert recording.step(changes[0].step - 1).policy == "strict"
    assert recording.finished is not None and recording.finished.reason == "stopped"


async def test_demo_off_aborts_with_banner_and_closed_recording(tmp_path):
    spec = preset_spec("demo", policy="off").validated()
    path = tmp_path / "abort.jsonl"
    app = live_app(spec, str(path))
    async with app.run_test(size=SIZE) as pilot:
        screen: LiveScreen = app.main_screen  # type: ignore[assignment]
        await wait_for(pilot, lambda: screen.view.finished is not None, "the end of the run")
        await wait_for(pilot, lambda: screen.recorder is None, "the recording to close")
        await pilot.pause()
        banner = screen.query_one(AbortBanner)
        assert banner.has_class("-visible") and banner.display
        text = banner.render().plain
        abort = screen.view.abort
        assert abort is not None
        assert "Aborted due to the lack of CPU swap space" in text
        assert f"step {abort.step:,}" in text and f"swapped {abort.swapped} groups" in text
        assert f"({abort.cpu_pct:.1f}%)" in text
        assert "aborted" in status_text(app)
        assert any("ABORTED" in t for t in screen.query_one(EventLog).visible_texts())
        # everything stays on screen: the table still shows the last steps
        table = screen.query_one("#decisions")
        assert table.visible_steps()[0] == screen.view.last_step
    recording = load(path)
    assert recording.abort is not None and recording.abort.step == abort.step
    assert recording.finished.reason == "aborted" and not recording.truncated


async def test_hint_pause_burst_and_restart():
    spec = preset_spec("demo", policy="off").validated()
    app = live_app(spec, None)
    async with app.run_test(size=SIZE) as pilot:
        screen: LiveScreen = app.main_screen  # type: ignore[assignment]
        # Pause as soon as the session exists: the command waits in its queue, so the engine
        # stops at the boundary before step 0 however fast it starts (no race with the abort).
        await wait_for(pilot, lambda: screen.session is not None, "the session")
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.session.state == "paused", "the pause")
        await wait_for(pilot, lambda: HINT_OFF in status_text(app), "the hint")
        await pilot.press("a")  # a burst while paused still arrives at the next boundary
        await wait_for(pilot, lambda: any(e.kind == "burst" for e in screen.view.events),
                       "the burst")
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.view.finished is not None, "the abort")
        first_session = screen.session
        await pilot.press("f")  # the run is over: the choice applies to the restart
        await pilot.press("R")
        await wait_for(pilot, lambda: screen.session is not first_session
                       and screen.view.steps, "the restarted run")
        assert screen.session.policy == "strict"
        assert not screen.query_one(AbortBanner).has_class("-visible")
        await pilot.press("q")


async def test_recording_switched_on_mid_run_starts_at_the_next_step(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # default recording paths are relative to the cwd
    spec = preset_spec("demo", policy="strict", requests=256).validated()
    app = live_app(spec, None)
    async with app.run_test(size=SIZE) as pilot:
        screen: LiveScreen = app.main_screen  # type: ignore[assignment]
        await wait_for(pilot, lambda: len(screen.view.steps) > 20, "some steps")
        await pilot.press("r")
        assert screen.recorder is not None
        path = screen.recorder.path
        await wait_for(pilot, lambda: screen.recorder.records_written > 50, "records")
        await pilot.press("r")
        assert screen.recorder is None
        await pilot.press("q")
    recording = load(tmp_path / path)
    assert recording.header.starts_at_step > 20
    assert recording.steps[0].step == recording.header.starts_at_step
    assert [s.step for s in recording.steps] == list(
        range(recording.steps[0].step, recording.steps[-1].step + 1))


def test_live_refuses_stdout_recording(capsys):
    from tui.launch import live

    assert live(preset_spec("demo").validated(), "-") == 2
    assert "cannot record to stdout" in capsys.readouterr().err


@pytest.mark.parametrize("key", ["question_mark"])
async def test_help_lists_every_key(key):
    app = live_app(preset_spec("demo", policy="strict").validated(), None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(key)
        await pilot.pause()
        from tui.help_screen import HelpScreen

        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-text").render())
        for binding in LiveScreen.BINDINGS:
            assert (binding.key_display or binding.key) in text
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, LiveScreen)
        app.main_screen.shutdown()


async def test_policy_picker_sets_a_watermark_level():
    spec = preset_spec("demo", policy="strict", requests=256).validated()
    app = live_app(spec, None)
    async with app.run_test(size=SIZE) as pilot:
        screen: LiveScreen = app.main_screen  # type: ignore[assignment]
        await wait_for(pilot, lambda: len(screen.view.steps) > 5, "the first steps")
        await pilot.press("F")
        await pilot.pause()
        from tui.policy_picker import PolicyPicker

        assert isinstance(app.screen, PolicyPicker)
        level = app.screen.query_one("#picker-level")
        level.value = "0.7"
        level.focus()
        await pilot.press("enter")  # submitting the level picks watermark at that level
        await wait_for(pilot, lambda: screen.view.policy_changes, "the policy change")
        assert screen.session.policy == "watermark:0.7"
        change = screen.view.policy_changes[0]
        assert (change.new, change.source) == ("watermark:0.7", "tui")
        await pilot.press("q")
