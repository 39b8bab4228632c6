"""Attention: an engine a person watches holds at each sign of trouble, so that `f` is in time.

The bugs the observatory shows run their course in a second or two of wall clock once they
start: on the seed (#5578, vLLM 0.5.0.post1) the first group swaps out at step 454, and a fix
switched on later than ~175 steps after it no longer saves the run, which an unpaced sim engine
covers in well under a second (on 0.6.3.post1 `reserve` must come before step 3, one step after
the demand outgrew GPU + CPU); v1-head-of-line's 612-step stall is over in two seconds at 300
steps/s. A person who sees the first sign and reaches for `f` three seconds later came too late.

So the live monitor's own engine pauses itself where a kind of sign first shows
(engine.analysis.signs: on V0 the committed demand outgrowing GPU + CPU, then the first swapped
group; on V1 the first preemption, a stall, an under-filled step) while the policy is still
`off`, for HOLD_S seconds of wall clock (`live --hold`). Any command ends the hold at once: `f`
switches the fix at the very step the run was held at, space goes on, `>` and `<` go on at the
new pace. With none, the run goes on by itself. The StateChanged that says "paused" carries the
sign and the seconds, and the screen says them.

A hold is wall clock only (engine.session): no record says it and no decision changes, so the
recording of a held run equals a headless run's with the same policy switches, step for step.
Only live's engine child holds, and only on the sim (a GPU run's arrivals follow the wall
clock): `run`, `serve`, `exec` and attached engines never do.
"""

from __future__ import annotations

from engine.analysis.signs import Signs
from engine.analysis.stall import seat_limit
from engine.stream.records import STEP_TYPES, Header

HOLD_S = 10.0
"""Seconds the engine holds at a sign: a person who notices it within three seconds and presses
`f` is in time with room to spare, also on a loaded machine whose screen lags."""


class Attention:
    """A Session sink (engine thread) that asks the session to hold where a sign shows."""

    def __init__(self, session, seconds: float = HOLD_S) -> None:
        self.session = session  # engine.session.Session
        self.seconds = seconds
        self._signs: Signs | None = None

    def __call__(self, item) -> None:
        kind = type(item)
        if kind is Header:
            self._signs = Signs(item.engine, seat_limit(item))
        elif kind in STEP_TYPES and self._signs is not None:
            sign = self._signs.add(item)
            if sign is not None and item.policy == "off":
                self.session.hold(self.seconds, sign)
