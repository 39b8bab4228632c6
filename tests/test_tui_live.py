"""The live monitor, headless, on a real engine child process (demo preset: seconds per run).

The engine runs in its own process and owns the recording; these tests drive the UI with
Pilot and check what the engine process wrote, after waiting for it to exit by PID.
"""

from __future__ import annotations

import os
import time
from typing import Callable

import pytest

from engine.stream.reader import load
from engine.stream.records import PolicyChanged
from engine.spec import preset_spec
from tui.widgets.abort_banner import AbortBanner
from tui.widgets.event_log import EventLog
from tui.widgets.key_footer import KeyFooter
from tui.launch import live_app
from tui.live.live_screen import LiveScreen, fix_hint
from tui.widgets.status_bar import StatusBar

SIZE = (160, 50)
TIMEOUT_S = 180.0  # the engine child imports vLLM: slow on a loaded 2-core machine


async def wait_for(pilot, condition: Callable[[], bool], what: str) -> None:
    """Let the app run until `condition` holds (no fixed sleeps)."""
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def wait_for_exit(pid: int | None, timeout: float = 30.0) -> None:
    """The engine child finishes its recording on its own after the UI lets go."""
    deadline = time.monotonic() + timeout
    while pid is not None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"engine child {pid} still running after {timeout} s")
        time.sleep(0.05)


def status_text(app) -> str:
    return app.main_screen.query_one(StatusBar).render().plain  # type: ignore[union-attr]


def engine_pid(screen: LiveScreen) -> int | None:
    return getattr(screen.source, "pid", None)


async def test_f_shows_pending_at_once_then_the_engine_applies_it(tmp_path):
    # strict with more requests runs long enough to press keys during the run
    spec = preset_spec("demo", policy="strict", requests=256).validated()
    path = tmp_path / "live.jsonl"
    app = live_app(spec, str(path))
    async with app.run_test(size=SIZE) as pilot:
        screen: LiveScreen = app.main_screen  # type: ignore[assignment]
        await wait_for(pilot, lambda: len(screen.view.steps) > 5, "the first steps")
        assert screen.view.policy == "strict"
        screen.action_toggle_fix()  # what `f` does; the frame it paints is checked at once
        assert "→ reserve…" in status_text(app)  # strict is not the demo's fix: f goes to it
        await wait_for(pilot, lambda: screen.view.policy_changes, "the policy change")
        await wait_for(pilot, lambda: screen.view.policy == "reserve", "a governed step")
        # the next frame (not necessarily this instant's) drops the pending mark
        await wait_for(pilot, lambda: "→ reserve…" not in status_text(app),
                       "the pending mark to go")
        pid = engine_pid(screen)
        await pilot.press("q")
    wait_for_exit(pid)
    recording = load(path)
    changes = [i for i in recording.items if isinstance(i, PolicyChanged)]
    assert [(c.old, c.new, c.source) for c in changes] == [("strict", "reserve", "tui")]
    assert recording.step(changes[0].step).policy == "reserve"
    assert recording.step(changes[0].step - 1).policy == "strict"
    assert recording.finished is not None and recording.finished.reason == "stopped"


async def test_f_while_paused_stays_pending_until_a_step_runs_under_it():
    """The engine takes the change at once while paused, with no step after it: the mark
    went, and the status said `off … press f to switch the fix on` for a fix already on."""
    spec = preset_spec("demo", policy="off", requests=256).validated()
    app = live_app(spec, None, pace=50)  # paced: the pause lands long before the demo aborts
    async with app.run_test(size=SIZE) as pilot:
        screen: LiveScreen = app.main_screen  # type: ignore[assignment]
        await wait_for(pilot, lambda: len(screen.view.steps) > 5, "the first steps")
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.engine_state == "paused", "the pause")
        await pilot.press("f")
        await wait_for(pilot, lambda: screen.view.policy_changes, "the engine taking it")
        await pilot.pause()
        assert screen.view.policy == "off"  # no step has run under reserve yet
        assert "→ reserve…" in status_text(app) and fix_hint("reserve") not in status_text(app)
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.view.policy == "reserve", "a governed step")
        await wait_for(pilot, lambda: "→ reserve…" not in status_text(app), "the mark to go")
        await pilot.press("q")


