"""Assemble a V1StepRecord from what the hooks captured and what the step left behind.

Called once per step, right after `LLMEngine.step()` returns, when vLLM's `update_from_output`
has run: queue sizes, finished requests and KV usage are the step's outcome. The tokens each
request was scheduled come from the step's SchedulerOutput, split as vLLM splits them: new
requests, requests resumed after a preemption, and requests already running; the hooks
classified them before the step sampled (engine.adapters.v1.hooks).
"""

from __future__ import annotations

from typing import Any

from engine.adapters.v1.current import fam
from engine.adapters.v1.hooks import V1Capture
from engine.adapters.v1.tier import TierStep
from engine.costmodel import CostModel
from engine.stream.records import V1StepRecord


class StepReader:
    """Builds each step's record; keeps the per-run count a record carries (finished)."""

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        self.finished_total = 0
        self.computed_total = 0
        self.recomputed_total = 0
        self.preemptions_total = 0
        self.token_budget = fam.token_budget(scheduler)
        self.gpu_total = fam.total_blocks(scheduler)

    def build(self, step: int, capture: V1Capture, cost: CostModel, sim_start_s: float,
              wall_s: float, finished: list[str],
              tier: TierStep | None = None,
              finished_lens: list[int] | None = None) -> V1StepRecord:
        scheduler = self.scheduler
        output = capture.output
        new: list[tuple[str, int]] = []
        resumed: list[tuple[str, int]] = []
        running: list[tuple[str, int]] = []
        prefix_hits = first_hits = 0
        if output is not None:
            scheduled = fam.scheduled_tokens(output)
            new_ids, resumed_ids = capture.new_ids, capture.resumed_ids
            if not new_ids and not resumed_ids:  # most steps: every request was running
                running = list(scheduled.items())
            else:
                new = [(rid, scheduled[rid]) for rid in new_ids]
                seen = set(new_ids)
                for rid, n in scheduled.items():
                    if rid in seen:
                        continue
                    (resumed if rid in resumed_ids else running).append((rid, n))
                prefix_hits, first_hits = fam.admitted_cached_tokens(output, resumed_ids)
            batched = fam.total_scheduled_tokens(output)
        else:
            batched = 0
        self.finished_total += len(finished)
        self.computed_total += batched
        self.recomputed_total += capture.recomputed_tokens
        self.preemptions_total += len(capture.preempted)
        live = fam.running(scheduler)
        kv_tokens = fam.computed_tokens_sum(live)
        sim_step_s = cost.step_seconds(capture.prompt_tokens, capture.decode_reqs, kv_tokens)
        record = V1StepRecord(
            step=step,
            wall_s=wall_s,
            sim_s=sim_start_s + sim_step_s,
            sim_step_s=sim_step_s,
            policy=str(capture.policy),
            running=len(live),
            waiting=fam.waiting_count(scheduler),
            finished_total=self.finished_total,
            gpu_used=max(0, self.gpu_total - fam.free_blocks(scheduler)),
            gpu_total=self.gpu_total,
            kv_tokens=kv_tokens,
            batched_tokens=batched,
            token_budget=self.token_budget,
            new=new,
            resumed=resumed,
            scheduled=running,
            preempted=capture.preempted,  # the capture's own: no hook appends to it now
            prefix_hit_tokens=prefix_hits,
            new_prefix_hit_tokens=first_hits,
            recomputed_tokens=capture.recomputed_tokens,
            prompt_tokens=capture.prompt_tokens,
            generated_tokens=capture.generated_tokens,
            decode_reqs=capture.decode_reqs,
            first_tokens=capture.first_tokens,
            finished=finished,
            withheld=capture.withheld,
            held_back=capture.held_back,
            computed_total=self.computed_total,
            recomputed_total=self.recomputed_total,
            preemptions_total=self.preemptions_total,
            waiting_by_reason=fam.waiting_by_reason(scheduler),
            head_reason=capture.head_reason,
            head_need=capture.head_need,
            head_limit=capture.head_limit,
            finished_lens=finished_lens,
        )
        if tier is not None:
            _add_tier(record, tier)
        return record


def abort_state(scheduler: Any, tier: Any = None) -> dict[str, int]:
    """EngineAborted's queues and blocks, read when vLLM raised out of a step (the Session's
    driver and an attached tap both); `tier`: the CPU tier (engine.adapters.v1.tier), if any.
    V1 swaps nothing."""
    total = fam.total_blocks(scheduler)
    return {"running": len(fam.running(scheduler)), "swapped": 0,
            "waiting": fam.waiting_count(scheduler),
            "gpu_used": max(0, total - fam.free_blocks(scheduler)), "gpu_total": total,
            "cpu_used": tier.resident() if tier is not None else 0,
            "cpu_total": tier.capacity if tier is not None else 0}


def _add_tier(record: V1StepRecord, tier: TierStep) -> None:
    """The CPU tier's part of the record; a step that waited for transfers lasts that much
    longer on the simulated clock."""
    record.cpu_chunks = tier.chunks
    record.cpu_chunks_total = tier.chunks_total
    record.cpu_loads = tier.loads
    record.cpu_load_bytes = tier.load_bytes
    record.cpu_stores = tier.stores
    record.cpu_store_bytes = tier.store_bytes
    record.cpu_evictions = tier.evictions
    record.cpu_hit_tokens = tier.hit_tokens
    record.cpu_in_flight = tier.in_flight
    if tier.wait_s:
        record.cpu_wait_s = tier.wait_s
        record.sim_step_s += tier.wait_s
        record.sim_s += tier.wait_s
