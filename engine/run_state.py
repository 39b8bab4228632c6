"""The run's state: the one vocabulary the engine loop, the service protocol and the UI share.

A run is `starting` (vLLM importing, the engine building) until its first step, then `running`,
possibly `paused`, and `stopping` once a stop was asked for; it ends `finished` (completed or
--max-steps), `aborted` (vLLM raised: issue #5578's swap-space abort), `stopped` (asked to),
`stuck` (the no-progress guard ended it: engine.analysis.progress), or `failed` (it never
started, or the observatory's own code broke).

Why a str-valued Enum and not bare strings: the spelling on the wire and in StateChanged stays
exactly the old one ("running"), a member still equals its string for code that has not moved to
the Enum yet, and a typo in a comparison is an AttributeError instead of a silent False.
"""

from __future__ import annotations

from enum import Enum


class RunState(str, Enum):
    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    STOPPING = "stopping"
    FINISHED = "finished"
    ABORTED = "aborted"
    STOPPED = "stopped"
    FAILED = "failed"
    STUCK = "stuck"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def over(self) -> bool:
        """The run has ended (or never started): no further state follows."""
        return self in OVER_STATES


OVER_STATES = frozenset({RunState.FINISHED, RunState.ABORTED, RunState.STOPPED, RunState.FAILED,
                         RunState.STUCK})

_STATE_FOR_END = {"aborted": RunState.ABORTED, "stopped": RunState.STOPPED,
                  "observer_error": RunState.FAILED, "bad_trace": RunState.FAILED,
                  "no_progress": RunState.STUCK}


def state_for_end(reason: str) -> RunState:
    """The state a run ends in, from RunFinished's reason ("completed", "max_steps", ...)."""
    return _STATE_FOR_END.get(reason, RunState.FINISHED)
