"""What a new user saw go wrong on screen, at 80 columns and at 200: each fault, held fixed.

No engine runs here: the widgets are fed shipped recordings or a bare RunView, and drawn by
the same calls the screens make (StatusBar.compose_text, the table's cells, the picker).
"""

from __future__ import annotations

import re

from rich.cells import cell_len

from tui.run_view import RunView
from tui.widgets.status_bar import Status, StatusBar

LONG_STAGE = "building the engine (8,192 GPU blocks, 7,281 CPU blocks of 16 tokens)"


def test_a_long_start_up_stage_is_shortened_not_wrapped_over_the_hint():
    """At 80 columns (78 inside the padding) the V0 demo's start-up stage pushed line 1 past
    the edge: Textual wrapped it, and `tokens)… ●REC` covered the hint on line 2."""
    status = Status(state="starting", stage=LONG_STAGE, recording="recordings/r.jsonl.zst",
                    hint="f switches reserve on")
    line1, line2 = StatusBar.compose_text(RunView(), status, width=78).plain.split("\n")
    assert cell_len(line1) <= 78
    assert line1.rstrip().endswith("●REC")  # the recording indicator stays on line 1
    assert "building the engine (8,192 GPU blocks" in line1  # shortened, not dropped
    shown = line1.split("…")[0].split("building the engine")[1]
    assert f"{shown} " in LONG_STAGE or shown == LONG_STAGE  # cut at a word's end
    assert "f switches reserve on" in line2
    wide = StatusBar.compose_text(RunView(), status, width=198).plain.split("\n")[0]
    assert LONG_STAGE in wide  # where it fits, all of it


def test_every_policy_name_is_whole_in_the_decisions_table_at_80_columns():
    """At 80 columns V1's policy column was 7 cells: `full-i`, `whole+`; V0's cut
    `watermark:0.5` to `watermar`. Each shows whole, in its long or its short form."""
    import msgspec

    from engine.stream.reader import load
    from screens_harness import OFF, V1_OFF
    from tui.widgets.decisions_table import COLUMNS, V1_COLUMNS, cell, layout_columns
    from tui.widgets.status_bar import short_policy

    cases = [(V1_OFF, V1_COLUMNS, "v1policy",
              ["off", "full-isl", "whole-context", "whole-context+least-computed",
               "least-computed", "full-isl+least-computed", "skip-and-continue",
               "full-isl+skip-and-continue"]),
             (OFF, COLUMNS, "policy", ["off", "strict", "watermark:0.5", "reserve"])]
    for path, columns, key, policies in cases:
        step = load(path).steps[0]
        width = dict((c.key, w) for c, w in layout_columns(78, columns))[key]
        for policy in policies:
            record = msgspec.structs.replace(step, policy=policy, withheld=False)
            text, _ = cell(key, record, width)
            assert text in (policy, short_policy(policy)), (policy, text, width)


async def test_the_policy_pickers_descriptions_line_up_and_its_keys_are_said():
    """V1's last option (`whole-context+least-computed  both`) stood 7 cells out of line; and
    the picker did not say how to choose or leave it."""
    from textual.app import App
    from textual.widgets import Label, OptionList

    from tui.live.policy_picker import V0_OPTIONS, V1_OPTIONS, PolicyPicker

    for engine, options in (("v0", V0_OPTIONS), ("v1", V1_OPTIONS)):
        class PickerApp(App[None]):
            def on_mount(self) -> None:
                self.push_screen(PolicyPicker("off", engine))

        app = PickerApp()
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            shown = app.screen.query_one(OptionList)
            prompts = [str(shown.get_option_at_index(i).prompt)
                       for i in range(shown.option_count)]
            starts = {prompt.index(description, len(name))
                      for prompt, (name, description) in zip(prompts, options)}
            assert len(starts) == 1, prompts
            assert shown.virtual_size.width <= shown.size.width  # whole at 80 columns
            keys = str(app.screen.query_one("#picker-keys", Label).render())
            assert "enter" in keys and "escape" in keys


async def test_the_event_log_shows_whole_entries_never_the_tail_of_one():
    """The V1 thrash at 160x48: the log's top line read `77.4%, 24 waiting)`, the end of a
    wrapped entry whose start had scrolled away."""
    from screens_harness import V1_OFF, live_status, panel_app, view_until
    from tui.widgets.event_log import EventLog

    view = view_until(V1_OFF, 2991)
    app = panel_app(view, live_status(view))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.pause()
        log = app.screen.query_one(EventLog)
        lines = log.render().plain.split("\n")
        shown = [line for line in lines if line.strip()]
        assert shown and len(lines) <= log.size.height
        # the top line is an entry's first (its step, right-aligned in 6 cells), not the tail
        # of one whose start is off the top
        assert re.match(r"^ {0,5}\d+ \S", shown[0]), shown
        assert lines[-1].strip()  # the newest entry is at the bottom


