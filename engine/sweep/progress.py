"""The sweep's progress: a rich progress bar on a terminal (cells done, failed, ETA), a line every
few seconds when stderr is a pipe or a file, and one final line either way."""

from __future__ import annotations

import sys
import time
from typing import IO

LINE_INTERVAL_S = 5.0


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def note_line(bar, stream: IO[str], text: str) -> None:  # noqa: ANN001
    """`text` as a line above a rich progress `bar`, or on `stream` when there is none (the
    sweep's and the hunt's progress both)."""
    if bar is not None:
        bar.console.print(text, highlight=False, markup=False)
    else:
        stream.write(text + "\n")
        stream.flush()


class SweepProgress:
    """`advance(failed=...)` once per finished cell; `tick()` when nothing finished (keeps the
    ETA moving); `close()` prints the final line."""

    def __init__(self, total: int, skipped: int, stream: IO[str] | None = None,
                 live: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.total = total  # cells this run will execute (resumed cells not counted)
        self.skipped = skipped
        self.done = 0
        self.failed = 0
        self.started = time.monotonic()
        self._rate_from = self.started
        self._last_line = self.started
        self._bar = None
        if live is None:
            live = self.stream.isatty()
        if live and total:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            self._bar = Progress(
                TextColumn("sweep"), BarColumn(), MofNCompleteColumn(),
                TextColumn("[red]{task.fields[failed]} failed"), TextColumn("elapsed"),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                console=Console(file=self.stream), transient=True)
            self._task = self._bar.add_task("cells", total=total, failed=0)
            self._bar.start()

    def begin(self) -> None:
        """Cells start now (Ray is up): the ETA counts from here, the final line from the start."""
        self._rate_from = time.monotonic()

    def note(self, text: str) -> None:
        """A line above the bar (or on its own without one)."""
        note_line(self._bar, self.stream, text)

    def eta_s(self) -> float | None:
        if not self.done:
            return None
        elapsed = time.monotonic() - self._rate_from
        return elapsed / self.done * (self.total - self.done)

    def status_line(self) -> str:
        eta = self.eta_s()
        return (f"sweep: {self.done}/{self.total} cells done, {self.failed} failed, elapsed "
                f"{_clock(time.monotonic() - self.started)}, ETA "
                f"{'?' if eta is None else _clock(eta)}")

    def advance(self, failed: bool) -> None:
        self.done += 1
        self.failed += int(failed)
        if self._bar is not None:
            self._bar.update(self._task, advance=1, failed=self.failed)
        else:
            self.tick()

    def tick(self) -> None:
        now = time.monotonic()
        if self._bar is None and now - self._last_line >= LINE_INTERVAL_S:
            self._last_line = now
            self.stream.write(self.status_line() + "\n")
            self.stream.flush()

    def close(self, directory: str, interrupted: bool = False) -> str:
        """Stop the bar and print (and return) the final line."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        elapsed = _clock(time.monotonic() - self.started)
        kept = f", {self.skipped} already done" if self.skipped else ""
        if interrupted:
            line = (f"sweep interrupted: {self.done} of {self.total} cells finished "
                    f"({self.failed} failed){kept} in {elapsed}; rows kept in {directory}; "
                    f"continue with: observatory sweep --resume {directory}")
        else:
            line = (f"sweep: {self.done} cells ({self.done - self.failed} ok, {self.failed} "
                    f"failed){kept} in {elapsed}; results in {directory}")
        self.stream.write(line + "\n")
        self.stream.flush()
        return line
