"""What `run` and `serve` share: both drive one EngineHost headless (the same recorder path as
the live TUI's engine child), print one progress line about once a second, and turn how the
run ended into the exit status.

Exit statuses (engine.exit_status): 0 finished (or reached --max-steps), 3 vLLM aborted, 4 the
observatory's own code failed (an ObserverError: a bug to report), 2 bad usage, 128+N stopped by
signal N (130 for Ctrl-C). The first SIGINT, SIGTERM or SIGHUP stops at the next step boundary
and closes the recording with its end record; a second one gives up on the engine at once.
"""

from __future__ import annotations

import signal
import time
from typing import Any

from engine import exit_status
from engine.errors import EngineError
from engine.conventions import pct_text
from engine.safe_text import safe
from engine.stream.protocol import RecordingStatus
from engine.stream.records import LogLine, ObserverError, StepRecord, V1StepRecord
from engine.traces.stats import LOGGER as TRACE_LOGGER


class Progress:
    """One stderr line about once a second: enough to see Swapped climb without a TUI. Also the
    things a headless user must not miss: a recording that stopped, an observatory bug. A line
    fits 80 columns: the policy is named on the first line and where it changed, not on every
    one, on a line of its own (a policy name alone can be 28 characters)."""

    def __init__(self, stream: Any, verbose: bool = False) -> None:
        self.stream = stream
        self.verbose = verbose
        self.last = 0.0
        self.policy: str | None = None  # the policy the last progress line named

    def _policy(self, item: Any) -> None:
        if item.policy != self.policy:
            self.policy = item.policy
            self._line(f"policy {safe(item.policy)}")

    def __call__(self, item: Any) -> None:
        kind = type(item)
        if kind is StepRecord:
            now = time.monotonic()
            if now - self.last >= 1.0:
                self.last = now
                self._policy(item)
                self._line(f"step {item.step:>7,}  run {item.running:>4}  swap "
                           f"{item.swapped:>4}  wait {item.waiting:>6,}  GPU "
                           f"{pct_text(item.gpu_pct):>5}%  CPU {pct_text(item.cpu_pct):>5}%")
        elif kind is V1StepRecord:
            now = time.monotonic()
            if now - self.last >= 1.0:
                self.last = now
                self._policy(item)
                self._line(f"step {item.step:>7,}  run {item.running:>4}  wait "
                           f"{item.waiting:>5,}  GPU {pct_text(item.gpu_pct):>5}%  preempted "
                           f"{item.preemptions_total:>5,}  tax {item.recompute_tax:.2f}")
        elif kind is LogLine and item.logger == TRACE_LOGGER:
            if item.level == "ERROR":  # the run's one line about a bad trace row
                self._line(f"observatory: {safe(item.message)}")
        elif kind is LogLine and (self.verbose or (
                item.level in ("WARNING", "ERROR", "CRITICAL")
                and item.logger.startswith("vllm.core"))):
            times = f" (x{item.repeats})" if item.repeats > 1 else ""
            self._line(f"vllm {item.level.lower()}: {safe(item.message[:200])}{times}")
        elif kind is RecordingStatus and item.error is not None and item.closed is None:
            self._line(f"observatory: warning: recording stopped: {item.path}: {item.error}")
        elif kind is ObserverError:
            self._line(f"observatory: internal error at step {item.step} in {item.where} (a bug "
                       f"in the observatory, not in vLLM): {item.error}: {item.message}")

    def _line(self, text: str) -> None:
        try:
            self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away (SIGHUP follows): run on
            pass


def exit_code(host: Any, signals: list[int]) -> int:
    """The exit status for how the host's run ended (see the module docstring)."""
    if host.start_error is not None and host.finished is None:
        if signals:
            return exit_status.for_signal(signals[0])
        raise EngineError(host.start_error)
    if signals:
        return exit_status.for_signal(signals[0])
    reason = host.finished.reason if host.finished is not None else "interrupted"
    return exit_status.for_run_end(reason)


def count_signals(host: Any) -> list[int]:
    """Record which signal stopped the run (for the exit code), then let the host handle it."""
    seen: list[int] = []
    handlers = {}

    def wrapper(signum, frame) -> None:  # noqa: ANN001
        seen.append(signum)
        handlers[signum](signum, frame)

    host.install_signal_handlers()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        handlers[sig] = signal.getsignal(sig)
        signal.signal(sig, wrapper)
    return seen