async def test_replay_help_names_no_policy_keys_it_does_not_have():
    """Replay's `?` said "policies (f cycles, F picks)": replay's f and F fork the run (its own
    rows say so), they do not switch the policy, so the policies' heading names no key."""
    from screens_harness import OFF, V1_OFF
    from tui.launch import replay_app
    from tui.live.live_screen import LiveScreen
    from tui.widgets.help_screen import has_policy_keys

    assert has_policy_keys(LiveScreen)  # the live monitor still says them
    for path, policies in ((OFF, "policies: what each guarantees"),
                           (V1_OFF, "policies on vLLM's V1 engine: what each does")):
        app = replay_app([str(path)], autoplay=False)
        async with app.run_test(size=(100, 40)) as pilot:
            await pilot.pause()
            await pilot.press("question_mark")
            await pilot.pause()
            text = str(app.screen.query_one("#help-text").render())
            assert policies in text
            assert "f cycles" not in text and "F picks any" not in text
            assert "f: off ↔" not in text and "fork" in text
            assert not has_policy_keys(app.main_screen)


def test_a_long_detail_value_wraps_under_its_value_not_under_the_labels():
    """v1-prefix-offload at 200x50: the detail pane (60 cells inside) showed `CPU tier  309/309
    (100%)  load 0 (0B)  store 0 (0B)  evicted` and then `0` alone at the pane's left edge."""
    import msgspec
    from rich.console import Console

    from engine.stream.reader import load
    from screens_harness import V1_OFF
    from tui.widgets.step_detail import StepDetail, hanging

    step = msgspec.structs.replace(load(V1_OFF).steps[100], cpu_chunks=309,
                                   cpu_chunks_total=309)
    text = StepDetail.describe(step)
    console = Console(width=60, record=True, color_system=None)
    console.print(hanging(text, 10))
    lines = console.export_text().splitlines()
    tier = next(i for i, line in enumerate(lines) if line.startswith("CPU tier  309/309"))
    assert lines[tier + 1].startswith(" " * 10) and lines[tier + 1].strip(), lines
    assert all(line.startswith(("policy", " ")) or line[:10].rstrip() in {
        "queues", "KV", "CPU tier", "tokens", "again", "new", "resumed", "running",
        "preempted", "done", "so far"} for line in lines), lines


async def test_the_sweep_browser_says_how_to_open_a_cell_and_a_cells_help_lists_its_keys():
    """The footer never showed `enter replay cell` (the focused table's own enter shadowed it),
    and `?` on a cell's replay listed `q` alone (CellReplayScreen's BINDINGS)."""
    from pathlib import Path

    from textual.app import App
    from textual.widgets import Footer

    from screens_harness import OFF
    from tui.cli.sweep_browse import browse_app
    from tui.run_source import load_view
    from tui.sweeps.sweep_screen import CellReplayScreen

    shipped = Path(__file__).resolve().parents[1] / "sweeps" / "demo-cpu-blocks"
    app = browse_app(str(shipped))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.pause()
        footer = app.screen.query_one(Footer)
        shown = {key.key_display or key.key for key in footer.query("FooterKey")}
        assert "enter" in {k.lower() for k in shown} or "⏎" in shown, shown
    view, _ = load_view(str(OFF))

    class CellApp(App[None]):
        def on_mount(self) -> None:
            self.push_screen(CellReplayScreen(view, title="cell 0", autoplay=False))

    app = CellApp()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        text = str(app.screen.query_one("#help-text").render())
        assert "play/pause" in text and "back to cells" in text and "next event" in text
        assert "\nq               quit" not in text


def test_live_names_only_recordings_that_are_on_disk(tmp_path):
    """Quit while the V1 engine was being built: "nothing was recorded", then
    `recording: recordings/…-v1-thrash-off.jsonl.zst`, a file that was not there."""
    from types import SimpleNamespace

    from tui.launch import closing_lines

    kept = tmp_path / "kept.jsonl.zst"
    kept.write_bytes(b"x")
    cut_short = SimpleNamespace(view=RunView(), stage="building the engine",
                                recordings=[str(tmp_path / "never-written.jsonl.zst")])
    lines = closing_lines(cut_short)
    assert len(lines) == 1 and "nothing was recorded" in lines[0]
    assert not any(line.startswith("recording:") for line in lines)
    ran = SimpleNamespace(view=RunView(), stage="", recordings=[str(kept)])
    assert closing_lines(ran) == [f"recording: {kept}"]


def test_the_policy_marker_has_a_colour_of_its_own_on_every_plot_in_every_theme():
    """textual-dark gives $warning and $accent one orange: the committed line (and V1's CPU
    tier) looked like the `f` marker on the KV plot."""
    from textual.theme import BUILTIN_THEMES

    from tui.widgets import theme
    from tui.widgets.run_panel import PLOTS, V1_PLOTS

    for name, built_in in BUILTIN_THEMES.items():
        variables = built_in.to_color_system().generate()
        marker = theme.rgb(variables, theme.POLICY_MARKER)
        assert marker != theme.rgb(variables, theme.ABORT_MARKER), name
        for plot_id, *_, series in (*PLOTS, *V1_PLOTS):
            for line in series:
                assert theme.rgb(variables, line.color) != marker, (name, plot_id, line.name)
