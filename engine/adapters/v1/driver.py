"""The V1 engine behind the Session's driver interface (engine.adapters.driver): vLLM's V1
`LLMEngine` with its EngineCore in this process (engine.adapters.v1.build), its Scheduler
instrumented by engine.adapters.v1.hooks, each step read by engine.adapters.v1.step_record,
and its executor timed by engine.adapters.exec_timing."""

from __future__ import annotations

import math
from operator import attrgetter
from typing import Any

from engine.adapters import exec_timing
from engine.adapters.v1.current import fam
from engine.adapters.v1 import hooks as v1_hooks
from engine.adapters.v1 import tier as v1_tier
from engine.adapters.driver import Arrived, BuiltDriver, RequestFacts
from engine.adapters.v1.build import build_engine
from engine.adapters.v1.request_facts import RequestFactsReader
from engine.adapters.v1.step_record import StepReader, abort_state
from engine.costmodel import CostModel
from engine.errors import ConfigError
from engine.policy import Policy
from engine.spec import RunSpec
from engine.stream.records import V1StepRecord
from engine.workload import Request


_REQUEST_ID = attrgetter("request_id")  # of vLLM's public RequestOutput: read in C, every step
_FINISHED = attrgetter("finished")


class V1Driver(BuiltDriver):
    kind = "v1"

    def __init__(self, spec: RunSpec, policy: Policy) -> None:
        built = build_engine(spec)
        super().__init__(spec, built)
        self.count_tokens = None
        self.hook = v1_hooks.attach(built.scheduler, policy, asked=True)  # by the Session
        self.reader = StepReader(built.scheduler)
        self.exec_timer = exec_timing.ExecTimer(built.engine_core)
        self._params: dict[int, Any] = {}  # max_tokens -> SamplingParams
        self._finished: list[str] = []
        self._scheduled = False  # the last step called schedule(): the hook captured it
        # vLLM's CPU KV tier (its offloading connector), when the spec has one
        self.tier = v1_tier.attach(built.scheduler, fam.executor_of(built.engine_core))
        self._now_s = 0.0  # when the next step starts on the simulated clock
        self.facts = self._new_facts()
        self._executor = fam.executor_of(built.engine_core)
        if self.tier is not None and self.tier.capacity == 0:
            chunk = self.tier.block_bytes
            raise ConfigError(f"--kv-offloading-size {spec.kv_offloading_gib:g} GiB holds no "
                              f"chunk of KV ({chunk:,} bytes for one block of this model): "
                              f"give at least {math.ceil(chunk / 2**30 * 1e4) / 1e4:g}, or "
                              f"0 for no CPU tier")
        if self.tier is not None:
            hook, cost = self.hook, spec.cost
            self.tier.configure_sim(
                spec.offload_bandwidth_gbps * 1e9,
                lambda: cost.step_seconds(hook.current.prompt_tokens, hook.current.decode_reqs,
                                          0))

    def reset(self, spec: RunSpec, policy: Policy) -> bool:
        """Make this engine what a new one of the same engine settings would be, for the next
        workload (`hunt` reuses warm engines): vLLM's prefix cache and CPU tier emptied by
        vLLM's own reset APIs, and the observatory's hook, reader, tier observer and sim clock
        made anew. False (nothing changed) when requests are left, and with a CPU tier: vLLM's
        offloading connector keeps per-request state past a request's end (the next workload,
        whose request ids are the same, raised KeyError in its `_build_store_jobs`), which no
        reset API of vLLM's clears, so a tier engine is built anew."""
        if (self.tier is not None or self.has_unfinished_requests()
                or not self.engine.reset_prefix_cache()):
            return False
        self.hook.detach()
        self.hook = v1_hooks.attach(self.scheduler, policy)  # before its Session asks
        self.reader = StepReader(self.scheduler)
        self.spec = spec
        self._params.clear()
        self._finished, self._scheduled, self._now_s = [], False, 0.0
        self.facts = self._new_facts()  # a new workload's blocks, numbered from 0
        self._executor.forget_stops()
        return True

    def _new_facts(self) -> RequestFactsReader:
        return RequestFactsReader(fam.block_size(self.scheduler),
                                  fam.total_blocks(self.scheduler)
                                  + (self.tier.capacity if self.tier is not None else 0))

    def blocks_line(self) -> str:
        line = (f"{fam.total_blocks(self.scheduler):,} GPU blocks of {self.spec.block_size} "
                f"tokens")
        if self.tier is None:
            return line + " (V1: no swap space)"
        return line + f", a CPU tier of {self.tier.capacity:,} chunks (vLLM's offloading connector)"

    def _sampling_params(self, max_tokens: int, stops: bool) -> Any:
        """One request's params (shared by every request with the same): it ends at
        `max_tokens`, or, when `stops` (a re-run's request that ended earlier), at the sim's
        stop token, which its executor samples at that request's recorded length."""
        key = (max_tokens, stops)
        params = self._params.get(key)
        if params is None:
            from vllm import SamplingParams

            from engine.adapters.v1.sim_executor import STOP_TOKEN_ID

            params = SamplingParams(n=1, max_tokens=max_tokens, ignore_eos=True,
                                    detokenize=False,
                                    stop_token_ids=[STOP_TOKEN_ID] if stops else None)
            self._params[key] = params
        return params

    def add_request(self, request: Request, arrival_time: float) -> Arrived:
        length = request.output_len
        stops = length is not None and length < request.max_tokens
        if stops:
            self._executor.stop_at(request.request_id, length)
        self.engine.add_request(request.request_id,
                                {"prompt_token_ids": request.prompt_token_ids},
                                self._sampling_params(request.max_tokens, stops),
                                arrival_time=arrival_time)
        # an idle sim jumps to the arrival, on the simulated clock (the workload's arrival_s, the
        # axis the session's sim_s runs on), never to vLLM's stamp (`arrival_time`, time.time()):
        # a CPU-tier load submitted at an epoch-second `now` finished only at the next arrival's
        # step, so the last arrival's loads never did (requests stuck in WAITING_FOR_REMOTE_KVS)
        self._now_s = max(self._now_s, request.arrival_s)
        taken = fam.requests(self.scheduler).get(request.request_id)
        facts = (self.facts.arrived(taken) if taken is not None
                 else RequestFacts(1, request.max_tokens, (0, 0)))
        return Arrived(len(request.prompt_token_ids), facts)

    def has_unfinished_requests(self) -> bool:
        """Requests to finish, or (with a CPU tier) transfers vLLM still waits for: its engine
        core keeps stepping until they are reported, as a server's would; with `busy_loop`,
        also finished requests its workers have not been told of (vLLM's busy loop steps once
        more for them)."""
        return (self.engine.has_unfinished_requests()
                or (self.tier is not None and self.tier.pending())
                or (self.spec.busy_loop and self.scheduler.has_finished_requests()))

    def step(self) -> None:
        hook = self.hook
        scheduled_before = hook.steps_scheduled
        if self.tier is not None:
            self.tier.before_step(self._now_s)
        outputs = self.engine.step()
        # vLLM skips schedule() on a step with no requests: then the hook captured nothing
        self._scheduled = hook.steps_scheduled != scheduled_before
        self._finished = list(map(_REQUEST_ID, filter(_FINISHED, outputs)))

    def record(self, step: int, cost: CostModel, sim_start_s: float,
               wall_s: float) -> V1StepRecord:
        hook = self.hook
        capture = hook.current if self._scheduled else v1_hooks.V1Capture(hook.policy)
        tier = self.tier.take(capture.output) if self.tier is not None else None
        record = self.reader.build(step, capture, cost, sim_start_s, wall_s, self._finished,
                                   tier, self.facts.finished_lens(self._finished) or None)
        record.exec_s = self.exec_timer.take()
        self._now_s = record.sim_s
        return record

    def set_policy(self, policy: Policy, source: str) -> None:
        self.hook.switch(policy, source)  # asked by the Session; applied at the next step

    def abort_state(self) -> dict[str, int]:
        return abort_state(self.scheduler, self.tier)


def build_driver(spec: RunSpec, policy: Policy) -> V1Driver:
    return V1Driver(spec, policy)
