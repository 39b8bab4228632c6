"""One engine that someone else's program built and drives, watched: its stream of records,
its recording, its clients, its policy commands.

The observatory's own runs are driven by a Session (engine.session), which adds the requests
and calls `step()`. Here the user's program does both; the engine's "tap" (engine/adapters/
<kind>/attach.py, the only place with vLLM's names) calls `before_step`, `after_step`,
`aborted` and `added` around vLLM's own methods, and the Observer tells the stream's one writer
(engine.stream.producer.RunStream, as a Session does) what happened, so the records are a
Session's: the Header when the engine is built, one Arrivals record per batch of
requests, PolicyChanged (with its source: "exec", "api", "remote:<client>"), one step record
per step, EngineAborted if vLLM raises, and RunFinished when the engine is closed (at exit):
`completed`, or `unfinished` when requests it was given never finished (a program that gave up
on a stalled engine), or `no_progress` when the guard (engine.analysis.progress) saw it hold
requests and move none for its whole step limit: one line on stderr, the stream sealed, and
vLLM left to run on unwatched.

The admission watchdog (engine.analysis.stall) follows a V1 engine's steps: when it stalls (no
admission for MIN_STEPS steps while requests wait and a seat and KV room are free) the process
says so in one line on stderr, and in one more when it admits again; `exec` has no screen, and
a stalled engine otherwise looks healthy.

Every line goes through the same pieces as `observatory serve` (engine.host's
RecordingController and Outbox, engine.stream's Server), so a recording made here reads, checks
and replays like any other, and `observatory live --connect` watches it.

Never harm the engine: nothing here raises into vLLM. The first failure of the observatory's
own code (a hook, a record, a full disk) is reported once (`warn`, into vLLM's log) and the
observer stops observing that engine, sealing what it recorded so far; vLLM goes on with its own
methods (engine.adapters.guard).
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable

import msgspec

from engine.adapters.driver import AttachedTap
from engine.analysis import progress
from engine.analysis.stall import ENDED, STARTED, StallWatch, seat_limit
from engine.costmodel import CostModel
from engine.errors import ConfigError, first_line
from engine.host.outbox import Outbox, ServesOutbox
from engine.host.recording import RecordingController
from engine.host.scribe_pipe import open_recorder
from engine.kinds import kind_of
from engine.policy import parse_policy, require_engine_kind
from engine.run_state import RunState
from engine.spec import RunSpec
from engine.stream.producer import RunStream
from engine.stream.protocol import (Ack, AddBurst, Pause, RecordingStatus, Resume, SetPolicy,
                                    SetPace, StateChanged, Stop,
                                    ToggleRecording)
from engine.stream.records import Header, Record, encode

Warn = Callable[[str], None]


def say_on_stderr(message: str) -> None:
    """One line on the process's stderr (the stall lines: not the once-per-process warning,
    and not vLLM's log, which a program may have turned off)."""
    try:
        sys.stderr.write(f"WARNING observatory: {message}\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001  a closed or broken stderr: say nothing
        pass


class Observer(ServesOutbox):
    """The stream of one attached engine (`tap`: V0Tap or V1Tap), named `name`
    (host/pid/engine-index)."""

    def __init__(self, tap: AttachedTap, name: str, *, record: str | None, sim: bool,
                 warn: Warn, say: Warn = say_on_stderr) -> None:
        self.tap = tap
        self.name = name
        self.warn = warn
        self.say = say  # the stall lines
        self.dead = False  # stopped observing (closed, or our own failure)
        # the stream's one writer; a failure to write reaches this observer's caller (`fail`)
        self._stream = RunStream([self._send])
        self._lock = threading.Lock()  # the stream: steps vs close() from another thread
        self._arrivals: list[tuple[str, int, Any]] = []  # id, prompt tokens, RequestFacts
        self._changes_seen = len(tap.hook.changes)
        self._acks: list[Callable[[int], None]] = []
        self._boundary: list[Callable[[int], None]] = []
        self._warned_recording = False
        self._stopped = threading.Event()  # set at close: the recording's status poll ends
        self.outbox = Outbox()
        self.outbox.on_failure = lambda subscriber, exc: None  # a client: the Fanout drops it
        # a scribe process writes the file: vLLM may kill this process (V1's EngineCore)
        self.recording = RecordingController(record, self._on_status, open_recorder)
        self.server = None
        kind = kind_of(tap.kind)
        self.spec = RunSpec(backend="sim" if sim else "gpu", policy=str(tap.hook.policy),
                            preset=kind.default_preset)
        # the spec holds the sim's defaults: the engine is the user's, and its real settings
        # are in engine_config, with the stream's name under "attached"
        self.header: Header = self._stream.open(self.spec, tap, CostModel(),
                                                attached={"name": name})
        self.stalls = StallWatch(seat_limit(self.header)) if kind.watches_stalls else None
        self.guard = progress.ProgressGuard()  # its step rule only: the program owns the clock
        try:
            self.recording.open()
        except ConfigError as exc:
            self._warn(f"not recording engine {name}: {exc}")
            self.recording = RecordingController(None, self._on_status)

    def start(self) -> None:
        """Begin the stream (the Header), once its server (if any) listens, so every client
        gets the whole stream."""
        self._stream.begin()
        self.outbox.publish(StateChanged(state=RunState.RUNNING, step=0))
        # the file's growing size goes out about once a second, as `run`'s host does (without
        # this a client's REC showed the size at the header: 3 kB of a 458 kB file)
        self.recording.watch(self._stopped)

    def submit(self, command: Any, source: str, reply: Callable[[Ack], None] | None = None,
               *, allow_path: bool = False) -> None:
        """A client's command. Only `policy` and `record` apply to an engine its own program
        drives; each gets exactly one Ack (after the change is in the stream)."""
        command_id, op = getattr(command, "id", 0), getattr(command, "op", "?")

        def ack(ok: bool, message: str = "", step: int | None = None) -> None:
            if reply is not None:
                reply(Ack(id=command_id, op=op, ok=ok, message=message, step=step))

        if self.dead:
            return ack(False, "this engine is no longer observed")
        kind = type(command)
        if kind is SetPolicy:
            try:
                if not isinstance(command.policy, str):
                    raise ConfigError("policy needs a policy name")
                policy = parse_policy(command.policy)
                require_engine_kind(policy, self.tap.kind)
                self.tap.hook.require(policy)  # what this engine can do (release, async, sim)
            except ConfigError as exc:
                return ack(False, str(exc))
            with self._lock:
                self.tap.hook.switch(policy, source)
                self._acks.append(lambda step: ack(True, "", step))
            return None
        if kind is ToggleRecording:
            target = command.target
            if target not in (None, "on", "off") and not allow_path:
                return ack(False, "a remote client cannot choose file names: send record on, "
                                  "off, or nothing to toggle")

            def toggle(step: int) -> None:
                spec = msgspec.structs.replace(self.spec, policy=str(self.tap.hook.policy))
                ok, message = self.recording.toggle(target, step, self.header, spec)
                ack(ok, message, step)

            with self._lock:
                self._boundary.append(toggle)
            return None
        if kind in (Pause, Resume, AddBurst, Stop, SetPace):
            return ack(False, f"{op} does not apply to an attached engine: its own program "
                              f"adds the requests and steps it; switch the policy or the "
                              f"recording")
        return ack(False, f"not a command: {kind.__name__}")

    @property
    def step(self) -> int:
        """The next step's number (steps observed so far)."""
        return self._stream.step

    # ---- the tap's calls (vLLM's thread); none of them raises ------------------------------
    def before_step(self) -> None:
        if self.dead:
            return
        try:
            stream = self._stream
            with self._lock:
                boundary, self._boundary = self._boundary, []
                arrivals, self._arrivals = self._arrivals, []
            for fn in boundary:
                fn(stream.step)
            if arrivals:
                stream.arrivals("workload", [r for r, _, _ in arrivals],
                                [n for _, n, _ in arrivals], [stream.sim_s] * len(arrivals),
                                [f for _, _, f in arrivals])
        except Exception as exc:  # noqa: BLE001
            self.fail("before a step", exc)

    def after_step(self) -> None:
        if self.dead:
            return
        try:
            stream = self._stream
            step = stream.step
            hook = self.tap.hook
            changes = hook.changes
            for _, old, new, source in changes[self._changes_seen:]:
                stream.policy_changed(old, new, source)
            self._changes_seen = len(changes)
            record = stream.read_step()
            stream.step_done(record)
            if self.stalls is not None:
                change = self.stalls.add(record)
                if change is not None:
                    self._say_stall(change)
            stuck = self.guard.add(record)
            if stuck is not None:  # one line, the stream ended and sealed; vLLM runs on
                self.say(f"engine {self.name} is stuck: {stuck.what}; no longer watched")
                stream.log("ERROR", progress.LOGGER, stuck.what, step=step)
                return self.close(progress.REASON)
            if self._acks and not hook.has_pending:  # the change (if any) is in the stream
                with self._lock:
                    acks, self._acks = self._acks, []
                for ack in acks:
                    ack(step)
        except Exception as exc:  # noqa: BLE001
            self.fail("after a step", exc)

    def added(self, request_id: str, prompt_tokens: int, facts: Any) -> None:
        if self.dead:
            return
        try:
            with self._lock:
                self._arrivals.append((request_id, prompt_tokens, facts))
        except Exception as exc:  # noqa: BLE001
            self.fail("add_request", exc)

    def aborted(self, exc: BaseException) -> None:
        """vLLM raised out of its step: record it (the engine's failure, not ours)."""
        if self.dead:
            return
        try:
            self._stream.aborted(exc)
            self.close("aborted")
        except Exception as inner:  # noqa: BLE001
            self.fail("recording vLLM's abort", inner)

    def _say_stall(self, change: str) -> None:
        """The one line when the stall starts, and the one when it is over."""
        stalls = self.stalls
        assert stalls is not None
        if change == STARTED and stalls.current is not None:
            s = stalls.current
            self.say(f"engine {self.name} stalls: no admission for {s.steps:,} steps (since "
                     f"step {s.since:,}) while {s.waiting:,} requests wait, fewer run than "
                     f"max_num_seqs and {s.free_pct:.0f}% of the KV cache is free"
                     + (f"; the head request waits for {s.reason}" if s.reason else ""))
        elif change == ENDED and stalls.ended is not None:
            s = stalls.ended
            self.say(f"engine {self.name} admits again at step {self.step - 1:,}, after a "
                     f"stall of {s.steps:,} steps (since step {s.since:,})")

    # ---- ending -----------------------------------------------------------------------
    def close(self, reason: str | None = None) -> None:
        """End the stream (RunFinished) and stop observing; the engine keeps vLLM's methods
        from here on only if `detach` is called (closing at exit leaves them). Without a
        reason: `completed`, or `unfinished` if requests it was given never finished."""
        with self._lock:
            if self.dead:
                return
            self.dead = True
        self._stopped.set()
        reason = self._stream.end_reason(reason)
        try:
            self._stream.finish(reason)
        except Exception:  # noqa: BLE001  the stream could not say it: the file still ends
            self.recording.seal(reason)
        if self.server is not None:
            try:
                self.server.close("the engine's program ended")
            except Exception:  # noqa: BLE001
                pass

    def fail(self, where: str, exc: BaseException) -> None:
        """Our own code failed: one warning, seal the recording with an ObserverError, and
        leave the engine to vLLM's own methods."""
        if self.dead:
            return
        self.tap.guard.broken = True
        self._warn(f"stopped watching engine {self.name} ({where}: "
                   f"{type(exc).__name__}: {first_line(exc)}); vLLM runs on unchanged")
        try:
            self._stream.observer_error(where, exc)
        except Exception:  # noqa: BLE001
            pass
        self.close("observer_error")

    # ---- helpers ------------------------------------------------------------------------
    def _send(self, item: Header | Record) -> None:
        """The stream's one sink: the recording, then the clients, one encoding for both."""
        line = encode(item) + b"\n"
        if self.recording.write(item, line):
            self.outbox.recorded(item, line)

    def _on_status(self, status: RecordingStatus) -> None:
        if status.error is not None and not self._warned_recording:
            self._warned_recording = True
            self._warn(f"stopped recording engine {self.name} to "
                       f"{status.path or status.closed}: {status.error}; vLLM runs on "
                       f"unchanged")
        self.outbox.publish(status)

    def _warn(self, message: str) -> None:
        try:
            self.warn(message)
        except Exception:  # noqa: BLE001
            pass
