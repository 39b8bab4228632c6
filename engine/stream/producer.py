"""RunStream: the one writer of a run's stream (after vLLM V1's core.py, the one producer that
many transports carry).

A stream is a Header first, then records, and exactly one RunFinished last. Two kinds of
engine feed one: the engine the observatory drives (engine.session.Session pulls its steps)
and the engine a user's program drives (engine.attached.observer.Observer is told of them).
Both only say what happened; every record of the run is built here, once:

- `open(spec, tap, cost)` describes the engine in the Header (not yet sent); `begin()` sends it;
- `arrivals()` when requests are handed to the engine, `policy_changed()` when the fix
  switches, `logs()` for vLLM's captured log lines;
- `step()` after each engine step: the tap reads the step's record, its measured times are
  rounded to the header's resolution, the clocks move on, and it goes out;
- `aborted(exc)` when vLLM raises out of a step, `observer_error(where, exc)` when the
  observatory's own code fails;
- `finish(reason)`: RunFinished, exactly once (a second call sends nothing).

The stream owns the run's counters: the next step's number, the simulated clock, the measured
clock since the run started, and the requests handed over and not yet finished (an attached
engine's `unfinished`). Per-request facts a re-run needs (issue #38) are gathered here too.

A recording cut before its end (the engine's process killed, a second Ctrl-C) is ended by
whoever holds the file, from what passed through it: `Ending` keeps the last step seen and
makes the same RunFinished after it (engine.host.recording's seal, engine.host.scribe's
EOF). The log importer's Header and end come from `new_header` and `end_record` too.

Sinks get every item in order on the caller's thread. Once the end is sent nothing more goes
out: the no-progress guard (engine.analysis.progress) may end a run from its own thread while
the engine's thread is blocked in a step, and whatever that thread says afterwards is dropped.
A sink that raises is the observatory's bug: with `on_sink_error` the stream tells its owner and goes on to the other sinks (the
Session ends the run at the next boundary); without it the exception reaches the caller (the
Observer stops observing). Only msgspec and engine.stream.records are needed here.
"""

from __future__ import annotations

import datetime as _dt
import socket
import time
from typing import Any, Callable, Iterable, Protocol

from engine import __version__
from engine.errors import first_line
from engine.stream.records import (MEASURED_RESOLUTION_S, SCHEMA_VERSION, STEP_TYPES, Arrivals,
                                   EngineAborted, Header, LogLine, ObserverError, PolicyChanged,
                                   Record, RunFinished, StepRecord, V1StepRecord, measured)

Item = Header | Record
Sink = Callable[[Item], None]
SinkFailed = Callable[[Sink, Exception], None]


class Spec(Protocol):
    """What the Header takes of a run's settings (engine.spec.RunSpec)."""

    backend: str

    def to_dict(self) -> dict[str, Any]: ...


class StepTap(Protocol):
    """What a stream reads of an engine (engine.adapters.driver.EngineTap)."""

    kind: str
    vllm_version: str
    model: str
    engine_config: dict[str, Any]

    def record(self, step: int, cost: Any, sim_start_s: float,
               wall_s: float) -> StepRecord | V1StepRecord: ...

    def abort_state(self) -> dict[str, int]: ...


class CapturedLog(Protocol):
    """A log line vLLM wrote, as engine.logs captured it."""

    level: str
    logger: str
    message: str
    repeats: int


def new_header(**fields: Any) -> Header:
    """A Header for a stream that starts now, on this host, written by this observatory."""
    return Header(schema=SCHEMA_VERSION, observatory_version=__version__,
                  started_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                  host=socket.gethostname(), **fields)


def end_record(reason: str, steps: int, sim_s: float, wall_s: float) -> RunFinished:
    """The stream's last record: `steps` completed, ended for `reason`."""
    return RunFinished(steps=steps, reason=reason, sim_s=sim_s, wall_s=wall_s)