async def test_demo_off_aborts_with_banner_and_closed_recording(tmp_path):
    spec = preset_spec("demo", policy="off").validated()
    path = tmp_path / "abort.jsonl"
    app = live_app(spec, str(path))
    async with app.run_test(size=SIZE) as pilot:
        screen: LiveScreen = app.main_screen  # type: ignore[assignment]
        await wait_for(pilot, lambda: screen.view.finished is not None, "the end of the run")
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
        # the file is there, whole: the status says so rather than "not recording"
        await wait_for(pilot, lambda: "✔ saved" in status_text(app), "the saved recording")
        visible = screen.query_one(EventLog).visible_texts()
        assert any("ABORTED" in t for t in visible), visible
        # everything stays on screen: the table still shows the last steps
        table = screen.query_one("#decisions")
        assert table.visible_steps()[0] == screen.view.last_step
        pid = engine_pid(screen)
    wait_for_exit(pid)
    recording = load(path)
    assert recording.abort is not None and recording.abort.step == abort.step
    assert recording.finished.reason == "aborted" and not recording.truncated


async def test_hint_pause_burst_and_restart():
    spec = preset_spec("demo", policy="off").validated()
    app = live_app(spec, None)
    async with app.run_test(size=SIZE) as pilot:
        screen: LiveScreen = app.main_screen  # type: ignore[assignment]
        # Pause as soon as the engine process answers: the command waits in its queue, so the
        # engine stops at the boundary before step 0 however fast it starts (no race with the
        # abort).
        await wait_for(pilot, lambda: getattr(screen.source, "_link", None) is not None,
                       "the engine process")
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.engine_state == "paused", "the pause")
        assert screen.view.steps == [] or len(screen.view.steps) < 5
        await wait_for(pilot, lambda: fix_hint("reserve") in status_text(app), "the hint")
        footer = screen.query_one(KeyFooter)
        await wait_for(pilot, lambda: "space" in footer.shown_keys, "the footer")
        assert "R" not in footer.shown_keys  # restart does nothing while the run goes on
        assert not screen.check_action("restart", ())
        await pilot.press("a")  # a burst while paused still arrives at the next boundary
        await wait_for(pilot, lambda: any(e.kind == "burst" for e in screen.view.events),
                       "the burst")
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.view.finished is not None, "the abort")
        await wait_for(pilot, lambda: screen.over, "the end of the stream")
        # over: the footer offers R (the banner's key), not pause, record or burst, which
        # can no longer act
        await wait_for(pilot, lambda: "R" in footer.shown_keys, "R in the footer")
        assert not {"space", "r", "a"} & set(footer.shown_keys)
        first_source = screen.source
        await pilot.press("f")  # the run is over: the choice applies to the restart
        assert "R restarts with reserve" in status_text(app)
        assert screen.view.policy == "off"  # the finished run stays as it was
        await pilot.press("R")
        assert screen.view.policy == "reserve"  # planned at once, before the engine starts
        await wait_for(pilot, lambda: screen.source is not first_source
                       and screen.view.steps, "the restarted run")
        assert screen.view.header is not None and screen.view.header.spec["policy"] == "reserve"
        assert screen.view.steps[0].policy == "reserve"
        assert not screen.query_one(AbortBanner).has_class("-visible")
        await wait_for(pilot, lambda: "space" in footer.shown_keys, "pause again")
        assert "R" not in footer.shown_keys
        await pilot.press("q")


