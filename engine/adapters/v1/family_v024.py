"""vLLM 0.24's V1 API family (the release verl 0.9.1 pins): what differs from 0.29's
(family_v029.py), and every private name it reads.

0.24's scheduler reads as 0.29's for everything the observatory touches (the full-ISL option,
the set of prefills in flight, `skipped_waiting` beside `waiting`, `resumed_req_ids`,
`ModelRunnerOutput.req_id_to_index`, the offloading connector's `_num_blocks`), but for two
names, checked against the 0.24.0 wheel:

- `KVCacheCoordinator.get_num_blocks_to_allocate(request_id, num_tokens, new_computed_blocks,
  num_encoder_tokens, total_computed_tokens, num_tokens_main_model, apply_admission_cap)` has
  no `num_local_computed_tokens` (0.26 added it): `blocks_to_reach` calls it as 0.24's own
  `Scheduler._request_remaining_blocks` does;
- the waiting scan stops when `len(running) == max_num_running_reqs`: paused streaming
  sessions (`num_waiting_for_streaming_input`) take no seat there (0.26 counts them), so
  `seats` is 0.18's.

Its platform: 0.24 resolves vLLM's platform while `import vllm` runs (`torch_utils`'
`PIN_MEMORY`) and ignores `VLLM_TARGET_DEVICE`, so without a GPU it would be
`UnspecifiedPlatform`; its sim runs on the sim's platform (the release's `sim_plugin`), which
vLLM consults even at that point (engine.adapters.v1.platform).
"""

from __future__ import annotations

from typing import Any

from engine.adapters.v1.family_v029 import (  # noqa: F401  (the names 0.24 shares with 0.29)
    admissions, admitted_cached_tokens, blocked_reason, block_size, blocks_needed,
    compile_result, computed_tokens, computed_tokens_sum, configure, construct, context_tokens,
    engine_core_of, engine_kwargs, executor_of, finished_ids, free_blocks, full_isl_fits,
    full_isl_setting, head_waiting, inflight_reserved_blocks, install_sim_platform,
    is_admitting, kv_cache_manager, model_runner_output, NATIVE_FULL_ISL, new_request_lengths,
    output_tokens, PLATFORM_FROM_ENV, preemptions, request_id, request_progress, requests,
    reserve_full_isl, running, scheduled_tokens, scheduler_of, set_reserve_full_isl,
    token_budget, total_blocks, total_scheduled_tokens, vllm_config_of, waiting_by_reason,
    waiting_count,
)
from engine.adapters.v1.family_v029 import (  # noqa: F401  (no scan skip before 0.33)
    HAS_SCAN_SKIP, install_scan_skip, remove_scan_skip)
from engine.adapters.v1.family_v029 import (  # noqa: F401  (no async sim before 0.33)
    HAS_ASYNC_SIM, finals_in_flight, is_async, runs_sim, set_seats, widen_seats)
from engine.adapters.v1.family_v018 import seats  # noqa: F401  (running against max_num_seqs)
from engine.adapters.v1 import family_v033

TIER = "tier_v024"  # 0.29's connector names, but a transfer job holds (src, dst) as one spec


def blocks_to_reach(scheduler: Any, request: Any, num_tokens: int) -> int:
    """Blocks `request` must still get to hold `num_tokens` tokens, by vLLM's own arithmetic
    (as 0.24's `_request_remaining_blocks` counts them: no `num_local_computed_tokens`; prefix
    hits not counted)."""
    return blocks_needed(scheduler, request, num_tokens, num_tokens_main_model=num_tokens,
                         apply_admission_cap=True)


def refused_blocks(scheduler: Any, request: Any, num_new_tokens: int, args: tuple,
                   kwargs: dict[str, Any]) -> tuple[int, int]:
    """0.33's count of a refused allocation, with 0.24's block arithmetic."""
    return family_v033.refused_blocks(scheduler, request, num_new_tokens, args, kwargs,
                                      reach=blocks_to_reach)
