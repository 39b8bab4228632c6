"""The V0 engine behind the Session's driver interface (engine.adapters.driver): a real
`vllm.LLMEngine` (0.5.0.post1 to 0.10.2) built by engine.adapters.v0.build, its scheduler
instrumented by engine.adapters.v0.hooks, each step read by engine.adapters.v0.step_record and
its executor timed by engine.adapters.exec_timing."""

from __future__ import annotations

from typing import Any

from engine.adapters import exec_timing
from engine.adapters.driver import Arrived, BuiltDriver
from engine.adapters.v0 import hooks as vllm_hooks
from engine.adapters.v0.build import build_engine
from engine.adapters.v0.request_facts import RequestFactsReader, added_groups
from engine.adapters.v0.step_record import abort_state, build_step_record
from engine.costmodel import CostModel
from engine.policy import Policy
from engine.spec import RunSpec
from engine.stream.records import StepRecord
from engine.workload import Request


class V0Driver(BuiltDriver):
    kind = "v0"

    def __init__(self, spec: RunSpec, policy: Policy) -> None:
        built = build_engine(spec)
        super().__init__(spec, built)
        self.count_tokens = built.count_tokens
        self.hook = vllm_hooks.attach(built.scheduler, policy)
        self.exec_timer = exec_timing.attach(built.engine, spec.backend)
        self._params: dict[tuple[int, int], Any] = {}  # (n, max_tokens) -> SamplingParams
        gpu_total, cpu_total = vllm_hooks.block_counts(self.scheduler)[1::2]
        self.facts = RequestFactsReader(self.scheduler.cache_config.block_size,
                                        gpu_total + cpu_total)
        self._cached_blocks = gpu_total + cpu_total

    def reset(self, spec: RunSpec, policy: Policy) -> bool:
        """Make this engine what a new one of the same engine settings would be, for the next
        workload (`hunt` reuses warm engines): every block is free once its groups finished;
        the scheduler's preemption count (which its warnings quote) and the hook start anew.
        False (nothing changed) when groups are left."""
        if self.engine.has_unfinished_requests():
            return False
        vllm_hooks.reset_scheduler(self.scheduler)
        self.hook.detach()
        self.hook = vllm_hooks.attach(self.scheduler, policy)
        self.spec = spec
        self._params.clear()
        # a new workload's requests: numbered from 0, ended at their own lengths
        self.facts = RequestFactsReader(self.scheduler.cache_config.block_size,
                                        self._cached_blocks)
        forget = getattr(self.engine.model_executor, "forget_lengths", None)
        if forget is not None:
            forget()
        return True

    def blocks_line(self) -> str:
        gpu_total, cpu_total = vllm_hooks.block_counts(self.scheduler)[1::2]
        return (f"{gpu_total:,} GPU blocks, {cpu_total:,} CPU blocks of "
                f"{self.spec.block_size} tokens")

    def _sampling_params(self, n: int, max_tokens: int) -> Any:
        params = self._params.get((n, max_tokens))
        if params is None:
            from vllm import SamplingParams

            params = SamplingParams(n=n, max_tokens=max_tokens,
                                    stop_token_ids=list(self.built.stop_token_ids))
            self._params[(n, max_tokens)] = params
        return params

    def add_request(self, request: Request, arrival_time: float) -> Arrived:
        built = self.built
        text = built.text_prompts and request.prompt_text is not None
        inputs = ({"prompt": request.prompt_text} if text
                  else {"prompt_token_ids": request.prompt_token_ids})
        if request.output_lens is not None:  # a re-run: its samples end where they ended
            built.engine.model_executor.force_lengths(request.request_id, request.output_lens,
                                                      request.max_tokens)
        before = len(self.scheduler.waiting)
        built.engine.add_request(request.request_id, inputs,
                                 self._sampling_params(request.n or self.spec.samples,
                                                       request.max_tokens),
                                 arrival_time=arrival_time)
        groups = added_groups(self.scheduler, before)
        prompt_tokens = (len(groups[0].prompt_token_ids) if text  # vLLM's tokenization
                         else len(request.prompt_token_ids))
        return Arrived(prompt_tokens, self.facts.arrived(groups))

    def has_unfinished_requests(self) -> bool:
        return self.engine.has_unfinished_requests()

    def step(self) -> None:
        self.engine.step()

    def record(self, step: int, cost: CostModel, sim_start_s: float,
               wall_s: float) -> StepRecord:
        record = build_step_record(step, self.hook.current, self.scheduler, cost, sim_start_s,
                                   wall_s, self.built.fans_out, self.hook.demand())
        record.exec_s = self.exec_timer.take() if self.exec_timer is not None else 0.0
        return record

    def set_policy(self, policy: Policy, source: str) -> None:
        self.hook.switch(policy, source)  # asked by the Session; applied at the next step

    def abort_state(self) -> dict[str, int]:
        return abort_state(self.scheduler)


def build_driver(spec: RunSpec, policy: Policy) -> V0Driver:
    return V0Driver(spec, policy)
