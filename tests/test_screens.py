"""The live and replay widgets as a user meets them, driven with Pilot: the status line at
80x24, the runway warning, the "too late" banner (from a real demo run and from the shipped
seed run), colours read back from the rendered cells, the help text, layout by priority, the
event log, and A/B stepping."""

from __future__ import annotations

import colorsys
import re
import time

import msgspec
import pytest
from rich.segment import Segment
from textual.widgets._footer import FooterKey

from engine.analysis.runway import forecast
from engine.conventions import pct_text
from engine.stream.reader import load
from screens_harness import (LATE, OFF, RECORDING_PATH, TOGGLED, live_status, panel_app,
                             replay_status, view_until)
from tui.widgets import theme
from tui.widgets.abort_banner import AbortBanner
from tui.replay.compare_screen import CompareScreen
from tui.widgets.decisions_table import DecisionsTable
from tui.widgets.event_log import EventLog
from tui.widgets.help_screen import HelpScreen
from tui.launch import replay_app
from tui.widgets.run_panel import RunPanel
from tui.widgets.run_plot import RunPlot
from tui.run_view import RunView
from tui.widgets.status_bar import StatusBar


async def until(pilot, condition, what: str, timeout: float = 30.0) -> None:
    """Let the app run until `condition()` holds: an event to wait for, not a guessed sleep."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.02)


SMALL = (80, 24)


def lines(widget) -> list[str]:
    return widget.render().plain.split("\n")


def runway_steps(text: str) -> int | None:
    found = re.search(r"runway ~([\d,]+)", text)
    return int(found[1].replace(",", "")) if found else None


# -- the status line ----------------------------------------------------------------------


@pytest.mark.parametrize("pending", [None, "watermark:0.5"])
async def test_status_keeps_every_key_number_at_80x24_with_recording_on(pending):
    # the widest numbers a long seed run reaches: step 123,456, thousands swapped
    recording = load(OFF)
    offset = 123_456 - 700
    view = RunView.from_items([recording.header] + [
        msgspec.structs.replace(s, step=s.step + offset, running=256, swapped=1_024,
                                waiting=99_999) for s in recording.steps[:701]])
    last = view.steps[-1]
    status = live_status(view, pending_policy=pending, recording_bytes=12_345_678)
    app = panel_app(view, status)
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        bar = app.screen.query_one(StatusBar)
        first = lines(bar)[0]
        assert len(first) <= bar.content_size.width == 78
        for needed in ("→ wm:0.5…" if pending else "off", "running", "123456", "run 256", "1024", "99999",
                       f"GPU {pct_text(last.gpu_pct, 0)}%", f"CPU {pct_text(last.cpu_pct, 0)}%",
                       "●REC"):
            assert needed in first, (needed, first)
        assert RECORDING_PATH not in bar.render().plain  # the full path is in the help
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert RECORDING_PATH in str(app.screen.query_one("#help-text").render())


async def test_status_is_verbose_when_there_is_room():
    view = view_until(OFF, 700)
    app = panel_app(view, live_status(view, pending_policy="strict"))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        first, second = lines(app.screen.query_one(StatusBar))
        assert first.split() == ["policy", "→", "strict…", "running", "step", "700", "running",
                                 "27", "swapped", "71", "waiting", "9,902", "GPU", "KV",
                                 "99.7%", "CPU", "KV", "72.6%", "●", "REC", "23.5", "kB"]
        assert "● REC 23.5 kB" in first
        assert "f switches reserve on" in second and "63 steps/s" in second


# -- swap runway ------------------------------------------------------------------------------


async def test_runway_warns_when_short():
    recording = load(OFF)
    view = view_until(OFF)
    app = panel_app(view, replay_status("seed-5578-off"), mode="replay")
    async with app.run_test(size=SMALL) as pilot:
        screen = app.screen
        bar = screen.query_one(StatusBar)
        screen.seek(300)  # nothing swapped yet: nothing to say
        await pilot.pause()
        assert "runway" not in bar.render().plain
        screen.seek(480)  # swapping, far from the end
        await pilot.pause()
        second = lines(bar)[1]
        assert runway_steps(second) > 150 and "⚠ swap runway" not in second
        assert "⚠ committed" in second  # the demand outgrew GPU + CPU at step 1: still so
        screen.seek(700)  # 105 steps before the abort
        await pilot.pause()
        second = lines(bar)[1]
        assert second.startswith("⚠ swap runway ~")
        assert abs(runway_steps(second) - (recording.abort.step - 700)) < 30
        # the warning is drawn as a warning: on the theme's error colour
        warning = [seg for seg in bar.render_line(1) if "⚠" in seg.text]
        error = theme.rgb(app.theme_variables, "error")
        assert warning and warning[0].style.bgcolor.triplet == error


async def test_runway_after_the_fix_says_whether_it_still_reaches_zero():
    view = view_until(TOGGLED)
    app = panel_app(view, replay_status("toggled"), mode="replay")
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        bar = screen.query_one(StatusBar)
        screen.seek(505)  # the fix took over at 500: still measuring
        await pilot.pause()
        assert "(measuring strict)" in lines(bar)[1]
        screen.seek(700)  # under strict the swap space still fills
        await pilot.pause()
        assert "still reaches zero under strict" in lines(bar)[1]
        screen.seek(1100)  # the running groups finished and the swapped ones came back
        await pilot.pause()
        assert "swap space empty under strict" in lines(bar)[1]


# -- the abort banner -------------------------------------------------------------------------


async def test_too_late_banner_from_a_real_demo_run(demo_run):
    view = RunView.from_items(demo_run("off", toggles=[(170, "strict")]))
    assert view.abort is not None and view.policy_changes  # the fix came, the run aborted
    change = view.policy_changes[-1]
    app = panel_app(view, live_status(view))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        banner = app.screen.query_one(AbortBanner)
        text = banner.render().plain
        assert banner.late_shown
        assert f"The fix came too late: strict took over at step {change.step}, " \
               f"{view.abort.step - change.step} steps before the abort" in text
        assert f"ABORTED at step {view.abort.step}:" in text
        status = lines(app.screen.query_one(StatusBar))[0]
        assert f"step {view.abort.step}" in status  # banner and status agree


async def test_too_late_banner_gives_the_runway_the_status_showed_then():
    view = view_until(LATE)
    change = view.policy_changes[-1]
    app = panel_app(view, replay_status("late"), mode="replay")
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        screen.seek(change.step - 1)  # the last step before the fix took over
        await pilot.pause()
        then = runway_steps(lines(screen.query_one(StatusBar))[1])
        screen.seek(view.last_step)
        await pilot.pause()
        text = screen.query_one(AbortBanner).render().plain
        assert f"when the swap runway was ~{then} steps" in text
        assert f"{view.abort.step - change.step} steps before the abort" in text


async def test_no_too_late_banner_without_a_fix_and_compact_when_small():
    view = view_until(OFF)
    app = panel_app(view, live_status(view))
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        banner = app.screen.query_one(AbortBanner)
        assert not banner.late_shown and banner.compact
        assert len(lines(banner)) == 2 and banner.size.height == 2
        assert lines(banner)[0].startswith("✗ vLLM ABORTED at step 805:")


# -- colours ----------------------------------------------------------------------------------


def hue(rgb: tuple[int, int, int]) -> float:
    return colorsys.rgb_to_hsv(*(c / 255 for c in rgb))[0] * 360


def drawn(app, plot: RunPlot) -> tuple[dict[str, tuple[int, int, int]], set]:
    """(legend label -> colour, colours of the chart's cells), read from the rendered cells
    after Textual's own filters (the ANSI-to-truecolour theme mapping)."""
    background = app.screen.styles.background
    legend: dict[str, tuple[int, int, int]] = {}
    chart: set = set()
    for y in range(plot.size.height):
        segments: list[Segment] = list(plot.render_line(y))
        for line_filter in app._filters:
            segments = line_filter.apply(segments, background)
        for segment in segments:
            color = segment.style.color if segment.style else None
            if color is None or not segment.text.strip():
                continue
            rgb = tuple(color.get_truecolor())
            if y == 0:
                label = segment.text.strip("━┃ ")
                if label:
                    legend[label] = rgb
            elif any(0x2800 <= ord(ch) <= 0x28FF or ch == "│" for ch in segment.text):
                chart.add(rgb)
    return legend, chart


async def test_legends_match_the_drawn_colours_and_hues_are_distinct():
    view = view_until(LATE)  # a policy marker and an abort marker
    app = panel_app(view, live_status(view))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        for plot in app.screen.query(RunPlot):
            legend, chart = drawn(app, plot)
            # each line under the label its legend shows at this width: the full one, or the
            # short one when the full ones do not fit
            lines_ = {next(shown for shown in (label, short) if shown in legend):
                      plot.color_of(line.color) for line in plot._lines
                      for label, short in [(line.label + ("→" if line.axis == "right" else ""),
                                            (line.short or line.label)
                                            + ("→" if line.axis == "right" else ""))]}
            for label, color in lines_.items():
                assert legend[label] == color, (plot.id, label)
                assert color in chart, (plot.id, label)  # the line is drawn in that colour
            assert legend["policy"] == plot.color_of(theme.POLICY_MARKER) in chart
            assert legend["abort"] == plot.color_of(theme.ABORT_MARKER)
            hues = [hue(c) for c in lines_.values()]
            for i, a in enumerate(hues):
                for b in hues[i + 1:]:
                    assert min(abs(a - b), 360 - abs(a - b)) >= 40, (plot.id, hues)


# -- help -------------------------------------------------------------------------------------


async def test_help_shows_the_pace_keys_and_the_table_keys():
    """`<` and `>` (the pace keys of live and replay alike) show as themselves, their words
    plain text, not taken for markup."""
    view = view_until(OFF, 300)
    app = panel_app(view, live_status(view))
    async with app.run_test(size=(120, 48)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        text = app.screen.query_one("#help-text").render()
        plain = text.plain
        for row in ("<  ", ">  ", "↑", "↓", "PgUp", "PgDn", "Enter", "?", "q"):
            assert row in plain, row
        assert re.search(r"^>\s+faster$", plain, re.M)
        faster = plain.index("faster")
        # the description after `>` is plain text, not swallowed into a markup tag
        assert text.get_style_at_offset(faster).bold is not True


# -- layout by priority --------------------------------------------------------------------


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (220, 60)])
async def test_the_replay_screen_is_styled_once_for_its_size(size):
    """The panes' classes (and the footer's compact look) are set for the terminal's size
    before the widgets are first styled: set on the first resize instead, they restyled the
    panel's ~70 widgets and every footer key again before the first paint."""
    from textual.app import App

    restyled: list[str] = []
    original = App.update_styles

    def counted(self, node, *args, **kwargs) -> None:
        restyled.append(type(node).__name__)
        return original(self, node, *args, **kwargs)

    app = replay_app([str(OFF)], autoplay=False)
    App.update_styles = counted  # type: ignore[method-assign]
    try:
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: {"?", "q"} <= {key.key_display for key in
                                                      app.screen.query(FooterKey)},
                        "the footer keys")
            await pilot.pause()
            panel = app.screen.query_one(RunPanel)
            panel.apply_layout(panel.size)  # what a resize to the same size does
            await pilot.pause()
    finally:
        App.update_styles = original  # type: ignore[method-assign]
    assert not {"RunPanel", "KeyFooter", "FooterKey"} & set(restyled), restyled


