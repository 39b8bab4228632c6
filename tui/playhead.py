"""One playback object for every screen that moves through a run: replay, the A/B replay and
a sweep cell's replay. It owns where playback is, how fast it goes, whether it plays, whether
it follows the newest position, and how it moves: step, seek, start and end, the jumps between
events, and the play clock. The screens only draw what it says.

Positions are whole numbers from `first` to `last`: step numbers on the replay screen, indices
into the shared timeline on the A/B replay. How fast a position goes by at 1x is the `Pace`'s
business: the recorded wall clock on the replay screen, steps or simulated milliseconds on the
A/B replay. Nothing here imports textual; tests drive it with explicit clock readings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

MIN_SPEED, MAX_SPEED = 0.25, 64.0


class Pace(Protocol):
    """How positions map onto the axis playback runs along (seconds, steps, milliseconds)."""

    units_per_s: float  # axis units that go by in one second at 1x

    def value_of(self, position: int) -> float:
        """Where `position` is on the axis."""

    def position_at(self, value: float) -> int:
        """The last position at or before `value` on the axis."""


class StepPace:
    """Positions are their own axis: `units_per_s` of them go by per second at 1x."""

    def __init__(self, units_per_s: float) -> None:
        self.units_per_s = units_per_s

    def value_of(self, position: int) -> float:
        return float(position)

    def position_at(self, value: float) -> int:
        return int(value // 1)


class WallPace:
    """A run's steps at the pace they were recorded: 1x plays its wall clock. A recording
    without usable wall-clock times plays `fallback_steps_per_s` steps a second. Read from the
    run (a RunView) on every call, so a run that is still growing keeps its pace."""

    def __init__(self, run, fallback_steps_per_s: float = 100.0) -> None:
        self.run = run
        self.fallback = StepPace(fallback_steps_per_s)

    @property
    def timed(self) -> bool:
        steps = self.run.steps
        return bool(steps) and steps[-1].wall_s > steps[0].wall_s

    @property
    def units_per_s(self) -> float:
        return 1.0 if self.timed else self.fallback.units_per_s

    def value_of(self, position: int) -> float:
        return self.run.wall_of(position) if self.timed else self.fallback.value_of(position)

    def position_at(self, value: float) -> int:
        return self.run.step_at_wall(value) if self.timed else self.fallback.position_at(value)


EventFinder = Callable[[int, int], "tuple[int, str] | None"]
"""(position, direction +1/-1) -> the next event's position that way and what it says, or
None. Each screen knows its events (one run's, or the nearer of two runs'); the playhead
moves to them."""


@dataclass
class Playhead:
    """Where playback is and how it moves. `following` holds `position` at `last` as more
    arrives; `ended` says nothing more will arrive, so playing stops at the end."""

    pace: Pace = field(default_factory=lambda: StepPace(100.0))
    first: int = 0
    last: int = 0
    position: int = 0
    speed: float = 1.0
    playing: bool = False
    following: bool = False
    ended: bool = True
    _clock: float = 0.0  # where playback is on the pace's axis (between positions, too)
    _last_tick: float | None = None

    def __post_init__(self) -> None:
        self.speed = clamp_speed(self.speed)
        self.position = self.last if self.following else self.clamp(self.position)
        self._clock = self.pace.value_of(self.position)

    # -- what it covers --------------------------------------------------------------------

    def clamp(self, position: int) -> int:
        return max(self.first, min(self.last, position))

    def extend(self, first: int, last: int) -> None:
        """More positions arrived (or the run was replaced): keep following, else stay."""
        self.first, self.last = first, max(first, last)
        if self.following:
            self.position = self.last
        else:
            self.position = self.clamp(self.position)

    @property
    def at_end(self) -> bool:
        return self.position >= self.last

    # -- moving ----------------------------------------------------------------------------

    def seek(self, position: int) -> None:
        """Go to `position` (clamped) and stop following; playing goes on from there."""
        self.following = False
        self.position = self.clamp(position)
        self._clock = self.pace.value_of(self.position)

    def go(self, position: int) -> None:
        """A user's move (a key, a click, a jump): stop playing and go there."""
        self.playing = False
        self.seek(position)

    def step(self, delta: int) -> None:
        self.go(self.position + delta)

    def start(self) -> None:
        self.go(self.first)

    def end(self) -> None:
        """To the last position; while more may come, follow it."""
        self.playing = False
        if self.ended:
            self.seek(self.last)
        else:
            self.follow()

    def follow(self) -> None:
        self.following, self.playing = True, False
        self.position = self.last

    def jump(self, direction: int, find: EventFinder) -> str | None:
        """To the next (+1) or previous (-1) event; what it says, or None if there is none."""
        found = find(self.position, direction)
        if found is None:
            return None
        position, text = found
        self.go(position)
        return text

    # -- playing ---------------------------------------------------------------------------

    def toggle(self, now: float) -> None:
        """Play or pause. Playing at the end of a finished run starts again from the start;
        playing while following plays on from the newest position."""
        if not self.playing and self.ended and self.at_end:
            self.seek(self.first)
        if self.following:
            self.seek(self.last)
        self.playing = not self.playing
        self._last_tick = now

    def scale_speed(self, factor: float) -> None:
        self.speed = clamp_speed(self.speed * factor)

    def tick(self, now: float) -> bool:
        """Advance by the time since the last tick; whether the position (or playing) changed."""
        dt = 0.0 if self._last_tick is None else now - self._last_tick
        self._last_tick = now
        if not self.playing or self.following:
            return False
        self._clock += dt * self.speed * self.pace.units_per_s
        target = self.clamp(max(self.position, self.pace.position_at(self._clock)))
        changed = target != self.position
        self.position = target
        if self.at_end and self.ended:
            self.playing = False
            return True
        return changed

    def retime(self, pace: Pace, position: int) -> None:
        """A new axis (the A/B replay switching between steps and time) at `position`."""
        self.pace = pace
        self.seek(position)


def clamp_speed(speed: float) -> float:
    return max(MIN_SPEED, min(MAX_SPEED, speed))
