"""A session: one engine, one workload, one stream of records, on its own thread.

This is the small interface everything else talks to (the headless CLI, the TUI, verify).
Commands from other threads (policy, pause, burst, stop) go through a queue and apply at the next
step boundary, so a step is never observed half-way. Subscribers ("sinks") get every item in
order on the engine thread: first the Header, then records, and always exactly one RunFinished
last. A sink must be cheap and must not touch UI widgets (post a message instead).

When vLLM raises out of `step()` (issue #5578's "Aborted due to the lack of CPU swap space", or
any other engine failure), the session emits EngineAborted with the scheduler's state at that
moment, then RunFinished(reason="aborted"), and stops. The engine is not reusable after that;
start a new Session with the same spec.
"""

from __future__ import annotations

import datetime as _dt
import queue
import socket
import threading
import time
from typing import Callable

from engine import __version__, logs
from engine.adapters import hooks as vllm_hooks
from engine.adapters.build import BuiltEngine, build_engine
from engine.policy import Policy, parse_policy
from engine.stream.records import (SCHEMA_VERSION, Arrivals, EngineAborted, Header, LogLine,
                            PolicyChanged, Record, RunFinished)
from engine.spec import RunSpec
from engine.adapters.step_record import build_step_record
from engine.workload import Request, Workload

Item = Header | Record
Sink = Callable[[Item], None]

# vLLM's fcfs policy orders by arrival_time. The seed's add_request loop stamps each request with
# a distinct, increasing time.time(); requests arriving at the same simulated instant get stamps
# this far apart so vLLM sees the same order (ties would make its stable sort keep queue order,
# which changes who gets preempted).
_ARRIVAL_TIEBREAK_S = 1e-6


