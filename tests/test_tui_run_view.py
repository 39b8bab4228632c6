"""The TUI's view model, without an app: what every widget renders from."""

from __future__ import annotations

import numpy as np

from engine.stream.records import EngineAborted, PolicyChanged, StepRecord
from tui.run_view import RunView


def test_demo_abort_becomes_events_and_markers(demo_run):
    items = demo_run("off")
    view = RunView.from_items(items)
    steps = [i for i in items if isinstance(i, StepRecord)]
    abort = next(i for i in items if isinstance(i, EngineAborted))
    assert len(view) == len(steps) and view.recorded_last_step == steps[-1].step
    assert view.abort == abort and view.finished is not None
    # the step vLLM raised in is one more step to show (engine.conventions): its state is
    # what vLLM left, it decided nothing, and the plots end at it
    assert view.last_step == abort.step == steps[-1].step + 1
    aborting = view.get(abort.step)
    assert aborting is view.aborting and aborting.swapped == abort.swapped
    assert (aborting.running, aborting.waiting, aborting.cpu_used) == \
        (abort.running, abort.waiting, abort.cpu_used)
    assert not aborting.prefills and not aborting.swapped_out and aborting.batched_tokens == 0
    xs, ys = view.series("swapped", view.first_step, view.last_step, 10_000)
    assert (xs[-1], ys[-1]) == (abort.step, abort.swapped)
    assert max(ys) == abort.swapped
    xs, _ = view.series("gen_tps", view.first_step, view.last_step, 10_000)
    assert xs[-1] == steps[-1].step  # no rate: the step never ran
    kinds = [e.kind for e in view.events]
    assert "swapout" in kinds and "abort" in kinds
    # n from the start walks swap-out bursts and lands on the abort last.
    event, seen = view.next_event(-1), []
    while event is not None:
        seen.append(event)
        event = view.next_event(event.step)
    assert seen[-1].kind == "abort" and seen[-1].step == abort.step
    assert view.prev_event(abort.step).kind == "swapout"


def test_abort_is_visible_only_once_the_cursor_reaches_it(demo_run):
    view = RunView.from_items(demo_run("off"))
    view.cursor = view.first_step
    assert not view.abort_visible
    view.cursor = view.last_step
    assert view.abort_visible
    view.cursor = None  # live: following the newest step
    assert view.abort_visible


def test_series_downsample_keeps_peaks_and_rates(demo_run):
    items = demo_run("off")
    view = RunView.from_items(items)
    steps = [i for i in items if isinstance(i, StepRecord)]
    xs, ys = view.series("cpu_pct", view.first_step, view.last_step, 50)
    assert len(xs) <= 50 and len(xs) == len(ys)
    assert ys.max() == max(s.cpu_pct for s in steps)  # the peak before the abort survives
    _, rate = view.series("gen_tps", view.first_step, view.last_step, 10_000)
    expected = [s.generated_tokens / s.sim_step_s for s in steps]
    assert np.allclose(rate, expected)
    # a window is just that window
    xs, _ = view.series("swapped", 10, 19, 100)
    assert list(xs) == list(range(10, 20))


def test_policy_changes_are_tracked(demo_run):
    view = RunView.from_items(demo_run("off", toggles=[(40, "strict")]))
    assert [(p.step, p.new) for p in view.policy_changes] == [(40, "strict")]
    view.cursor = 39
    assert view.policy == "off"
    view.cursor = 40
    assert view.policy == "strict"
    assert view.next_event(0, ("policy",)).step == 40
    assert isinstance(view.policy_changes[0], PolicyChanged)


def test_a_gap_in_the_steps_is_bridged_with_a_notice(demo_run):
    items = [i for i in demo_run("off") if not (isinstance(i, StepRecord) and 50 <= i.step < 53)]
    view = RunView.from_items(items)
    assert [s.step for s in view.steps] == list(range(view.first_step,
                                                      view.recorded_last_step + 1))
    assert view.get(51).swapped == view.get(49).swapped
    assert any(e.kind == "notice" and "50–52 are missing" in e.text for e in view.events)


def test_a_lenient_read_with_a_missing_step_keeps_steps_in_place(demo_run, tmp_path):
    """`replay --lenient` of a file whose step line is corrupt: the gap is bridged and said."""
    from engine.stream.reader import load
    from engine.analysis.summary import SummaryBuilder
    from engine.stream.recorder import Recorder

    items = demo_run("off")
    path = tmp_path / "damaged.jsonl"
    with Recorder(path, items[0], background_flush=False, fold=SummaryBuilder) as recorder:
        for item in items[1:]:
            recorder.write(item)
            recorder.flush()  # a Check line per record: damage costs just that record
    lines = path.read_bytes().splitlines(keepends=True)
    victim = next(i for i, line in enumerate(lines) if b'"step":50,' in line
                  and line.startswith(b'{"kind":"step"'))
    lines[victim] = b'{"kind":"step","step":50,"wall_s":\n'
    path.write_bytes(b"".join(lines))

    recording = load(path, lenient=True)
    assert recording.skipped_lines == 2  # the step's line and its Check line
    view = RunView.from_items(recording.all_items())
    assert view.get(50).step == 50 and view.get(51).step == 51
    assert view.get(50).swapped == view.get(49).swapped  # a repeat of step 49, not a guess
    assert any(e.kind == "notice" and "missing" in e.text for e in view.events)
