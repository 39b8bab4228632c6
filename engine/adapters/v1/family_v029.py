"""vLLM 0.29's V1 API family (the release verl pins): every private name the V1 hooks, step
reader and builder use.

0.29's scheduler reads as 0.33's for everything the observatory touches but one call, so this
module takes 0.33's functions (engine.adapters.v1.family_v033) and defines what differs. What is
read (the same names as 0.33, checked against the 0.29.0 wheel):
- the Scheduler: `requests`, `running`, `waiting`, `kv_cache_manager` (its `block_pool`,
  `coordinator.get_num_blocks_to_allocate`, `empty_kv_cache_blocks`),
  `scheduler_reserve_full_isl` (cached from SchedulerConfig at start, read at each admission:
  the `full-isl` policy switches it live), `_inflight_prefills` and
  `_request_remaining_blocks()` (the blocks the prefills in flight still need to finish,
  vLLM's own arithmetic), `block_size`, `max_num_scheduled_tokens`, and the wrapped methods
  `schedule`, `_preempt_request` and `kv_cache_manager.allocate_slots` (its
  `full_sequence_must_fit` and `reserved_blocks` arguments);
- a Request: `request_id`, `status`, `num_computed_tokens`, `num_tokens` (prompt plus outputs),
  `num_output_tokens`, `num_preemptions`;
- a SchedulerOutput: `num_scheduled_tokens`, `total_num_scheduled_tokens`,
  `scheduled_new_reqs`, `scheduled_cached_reqs` (`resumed_req_ids`, `num_computed_tokens`),
  `finished_req_ids`;
- the engine: `LLMEngine.engine_core` (the InprocClient) `.engine_core` (the EngineCore).

What differs from 0.33:
- `KVCacheCoordinator.get_num_blocks_to_allocate` has no `prefill_end` argument (0.33 added it
  for Mamba prefill checkpoints; a full-attention model's count does not depend on it), so
  `blocks_to_reach` calls it as 0.29's own `Scheduler._request_remaining_blocks` does;
- 0.29 has no `kv_holding_waiting` queue (0.31 added it): a preempted request waits in
  `waiting` alone. Nothing here reads that queue, so nothing changes for it, but the bug it
  closes (#53130: a block-holding request stuck behind one whose allocation fails) is live on
  this release;
- the offloading connector's CPU manager counts `_num_blocks`, not 0.33's `_num_chunks`, and
  its transfer jobs have no `sync` flag (every load is asynchronous): `tier_v029`.
"""

from __future__ import annotations

from typing import Any

from engine.adapters.v1.family_v033 import (  # noqa: F401  (the family's interface)
    admissions, admitted_cached_tokens, blocked_reason, block_size, blocks_needed, compile_result,
    computed_tokens, computed_tokens_sum, configure, construct, context_tokens, engine_core_of,
    engine_kwargs, executor_of, finished_ids, free_blocks, full_isl_fits, full_isl_setting,
    inflight_reserved_blocks, install_sim_platform, is_admitting, kv_cache_manager,
    model_runner_output, NATIVE_FULL_ISL, new_request_lengths, output_tokens, PLATFORM_FROM_ENV,
    preemptions, request_id, request_progress, requests, reserve_full_isl, running,
    scheduled_tokens, scheduler_of, set_reserve_full_isl, token_budget, total_blocks,
    total_scheduled_tokens, vllm_config_of,
)

from engine.adapters.v1 import family_v033

HAS_ASYNC_SIM = False
"""Not tried on 0.29 (nor 0.27.1, 0.18): `--async-scheduling` is refused in one line, and so
is `per-iteration-count`, whose names below are never asked."""


def is_async(scheduler: Any) -> bool:
    return False  # the sim never runs it here (HAS_ASYNC_SIM)


def runs_sim(scheduler: Any) -> bool:
    raise NotImplementedError("no async scheduling on this release's sim (HAS_ASYNC_SIM)")


def finals_in_flight(scheduler: Any) -> int:
    raise NotImplementedError("no async scheduling on this release's sim (HAS_ASYNC_SIM)")


def widen_seats(scheduler: Any, extra: int) -> tuple[int, int]:
    raise NotImplementedError("no async scheduling on this release's sim (HAS_ASYNC_SIM)")


def set_seats(scheduler: Any, saved: tuple[int, int]) -> None:
    raise NotImplementedError("no async scheduling on this release's sim (HAS_ASYNC_SIM)")

TIER = "tier_v029"  # the offloading connector's names (engine.adapters.v1.current.tier)


def blocks_to_reach(scheduler: Any, request: Any, num_tokens: int) -> int:
    """Blocks `request` must still get to hold `num_tokens` tokens, by vLLM's own arithmetic
    (as 0.29's `_request_remaining_blocks` counts them: no `prefill_end`; prefix hits not
    counted)."""
    return blocks_needed(scheduler, request, num_tokens,
                         num_local_computed_tokens=request.num_computed_tokens,
                         num_tokens_main_model=num_tokens,
                         apply_admission_cap=True)


def waiting_count(scheduler: Any) -> int:
    """Every request waiting to be scheduled: 0.29 has no block-holding queue; it keeps
    requests the scan skipped (async KV loads, grammars) in `skipped_waiting` beside `waiting`,
    the same sum as vLLM's own `get_request_counts()`."""
    return len(scheduler.waiting) + len(scheduler.skipped_waiting)


def waiting_by_reason(scheduler: Any) -> dict[str, int]:
    """vLLM's own `num_requests_waiting_by_reason`, as 0.29's `make_stats()` counts it:
    `capacity` the `waiting` queue, `deferred` the `skipped_waiting` one (not calling
    make_stats, which drains the stats vLLM's loggers read)."""
    return {"capacity": len(scheduler.waiting), "deferred": len(scheduler.skipped_waiting)}


def head_waiting(scheduler: Any) -> Any:
    """The waiting request vLLM's scan takes first next step, or None: the queue 0.29's own
    `_select_waiting_queue_for_scheduling()` picks (it only compares heads), peeked."""
    queue = scheduler._select_waiting_queue_for_scheduling()
    return queue.peek_request() if queue else None


def seats(scheduler: Any) -> tuple[str, int, int]:
    """(the limit's name, seats taken, the limit) as 0.29's scan checks them: running
    requests plus paused streaming sessions against `max_num_running_reqs` (max_num_seqs)."""
    return ("max_num_seqs", len(scheduler.running) + scheduler.num_waiting_for_streaming_input,
            scheduler.max_num_running_reqs)


def refused_blocks(scheduler: Any, request: Any, num_new_tokens: int, args: tuple,
                   kwargs: dict[str, Any]) -> tuple[int, int]:
    """0.33's count of a refused allocation, with 0.29's block arithmetic."""
    return family_v033.refused_blocks(scheduler, request, num_new_tokens, args, kwargs,
                                      reach=blocks_to_reach)


HAS_SCAN_SKIP = False
"""The waiting scan before 0.33 (0.18 to 0.29) has no per-request hook it asks before it looks
at a request's blocks (0.33 added `_handle_blocked_waiting_request`): `skip-and-continue` is
refused here in one line (engine.adapters.v1.hooks), rather than re-implementing vLLM's scan."""


def install_scan_skip(scheduler: Any, skip: Any) -> None:
    raise NotImplementedError("vLLM's waiting scan before 0.33 cannot pass a request by")


def remove_scan_skip(scheduler: Any) -> None:
    """Nothing was installed (HAS_SCAN_SKIP is False)."""