@pytest.mark.parametrize("size, collapsed", [((80, 24), ["events", "detail"]),
                                             ((120, 40), ["events"]),
                                             ((160, 48), []), ((220, 60), [])])
async def test_panes_collapse_in_order_and_help_quit_stay(size, collapsed):
    view = view_until(OFF, 700)
    app = panel_app(view, live_status(view))
    async with app.run_test(size=size) as pilot:
        screen = app.screen
        # the footer recomposes once the bindings are known
        await until(pilot, lambda: {"?", "q"} <= {key.key_display for key in
                                                  app.screen.query(FooterKey)}, "the footer keys")
        await pilot.pause()
        assert screen.query_one(RunPanel).collapsed == collapsed
        keys = {key.key_display: key.region for key in screen.query(FooterKey)}
        for key in ("?", "q"):
            region = keys[key]
            assert region.width > 0 and region.right <= size[0]
        for plot in screen.query(RunPlot):  # plots shrink but keep their legends
            assert "━" in plot.render_line(0).text
        table = screen.query_one(DecisionsTable)
        columns = [c.key for c, _ in table.columns]
        assert "step" in columns and "out" in columns
        if size[0] >= 200:
            assert dict((c.key, w) for c, w in table.columns)["out"] > 10


# -- the event log --------------------------------------------------------------------------


