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
- the offloading connector's `offloading/` package with job ids, `jobs_to_flush` and a job's
  `transfer_spec` pair, as 0.24's (tier_v024), not run by the releases bench (its preset has
  no CPU tier).
"""

from __future__ import annotations

from engine.adapters.v1.family_v024 import (  # noqa: F401  (0.24's names, kept by 0.19-0.22)
    admissions, admitted_cached_tokens, blocked_reason, block_size, blocks_needed,
    blocks_to_reach, compile_result, computed_tokens, computed_tokens_sum, configure,
    construct, context_tokens, engine_core_of, engine_kwargs, executor_of, finished_ids,
    free_blocks, full_isl_fits, full_isl_setting, head_waiting, is_admitting, kv_cache_manager,
    model_runner_output, NATIVE_FULL_ISL, new_request_lengths, output_tokens, preemptions,
    refused_blocks, request_id, request_progress, requests, reserve_full_isl, running,
    scheduled_tokens, scheduler_of, seats, set_reserve_full_isl, TIER, token_budget,
    total_blocks, total_scheduled_tokens, vllm_config_of, waiting_by_reason, waiting_count,
)
from engine.adapters.v1.family_v024 import (  # noqa: F401  (no scan skip before 0.33)
    HAS_SCAN_SKIP, install_scan_skip, remove_scan_skip)
from engine.adapters.v1.family_v024 import (  # noqa: F401  (no async sim before 0.33)
    HAS_ASYNC_SIM, finals_in_flight, is_async, runs_sim, set_seats, widen_seats)
from engine.adapters.v1.family_v018 import (  # noqa: F401  (0.18's platform and in-flight reading)
    PLATFORM_FROM_ENV, inflight_reserved_blocks, install_sim_platform)
