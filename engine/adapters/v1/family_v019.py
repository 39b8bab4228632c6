"""vLLM 0.19-0.22's V1 API family: 0.18's scheduler with vLLM's own full-ISL option, and every
private name it reads.

Read from the 0.22.1 wheel against 0.18.0's (family_v018.py) and 0.24.0's (family_v024.py):
- vLLM's `scheduler_reserve_full_isl` (SchedulerConfig, cached on the Scheduler, passed to
  `allocate_slots` as `full_sequence_must_fit`) enforces `full-isl`, as from 0.24
  (NATIVE_FULL_ISL; the hook only switches it): 0.24's building and full-ISL names;
- no set of prefills in flight (`_inflight_prefills` came in 0.23): what `whole-context`
  reads as the blocks those prefills still need is 0.18's reading (the running requests
  still prefilling), and `allocate_slots` has no `reserved_blocks`;
- `get_num_blocks_to_allocate` as 0.24's (no `num_local_computed_tokens`) and the waiting scan
  as 0.24's (`skipped_waiting`, `_select_waiting_queue_for_scheduling`, running requests
  against `max_num_running_reqs`);
- the platform as 0.18's: resolved lazily and not from VLLM_TARGET_DEVICE, so a sim engine
  sets vLLM's CpuPlatform itself (`install_sim_platform`);
- `get_num_blocks_to_allocate` takes 0.24's `apply_admission_cap` from 0.20.2 (and 0.18's
  arguments before it: 0.19.0 to 0.20.1), so `blocks_to_reach` passes it where the
  installed coordinator has it;
- on 0.19.0 to 0.20.1 vLLM's full-ISL check is `kv_cache_manager.can_fit_full_sequence`,
  asked by `schedule` before `allocate_slots` (not `allocate_slots`' `full_sequence_must_fit`):
  the hook switches it the same way (the Scheduler's `scheduler_reserve_full_isl`), but a
  request it turns away is not an `allocate_slots` refusal, so its admission reason is not
  read from one (no test checks those reasons on 0.19 or 0.20.0-0.20.1);
- the worker's `compile_or_warm_up_model` answers a float of seconds on 0.19 (0.18's answer)
  and vLLM's `CompilationTimes` from 0.20.2 at the latest (0.24's): `compile_result` gives
  the one the installed release's `worker_base` defines;
- the offloading connector's `offloading/` package with job ids, `jobs_to_flush` and a job's
  `transfer_spec` pair, as 0.24's (tier_v024), not run by the releases bench (its preset has
  no CPU tier).
"""

from __future__ import annotations

import inspect
from typing import Any

from engine.adapters.v1 import family_v024, family_v033
from engine.adapters.v1.family_v024 import (  # noqa: F401  (0.24's names, kept by 0.19-0.22)
    admissions, admitted_cached_tokens, blocked_reason, block_size, blocks_needed,
    computed_tokens, computed_tokens_sum, configure,
    construct, context_tokens, engine_core_of, engine_kwargs, executor_of, finished_ids,
    free_blocks, full_isl_fits, full_isl_setting, head_waiting, is_admitting, kv_cache_manager,
    model_runner_output, NATIVE_FULL_ISL, new_request_lengths, output_tokens, preemptions,
    request_id, request_progress, requests, reserve_full_isl, running,
    scheduled_tokens, scheduler_of, seats, set_reserve_full_isl, TIER, token_budget,
    total_blocks, total_scheduled_tokens, vllm_config_of, waiting_by_reason, waiting_count,
)
from engine.adapters.v1.family_v024 import (  # noqa: F401  (no scan skip before 0.33)
    HAS_SCAN_SKIP, install_scan_skip, remove_scan_skip)
from engine.adapters.v1.family_v024 import (  # noqa: F401  (no async sim before 0.33)
    HAS_ASYNC_SIM, finals_in_flight, is_async, runs_sim, set_seats, widen_seats)
from engine.adapters.v1.family_v018 import (  # noqa: F401  (0.18's platform and in-flight reading)
    PLATFORM_FROM_ENV, inflight_reserved_blocks, install_sim_platform)


def compile_result() -> Any:
    """What a worker's `compile_or_warm_up_model` returns, nothing compiled: the release's
    `CompilationTimes` where its `worker_base` has one (0.20.2 on), else 0.0 seconds (0.19)."""
    from vllm.v1.worker import worker_base

    times = getattr(worker_base, "CompilationTimes", None)
    return 0.0 if times is None else times(language_model=0.0, encoder=0.0)


_CAPPED: dict[type, bool] = {}
"""Whether a coordinator class's `get_num_blocks_to_allocate` takes `apply_admission_cap`."""


def blocks_to_reach(scheduler: Any, request: Any, num_tokens: int) -> int:
    """Blocks `request` must still get to hold `num_tokens` tokens, by vLLM's own arithmetic:
    0.24's (family_v024) where the coordinator takes `apply_admission_cap` (0.20.2 on), else
    the same call without it, as 0.19's own scheduler makes it."""
    coordinator = type(scheduler.kv_cache_manager.coordinator)
    if coordinator not in _CAPPED:
        _CAPPED[coordinator] = "apply_admission_cap" in inspect.signature(
            coordinator.get_num_blocks_to_allocate).parameters
    if _CAPPED[coordinator]:
        return family_v024.blocks_to_reach(scheduler, request, num_tokens)
    return blocks_needed(scheduler, request, num_tokens, num_tokens_main_model=num_tokens)


def refused_blocks(scheduler: Any, request: Any, num_new_tokens: int, args: tuple,
                   kwargs: dict[str, Any]) -> tuple[int, int]:
    """0.33's count of a refused allocation, with this family's block arithmetic."""
    return family_v033.refused_blocks(scheduler, request, num_new_tokens, args, kwargs,
                                      reach=blocks_to_reach)