async def test_event_log_hides_info_folds_repeats_and_keeps_the_newest_entry():
    # vLLM logs its metrics line every 5 s of wall time: where depends on the recording run.
    metrics = next(line.step for line in load(OFF).records("log")
                   if "Avg prompt throughput" in line.message)
    view = view_until(OFF, metrics + 1)
    app = panel_app(view, live_status(view))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        log = app.screen.query_one(EventLog)
        shown = log.render().plain
        # the EOS warning, once per request, is the sim's own setup (no tokenizer): hidden
        # with the INFO lines, not a ⚠ on every run (engine.adapters.setup_lines)
        assert "EOS" not in shown and "Chunked prefill is enabled" not in shown
        assert "INFO hidden" in str(log.border_title)
        assert "Avg prompt throughput" not in shown  # the metrics line: INFO
        log.show_info = True
        await pilot.pause()
        shown = log.render().plain
        assert "Avg prompt throughput" in shown
        assert "×10,000" in shown and "EOS" in shown  # folded into one entry
    view = view_until(OFF)
    app = panel_app(view, live_status(view))
    async with app.run_test(size=(160, 40)) as pilot:  # a short log: the newest must fit
        await pilot.pause()
        panel = app.screen.query_one(RunPanel)
        assert "events" not in panel.collapsed
        log = app.screen.query_one(EventLog)
        rendered = log.render().plain.split("\n")
        newest = "run finished: aborted; steps 0–804 completed"
        assert rendered[-1].strip().endswith(newest) or newest in " ".join(rendered)
        preemptions = [line for line in rendered if "preempted" in line]
        assert len(preemptions) <= 1  # three warnings that differ in numbers: one entry


