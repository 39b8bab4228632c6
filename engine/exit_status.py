"""Every exit status the `observatory` command can end with, and what sets it: the one map.

    0   OK              done: the run finished or reached --max-steps, the file was written
    1   DIFFERENCE      `verify` found a difference; some of a sweep's cells failed; `hunt`
                        found a bug (its bundles say what)
    2   USAGE           bad input, one line on stderr: any ObservatoryError (a flag, a damaged
                        recording, a refused connection, an engine that cannot be built), or
                        stdout/stderr that cannot be written
    3   ABORTED         vLLM aborted the run (issue #5578's swap-space abort): the bug, observed
    4   OBSERVER_ERROR  the observatory's own code failed during a run (ObserverError): a bug to
                        report
    5   STUCK           the no-progress guard ended the run (RunFinished reason "no_progress"):
                        the engine held requests and moved none of them, or a step never
                        returned; the log line of logger observatory.guard says what was stuck
    128+N               stopped by signal N (130: Ctrl-C; a sweep interrupted also exits 130)

Why one place: the statuses are a contract with scripts and CI (a sweep's cell, `verify` in a
pipeline), and they used to be constants scattered over five modules.
"""

from __future__ import annotations

import signal
from enum import IntEnum

from engine.errors import ConfigError, EngineError, ObservatoryError, PeerError, RecordingError


class ExitStatus(IntEnum):
    OK = 0
    DIFFERENCE = 1
    USAGE = 2
    ABORTED = 3
    OBSERVER_ERROR = 4
    STUCK = 5
    INTERRUPTED = 128 + signal.SIGINT  # 130


_FOR_ERROR: dict[type[ObservatoryError], ExitStatus] = {
    ConfigError: ExitStatus.USAGE,
    RecordingError: ExitStatus.USAGE,
    PeerError: ExitStatus.USAGE,
    EngineError: ExitStatus.USAGE,
}
_FOR_END_REASON = {"aborted": ExitStatus.ABORTED, "observer_error": ExitStatus.OBSERVER_ERROR,
                   "bad_trace": ExitStatus.USAGE,  # a --trace row that is bad, mid-run
                   "no_progress": ExitStatus.STUCK}  # engine.analysis.progress


def for_error(exc: BaseException) -> ExitStatus:
    """The status for an error the CLI reports in one line (the most specific class wins)."""
    for cls in type(exc).__mro__:
        if cls in _FOR_ERROR:
            return _FOR_ERROR[cls]
    return ExitStatus.USAGE  # ObservatoryError itself, an unwritable stdout (console)


def for_run_end(reason: str) -> ExitStatus:
    """The status for a run that ended with RunFinished(reason=...): "completed" and
    "max_steps" are OK; "interrupted" (a second signal) is decided by for_signal."""
    return _FOR_END_REASON.get(reason, ExitStatus.OK)


def for_signal(signum: int) -> int:
    """A run stopped by signal N exits 128+N, as a shell reports it."""
    return 128 + int(signum)
