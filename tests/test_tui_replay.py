"""Replay and compare, headless, on the shipped recordings (and broken copies of them)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.stream.reader import load
from engine.stream.records import encode
from tui.widgets.abort_banner import AbortBanner
from tui.replay.compare_screen import CompareScreen
from tui.widgets.decisions_table import DecisionsTable
from tui.launch import replay, replay_app
from tui.widgets.replay_bar import ReplayBar
from tui.replay.replay_screen import ReplayScreen
from tui.widgets.run_plot import RunPlot
from tui.widgets.status_bar import StatusBar
from tui.widgets.step_detail import StepDetail

ROOT = Path(__file__).resolve().parents[1]
OFF = ROOT / "recordings" / "seed-5578-off.jsonl.zst"
TOGGLED = ROOT / "recordings" / "seed-5578-off-then-strict.jsonl.zst"
STRICT = ROOT / "recordings" / "seed-5578-strict.jsonl.zst"
SIZE = (160, 50)


def plain_lines(path: Path) -> list[bytes]:
    """A recording as plain JSON lines (header first), to cut or grow in tests."""
    recording = load(path)
    return [encode(recording.header)] + [encode(item) for item in recording.items]


def shown(screen: ReplayScreen) -> tuple[int, int, str]:
    """(cursor, table's top row, detail title): what the widgets say the current step is."""
    table = screen.query_one(DecisionsTable)
    return (screen.view.current_step, table.visible_steps()[0],
            str(screen.query_one(StepDetail).border_title))


async def test_replay_step_seek_and_jump_to_the_abort():
    recording = load(OFF)
    app = replay_app([str(OFF)], autoplay=False)
    async with app.run_test(size=SIZE) as pilot:
        screen: ReplayScreen = app.main_screen  # type: ignore[assignment]
        assert shown(screen) == (0, 0, "step 0")
        await pilot.press("right", "right")
        assert shown(screen)[:2] == (2, 2)
        await pilot.press("shift+right")
        assert screen.view.current_step == 102
        await pilot.press("left")
        assert screen.view.current_step == 101
        await pilot.press("end")  # the step vLLM raised in, after the recorded ones
        assert screen.view.current_step == recording.abort.step == recording.steps[-1].step + 1
        await pilot.press("home")
        assert screen.view.current_step == 0
        assert not screen.query_one(AbortBanner).has_class("-visible")
        # n walks the events; the last one is the abort
        for _ in range(100):
            await pilot.press("n")
            if screen.view.abort_visible:
                break
        await pilot.pause()
        assert screen.view.current_step == recording.abort.step
        banner = screen.query_one(AbortBanner)
        assert banner.has_class("-visible")
        assert f"ABORTED at step {recording.abort.step}:" in banner.render().plain
        assert "Aborted due to the lack of CPU swap space" in banner.render().plain
        status = screen.query_one(StatusBar).render().plain
        # the status says what vLLM left when it raised: the summary's peak (104), not the
        # last completed step's 103
        assert "aborted" in status and f"step {recording.abort.step}" in status
        assert f"swapped {recording.abort.swapped}" in status
        assert recording.abort.swapped == recording.steps[-1].swapped + 1
        assert "wall" not in status  # replay shows no wall-clock values
        await pilot.press("left")  # the last step that completed: the abort is yet to come
        assert screen.view.current_step == recording.abort.step - 1
        assert not banner.has_class("-visible")
        await pilot.press("N")
        assert screen.view.current_step < recording.abort.step - 1
        # g: go to a step by number
        await pilot.press("g")
        await pilot.pause()
        await pilot.press(*"345", "enter")
        await pilot.pause()
        assert shown(screen) == (345, 345, "step 345")
        bar = screen.query_one(ReplayBar)
        assert bar.fraction == pytest.approx(345 / recording.abort.step)


async def test_click_on_a_plot_seeks_there():
    app = replay_app([str(OFF)], autoplay=False)
    async with app.run_test(size=SIZE) as pilot:
        screen: ReplayScreen = app.main_screen  # type: ignore[assignment]
        await pilot.pause()
        plot = screen.query_one("#plot-kv", RunPlot)
        left, right = plot._x_span  # the plotting area, from the drawn frame
        x = left + (right - left) // 2
        await pilot.click(plot, offset=(x, plot.size.height // 2))
        await pilot.pause()
        expected = plot.step_at_column(x)
        assert expected is not None and abs(expected - screen.view.last_step / 2) < 20
        assert screen.view.current_step == expected


async def test_play_advances_and_speed_keys_are_bounded():
    app = replay_app([str(OFF)], speed=64, autoplay=False)
    async with app.run_test(size=SIZE) as pilot:
        screen: ReplayScreen = app.main_screen  # type: ignore[assignment]
        await pilot.press("greater_than_sign")
        assert screen.speed == 64
        for _ in range(10):
            await pilot.press("less_than_sign")
        assert screen.speed == 0.25
        for _ in range(8):
            await pilot.press("greater_than_sign")
        assert screen.speed == 64
        for _ in range(8):
            await pilot.press("less_than_sign")
        # At 0.25x the 10 s run takes 40 s to play, so however slowly this machine runs the
        # test, play is still going when space comes (at the end play stops by itself, and
        # space would then play again from the start).
        assert screen.speed == 0.25
        await pilot.press("space")
        assert screen.playing
        deadline = time.monotonic() + 30
        while screen.view.current_step < 20 and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert 20 <= screen.view.current_step < screen.view.last_step
        assert screen.playing
        await pilot.press("space")
        assert not screen.playing
        paused_at = screen.view.current_step
        await pilot.pause(0.3)  # not a synchronisation: time in which a playing cursor moves
        assert screen.view.current_step == paused_at


async def test_policy_change_is_a_marker_and_an_event():
    app = replay_app([str(TOGGLED)], autoplay=False)
    async with app.run_test(size=SIZE) as pilot:
        screen: ReplayScreen = app.main_screen  # type: ignore[assignment]
        jumps = []
        for _ in range(50):
            await pilot.press("n")
            jumps.append(screen.view.current_step)
            if screen.view.current_step >= 500:
                break
        assert 500 in jumps
        assert "strict" in screen.query_one(StatusBar).render().plain
        plot = screen.query_one("#plot-kv", RunPlot)
        assert [m.step for m in plot._markers] == [500]


async def test_compare_two_recordings_on_shared_axes():
    app = replay_app([str(OFF), str(STRICT)])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.main_screen
        assert isinstance(screen, CompareScreen)
        await pilot.press("end")  # the A/B replay opens at the first difference
        cpu = screen.query_one("#compare-cpu", RunPlot)
        assert len(cpu._lines) == 2 and cpu._xlim == (0.0, 1599.0)
        first = screen.query_one("#status-0", StatusBar).render().plain
        second = screen.query_one("#status-1", StatusBar).render().plain
        assert "aborted" in first and "seed-5578-off" in first
        assert "max_steps" in second and "strict" in second


def test_broken_recording_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("this is not a recording\n")
    assert replay([str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("observatory: ") and "Traceback" not in err
    assert replay([str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err


async def test_truncated_recording_replays_with_a_notice(tmp_path):
    import zstandard  # the recording's own text, Check lines included

    data = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True).decompress(
        OFF.read_bytes())
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[: len(data) // 2])
    app = replay_app([str(cut)], autoplay=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen: ReplayScreen = app.main_screen  # type: ignore[assignment]
        assert screen.view.steps and screen.view.finished is None
        assert any("truncated" in e.text for e in screen.view.events)


async def test_follow_keeps_up_with_a_growing_file(tmp_path):
    lines = plain_lines(OFF)
    path = tmp_path / "growing.jsonl"
    path.write_bytes(b"\n".join(lines[:101]) + b"\n")
    app = replay_app([str(path)], follow=True)
    async with app.run_test(size=SIZE) as pilot:
        screen: ReplayScreen = app.main_screen  # type: ignore[assignment]
        deadline = time.monotonic() + 30
        while len(screen.view.steps) < 50 and time.monotonic() < deadline:
            await pilot.pause(0.05)
        first = len(screen.view.steps)
        assert first >= 50
        with path.open("ab") as f:
            f.write(b"\n".join(lines[101:]) + b"\n")
        while screen.view.finished is None and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert screen.view.finished is not None and len(screen.view.steps) > first
        assert screen.view.current_step == screen.view.last_step  # following the edge
        await pilot.press("q")


async def test_choosing_a_table_row_seeks_to_that_step():
    app = replay_app([str(OFF)], autoplay=False)
    async with app.run_test(size=SIZE) as pilot:
        screen: ReplayScreen = app.main_screen  # type: ignore[assignment]
        screen.seek(300)
        await pilot.pause()
        table = screen.query_one(DecisionsTable)
        assert table.visible_steps()[:3] == [300, 299, 298]
        await pilot.click(table, offset=(3, 1 + 1 + 4))  # border, header, then the 5th row
        await pilot.pause()
        assert screen.view.current_step == 296
        table.focus()
        await pilot.press("down", "down", "enter")
        await pilot.pause()
        assert screen.view.current_step == 294
