"""Open a long recording at once: show a window of it read through its index, and read the
whole file on a background thread.

Why: a 100,000-step recording takes seconds to read whole, while the index the recorder wrote
at close (the reader's indexed mode, engine.stream.reader) says where every zstd frame starts.
So a replay opens on the run's last frames (decoded by offset: a few ms), and `WholeRunLoader`
reads everything with the ordinary, fully checked reader (engine.stream.reader.load) and hands
the screen a complete RunView (tui.messages.RunLoaded), its plot columns already built as
numpy arrays. A jump before that lands decodes the frame it needs on demand (`window_at`). A
damaged file is found by the whole read, said in one line, and the window stays on screen.
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

from engine.errors import ObservatoryError
from engine.stream.reader import IndexDamaged, IndexedFile
from engine.stream.records import STEP_TYPES, Header
from tui.messages import RunLoaded
from tui.run_view import RunView

WINDOW_FROM_STEPS = 20_000
"""Shorter recordings load whole before the screen opens, at step 0 as always: a shipped
1,600-step run loads in ~10 ms of CPU; 100,000 steps take about a second, which is what the
window is for."""

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
    """Reads the whole recording on a daemon thread and posts RunLoaded to `target`.

    It reads frame by frame through the index (each block checked against its Check line,
    each zstd frame against its content checksum, and the steps, lines and end against the
    sealed index), and waits while the user is moving (`busy`): a key press must not queue
    behind a second of decoding for the GIL, so the read offers to wait every ~1 ms of its
    work (every PAUSE_LINES lines of a frame, every EXTEND_CHUNK records it indexes, every
    plot series it builds). Anything that does not check sends it to the strict whole-file
    reader (engine.stream.reader.load), whose one-line error the screen shows.

    The cyclic garbage collector is off while it reads, as engine.stream.reader.load turns
    it off: a 100,000-step run is ~700,000 small containers, none of them cyclic, and each
    full collection over them took ~100 ms of the interpreter, mid-key. With `freeze` (the
    replay owns its process: the `replay` command, not a test) the whole run is then moved
    to the collector's permanent generation (gc.freeze), so no later collection walks it."""

    PAUSE_S = 0.3  # after a key, the read waits this long before going on
    EXTEND_CHUNK = 256  # records indexed between offers to wait

    def __init__(self, path: str, lenient: bool = False,
                 hold: threading.Event | None = None, indexed: IndexedFile | None = None,
                 freeze: bool = False) -> None:
        self.path = path
        self.lenient = lenient
        self.hold = hold  # tests: the read waits for this, so the window can be driven first
        self.indexed = indexed
        self.freeze = freeze
        self.done = threading.Event()  # set once RunLoaded is posted
        self._quiet_at = 0.0  # monotonic time before which the read does not go on

    def busy(self) -> None:
        """The user pressed a key: let the UI have the interpreter for a moment."""
        self._quiet_at = time.monotonic() + self.PAUSE_S

    def start(self, target: Any) -> None:
        threading.Thread(target=self._run, args=(target,), name="observatory-whole-run",
                         daemon=True).start()

    def _wait_quiet(self) -> None:
        while (wait := self._quiet_at - time.monotonic()) > 0:
            time.sleep(wait)

    def _by_frames(self) -> RunView | None:
        indexed = self.indexed
        if indexed is None or self.lenient:
            return None
        index = indexed.index
        try:
            header, records = indexed.frame_records(0, self._wait_quiet)
            if header is None:
                return None
            view = RunView(header, indexed.path)
            self._extend(view, records)
            for k in range(1, len(index.frames)):
                self._extend(view, indexed.frame_records(k, self._wait_quiet)[1])
        except (IndexDamaged, OSError):
            return None
        indexed.cache.clear()  # the view holds the records now
        steps = view.steps
        held = (len(view), steps[0].step if steps else None, steps[-1].step if steps else None,
                view.finished is not None, not view.missing)
        if held != (index.steps, index.first_step, index.last_step, index.finished, True):
            return None
        view.index = index
        return view

    def _extend(self, view: RunView, records: list) -> None:
        step = self.EXTEND_CHUNK
        for i in range(0, len(records), step):
            self._wait_quiet()
            view.extend(records[i:i + step])

    def _run(self, target: Any) -> None:
        from engine.stream.reader import load

        if self.hold is not None:
            self.hold.wait()
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            view = self._by_frames()
            if view is None:
                view = load(self.path, lenient=self.lenient, into=RunView)
            view.prepare_plots(self._wait_quiet)
            if self.freeze:
                gc.freeze()
            message = RunLoaded(view)
        except ObservatoryError as exc:
            message = RunLoaded(None, str(exc))
        except (OSError, MemoryError) as exc:
            message = RunLoaded(None, f"{type(exc).__name__}: {exc}")
        finally:
            if was_enabled:
                gc.enable()
        self._wait_quiet()
        target.post_message(message)
        self.done.set()


__all__ = ["IndexDamaged", "WholeRunLoader", "window_at"]
