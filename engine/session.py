"""A session: one engine, one workload, one stream of records, on its own thread.

This is the small interface everything else talks to (engine.host, verify, the tests).
Commands from other threads (policy, pause, burst, stop) go through a queue, as the typed commands
of engine.stream.protocol, and apply at the next step boundary, dispatched by their type, so a
step is never observed half-way. Each command may carry a `done(ok, message, step)` callback,
called on the engine thread once it has been applied (or refused), which is what a service turns
into an acknowledgement. Subscribers ("sinks") get every item in order on the
engine thread: first the Header, then records, and always exactly one RunFinished last (the
stream's one writer, engine.stream.producer.RunStream, builds every record; the session only
says what happened). A sink must be cheap and must not touch UI widgets (post a message
instead).

Two kinds of failure end a run, and the stream says which:
- vLLM raises out of `step()` (issue #5578's "Aborted due to the lack of CPU swap space", or any
  other engine failure): EngineAborted with the scheduler's state at that moment, then
  RunFinished(reason="aborted").
- The observatory's own code raises (a scheduler hook, `build_step_record`, a sink): that is our
  bug, not vLLM's, so it becomes ObserverError (where, error, message), then
  RunFinished(reason="observer_error"). The hooks wrap their own exceptions in HookError so the
  two can be told apart even though both come out of `step()`.
The engine is not reusable after either; start a new Session with the same spec.
A third is the user's input: a trace (--trace) whose row turns out bad mid-stream ends the run
with a LogLine naming the line (logger observatory.trace, ERROR) and RunFinished(reason=
"bad_trace"), exit 2; the records up to there are kept. A trace run also records its trace stats
(engine.traces.stats) as an INFO LogLine just before its RunFinished.

What differs between vLLM's V0 engine and its V1 engine (building it, the hooks, reading a step)
is behind one driver (engine.adapters.driver), picked by the installed release; the session is
the same for both.

Two clocks, one per backend (engine.stream.timeaxis names them in the header): on the sim, arrivals
(`--arrival-rate`, bursts) follow the cost model's simulated clock, which jumps over idle time; on
a GPU they follow the wall clock, and an idle engine waits for the next arrival in real time.
Either way vLLM's own `arrival_time` stamps are on its real clock (time.time()), so its queue-time
and TTFT metrics are seconds, not the ~1.7e9 that stamps counted from 0.0 gave. Every step's
executor call is timed (`exec_s`, engine.adapters.exec_timing).

A pace (`pace`, steps per second; `live --pace`, `serve --pace`) slows the loop to a speed a
person can follow: a step starts no sooner than 1/pace seconds after the one before. It is wall
clock only, never a decision: the wait is spent blocked on the command queue (a Stop, a Pause or
a policy switch applies at once, not at the next due step), and no record field but the measured
`wall_s` can differ from an unpaced run. It is not a RunSpec field, so recordings and `verify`
never see it. A hold (`hold(seconds, why)`, engine.host.attention: the live monitor's pause at
the first sign of trouble) is the same kind of wait: a pause that goes on by itself after
`seconds`, or as soon as any command arrives (the `f` that switches the fix applies at the
step it was held at, and the run goes on).

Once the initial requests are added the session moves everything alive into the garbage
collector's permanent generation (`gc.freeze()`): the seed's 10,000 requests are ~80,000
sequences that every full collection would otherwise re-scan (0.2-0.8 s each), which costs the
engine 20-30% of its steps/s (bench/bench_engine.py measures it). While they are added the
collector is off (one collection just before): the full collections their allocations set off
re-scanned everything added so far, and took most of the seed's start-up (bench/startup.py).
"""

from __future__ import annotations

import gc
import math
import queue
import threading
import time
from typing import Callable

import msgspec

from engine import logs
from engine.adapters import device_info
from engine.adapters.driver import (Arrived, EngineDriver, HookError, import_vllm,
                                    installed_engine_kind,
                                   open_driver)
