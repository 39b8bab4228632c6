"""The pure parts behind the screens: swap runway, late fix, first difference, the A/B timeline,
table columns by width, plot ticks and legends. No app."""

from __future__ import annotations

import msgspec
import pytest
from rich.style import Style

from engine.analysis.divergence import decision_diff, first_difference
from engine.analysis.runway import (SHORT_RUNWAY_STEPS, forecast, forecast_errors, late_fix,
                                    latest_change)
from engine.stream.reader import load
from engine.stream.records import PolicyChanged, StepRecord
from screens_harness import LATE, OFF, TOGGLED, view_until
from tui.widgets import theme
from tui.replay.ab_timeline import Timeline
from tui.widgets.decisions_table import COLUMNS, _ids, layout_columns
from tui.widgets.run_plot import Line, Marker, legend_text, nice_ticks, tick_label


def steps_filling(cpu_used: list[int], total: int = 1000, policy: str = "off",
                  swapped_out_at: dict[int, int] | None = None) -> list[StepRecord]:
    """Synthetic steps with the given CPU-block usage (everything else from a real step, less
    its committed demand: these steps are as old recordings have them, the rate counts)."""
    base = msgspec.structs.replace(load(OFF).steps[0], committed_blocks=None,
                                   committed_slack=None)
    out = swapped_out_at or {}
    return [msgspec.structs.replace(base, step=i, cpu_used=used, cpu_total=total, policy=policy,
                                    swapped_out=[f"r{i}-{k}" for k in range(out.get(i, 0))],
                                    swapped_in=[])
            for i, used in enumerate(cpu_used)]


def test_runway_is_free_blocks_over_the_net_rate():
    steps = steps_filling([10 * i for i in range(51)])  # 10 blocks a step, 500 used of 1000
    runway = forecast(steps)
    assert runway.rate == pytest.approx(10.0)
    assert runway.free_blocks == 500 and runway.reserve == 0
    assert runway.steps == pytest.approx(50.0)
    assert runway.short and runway.at_step == 100


def test_runway_sets_room_aside_for_the_next_swap_out():
    used = [0] * 20 + [200] * 11  # one swap-out of 2 groups (100 blocks each) at step 20
    used += [200 + 10 * i for i in range(1, 30)]  # then 10 blocks a step
    steps = steps_filling(used, swapped_out_at={20: 2})
    runway = forecast(steps)
    assert runway.reserve == 100
    assert runway.steps == pytest.approx((1000 - used[-1] - 100) / runway.rate)


def test_no_runway_when_the_swap_space_is_not_filling():
    assert forecast(steps_filling([300] * 40)).steps is None
    assert forecast(steps_filling([300 - i for i in range(40)])).steps is None
    assert forecast(steps_filling([0])) is None  # one step: no rate yet


def test_after_a_policy_change_the_rate_is_the_new_policy_s():
    used = [10 * i for i in range(100)] + [990] * 60  # fills, then flat under the fix
    steps = steps_filling(used)
    just_after = forecast(steps, 105, changed_at=100)
    assert just_after.measuring and not just_after.since_change
    assert just_after.steps is not None  # still the old policy's projection
    later = forecast(steps, 160, changed_at=100)
    assert later.since_change and not later.measuring
    assert later.steps is None  # the projection no longer reaches zero


def test_late_fix_from_the_shipped_recording():
    recording = load(LATE)
    late = late_fix(recording.steps, recording.policy_changes, recording.abort.step)
    assert late is not None and late.change.new == "strict"
    assert late.steps_before_abort == recording.abort.step - late.change.step > 100
    # the runway then was measured under `off`, right before the switch
    before = forecast(recording.steps, late.change.step - recording.steps[0].step)
    assert late.runway.steps == pytest.approx(before.steps)
    assert late.runway.steps < SHORT_RUNWAY_STEPS * 2
    assert late_fix(load(OFF).steps, [], 805) is None  # no fix at all
    switched_back = [*recording.policy_changes,
                     PolicyChanged(step=700, old="strict", new="off", source="tui")]
    assert late_fix(recording.steps, switched_back, recording.abort.step) is None


def test_forecast_error_on_the_shipped_aborts_is_bounded():
    """bench/bench_runway.py prints these; keep the forecast from getting much worse."""
    for path, bound in ((OFF, 40), (LATE, 40)):
        recording = load(path)
        errors = forecast_errors(recording.steps, recording.policy_changes,
                                 recording.abort.step, (50,))
        assert errors[50] is not None and errors[50] <= bound


