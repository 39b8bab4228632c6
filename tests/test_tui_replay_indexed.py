"""Replay of a long recording with an index: it opens on a window of the run's end, jumps
work before the whole file is read, and the whole run then takes the window's place. (A
shipped run is short, so `window_from_steps=0` makes it long enough.)"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from engine.stream.reader import load
from engine.analysis.summary import SummaryBuilder
from engine.stream.recorder import Recorder
from tui.launch import replay_app
from tui.run_window import WholeRunLoader
from tui.replay.replay_screen import ReplayScreen
from tui.widgets.replay_bar import ReplayBar

ROOT = Path(__file__).resolve().parents[1]
OFF = ROOT / "recordings" / "seed-5578-off.jsonl.zst"  # 1,600-odd steps, ends in the abort
SIZE = (160, 50)


def indexed_copy(tmp_path: Path, frame_bytes: int = 1 << 15) -> Path:
    run = load(OFF)
    path = tmp_path / "off.jsonl.zst"
    recorder = Recorder(path, run.header, background_flush=False, frame_bytes=frame_bytes,
                        fold=SummaryBuilder)
    for item in run.items:
        recorder.write(item)
    recorder.close()
    return path


async def test_indexed_replay_opens_at_the_end_and_jumps_before_the_whole_read(tmp_path):
    path = indexed_copy(tmp_path)
    full = load(path)
    first, last = full.first_step, full.abort.step  # the screens end at the aborting step
    assert last == full.last_step + 1
    hold = threading.Event()  # the whole read waits: drive the window first
    app = replay_app([str(path)], hold_whole_read=hold, window_from_steps=0)
    async with app.run_test(size=SIZE) as pilot:
        screen: ReplayScreen = app.main_screen  # type: ignore[assignment]
        assert isinstance(screen.loader, WholeRunLoader)
        assert screen.windowed and screen.view.current_step == last
        assert screen.view.first_step > first  # a window, not the run
        bar = screen.query_one(ReplayBar)
        assert (bar.first, bar.last) == (first, last)  # the bar says the whole run
        await pilot.press("home")
        assert screen.view.current_step == first and screen.windowed
        assert screen.view.get(first) == full.step(first)
        await pilot.press("g")
        await pilot.press(*str(last // 2), "enter")
        assert screen.view.current_step == last // 2
        assert screen.view.get(last // 2) == full.step(last // 2)
        await pilot.press("end")
        assert screen.view.current_step == last
        await pilot.press("g")
        await pilot.press(*str(last // 3), "enter")
        hold.set()
        await asyncio.to_thread(screen.loader.done.wait, 60)
        await pilot.pause()
        assert not screen.windowed and len(screen.view) == len(full)
        assert screen.view.current_step == last // 3  # the whole run, where the cursor was
        assert [e.text for e in screen.view.events] == [e.text for e in full.log]
        await pilot.press("end")
        assert screen.view.current_step == last
        assert screen.view.abort is not None


def plotted(screen: ReplayScreen) -> dict[str, tuple[tuple[float, float], list]]:
    """Each plot's x range and its lines' points, as the plots were last given them."""
    from tui.widgets.run_plot import RunPlot

    return {p.id: (p._xlim, [(line.label, list(line.xs), list(line.ys)) for line in p._lines])
            for p in screen.query(RunPlot)}


async def test_a_jump_to_another_window_shows_that_steps_plots(tmp_path):
    """Home and `g N` on the window land on another part of the run: the screen shows that
    step, and every plot is redrawn from that part's records (the whole run's series over the
    same range), not left showing the window it came from."""
    path = indexed_copy(tmp_path)
    full = load(path)
    from tui.run_view import RunView

    whole = load(path, into=RunView)
    hold = threading.Event()
    app = replay_app([str(path)], hold_whole_read=hold, window_from_steps=0)
    async with app.run_test(size=SIZE) as pilot:
        screen: ReplayScreen = app.main_screen  # type: ignore[assignment]
        at_end = plotted(screen)
        for keys, step in ((["home"], full.first_step),
                           (["g", *str(full.last_step // 2), "enter"], full.last_step // 2)):
            await pilot.press(*keys)
            await pilot.pause()
            assert screen.windowed and screen.view.current_step == step
            view = screen.view
            assert view.first_step <= step <= view.last_step < full.last_step
            shown = plotted(screen)
            assert shown != at_end
            for plot_id, (xlim, lines) in shown.items():
                assert xlim == (float(view.first_step), float(view.last_step))
                plot = screen.query_one(f"#{plot_id}")
                for label, xs, ys in lines:
                    name = {"GPU": "gpu_pct", "CPU": "cpu_pct", "running": "running",
                            "swapped": "swapped", "waiting": "waiting", "generated": "gen_tps",
                            "prompt": "prompt_tps",
                            "committed × GPU+CPU": "committed_x"}[label]
                    wx, wy = whole.series(name, view.first_step, view.last_step, plot.points)
                    assert xs == list(wx) and ys == list(wy), (plot_id, label)
            assert plot._cursor == step  # the cursor line is at the shown step
        hold.set()
        await asyncio.to_thread(screen.loader.done.wait, 60)


def test_the_whole_read_turns_the_collector_off_and_with_freeze_freezes_the_run(tmp_path):
    """A 100,000-step run is ~700,000 containers; a full collection over them mid-key took
    ~100 ms. The read runs with the collector off (and turns it back on); with `freeze` (the
    `replay` command owns its process) the run ends in the permanent generation."""
    import gc

    from engine.stream.reader import open_indexed

    path = indexed_copy(tmp_path)

    class Target:
        def __init__(self) -> None:
            self.messages = []
            self.collector_on = []

        def post_message(self, message) -> None:
            self.collector_on.append(gc.isenabled())
            self.messages.append(message)

    for freeze in (False, True):
        target = Target()
        collector_during = []
        loader = WholeRunLoader(str(path), indexed=open_indexed(path), freeze=freeze)
        loader._wait_quiet = lambda: collector_during.append(gc.isenabled())  # type: ignore
        before = gc.get_freeze_count()
        try:
            loader._run(target)
            frozen = gc.get_freeze_count() - before
        finally:
            gc.unfreeze()  # the test process goes on: give the collector its objects back
        assert gc.isenabled() and target.collector_on == [True]
        # off at every offer to pause while reading; the last one, before the post, is after
        assert len(collector_during) > 2 and not any(collector_during[:-1])
        assert target.messages[0].view is not None and len(target.messages[0].view) == \
            len(load(path))
        if freeze:
            assert frozen > len(target.messages[0].view.steps)  # the run's containers
        else:
            assert frozen == 0


def test_a_frame_read_offers_to_pause_every_few_hundred_lines(tmp_path):
    from engine.stream.reader import PAUSE_LINES, open_indexed

    path = indexed_copy(tmp_path, frame_bytes=1 << 20)
    indexed = open_indexed(path)
    calls = []
    k = max(range(len(indexed.index.frames)), key=lambda j: len(indexed.frame_text(j)))
    lines = indexed.frame_text(k).count(b"\n")
    indexed.frame_records(k, lambda: calls.append(1))
    assert lines > PAUSE_LINES
    assert len(calls) == -(-lines // PAUSE_LINES)
    indexed.frame_records(k, lambda: calls.append(1))  # cached: decoded once
    assert len(calls) == -(-lines // PAUSE_LINES)
