"""vLLM 0.34's V1 API family: every private name the V1 hooks, step reader, builder and sim
executor use, where 0.34 differs from 0.33 (engine.adapters.v1.family_v033, whose functions for
the names that did not change are reused from there).

What 0.34 changed, read from its wheel against 0.33.0's:
- a request resumed after a preemption is sent to the workers like a new one, in
  `SchedulerOutput.scheduled_new_reqs`, with `NewRequestData.prefill_token_ids` its prompt plus
  the tokens it generated before; `CachedRequestData.resumed_req_ids` is gone. A request
  admitted there is a resumed one when its `Request.num_preemptions` is above 0 (vLLM's own
  test for it, where it promotes a loaded request to PREEMPTED rather than WAITING);
- `ModelRunnerOutput` has no `req_id_to_index` (the scheduler indexes `req_ids` itself);
- a third waiting queue, `Scheduler.async_kv_waiting` (requests that may load KV
  asynchronously and have not started, with `--max-num-inflight-kv-loads`), beside `waiting`
  and `kv_holding_waiting`;
- the blocks the prefills in flight still need: `_inflight_prefill_reserved_blocks()` adds
  `_parked_reserved_blocks`, the cached reservations (`_parked_reservations`, request ->
  blocks) of async KV loads that are parked or have landed and wait to be admitted, which
  are no longer in `_inflight_prefills`;
- vLLM's CPU platform refuses to configure an engine on x86 without triton-cpu, so the sim
  runs on the observatory's platform plugin (engine.adapters.v1.sim_platform; the Release
  row's `sim_plugin`).

Every private name this family reads, with those reused from 0.33:
- the Scheduler: `requests`, `running`, `waiting`, `async_kv_waiting`, `kv_cache_manager` (its
  `block_pool`: `get_num_free_blocks()`, `num_gpu_blocks`; its `coordinator.
  get_num_blocks_to_allocate(...)` and `empty_kv_cache_blocks`), `block_size`,
  `scheduler_reserve_full_isl`, `_request_remaining_blocks()`, `_inflight_prefills`,
  `_parked_reserved_blocks`, `_parked_reservations`, `max_num_scheduled_tokens`, and the
  wrapped methods `schedule`, `_preempt_request` and `kv_cache_manager.allocate_slots`;
- a Request: `request_id`, `status`, `num_computed_tokens`, `num_tokens`, `num_prompt_tokens`,
  `num_output_tokens`, `num_preemptions`;
- a SchedulerOutput: `num_scheduled_tokens`, `total_num_scheduled_tokens`, `scheduled_new_reqs`
  (`req_id`, `prompt_token_ids`, `prefill_token_ids`, `num_computed_tokens`),
  `scheduled_cached_reqs` (`req_ids`, `num_computed_tokens`, `num_output_tokens`),
  `finished_req_ids`;
- the engine: `LLMEngine.engine_core` (the InprocClient) `.engine_core` (the EngineCore),
  `vllm_config`, its `scheduler` and `model_executor`;
- what the sim executor answers: `ModelRunnerOutput(req_ids, sampled_token_ids)`.
The offloading connector's names did not change: the CPU tier is tier_v033's.
"""

from __future__ import annotations

from typing import Any

from engine.adapters.v1.family_v033 import (  # noqa: F401  (the names 0.34 kept)
    blocked_reason, block_size, blocks_needed, blocks_to_reach, computed_tokens, computed_tokens_sum, construct,
    context_tokens, engine_core_of, engine_kwargs, executor_of, finished_ids, free_blocks,
    is_admitting, kv_cache_manager, output_tokens, preemptions, refused_blocks, request_id,
    request_progress, requests, reserve_full_isl, seats, waiting_by_reason, running, scheduled_tokens, scheduler_of, set_reserve_full_isl,
    token_budget, total_blocks, total_scheduled_tokens, vllm_config_of)
from engine.adapters.v1.family_v033 import (  # noqa: F401  (0.34's scan skips as 0.33's)
    HAS_SCAN_SKIP, install_scan_skip, remove_scan_skip)
from engine.adapters.v1.family_v033 import (  # noqa: F401  (0.34's async skip is 0.33's)
    finals_in_flight, is_async, runs_sim, set_seats, widen_seats)