from engine.adapters.policy_support import installed
from engine.analysis import progress
from engine.errors import ConfigError
from engine.kinds import kind_of
from engine.policy import Policy, parse_policy, require_policy
from engine.run_state import RunState, state_for_end
from engine.spec import RunSpec
from engine.stream.producer import RunStream, Sink
from engine.stream.protocol import AddBurst, Pause, Resume, SetPolicy, Stop
from engine.stream.records import Header
from engine.traces import source as trace_source
from engine.traces.rows import TraceError
from engine.traces.stats import LOGGER as TRACE_LOGGER
from engine.workload import Request, Workload

Done = Callable[[bool, str, int], None]
"""Command callback: (applied, one-line message, step it applied at)."""
ProgressFn = Callable[[str, str], None]
StateFn = Callable[[RunState, int, str, "float | None"], None]
"""(state, step, why, hold_s): `why` and `hold_s` say why a hold paused the run and for how
many seconds ("" and None otherwise)."""

# vLLM's fcfs policy orders by arrival_time. The seed's add_request loop stamps each request with
# a distinct, increasing time.time(); requests arriving at the same simulated instant get stamps
# this far apart so vLLM sees the same order (ties would make its stable sort keep queue order,
# which changes who gets preempted).
_ARRIVAL_TIEBREAK_S = 1e-6
MIN_PACE, MAX_PACE = 1.0, 10_000.0  # steps/s that `scale_pace` keeps to (faster: no pace)
_IDLE_NAP_S = 0.05  # gpu backend, nothing to run: the longest wait between command checks


class _AtBoundary(msgspec.Struct, frozen=True):
    """Internal command: call `fn(step)` between two steps (see Session.at_boundary)."""

    fn: Callable[[int], tuple[bool, str]]


class _Wake(msgspec.Struct, frozen=True):
    """Internal: wakes a paced wait so that it is re-timed (Session.set_pace)."""


class _Hold(msgspec.Struct, frozen=True):
    """Internal: pause for `seconds` at the next boundary, saying `why` (Session.hold)."""

    seconds: float
    why: str


_Queued = SetPolicy | AddBurst | Pause | Resume | Stop | _AtBoundary | _Wake | _Hold


def _check_pace(pace: float | None) -> float | None:
    """A pace as the loop keeps it: None for none (0 means none too); positive and finite."""
    if pace is None or pace == 0:
        return None
    if not math.isfinite(pace) or pace < 0:
        raise ValueError(f"pace must be a positive number of steps per second, not {pace}")
    return float(pace)


class _EngineFault(Exception):
    """Internal: vLLM's own code raised (out of `step()` or `add_request`)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class _ObserverFault(Exception):
    """Internal: the observatory's own code failed at `where` (the cause is `__cause__`)."""

    def __init__(self, where: str, cause: BaseException) -> None:
        super().__init__(where)
        self.where = where
        self.cause = cause


def _sink_name(sink: Sink) -> str:
    return getattr(sink, "__qualname__", None) or type(sink).__qualname__