class Session:
    def __init__(self, spec: RunSpec) -> None:
        self.spec = spec
        self.header: Header | None = None
        self.state = "starting"
        self._sinks: list[Sink] = []
        self._commands: queue.Queue[tuple[str, object, str]] = queue.Queue()
        self._built: BuiltEngine | None = None
        self._hook: vllm_hooks.SchedulerHook | None = None
        self._thread: threading.Thread | None = None
        self._policy = parse_policy(spec.policy)

    # ------------------------------------------------------------------ public API
    @property
    def policy(self) -> str:
        return str(self._policy)

    @property
    def engine(self):
        """The real `vllm.LLMEngine` (after prepare); for tests and power users."""
        return self._built.engine if self._built else None

    def subscribe(self, sink: Sink) -> None:
        self._sinks.append(sink)

    def prepare(self) -> None:
        """Build the engine on the calling thread. Raises ConfigError for bad settings."""
        if self._built is not None:
            return
        spec = self.spec.validated()
        built = build_engine(spec)
        self._workload = Workload(spec, built.max_model_len, built.count_tokens)
        self._hook = vllm_hooks.attach(built.engine.scheduler, self._policy)
        self._built = built
        self.header = Header(
            schema=SCHEMA_VERSION,
            observatory_version=__version__,
            vllm_version=built.vllm_version,
            backend=spec.backend,
            model=built.model,
            spec=spec.to_dict(),
            engine_config=built.engine_config,
            started_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            host=socket.gethostname(),
        )

    def start(self) -> None:
        """Run on a daemon thread (building the engine first, on this thread, if needed)."""
        self.prepare()
        self._thread = threading.Thread(target=self.run, name="observatory-engine", daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def set_policy(self, policy: str | Policy, source: str = "api") -> None:
        self._commands.put(("policy", parse_policy(policy), source))

    def add_burst(self, size: int | None = None, source: str = "api") -> None:
        self._commands.put(("burst", size or self.spec.burst_size, source))

    def pause(self) -> None:
        self._commands.put(("pause", None, ""))

    def resume(self) -> None:
        self._commands.put(("resume", None, ""))

    def stop(self) -> None:
        self._commands.put(("stop", None, ""))

    # ------------------------------------------------------------------ the engine loop
    def run(self) -> None:
        """Run to the end of the stream on the calling thread."""
        self.prepare()
        assert self._built is not None and self._hook is not None and self.header is not None
        engine = self._built.engine
        scheduler = engine.scheduler
        spec = self.spec
        cost = spec.cost
        toggles: dict[int, list[str]] = {}
        for at, policy in spec.toggles:
            toggles.setdefault(at, []).append(policy)
        pending = self._workload.initial()
        upcoming: Request | None = next(pending, None)
        self._last_stamp = -1.0
        self._t0 = time.perf_counter()
        self.state = "running"
        self._emit(self.header)

        step, sim_s, reason = 0, 0.0, "completed"
        while True:
            if self._drain_commands(step, sim_s):
                reason = "stopped"
                break
            for policy in toggles.pop(step, ()):
                self._change_policy(step, parse_policy(policy), "toggle-at")
            if spec.max_steps is not None and step >= spec.max_steps:
                reason = "max_steps"
                break
            if upcoming is not None and upcoming.arrival_s <= sim_s:
                due: list[Request] = []
                while upcoming is not None and upcoming.arrival_s <= sim_s:
                    due.append(upcoming)
                    upcoming = next(pending, None)
                self._add_requests(due, step, sim_s, "workload")
            if not engine.has_unfinished_requests():
                if upcoming is None:
                    break
                sim_s = upcoming.arrival_s  # idle: jump the simulated clock to the next arrival
                continue
            try:
                engine.step()
            except Exception as exc:  # vLLM aborts by raising; the stream must say so and end
                self._emit_logs(step)
                self._emit(self._abort_record(step, sim_s, exc))
                reason = "aborted"
                break
            record = build_step_record(step, self._hook.current, scheduler, cost, sim_s,
                                       time.perf_counter() - self._t0)
            sim_s = record.sim_s
            self._emit_logs(step)
            self._emit(record)
            step += 1
        self._emit_logs(step)
        self.state = {"aborted": "aborted", "stopped": "stopped"}.get(reason, "finished")
        self._emit(RunFinished(steps=step, reason=reason, sim_s=sim_s,
                               wall_s=time.perf_counter() - self._t0))

    # ------------------------------------------------------------------ helpers
    def _emit(self, item: Item) -> None:
        for sink in self._sinks:
            sink(item)

    def _emit_logs(self, step: int) -> None:
        for line in logs.drain():
            self._emit(LogLine(step=step, level=line.level, logger=line.logger,
                               message=line.message, repeats=line.repeats))

    def _change_policy(self, step: int, policy: Policy, source: str) -> None:
        if policy == self._policy:
            return
        old, self._policy = self._policy, policy
        assert self._hook is not None
        self._hook.set_policy(policy, source)  # applied by the hook when step `step` schedules
        self._emit(PolicyChanged(step=step, old=str(old), new=str(policy), source=source))

    def _drain_commands(self, step: int, sim_s: float) -> bool:
        """Apply queued commands; block while paused. True means stop."""
        paused = False
        while True:
            try:
                kind, value, source = self._commands.get(block=paused, timeout=None)
            except queue.Empty:
                return False
            if kind == "policy":
                self._change_policy(step, value, source)  # type: ignore[arg-type]
            elif kind == "burst":
                requests = self._workload.burst(int(value), sim_s)  # type: ignore[arg-type]
                self._add_requests(requests, step, sim_s, "burst")
            elif kind == "pause":
                paused, self.state = True, "paused"
            elif kind == "resume":
                paused, self.state = False, "running"
            elif kind == "stop":
                return True

    def _add_requests(self, requests: list[Request], step: int, sim_s: float,
                      source: str) -> None:
        from vllm import SamplingParams

        built = self._built
        assert built is not None
        params = SamplingParams(n=self.spec.n, max_tokens=self.spec.max_tokens,
                                stop_token_ids=list(built.stop_token_ids))
        waiting = built.engine.scheduler.waiting
        prompt_tokens: list[int] = []
        for request in requests:
            stamp = max(request.arrival_s, self._last_stamp + _ARRIVAL_TIEBREAK_S)
            self._last_stamp = stamp
            if built.text_prompts and request.prompt_text is not None:
                built.engine.add_request(request.request_id, {"prompt": request.prompt_text},
                                         params, arrival_time=stamp)
                prompt_tokens.append(len(waiting[-1].prompt_token_ids))  # vLLM's tokenization
            else:
                built.engine.add_request(request.request_id,
                                         {"prompt_token_ids": request.prompt_token_ids}, params,
                                         arrival_time=stamp)
                prompt_tokens.append(len(request.prompt_token_ids))
        self._emit(Arrivals(step=step, sim_s=sim_s, source=source,
                            request_ids=[r.request_id for r in requests],
                            prompt_tokens=prompt_tokens,
                            arrival_s=[r.arrival_s for r in requests]))

    def _abort_record(self, step: int, sim_s: float, exc: Exception) -> EngineAborted:
        assert self._built is not None
        scheduler = self._built.engine.scheduler
        running, swapped, waiting = vllm_hooks.abort_queue_sizes(scheduler)
        gpu_used, gpu_total, cpu_used, cpu_total = vllm_hooks.block_counts(scheduler)
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return EngineAborted(step=step, message=message, error=type(exc).__name__, sim_s=sim_s,
                             wall_s=time.perf_counter() - self._t0, running=running,
                             swapped=swapped, waiting=waiting, gpu_used=gpu_used,
                             gpu_total=gpu_total, cpu_used=cpu_used, cpu_total=cpu_total)
