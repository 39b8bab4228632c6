"""The engine's start-up as the live screen sees it: each stage named with its seconds.

Start-up was long and silent ("building the engine…" for 5 to 50 s, no time). The engine process
says each stage as it starts it (engine.stream.protocol.Progress: importing vLLM, building the
engine, making the workload, adding the requests, the first step); this clock times them on the
screen's side, from the launch of the command (the process's own start, where the OS says it) or
from a restart, so the status can say where it is and for how long, and the events panel keeps
the whole breakdown once the first step is on screen.
"""

from __future__ import annotations

import os
import time

FIRST_STAGE = "starting the engine process"


def process_age_s() -> float:
    """Seconds since this process started (Linux: /proc), 0.0 where that cannot be read: the
    launch a start-up time is counted from, imports included."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


class StartupClock:
    """Stages in the order they arrive, each timed until the next one starts."""

    def __init__(self, since: float | None = None) -> None:
        now = time.monotonic()
        self.since = now if since is None else min(since, now)  # the launch (monotonic)
        self.stage = FIRST_STAGE
        self.detail = ""
        self.stage_at = now
        self.done: list[tuple[str, float]] = []  # finished stages and their seconds
        self.shown = False  # the first step is on screen (the summary was said)
        if now - self.since >= 0.05:  # the interpreter, the imports and the screen itself
            self.done.append(("the observatory's own start", now - self.since))

    def enter(self, stage: str, detail: str = "") -> None:
        """The engine reached `stage` (or said more about the current one: `detail`)."""
        now = time.monotonic()
        if stage == self.stage:
            self.detail = detail or self.detail
            return
        self.done.append((self.stage, now - self.stage_at))
        self.stage, self.detail, self.stage_at = stage, detail, now

    def elapsed_s(self) -> float:
        return time.monotonic() - self.since

    def text(self) -> str:
        """The stage as the status says it: "building the engine (8,192 GPU blocks…) 2.1 s,
        6.3 s since launch"."""
        detail = f" ({self.detail})" if self.detail else ""
        return (f"{self.stage}{detail} {time.monotonic() - self.stage_at:.1f} s, "
                f"{self.elapsed_s():.1f} s since launch")

    def summary(self) -> str:
        """The events panel's line once the first step is on screen."""
        stages = [*self.done, (self.stage, time.monotonic() - self.stage_at)]
        return (f"first step on screen {self.elapsed_s():.1f} s after launch: "
                + " · ".join(f"{name} {seconds:.1f} s" for name, seconds in stages))