class Ending:
    """What ends a stream cut before its own end, as a sealer saw it pass: the last step (its
    clocks) and whether the run's RunFinished already came."""

    __slots__ = ("last", "ended")

    def __init__(self) -> None:
        self.last: StepRecord | V1StepRecord | None = None
        self.ended = False

    def note(self, item: Item) -> None:
        kind = type(item)
        if kind in STEP_TYPES:
            self.last = item  # type: ignore[assignment]
        elif kind is RunFinished:
            self.ended = True

    def record(self, reason: str) -> RunFinished:
        """RunFinished(reason) right after the last whole step seen."""
        last = self.last
        if last is None:
            return end_record(reason, 0, 0.0, 0.0)
        return end_record(reason, last.step + 1, last.sim_s, last.wall_s)


class RunStream:
    """The records of one run, in order, to `sinks`."""

    def __init__(self, sinks: Iterable[Sink] = (), *,
                 on_sink_error: SinkFailed | None = None,
                 logs: Callable[[], Iterable[CapturedLog]] | None = None) -> None:
        self._sinks: list[Sink] = list(sinks)
        self._on_sink_error = on_sink_error
        self._logs = logs  # vLLM's captured lines, drained before each step record
        self.header: Header | None = None
        self._tap: StepTap | None = None
        self._cost: Any = None
        self.step = 0  # the next step's number (steps completed so far)
        self.sim_s = 0.0  # the simulated clock at the end of the last step
        self._t0 = time.perf_counter()  # the measured clock's zero
        self.open_requests: set[str] = set()  # handed to the engine and not finished
        self.begun = False
        self.finished: RunFinished | None = None

    # ---- sinks ----------------------------------------------------------------------------
    def subscribe(self, sink: Sink) -> None:
        self._sinks.append(sink)

    def unsubscribe(self, sink: Sink) -> None:
        self._sinks = [s for s in self._sinks if s is not sink]

    # ---- the run's clocks -----------------------------------------------------------------
    def start_clock(self) -> None:
        """The measured clock starts now (the run's first step is about to be prepared)."""
        self._t0 = time.perf_counter()

    @property
    def t0(self) -> float:
        return self._t0

    def elapsed(self) -> float:
        """Measured seconds since the run started."""
        return time.perf_counter() - self._t0

    def idle_until(self, sim_s: float) -> None:
        """Nothing to run on the sim: the simulated clock jumps to the next arrival."""
        self.sim_s = sim_s

    # ---- the records ----------------------------------------------------------------------
    def open(self, spec: Spec, tap: StepTap, cost: Any, *, device: Any = None,
             attached: dict[str, Any] | None = None) -> Header:
        """Describe the run (its Header, sent by `begin`): `spec`'s settings on `tap`'s engine,
        steps read with `cost`. `device`: the hardware the measured times come from;
        `attached`: an attached engine's stream name, kept in the engine config."""
        self._tap, self._cost = tap, cost
        config = tap.engine_config if attached is None else {**tap.engine_config,
                                                             "attached": attached}
        extra = {} if device is None else {"device": device}
        self.header = new_header(
            vllm_version=tap.vllm_version, backend=spec.backend, model=tap.model,
            spec=spec.to_dict(), engine_config=config,
            time_axis="gpu" if spec.backend == "gpu" else "sim", engine=tap.kind,
            time_resolution_s=MEASURED_RESOLUTION_S, **extra)
        return self.header

    def begin(self) -> None:
        """The Header, first and once (any record sent before it sends it first)."""
        if self.begun:
            return
        assert self.header is not None, "open() describes the run before it begins"
        self.begun = True
        self._emit(self.header)

    def arrivals(self, source: str, request_ids: list[str], prompt_tokens: list[int],
                 arrival_s: list[float], facts: list[Any] | None = None) -> Arrivals:
        """Requests handed to the engine before the next step (`source`: workload, burst).

        `facts`: each request's engine.fingerprint.RequestFacts (its samples, output limit and
        prefix fingerprint), what a re-run needs; None where the engine could not say."""
        record = Arrivals(step=self.step, sim_s=self.sim_s, source=source,
                          request_ids=request_ids, prompt_tokens=prompt_tokens,
                          arrival_s=arrival_s,
                          n=None if facts is None else [f.n for f in facts],
                          max_tokens=None if facts is None else [f.max_tokens for f in facts],
                          prefix=None if facts is None else [f.prefix for f in facts])
        self.open_requests.update(request_ids)
        self._record(record)
        return record

    def policy_changed(self, old: Any, new: Any, source: str) -> None:
        """The fix switched; the next step is the first the new policy governs."""
        self._record(PolicyChanged(step=self.step, old=str(old), new=str(new), source=source))

    def log(self, level: str, logger: str, message: str, repeats: int = 1,
            step: int | None = None) -> None:
        """One log line, at the next step (or at `step`)."""
        self._record(LogLine(step=self.step if step is None else step, level=level,
                             logger=logger, message=message, repeats=repeats))

    def logs(self) -> None:
        """vLLM's lines captured since the last call, each as a LogLine at the next step."""
        if self._logs is not None:
            for line in self._logs():
                self.log(line.level, line.logger, line.message, line.repeats)

    def read_step(self) -> StepRecord | V1StepRecord:
        """The record of the step that just ran, its measured times at the header's
        resolution (not yet sent: `step` does both). Raises what the tap raises."""
        assert self._tap is not None
        record = self._tap.record(self.step, self._cost, self.sim_s,
                                  time.perf_counter() - self._t0)
        record.exec_s = measured(record.exec_s)
        record.wall_s = measured(record.wall_s)
        return record

    def step_done(self, record: StepRecord | V1StepRecord) -> None:
        """Send the step `read_step` read (vLLM's log lines of the step first); the clocks
        move on to the next step. The step counts as done once its record is on its way (an
        end sent meanwhile from another thread counts it)."""
        self.sim_s = record.sim_s
        self.logs()
        self.step += 1
        self._record(record)
        if record.finished:
            self.open_requests.difference_update(record.finished)

    def aborted(self, exc: BaseException) -> EngineAborted:
        """vLLM raised `exc` out of the step: the scheduler's state at that moment."""
        assert self._tap is not None
        record = EngineAborted(step=self.step, message=first_line(exc),
                               error=type(exc).__name__, sim_s=self.sim_s,
                               wall_s=time.perf_counter() - self._t0,
                               **self._tap.abort_state())
        self._record(record)
        return record

    def observer_error(self, where: str, exc: BaseException) -> None:
        """The observatory's own code failed at `where`: our bug, not vLLM's."""
        self._record(ObserverError(step=self.step, where=where, error=type(exc).__name__,
                                   message=first_line(exc)))

    def end_reason(self, reason: str | None = None) -> str:
        """`reason`, or without one: `completed`, or `unfinished` if requests handed over
        never finished (an attached engine whose program gave up on it)."""
        if reason is not None:
            return reason
        return "unfinished" if self.open_requests else "completed"

    def finish(self, reason: str | None = None) -> RunFinished | None:
        """RunFinished, exactly once (`end_reason(reason)`); None if the stream had already
        finished."""
        if self.finished is not None:
            return None
        end = end_record(self.end_reason(reason), self.step, self.sim_s,
                         time.perf_counter() - self._t0)
        if not self.begun:
            self.begin()
        self.finished = end
        self._emit(end)
        return end

    # ---- out ------------------------------------------------------------------------------
    def _record(self, record: Record) -> None:
        if self.finished is not None:
            return  # the stream is over (an end sent from another thread): nothing follows
        if not self.begun:
            self.begin()
        self._emit(record)

    def _emit(self, item: Item) -> None:
        for sink in self._sinks:
            try:
                sink(item)
            except Exception as exc:  # a broken sink is an observatory bug
                if self._on_sink_error is None:
                    raise
                self._on_sink_error(sink, exc)