# -- A/B replay ------------------------------------------------------------------------------


def table_top(screen, run: int) -> int:
    return screen.query_one(f"#decisions-{run}", DecisionsTable).visible_steps()[0]


async def test_ab_stepping_moves_both_runs():
    app = replay_app([str(OFF), str(TOGGLED)])
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        # it opens at the first difference, marked in both tables
        assert (table_top(screen, 0), table_top(screen, 1)) == (500, 500)
        assert all(screen.query_one(f"#decisions-{i}", DecisionsTable).marked == 500
                   for i in (0, 1))
        assert "first difference at step 500 (d jumps there): withheld" in \
            screen.query_one("#ab-diff").render().plain
        await pilot.press("right", "right")
        assert (table_top(screen, 0), table_top(screen, 1)) == (502, 502)
        await pilot.press("shift+right")
        assert screen.steps() == [602, 602]
        await pilot.press("n")  # the next event of either run
        here = screen.steps()[0]
        assert here > 602
        events = [e.step for v in screen.views for e in v.events
                  if e.kind in ("policy", "swapout", "abort") and 602 < e.step <= here + 1]
        assert events and min(events) in (here, here + 1)
        await pilot.press("end")  # A aborted at 805: it stays at its end, banner on
        assert screen.steps() == [805, 1599]
        assert screen.query_one("#banner-0", AbortBanner).has_class("-visible")
        assert not screen.query_one("#banner-1", AbortBanner).has_class("-visible")
        assert "aborted" in lines(screen.query_one("#status-0", StatusBar))[0]
        assert "A has ended (aborted)" in screen.query_one("#ab-diff").render().plain
        await pilot.press("d")
        assert screen.steps() == [500, 500]
        await pilot.press("t")  # align on simulated time
        assert screen.timeline.align == "time"
        a, b = screen.steps()
        assert a == 500
        sim_a, sim_b = screen.views[0].get(a).sim_s, screen.views[1].get(b).sim_s
        assert sim_b <= sim_a + 1e-9 and screen.views[1].get(b + 1).sim_s > sim_a
        await pilot.press("space")  # play moves both
        await until(pilot, lambda: screen.steps()[0] > 500 and screen.steps()[1] > b,
                    "play to move both runs")
        await pilot.press("space")
        assert not screen.playing


async def test_ab_choosing_a_row_in_b_seeks_there():
    app = replay_app([str(OFF), str(TOGGLED)])
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        screen = app.screen
        table = screen.query_one("#decisions-1", DecisionsTable)
        await pilot.click(table, offset=(3, 1 + 1 + 4))  # border, header, the 5th row
        await pilot.pause()
        assert screen.steps()[1] == screen.difference - 4



# -- start-up and restart (fields the live screen fills from the engine stream) -------------


async def test_start_up_stage_and_restart_policy_are_shown():
    from tui.widgets.status_bar import Status

    stage = "building the engine (8192 GPU / 7281 CPU blocks)"
    app = panel_app(RunView(), Status(state="starting", stage=stage, recording=RECORDING_PATH))
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        first = lines(app.screen.query_one(StatusBar))[0]
        assert "starting" in first and f"{stage}…" in first
    view = view_until(OFF)
    app = panel_app(view, live_status(view, restart_policy="strict", steps_per_s=63.0))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        first, second = lines(app.screen.query_one(StatusBar))
        assert "R restarts with strict" in second
        assert "steps/s" not in second  # only while running, never a stale value