async def test_recording_switched_on_mid_run_starts_at_the_next_step(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # default recording paths are relative to the cwd
    spec = preset_spec("demo", policy="strict", requests=256).validated()
    app = live_app(spec, None)
    async with app.run_test(size=SIZE) as pilot:
        screen: LiveScreen = app.main_screen  # type: ignore[assignment]
        await wait_for(pilot, lambda: len(screen.view.steps) > 20, "some steps")
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.recording is not None, "the recording to start")
        # the status shows it at the next frame (at most 1/MAX_FPS later): wait for that frame
        await wait_for(pilot, lambda: "REC" in status_text(app), "the status to say REC")
        path = screen.recording
        await wait_for(pilot, lambda: screen.recording_bytes > 2000, "records")
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.recording is None, "the recording to stop")
        pid = engine_pid(screen)
        await pilot.press("q")
    wait_for_exit(pid)
    recording = load(tmp_path / path)
    assert recording.header.starts_at_step > 20
    assert recording.steps[0].step == recording.header.starts_at_step
    assert [s.step for s in recording.steps] == list(
        range(recording.steps[0].step, recording.steps[-1].step + 1))
    assert path in screen.recordings


def test_live_refuses_stdout_recording(capsys):
    from tui.launch import live

    assert live(preset_spec("demo").validated(), "-") == 2
    assert "cannot record to stdout" in capsys.readouterr().err


async def test_help_lists_every_key():
    """`?` opens the help, and it has one line per key of the screen: the key, then what it
    does (a bare key letter somewhere in the text would prove nothing)."""
    app = live_app(preset_spec("demo", policy="strict").validated(), None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        from tui.widgets.help_screen import HelpScreen, describe_bindings

        assert isinstance(app.screen, HelpScreen)
        lines = [line.strip() for line in
                 app.screen.query_one("#help-text").render().plain.splitlines()]
        rows = describe_bindings(list(LiveScreen.BINDINGS))
        assert len(rows) == len(LiveScreen.BINDINGS)
        for key, description in rows:
            assert key and description
            assert any(line.startswith(key) and line.endswith(description)
                       and line[len(key):len(line) - len(description)].strip() == ""
                       for line in lines), f"no help line for {key!r}: {description!r}"
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, LiveScreen)
        await pilot.press("q")


async def test_policy_picker_sets_a_watermark_level():
    spec = preset_spec("demo", policy="strict", requests=256).validated()
    app = live_app(spec, None)
    async with app.run_test(size=SIZE) as pilot:
        screen: LiveScreen = app.main_screen  # type: ignore[assignment]
        await wait_for(pilot, lambda: len(screen.view.steps) > 5, "the first steps")
        await pilot.press("F")
        await pilot.pause()
        from tui.live.policy_picker import PolicyPicker

        assert isinstance(app.screen, PolicyPicker)
        level = app.screen.query_one("#picker-level")
        level.value = "0.7"
        level.focus()
        await pilot.press("enter")  # submitting the level picks watermark at that level
        await wait_for(pilot, lambda: screen.view.policy_changes, "the policy change")
        change = screen.view.policy_changes[0]
        assert (change.new, change.source) == ("watermark:0.7", "tui")
        await pilot.press("q")


async def test_restart_after_an_abort_records_under_the_policy_it_runs(tmp_path, monkeypatch):
    """Issue #8's R mislabel: switch to watermark after the abort, restart: the new run, its
    recording's name and its header all say watermark, and the first recording is untouched."""
    monkeypatch.chdir(tmp_path)
    spec = preset_spec("demo", policy="off").validated()
    app = live_app(spec, "auto")
    async with app.run_test(size=SIZE) as pilot:
        screen: LiveScreen = app.main_screen  # type: ignore[assignment]
        await wait_for(pilot, lambda: screen.over, "the abort")
        first = list(screen.recordings)
        assert len(first) == 1 and first[0].endswith("-demo-off.jsonl.zst")
        first_pid = engine_pid(screen)
        await pilot.press("F")  # the picker: watermark at its default level, for the restart
        await pilot.press("down", "down", "enter")
        assert "R restarts with watermark:0.5" in status_text(app)
        await pilot.press("R")
        await wait_for(pilot, lambda: len(screen.recordings) == 2 and screen.view.steps,
                       "the restarted run's recording")
        assert screen.recordings[1].endswith("-demo-watermark_0.5.jsonl.zst")
        assert screen.view.steps[0].policy == "watermark:0.5"
        pid = engine_pid(screen)
        await pilot.press("q")
    wait_for_exit(first_pid)
    wait_for_exit(pid)
    old = load(tmp_path / first[0])
    assert old.abort is not None and {s.policy for s in old.steps} == {"off"}
    new = load(tmp_path / screen.recordings[1])
    assert new.header.spec["policy"] == "watermark:0.5"
    assert new.finished is not None and new.finished.reason in ("stopped", "completed")


