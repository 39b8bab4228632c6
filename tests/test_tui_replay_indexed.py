"""Replay of a long recording with an index: it opens on a window of the run's end, jumps
work before the whole file is read, and the whole run then takes the window's place. (A
shipped run is short, so `window_from_steps=0` makes it long enough.)"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from engine.stream.reader import load
from engine.stream.recorder import Recorder
from tui.launch import replay_app
from tui.replay.lazy import WholeRunLoader
from tui.replay.replay_screen import ReplayScreen
from tui.widgets.replay_bar import ReplayBar

ROOT = Path(__file__).resolve().parents[1]
OFF = ROOT / "recordings" / "seed-5578-off.jsonl.zst"  # 1,600-odd steps, ends in the abort
SIZE = (160, 50)


def indexed_copy(tmp_path: Path) -> Path:
    run = load(OFF)
    path = tmp_path / "off.jsonl.zst"
    recorder = Recorder(path, run.header, background_flush=False, frame_bytes=1 << 15)
    for item in run.items:
        recorder.write(item)
    recorder.close()
    return path


async def test_indexed_replay_opens_at_the_end_and_jumps_before_the_whole_read(tmp_path):
    path = indexed_copy(tmp_path)
    full = load(path)
    first, last = full.first_step, full.last_step
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