from engine.adapters.v1.family_v033 import (  # noqa: F401  (0.34 has vLLM's full-ISL option)
    HAS_ASYNC_SIM, NATIVE_FULL_ISL, PLATFORM_FROM_ENV, compile_result, configure, full_isl_fits,
    full_isl_setting, install_sim_platform)

TIER = "tier_v033"  # the offloading connector's names are 0.33's


# ---- the scheduler ----------------------------------------------------------------------------
def waiting_count(scheduler: Any) -> int:
    """Every request waiting to be scheduled, in each of 0.34's three queues: `waiting`,
    `kv_holding_waiting` (requests that already hold KV blocks) and `async_kv_waiting`
    (requests that may load KV asynchronously, not started yet): the same sum as vLLM's own
    `get_request_counts()`."""
    return (len(scheduler.waiting) + len(scheduler.kv_holding_waiting)
            + len(scheduler.async_kv_waiting))


def head_waiting(scheduler: Any) -> Any:
    """The waiting request vLLM's scan takes first next step, or None: 0.34 drains
    `kv_holding_waiting` first, then whichever of `waiting` and `async_kv_waiting` has the
    earlier head (its own `_next_waiting_queue`, which only compares them)."""
    queue = scheduler.kv_holding_waiting or scheduler._next_waiting_queue(True)
    return queue.peek_request() if queue else None


def inflight_reserved_blocks(scheduler: Any, besides: Any = None) -> int:
    """The blocks the prefills in flight still need to finish (vLLM's own reservation, as
    `_inflight_prefill_reserved_blocks()` sums it: the chunked prefills' remaining blocks plus
    the parked async KV loads' cached reservations), less `besides`'s own: a request whose
    async KV load has landed keeps its reservation until it is admitted, and its need is
    counted apart."""
    parked = scheduler._parked_reserved_blocks
    if besides is not None:
        parked -= scheduler._parked_reservations.get(besides, 0)
    return parked + sum(scheduler._request_remaining_blocks(req)
                        for req in scheduler._inflight_prefills if req is not besides)


# ---- a SchedulerOutput ------------------------------------------------------------------------
def admissions(output: Any, requests: dict[str, Any]) -> tuple[list[str], set[str]]:
    """The requests the step admitted: first admissions (in vLLM's order) and requests
    resumed after a preemption. 0.34 sends both in `scheduled_new_reqs`; a resumed one has
    been preempted before (read as `schedule()` returns, while `requests` holds it)."""
    new = output.scheduled_new_reqs
    if not new:
        return [], set()
    first: list[str] = []
    resumed: set[str] = set()
    for data in new:
        rid = data.req_id
        if requests[rid].num_preemptions:
            resumed.add(rid)
        else:
            first.append(rid)
    return first, resumed


def admitted_cached_tokens(output: Any, resumed_ids: set[str]) -> tuple[int, int]:
    """Tokens the requests admitted this step found already computed (the prefix cache), at
    every admission and at first admissions only (engine.conventions): the computed tokens at
    admission of every request in `scheduled_new_reqs`, new or resumed (`resumed_ids`), then
    of the new ones alone."""
    hits = first = 0
    for new in output.scheduled_new_reqs:
        hits += new.num_computed_tokens
        if new.req_id not in resumed_ids:
            first += new.num_computed_tokens
    return hits, first


# ---- the sim executor's side of a step ------------------------------------------------------
def new_request_lengths(new: Any) -> tuple[int, int]:
    """(prompt tokens, output tokens so far) of a request in `scheduled_new_reqs`: a resumed
    one's `prefill_token_ids` holds its prompt and every token it generated before."""
    prompt = len(new.prompt_token_ids)
    return prompt, len(new.prefill_token_ids) - prompt


def model_runner_output(req_ids: list[str], sampled: list[list[int]]) -> Any:
    """The ModelRunnerOutput of a step that sampled `sampled[i]` for `req_ids[i]`."""
    from vllm.v1.outputs import ModelRunnerOutput  # at use: importing it resolves vLLM's
    # platform, which a sim engine must choose first (the family is imported before that)

    return ModelRunnerOutput(req_ids=req_ids, sampled_token_ids=sampled)