def test_a_committed_demand_that_fits_means_no_runway_to_count_down():
    """The same filling swap space: with the committed demand recorded and within GPU + CPU
    (with its slack) the forecast says it cannot run out; over it, the rate projection holds."""
    from tui.widgets.status_bar import committed_text, runway_text

    filling = steps_filling([0, 100, 200, 300, 400])
    capacity = filling[-1].gpu_total + filling[-1].cpu_total

    def with_demand(blocks: int, slack: int) -> list[StepRecord]:
        return [msgspec.structs.replace(s, committed_blocks=blocks, committed_slack=slack)
                for s in filling]

    assert forecast(filling).steps is not None  # an old recording: no demand, the rate counts
    fits = forecast(with_demand(capacity - 50, 50))
    assert fits.guaranteed and fits.steps is None
    assert "cannot run out" in runway_text(fits, "reserve", compact=False)[0]
    over = with_demand(capacity - 50, 51)
    runway = forecast(over)
    assert not runway.guaranteed and runway.steps is not None
    assert over[-1].overcommitted
    assert "cannot guarantee" in committed_text(over[-1], "reserve")[0][0]
    assert committed_text(over[-1], "off")[0][0].startswith(  # a sign of trouble: marked
        f"⚠ committed {capacity - 50:,}/{capacity:,} blocks")
    assert committed_text(filling[-1], "off") == []


def test_latest_change():
    changes = [PolicyChanged(step=s, old="off", new="strict", source="cli") for s in (5, 9)]
    assert latest_change(changes, 4) is None
    assert latest_change(changes, 5).step == 5 and latest_change(changes, 100).step == 9


def test_first_difference_of_the_shipped_runs():
    off, toggled = load(OFF).steps, load(TOGGLED).steps
    assert first_difference(off, toggled) == 500
    assert decision_diff(off[500], toggled[500]) == ["withheld"]
    assert first_difference(off, off) is None
    assert first_difference(off, off[:300]) == 300  # one run ended: its end is the difference


def test_timeline_by_step_keeps_the_shorter_run_at_its_end():
    a, b = view_until(OFF), view_until(TOGGLED)
    line = Timeline([a, b], "step")
    assert len(line) == 1600
    end = len(line) - 1
    assert line.step_at(0, end) == a.last_step == 805  # the step vLLM raised in
    assert line.step_at(1, end) == 1599
    assert line.step_at(0, 300) == line.step_at(1, 300) == 300


def test_timeline_by_time_pairs_steps_at_the_same_simulated_moment():
    a, b = view_until(OFF), view_until(TOGGLED)
    line = Timeline([a, b], "time")
    for index in (10, 700, 900, len(line) - 1):
        x = line.positions[index]
        for run, view in enumerate((a, b)):
            step = view.get(line.step_at(run, index))
            following = view.get(step.step + 1)
            assert step.sim_s * 1000 <= x + 1e-6 or step.step == view.first_step
            assert following is None or following.sim_s * 1000 > x
    assert line.index_of_step(0, 500) == line.index_of(a.step(500).sim_s * 1000)


def test_table_columns_by_width():
    narrow = [c.key for c, _ in layout_columns(38)]
    assert narrow[0] == "step" and "out" in narrow and "policy" in narrow
    assert "recomp" not in narrow and "finished" not in narrow
    normal = layout_columns(94)
    assert [c.key for c, _ in normal] == [c.key for c in COLUMNS]
    assert [w for _, w in normal] == [c.width for c in COLUMNS]
    wide = dict((c.key, w) for c, w in layout_columns(154))
    assert sum(wide.values()) == 154 and wide["out"] > 10 and wide["prefill"] > 25
    for width in (20, 38, 60, 78, 94, 120, 154, 300):
        assert sum(w for _, w in layout_columns(width)) <= max(width, 16)


def test_id_lists_are_never_cut_mid_id():
    ids = ["114", "113", "112"]
    assert _ids(ids, 20) == "114,113,112"
    assert _ids(ids, 9) == "114 +2"
    assert _ids([], 9) == ""


def test_ticks_are_whole_numbers_for_counts_and_labels_are_short():
    assert nice_ticks(109.2, 5, integer=True) == [0, 25, 50, 75, 100]
    assert all(t == int(t) for t in nice_ticks(7.3, 5, integer=True))
    assert tick_label(10_486) == "10k" and tick_label(2_500) == "2.5k" and tick_label(60) == "60"


def test_legend_shortens_but_keeps_every_series():
    lines = [Line("running", [], [], theme.RUNNING, short="run"),
             Line("waiting", [], [], theme.WAITING, "right", "wait")]
    marks = [Marker(3, theme.ABORT_MARKER, "abort"), Marker(1, theme.POLICY_MARKER, "policy")]
    colors = {theme.RUNNING: (1, 2, 3), theme.WAITING: (4, 5, 6), theme.ABORT_MARKER: (7, 8, 9),
              theme.POLICY_MARKER: (10, 11, 12)}
    wide = legend_text("groups", "groups", lines, marks, 80, colors.get)
    assert wide.plain == "groups  ━ running  ━ waiting→  ┃ policy  ┃ abort"
    narrow = legend_text("groups", "groups", lines, marks, 22, colors.get)
    assert narrow.plain == "groups ━run ━wait→"
    for text in (wide, narrow):
        styles = {text.plain[span.start:span.end].strip("━┃ "): span.style
                  for span in text.spans}
        assert Style.parse(str(styles["wait→" if "wait→" in styles else "waiting→"])).color \
            .triplet == colors[theme.WAITING]
