"""Snapshots of the live screen, the abort banner and the replay screen.

All are made from the shipped recordings, so they are deterministic: the live screen is fed by
a stand-in session that plays a recording's items (with wall-clock times replaced by a fixed
pace), replay shows no wall-clock values, and nothing blinks.

Update after an intended change: pytest tests/test_tui_snapshots.py --snapshot-update
"""

from __future__ import annotations

import time
from pathlib import Path

import msgspec

from engine.stream.reader import load
from engine.stream.records import EngineAborted, RunFinished, StepRecord
from engine.spec import RunSpec
from tui.app import ObservatoryApp
from tui.launch import replay_app
from tui.live_screen import LiveScreen

ROOT = Path(__file__).resolve().parents[1]
OFF = ROOT / "recordings" / "seed-5578-off.jsonl.zst"
TOGGLED = ROOT / "recordings" / "seed-5578-off-then-strict.jsonl.zst"
SIZE = (160, 50)


class RecordedSession:
    """Stands in for engine.session.Session: start() plays a recording's items to the sinks."""

    def __init__(self, path: Path, until_step: int | None = None) -> None:
        recording = load(path)
        self.header = None
        self._header = recording.header
        self._items = []
        for item in recording.items:
            step = getattr(item, "step", None)
            if until_step is not None and (isinstance(item, (RunFinished, EngineAborted))
                                           or (step is not None and step > until_step)):
                break
            if isinstance(item, StepRecord):
                item = msgspec.structs.replace(item, wall_s=(item.step + 1) * 0.01)
            self._items.append(item)
        self._final = "running" if until_step is not None else (
            "aborted" if recording.abort is not None else "finished")
        self.state = "starting"
        self.policy = str(self._header.spec.get("policy", "off"))
        self._sinks = []

    def subscribe(self, sink) -> None:
        self._sinks.append(sink)

    def prepare(self) -> None:
        self.header = self._header

    def start(self) -> None:
        for item in [self._header, *self._items]:
            for sink in self._sinks:
                sink(item)
        self.state = self._final

    def join(self, timeout=None) -> None:
        pass

    def stop(self) -> None:
        self.state = "stopped"

    pause = resume = stop
    set_policy = add_burst = lambda *a, **k: None  # noqa: E731


def live_from_recording(path: Path, until_step: int | None) -> ObservatoryApp:
    session = RecordedSession(path, until_step)
    spec = RunSpec.from_dict(session._header.spec)
    return ObservatoryApp(lambda: LiveScreen(spec, None, 2000,
                                             session_factory=lambda _spec: session))


def settled(steps: int):
    """run_before: wait until the live screen drained `steps` steps, then draw everything."""

    async def run_before(pilot) -> None:
        screen = pilot.app.main_screen
        deadline = time.monotonic() + 30
        while (len(screen.view.steps) < steps or screen._buffer) \
                and time.monotonic() < deadline:
            await pilot.pause(0.05)
        screen._update_widgets(force_plots=True)
        await pilot.pause()

    return run_before


def test_live_screen_mid_run(snap_compare):
    app = live_from_recording(OFF, until_step=600)
    assert snap_compare(app, terminal_size=SIZE, run_before=settled(601))


def test_live_abort_banner(snap_compare):
    app = live_from_recording(OFF, until_step=None)
    assert snap_compare(app, terminal_size=SIZE, run_before=settled(805))


def test_replay_screen(snap_compare):
    app = replay_app([str(TOGGLED)], autoplay=False)

    async def run_before(pilot) -> None:
        await pilot.pause()
        pilot.app.main_screen.seek(640)
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_replay_at_the_abort(snap_compare):
    app = replay_app([str(OFF)], autoplay=False)
    assert snap_compare(app, terminal_size=SIZE, press=["end"])