async def test_live_draws_a_reference_over_every_run(tmp_path):
    """`live --reference REF`: the real log's dots on the live plots, and again after a restart."""
    import msgspec

    from engine.analysis.logs.simrun import SimResult, run_one
    from engine.analysis.logs.synthetic import stats_log
    from engine.cli import main
    from engine.costmodel import CostModel
    from tui.widgets.run_plot import RunPlot

    # a "real" log: the demo on a slow clock, so that its 211 steps span two 5-s windows
    spec = preset_spec("demo", policy="off", cost=CostModel(base_s=0.05)).validated()
    run = msgspec.msgpack.decode(run_one(msgspec.json.encode(spec), 1e9), type=SimResult)
    log = tmp_path / "real.log"
    log.write_text(stats_log(run))
    ref = tmp_path / "ref.jsonl.zst"
    assert main(["import-log", str(log), "-o", str(ref)]) == 0

    def real_dots(screen) -> int:
        plot = screen.query_one("#plot-queues", RunPlot)
        return sum(len(line.xs) for line in plot._lines if "real log" in line.label)

    app = live_app(spec, None, reference=str(ref))
    async with app.run_test(size=SIZE) as pilot:
        screen: LiveScreen = app.main_screen  # type: ignore[assignment]
        await wait_for(pilot, lambda: screen.over, "the end of the run")
        await wait_for(pilot, lambda: real_dots(screen) > 0, "the reference's dots")
        first_source = screen.source
        await pilot.press("R")
        await wait_for(pilot, lambda: screen.source is not first_source and screen.over,
                       "the restarted run's end")
        await wait_for(pilot, lambda: real_dots(screen) > 0, "the dots after the restart")
        await pilot.press("q")


async def test_the_pace_keys_change_the_engines_pace_and_the_bar_says_it():
    """`>` doubles the pace of a local engine (here from one step per 2.8 hours, which the
    keys' floor lifts to 1 step/s, so the run goes on) and the bottom bar says the new pace."""
    from tui.widgets.replay_bar import ReplayBar

    app = live_app(preset_spec("demo", policy="off").validated(), None, pace=1e-4)
    async with app.run_test(size=SIZE) as pilot:
        screen: LiveScreen = app.main_screen  # type: ignore[assignment]
        bar = lambda: screen.query_one(ReplayBar).render().plain  # noqa: E731
        await wait_for(pilot, lambda: len(screen.view.steps) == 1, "the first step")
        assert "paced 0.0001 steps/s" in bar()
        await pilot.press("greater_than_sign")
        await wait_for(pilot, lambda: "paced 1 steps/s" in bar(), "the new pace in the bar")
        await wait_for(pilot, lambda: len(screen.view.steps) > 1, "the next step, now due")
        await pilot.press("q")


async def test_the_first_frame_says_where_it_records_and_each_stage_its_seconds(tmp_path):
    """REC said "○ not recording" for two seconds while recording was on, and start-up said
    "building the engine…" with no time: the first frame now says the recording, and the
    status names the stage with its seconds until the first step, which the events keep."""
    spec = preset_spec("demo", policy="reserve", max_steps=50).validated()
    app = live_app(spec, str(tmp_path / "first.jsonl.zst"))
    async with app.run_test(size=SIZE) as pilot:
        screen: LiveScreen = app.main_screen  # type: ignore[assignment]
        await pilot.pause()
        first = status_text(app)
        assert "● REC" in first and "not recording" not in first
        if screen.view.header is None:  # still starting (it takes vLLM's import, seconds)
            assert "s since launch" in first
        await wait_for(pilot, lambda: screen.view.steps, "the first step")
        notes = [e.text for e in screen.view.events if e.kind == "notice"]
        stages = next(n for n in notes if n.startswith("first step on screen"))
        assert "importing vLLM" in stages and "building the engine" in stages
        await pilot.press("q")
