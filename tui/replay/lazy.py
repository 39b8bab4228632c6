"""Open a long recording at once: show a window of it read through its index, and read the
whole file on a background thread.

Why: a 100,000-step recording takes seconds to read whole, while the index the recorder wrote
at close (engine.stream.indexed) says where every zstd frame starts. So a replay opens on the
run's last frames (decoded by offset: a few ms), and `WholeRunLoader` reads everything with
the ordinary, fully checked reader (engine.stream.reader.load) and hands the screen a
complete RunView (tui.messages.RunLoaded), its plot columns already built as numpy arrays. A
jump before that lands decodes the frame it needs on demand (`window_at`). A damaged file is
found by the whole read, said in one line, and the window stays on screen.
"""

from __future__ import annotations

import threading
from typing import Any

from engine.errors import ObservatoryError
from engine.stream.indexed import IndexDamaged, IndexedFile
from engine.stream.records import STEP_TYPES, Header
from tui.messages import RunLoaded
from tui.run_view import RunView

WINDOW_MIN_STEPS = 200
"""A window holds whole frames, at least this many steps (the last frame may be small)."""


def window_at(indexed: IndexedFile, header: Header, step: int) -> RunView:
    """A RunView over the frame holding `step` (and its neighbours until WINDOW_MIN_STEPS).
    Raises IndexDamaged if a frame does not check."""
    frames = indexed.index.frames
    k = indexed.frame_of(step)
    lo = hi = k
    chunks = {k: indexed.frame_records(k)[1]}

    def steps_in(ks) -> int:
        return sum(1 for j in ks for r in chunks[j] if type(r) in STEP_TYPES)

    while steps_in(chunks) < WINDOW_MIN_STEPS and (lo > 0 or hi < len(frames) - 1):
        if lo > 0:
            lo -= 1
            chunks[lo] = indexed.frame_records(lo)[1]
        if hi < len(frames) - 1 and steps_in(chunks) < WINDOW_MIN_STEPS:
            hi += 1
            chunks[hi] = indexed.frame_records(hi)[1]
    view = RunView(header, indexed.path)
    for j in range(lo, hi + 1):
        view.extend(chunks[j])
    return view


class WholeRunLoader:
    """Reads the whole recording on a daemon thread and posts RunLoaded to `target`."""

    def __init__(self, path: str, lenient: bool = False,
                 hold: threading.Event | None = None) -> None:
        self.path = path
        self.lenient = lenient
        self.hold = hold  # tests: the read waits for this, so the window can be driven first
        self.done = threading.Event()  # set once RunLoaded is posted

    def start(self, target: Any) -> None:
        threading.Thread(target=self._run, args=(target,), name="observatory-whole-run",
                         daemon=True).start()

    def _run(self, target: Any) -> None:
        from engine.stream.reader import load

        if self.hold is not None:
            self.hold.wait()
        try:
            view = load(self.path, lenient=self.lenient, into=RunView)
            view.prepare_plots()
            message = RunLoaded(view)
        except ObservatoryError as exc:
            message = RunLoaded(None, str(exc))
        except (OSError, MemoryError) as exc:
            message = RunLoaded(None, f"{type(exc).__name__}: {exc}")
        target.post_message(message)
        self.done.set()


__all__ = ["IndexDamaged", "WholeRunLoader", "window_at"]