class Session:
    def __init__(self, spec: RunSpec, *, on_progress: ProgressFn | None = None,
                 on_state: StateFn | None = None, freeze_gc: bool = True,
                 wall_paced: bool | None = None, pace: float | None = None,
                 guard: progress.ProgressGuard | None = None,
                 driver: EngineDriver | None = None) -> None:
        self.spec = spec
        self._guard = guard or progress.ProgressGuard()  # never hang: engine.analysis.progress
        self._busy_since: float | None = None  # perf_counter() when the step in hand started
        self._busy_step = 0  # its number
        self._abandoned = False  # the guard ended a run whose step never returned
        self._ended = threading.Event()  # set with RunFinished: the guard's thread stops
        self.engine_error: BaseException | None = None  # what vLLM raised, if it did
        self._pace = _check_pace(pace)  # steps per second; None runs as fast as it goes
        self._last_start: float | None = None  # perf_counter() when the last step started
        self.state = RunState.STARTING
        self._stream = RunStream(on_sink_error=self._sink_failed, logs=logs.drain)
        self._commands: queue.Queue[tuple[_Queued, str, Done | None]] = queue.Queue()
        self._paused = False
        self._accepting = threading.Lock()  # guards _over against a command racing the end
        self._over = False
        self._driver: EngineDriver | None = None
        self._warm = driver  # an engine built before, reset for this spec (hunt's warm engines)
        self._thread: threading.Thread | None = None
        self._policy = parse_policy(spec.policy)
        self._on_progress = on_progress or (lambda stage, detail: None)
        self._on_state = on_state or (lambda state, step, why, hold_s: None)
        self._hold_until: float | None = None  # perf_counter() a hold ends at (None: none)
        self._freeze_gc = freeze_gc
        self._sink_fault: _ObserverFault | None = None
        self._broken_sink: Sink | None = None
        # The clock arrivals follow: the cost model's on the sim, the wall clock on a GPU
        # (`wall_paced` overrides the backend's choice: tests and benches of the pacing itself).
        self._wall_paced = spec.backend == "gpu" if wall_paced is None else wall_paced

    # ------------------------------------------------------------------ public API
    @property
    def policy(self) -> str:
        return str(self._policy)

    @property
    def engine(self):
        """The real vLLM engine (after prepare): V0's `LLMEngine`, or V1's `LLMEngine` with its
        in-process EngineCore; for tests and power users."""
        return self._driver.engine if self._driver else None

    @property
    def driver(self) -> EngineDriver | None:
        return self._driver

    @property
    def header(self) -> Header | None:
        """The run's Header, once the engine is built (sent when the run starts)."""
        return self._stream.header

    def subscribe(self, sink: Sink) -> None:
        self._stream.subscribe(sink)

    def prepare(self) -> None:
        """Build the engine on the calling thread. Raises ConfigError for bad settings."""
        if self._driver is not None:
            return
        spec = self.spec = trace_source.resolve(self.spec.validated())  # its path and sha256
        # its policies, asked of its engine once, before it is built (refused in one line)
        engine = installed(installed_engine_kind(), spec.async_scheduling, spec.backend == "sim")
        for policy in [self._policy] + [parse_policy(p) for _, p in spec.toggles]:
            require_policy(policy, engine)
        if spec.trace is not None:  # its lines against the model's context, before the build
            self._on_progress("checking the trace", "")
            trace_source.check_fits(spec)
        self._on_progress("importing vLLM", "")
        import_vllm(spec)
        self._on_progress("building the engine", "")
        driver = self._warm or open_driver(spec, self._policy)
        self._on_progress("building the engine", driver.blocks_line())
        self._workload = Workload(spec, driver.max_model_len, driver.count_tokens,
                                  fan_out_samples=kind_of(driver.kind).fans_out_samples)
        self._driver = driver
        self._stream.open(spec, driver, spec.cost, device=device_info.describe(spec.backend))

    def start(self) -> None:
        """Run on a daemon thread (building the engine first, on this thread, if needed)."""
        self.prepare()
        self._thread = threading.Thread(target=self.run, name="observatory-engine", daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def over(self) -> bool:
        return self._over

    def set_policy(self, policy: str | Policy, source: str = "api",
                   done: Done | None = None) -> None:
        self._submit(SetPolicy(id=0, policy=str(parse_policy(policy))), source, done)

    def add_burst(self, size: int | None = None, source: str = "api",
                  done: Done | None = None) -> None:
        self._submit(AddBurst(id=0, size=size or self.spec.burst_size), source, done)

    def pause(self, done: Done | None = None) -> None:
        self._submit(Pause(id=0), "", done)

    def resume(self, done: Done | None = None) -> None:
        self._submit(Resume(id=0), "", done)

    def stop(self, done: Done | None = None) -> None:
        self._submit(Stop(id=0), "", done)

    def elapsed(self) -> float:
        """Measured seconds since the run started (the gpu backend's arrival clock)."""
        return self._stream.elapsed()

    @property
    def pace(self) -> float | None:
        """Steps per second the loop is held to, or None (as fast as it goes)."""
        return self._pace

    def set_pace(self, pace: float | None) -> None:
        """Change the pace (None or 0: as fast as it goes); any thread. A wall-clock setting,
        not a command: it changes no decision, so it applies at once without a record."""
        self._pace = _check_pace(pace)
        self._commands.put((_Wake(), "", None))  # re-time a wait in progress

    def scale_pace(self, scale: float) -> float | None:
        """Multiply the pace by `scale` (the live screen's `>` and `<`); return the new one.
        Slowing an unpaced run starts from its speed so far; past MAX_PACE the pace is lifted,
        and it never goes below MIN_PACE."""
        pace = self._pace
        if pace is None:
            if scale >= 1:
                return None
            step, elapsed = self._stream.step, self._stream.elapsed()
            pace = step / elapsed if step and elapsed > 0 else MAX_PACE
        pace = max(MIN_PACE, round(pace * scale, 3))
        self.set_pace(None if pace > MAX_PACE else pace)
        return self._pace

    def hold(self, seconds: float, why: str) -> None:
        """Pause at the next step boundary for `seconds` of wall clock, saying `why`; any
        command that arrives meanwhile ends the hold (and then applies). Any thread; wall clock
        only, like the pace: no record says it, no decision changes."""
        self._submit(_Hold(float(seconds), why), "", None)

    def report_sink_failure(self, sink: Sink, exc: BaseException) -> None:
        """A sink of a sink (e.g. EngineHost's subscribers) failed: end the run at the next
        step boundary with an ObserverError naming it. Any thread (the first report wins)."""
        if self._sink_fault is None:
            self._sink_fault = _ObserverFault(f"sink {_sink_name(sink)}", exc)

    def at_boundary(self, fn: Callable[[int], tuple[bool, str]], done: Done | None = None) -> None:
        """Call `fn(step)` on the engine thread between two steps (before `step` runs); its
        (ok, message) goes to `done`. For work that must line up exactly with the stream, such
        as opening a recording mid-run."""
        self._submit(_AtBoundary(fn), "", done)

    # ------------------------------------------------------------------ the engine loop
    def run(self) -> None:
        """Run to the end of the stream on the calling thread."""
        self.prepare()
        stream = self._stream
        self._last_stamp = -1.0
        stream.start_clock()
        self._epoch0 = time.time()  # the real clock base of vLLM's arrival stamps
        frozen = False
        watch = threading.Thread(target=self._watch_steps, name="observatory-guard", daemon=True)
        watch.start()
        try:
            if self._freeze_gc:  # one collection now, while the heap is small, and none while
                gc.collect()  # the requests go in: each automatic full collection re-scanned
                gc.disable()  # what was added so far (the seed's: 2-3 s of its start-up)
            try:
                self._on_progress("making the workload", "")
                pending = self._workload.initial()
                upcoming: Request | None = next(pending, None)
                first: list[Request] = []
                while upcoming is not None and upcoming.due(0, 0.0):
                    first.append(upcoming)
                    upcoming = next(pending, None)
                self._on_progress(f"adding {len(first):,} requests", "")
                first_tokens = self._add_requests(first) if first else []
            finally:
                if self._freeze_gc:
                    gc.freeze()  # what is alive now lives as long as the run
                    gc.enable()
                    frozen = True
            self._on_progress("first step", "")
            self._set_state(RunState.RUNNING, 0)
            stream.begin()
            if first:
                self._arrived(first, first_tokens, "workload")
            reason = self._loop(pending, upcoming)
        except TraceError as exc:  # the user's trace, not vLLM's or our fault
            stream.logs()
            stream.log("ERROR", TRACE_LOGGER, str(exc))
            reason = "bad_trace"
        except _EngineFault as fault:  # vLLM raised: that is an engine abort
            self.engine_error = fault.cause  # with its traceback, for the hunt's report
            stream.logs()
            stream.aborted(fault.cause)
            reason = "aborted"
        except _ObserverFault as fault:
            stream.logs()
            self._observer_error(fault)
            reason = "observer_error"
        except Exception as exc:  # anything else here is the session's own code
            stream.logs()
            self._observer_error(_ObserverFault("session", exc))
            reason = "observer_error"
        if self._abandoned:  # the guard has ended the stream from its own thread
            return
        stream.logs()
        stats = self._workload.trace_stats
        if stats is not None:
            stream.log("INFO", TRACE_LOGGER, stats.message())
        self._finish(reason)
        if frozen:
            gc.unfreeze()

    def _loop(self, pending, upcoming: Request | None) -> str:
        """Step until the run ends; return RunFinished's reason. Failures raise _EngineFault
        (vLLM's code) or _ObserverFault (ours); the stream's `step` says where."""
        driver = self._driver
        assert driver is not None
        stream = self._stream
        spec = self.spec
        toggles: dict[int, list[str]] = {}
        for at, policy in spec.toggles:
            toggles.setdefault(at, []).append(policy)
        while not self._abandoned:
            step = stream.step
            if self._sink_fault is not None:
                raise self._sink_fault
            if self._drain_commands(step, stream.sim_s):
                return "stopped"
            for policy in toggles.pop(step, ()):
                self._change_policy(parse_policy(policy), "toggle-at")
            if spec.max_steps is not None and step >= spec.max_steps:
                return "max_steps"
            now = stream.elapsed() if self._wall_paced else stream.sim_s
            if upcoming is not None and upcoming.due(step, now):
                due: list[Request] = []
                while upcoming is not None and upcoming.due(step, now):
                    due.append(upcoming)
                    upcoming = next(pending, None)
                self._arrived(due, self._add_requests(due), "workload")
            if not driver.has_unfinished_requests():
                if upcoming is None:
                    return "completed"
                if upcoming.step is not None:  # a re-run keeps the recorded steps: the
                    pass  # recorded engine stepped with nothing to do, so does this one
                elif self._wall_paced:  # idle on a GPU: wait for the next arrival in real time,
                    # in short naps so that commands (stop, burst) still apply promptly
                    time.sleep(min(_IDLE_NAP_S, max(0.0, upcoming.arrival_s - now)))
                else:  # idle on the sim: jump the simulated clock to the next arrival
                    stream.idle_until(upcoming.arrival_s)
                if upcoming.step is None:
                    continue
            self._busy_step = step  # the step in hand, for the guard's line if it never returns
            self._last_start = self._busy_since = time.perf_counter()
            try:
                driver.step()
            except HookError as exc:  # our hook, inside vLLM's step: our bug
                raise _ObserverFault(exc.where, exc.cause) from exc
            except Exception as exc:  # vLLM aborts by raising; the stream must say so and end
                raise _EngineFault(exc) from exc
            try:
                record = stream.read_step()
            except Exception as exc:
                raise _ObserverFault("build_step_record", exc) from exc
            stream.step_done(record)
            self._busy_since = None
            stuck = self._guard.add(record)
            if stuck is not None:  # the stuck step's line, then the end
                stream.log("ERROR", progress.LOGGER, stuck.what, step=stream.step - 1)
                return progress.REASON
        return progress.REASON

    # ------------------------------------------------------------------ helpers
    def _stamp(self, request: Request) -> float:
        """vLLM's `arrival_time` for `request`, on the real clock (`time.time()`) that vLLM's
        own metrics (queue time, TTFT) subtract it from. On a GPU: the planned arrival, so vLLM's
        TTFT is what a client would see. On the sim, whose simulated arrivals have no place on
        the real clock: the moment it is handed over, as vLLM itself stamps a request without
        one. Stamps strictly increase, so vLLM's fcfs order is the order of adding."""
        base = self._epoch0 + request.arrival_s if self._wall_paced else time.time()
        stamp = max(base, self._last_stamp + _ARRIVAL_TIEBREAK_S)
        self._last_stamp = stamp
        return stamp

    def _watch_steps(self) -> None:
        """The guard's wall-clock rule, on its own thread: a step (with its record's sinks)
        busy for longer than the guard allows ends the run from here, the recording sealed;
        the blocked engine thread is abandoned, and the stream, over, takes nothing more from
        it."""
        poll = min(1.0, self._guard.seconds / 4)
        while not self._ended.wait(poll):
            since = self._busy_since
            if since is None or self._over:
                continue
            stuck = self._guard.overdue(self._busy_step, time.perf_counter() - since)
            if stuck is None:
                continue
            with self._accepting:
                if self._over:
                    return
                self._abandoned = True
            self._stream.log("ERROR", progress.LOGGER, stuck.what)
            self._finish(progress.REASON)
            return

    def _sink_failed(self, sink: Sink, exc: Exception) -> None:
        """A broken sink is an observatory bug: end the run cleanly at the next boundary."""
        if self._sink_fault is None:
            self._sink_fault = _ObserverFault(f"sink {_sink_name(sink)}", exc)
            self._broken_sink = sink

    def _observer_error(self, fault: _ObserverFault) -> None:
        if fault is self._sink_fault and self._broken_sink is not None:
            self._stream.unsubscribe(self._broken_sink)  # it gets nothing more
        self._stream.observer_error(fault.where, fault.cause)

    def _finish(self, reason: str) -> None:
        """Refuse what is still queued, then the stream's one RunFinished (from the guard's
        thread when it ends a run whose engine thread is blocked)."""
        step = self._stream.step
        with self._accepting:
            self._over = True
        while True:
            try:
                command, _, done = self._commands.get_nowait()
            except queue.Empty:
                break
            if done is not None:
                done(type(command) is Stop, "the run is over", step)
        self._ended.set()
        self._set_state(state_for_end(reason), step)
        self._stream.finish(reason)

    def _set_state(self, state: RunState, step: int, why: str = "",
                   hold_s: float | None = None) -> None:
        self.state = state
        self._on_state(state, step, why, hold_s)

    def _submit(self, command: _Queued, source: str, done: Done | None) -> None:
        with self._accepting:
            if not self._over:
                self._commands.put((command, source, done))
                return
        if done is not None:
            done(type(command) is Stop, "the run is over", self._stream.step)

    def _change_policy(self, policy: Policy, source: str) -> bool:
        if policy == self._policy:
            return False
        assert self._driver is not None  # the policy was asked of the engine already: a
        # toggle's in prepare, a command's in _apply_policy
        old, self._policy = self._policy, policy
        self._driver.set_policy(policy, source)  # applied when the next step schedules
        self._stream.policy_changed(old, policy, source)
        return True

    def _drain_commands(self, step: int, sim_s: float) -> bool:
        """Apply queued commands, each by its type (`_APPLY`); block while paused, and with a
        pace until the next step is due, on the queue itself so that a command arriving
        meanwhile applies at once. True means stop."""
        self._paused = False
        if not self._commands.queue and self._pace is None:  # the common case: no lock
            return False
        while True:
            block, timeout = self._paused, None
            if self._hold_until is not None:
                timeout = max(0.0, self._hold_until - time.perf_counter())
            elif not block and self._pace is not None and self._last_start is not None:
                wait = self._last_start + 1.0 / self._pace - time.perf_counter()
                block, timeout = wait > 0, max(wait, 0.0)
            try:
                command, source, done = self._commands.get(block=block, timeout=timeout)
            except queue.Empty:
                if self._hold_until is None:
                    return False
                self._end_hold(step)  # its time is up: go on
                continue
            kind = type(command)
            if self._hold_until is not None and kind is not _Hold:
                self._end_hold(step)  # someone acted: the hold has done its job
            try:
                ok, message = _APPLY[kind](self, command, source, step, sim_s)
            except (_ObserverFault, _EngineFault):
                raise
            except Exception as exc:
                name = "call" if kind is _AtBoundary else getattr(command, "op", "hold")
                raise _ObserverFault(f"command {name}", exc) from exc
            if done is not None:
                done(ok, message, step)
            if kind is Stop:
                return True

    # One method per command type; each returns (ok, message) for the command's `done`.
    def _apply_policy(self, command: SetPolicy, source: str, step: int,
                      sim_s: float) -> tuple[bool, str]:
        policy = parse_policy(command.policy)
        if self.header.engine not in policy.engine_kinds:
            return False, (f"policy {policy} acts on the {', '.join(policy.engine_kinds)} engine, "
                           f"not on this {self.header.engine} engine")
        try:
            require_policy(policy, installed(self.header.engine, self.spec.async_scheduling,
                                             self.spec.backend == "sim"))
        except ConfigError as exc:
            return False, str(exc)
        if not self._change_policy(policy, source):
            return True, f"policy is already {policy}"
        return True, ""

    def _apply_burst(self, command: AddBurst, source: str, step: int,
                     sim_s: float) -> tuple[bool, str]:
        now = self._stream.elapsed() if self._wall_paced else sim_s
        requests = self._workload.burst(int(command.size or self.spec.burst_size), now)
        self._arrived(requests, self._add_requests(requests), "burst")
        return True, ""

    def _apply_pause(self, command: Pause, source: str, step: int,
                     sim_s: float) -> tuple[bool, str]:
        self._paused = True
        self._set_state(RunState.PAUSED, step)
        return True, ""

    def _apply_resume(self, command: Resume, source: str, step: int,
                      sim_s: float) -> tuple[bool, str]:
        if not self._paused:
            return True, "not paused"
        self._paused = False
        self._set_state(RunState.RUNNING, step)
        return True, ""

    def _apply_stop(self, command: Stop, source: str, step: int,
                    sim_s: float) -> tuple[bool, str]:
        return True, ""

    def _apply_wake(self, command: _Wake, source: str, step: int,
                    sim_s: float) -> tuple[bool, str]:
        return True, ""

    def _apply_hold(self, command: _Hold, source: str, step: int,
                    sim_s: float) -> tuple[bool, str]:
        if self._paused:
            return False, "already paused"
        self._paused = True
        self._hold_until = time.perf_counter() + command.seconds
        self._set_state(RunState.PAUSED, step, command.why, command.seconds)
        return True, ""

    def _end_hold(self, step: int) -> None:
        self._paused, self._hold_until = False, None
        self._set_state(RunState.RUNNING, step)

    def _apply_call(self, command: _AtBoundary, source: str, step: int,
                    sim_s: float) -> tuple[bool, str]:
        return command.fn(step)

    def _add_requests(self, requests: list[Request]) -> list[Arrived]:
        """Hand `requests` to vLLM; return each one's prompt tokens as vLLM counts them and
        what a re-run needs of it."""
        driver = self._driver
        assert driver is not None
        arrived = []
        for request in requests:
            stamp = self._stamp(request)
            try:
                arrived.append(driver.add_request(request, stamp))
            except Exception as exc:  # vLLM refused the request: vLLM's failure, not ours
                raise _EngineFault(exc) from exc
        return arrived

    def _arrived(self, requests: list[Request], arrived: list[Arrived], source: str) -> None:
        """The stream's Arrivals for requests just handed over."""
        self._stream.arrivals(source, [r.request_id for r in requests],
                              [a.prompt_tokens for a in arrived],
                              [r.arrival_s for r in requests], [a.facts for a in arrived])


_APPLY = {SetPolicy: Session._apply_policy, AddBurst: Session._apply_burst,
          Pause: Session._apply_pause, Resume: Session._apply_resume, Stop: Session._apply_stop,
          _AtBoundary: Session._apply_call, _Wake: Session._apply_wake, _Hold: Session._apply_hold}
"""What each queued command does, by type: every command type has exactly one entry."""
