"""vLLM 0.18's V1 API family: what differs from 0.33's (family_v033.py), and every private name
it reads.

0.18 is the oldest release verl supports. Its scheduler has no full-ISL option (no
`scheduler_reserve_full_isl`, no `full_sequence_must_fit`), no set of prefills in flight (no
`_inflight_prefills`, `_request_remaining_blocks`, `_inflight_prefill_reserved_blocks`), no
`kv_holding_waiting` queue, and an older `get_num_blocks_to_allocate`. What is read, beyond
the names family_v033 reads and this module reuses (a Request, a SchedulerOutput, building):

- the Scheduler: `running`, `waiting` and `skipped_waiting` (requests a pass skipped, among them
  those loading KV asynchronously: vLLM's own `get_request_counts` counts both queues),
  `max_model_len`, `num_spec_tokens`, `num_lookahead_tokens`, `kv_cache_manager` (its
  `coordinator.get_num_blocks_to_allocate(request_id, num_tokens, new_computed_blocks,
  num_encoder_tokens, total_computed_tokens, num_tokens_main_model)`, `empty_kv_cache_blocks`,
  `max_model_len`, `block_pool`) and the wrapped `kv_cache_manager.allocate_slots(request,
  num_new_tokens, num_new_computed_tokens, new_computed_blocks, num_lookahead_tokens,
  num_external_computed_tokens, delay_cache_blocks, num_encoder_tokens)`;
- a Request: `request_id`, `num_computed_tokens`, `num_tokens`, `status`
  (`RequestStatus.WAITING_FOR_REMOTE_KVS`), `is_prefill_chunk` (set by the scheduler after
  each step: the request is still prefilling);
- the executor RPC `compile_or_warm_up_model`, whose answer 0.18 reads as a float of seconds;
- the platform: `vllm.platforms._current_platform` (set to `vllm.platforms.cpu.CpuPlatform()`
  for a sim engine, before vLLM resolves its own).

Full ISL: 0.18 has no such option, so the hook enforces the rule itself (`NATIVE_FULL_ISL`
False): `full_isl_fits` is 0.33's `full_sequence_must_fit` check (kv_cache_manager.py) with
0.18's block arithmetic, applied where 0.33 applies it (an admission: a waiting or preempted
request's `allocate_slots`). The run spec's `scheduler_reserve_full_isl` is the hook's rule
in force under `off` (`configure`), as vLLM's option is on 0.33; an engine someone else built
(`observatory exec`) has it off, as 0.18 has.
"""

from __future__ import annotations

from typing import Any

from engine.adapters.v1.family_v033 import (  # noqa: F401  identical on 0.18
    admissions, admitted_cached_tokens, blocked_reason, block_size, blocks_needed, computed_tokens,
    computed_tokens_sum, construct, context_tokens, engine_core_of, executor_of, finished_ids,
    free_blocks, is_admitting, kv_cache_manager, model_runner_output, new_request_lengths,
    output_tokens, preemptions, request_id, request_progress, requests, running,
    scheduled_tokens, scheduler_of, token_budget, total_blocks, total_scheduled_tokens,
    vllm_config_of,
)
from engine.adapters.v1 import family_v029, family_v033
from engine.adapters.v1.family_v029 import (  # noqa: F401  (0.18's scan has no skip path either)
    HAS_SCAN_SKIP, install_scan_skip, remove_scan_skip)
from engine.adapters.v1.family_v029 import (  # noqa: F401  (no async sim on 0.18 either)
    HAS_ASYNC_SIM, finals_in_flight, is_async, runs_sim, set_seats, widen_seats)
from engine.spec import RunSpec

TIER = "tier_v018"  # the CPU tier is refused on 0.18 (tier_v018.py says why)

NATIVE_FULL_ISL = False
"""0.18 has no `scheduler_reserve_full_isl`: the hook's `allocate_slots` wrapper enforces it."""

_FULL_ISL = "_observatory_full_isl"  # the rule in force, on the scheduler instance (ours)
_ALLOCATE_ARGS = ("num_new_computed_tokens", "new_computed_blocks", "num_lookahead_tokens",
                  "num_external_computed_tokens", "delay_cache_blocks", "num_encoder_tokens")
"""0.18's `allocate_slots` parameters after (request, num_new_tokens), in order."""


# ---- building ---------------------------------------------------------------------------------
def engine_kwargs(spec: RunSpec) -> dict[str, Any]:
    return {}  # 0.18's EngineArgs has no scheduler_reserve_full_isl: `configure` carries it


def configure(scheduler: Any, spec: RunSpec) -> None:
    """The spec's settings that 0.18's EngineArgs cannot carry: its full-ISL rule, which the
    hook enforces (read at attach as the rule vLLM is configured with)."""
    vars(scheduler)[_FULL_ISL] = bool(spec.scheduler_reserve_full_isl)


def full_isl_setting(config: Any, spec: RunSpec) -> bool:
    """The full-ISL rule a run of `spec` starts with (the dry run's figure): the spec's, which
    the hook enforces; `config` (EngineArgs or SchedulerConfig) has no such field on 0.18."""
    return bool(spec.scheduler_reserve_full_isl)


def compile_result() -> float:
    """What a worker's `compile_or_warm_up_model` returns on 0.18: its compile seconds."""
    return 0.0


PLATFORM_FROM_ENV = False
"""VLLM_TARGET_DEVICE does not choose 0.18's platform: a sim engine needs the observatory in
its process before vLLM resolves one (`observatory run`, `observatory exec --sim`); `vllm
serve --distributed-executor-backend engine.SimExecutor` by hand cannot start without a GPU."""


def install_sim_platform() -> None:
    """vLLM's own CpuPlatform as this process's platform, unless one is resolved already:
    0.18 ignores VLLM_TARGET_DEVICE (it detects CPU only in a CPU build or on macOS) and finds
    no platform on a machine without a GPU ("Device string must not be empty"). Its module
    resolves the platform lazily from `_current_platform`, so setting that first is enough."""
    import vllm.platforms as platforms

    if platforms._current_platform is None:
        from vllm.platforms.cpu import CpuPlatform

        platforms._current_platform = CpuPlatform()


# ---- the scheduler ----------------------------------------------------------------------------
def reserve_full_isl(scheduler: Any) -> bool:
    return bool(vars(scheduler).get(_FULL_ISL, False))


def set_reserve_full_isl(scheduler: Any, value: bool) -> None:
    vars(scheduler)[_FULL_ISL] = value


def waiting_count(scheduler: Any) -> int:
    return len(scheduler.waiting) + len(scheduler.skipped_waiting)


def _blocks(scheduler: Any, request: Any, num_tokens: int, main_tokens: int) -> int:
    return blocks_needed(scheduler, request, num_tokens, num_tokens_main_model=main_tokens)


def blocks_to_reach(scheduler: Any, request: Any, num_tokens: int) -> int:
    """Blocks `request` must still get to hold `num_tokens` tokens, by vLLM's own arithmetic
    (prefix hits not counted)."""
    return _blocks(scheduler, request, num_tokens, num_tokens)


def _remaining_blocks(scheduler: Any, request: Any) -> int:
    """Blocks `request` still needs to hold its whole context: 0.33's
    `_request_remaining_blocks`, with 0.18's arithmetic."""
    full = min(request.num_tokens, scheduler.max_model_len)
    num_tokens = full
    if scheduler.num_spec_tokens:
        num_tokens += 1 + scheduler.num_spec_tokens + scheduler.num_lookahead_tokens
    return _blocks(scheduler, request, num_tokens, full)


def _prefilling(request: Any) -> bool:
    """Still prefilling: the scheduler's own mark after its last step, or (before this step
    advances it) more than its next token still to compute. A decode has exactly one."""
    return request.is_prefill_chunk or request.num_computed_tokens < request.num_tokens - 1


def inflight_reserved_blocks(scheduler: Any, besides: Any = None) -> int:
    """The blocks the prefills in flight still need to finish, less `besides`'s own: 0.33's
    `_inflight_prefill_reserved_blocks()`. 0.18 keeps no set of them, so they are the running
    requests still prefilling and those loading KV asynchronously; a request whose blocks
    already hold its context (its last chunk scheduled this step) adds 0, as in 0.33."""
    from vllm.v1.request import RequestStatus  # imported at use: it resolves vLLM's platform

    total = 0
    for request in scheduler.running:
        if request is not besides and _prefilling(request):
            total += _remaining_blocks(scheduler, request)
    for request in scheduler.skipped_waiting:
        if request is not besides and request.status == RequestStatus.WAITING_FOR_REMOTE_KVS:
            total += _remaining_blocks(scheduler, request)
    return total


def full_isl_fits(scheduler: Any, request: Any, args: tuple, kwargs: dict[str, Any]) -> bool:
    """0.33's `full_sequence_must_fit` check for one `allocate_slots(request, num_new_tokens,
    *args, **kwargs)` call: the free blocks hold `request`'s whole context (prompt plus
    outputs so far, at most max_model_len), its prefix hits counted, by 0.18's arithmetic."""
    given = dict(zip(_ALLOCATE_ARGS, args))
    given.update(kwargs)
    manager = scheduler.kv_cache_manager
    hit_blocks = given.get("new_computed_blocks")
    blocks = (hit_blocks.blocks if hit_blocks is not None
              else manager.empty_kv_cache_blocks.blocks)
    local = request.num_computed_tokens + given.get("num_new_computed_tokens", 0)
    full = min(request.num_tokens, manager.max_model_len)
    need = manager.coordinator.get_num_blocks_to_allocate(
        request_id=request.request_id,
        num_tokens=full,
        new_computed_blocks=blocks,
        num_encoder_tokens=given.get("num_encoder_tokens", 0),
        total_computed_tokens=min(local + given.get("num_external_computed_tokens", 0),
                                  manager.max_model_len),
        num_tokens_main_model=full,
    )
    return need <= manager.block_pool.get_num_free_blocks()


# ---- why the waiting wait ---------------------------------------------------------------------
head_waiting = family_v029.head_waiting  # 0.18 picks its queue as 0.29 does


def waiting_by_reason(scheduler: Any) -> dict[str, int]:
    """Nothing: 0.18 has no `num_requests_waiting_by_reason` (its `make_stats()` reports
    `waiting` and `skipped_waiting` together as `num_waiting_reqs`)."""
    return {}


def seats(scheduler: Any) -> tuple[str, int, int]:
    """(the limit's name, seats taken, the limit) as 0.18's scan checks them: the running
    requests against `max_num_running_reqs` (max_num_seqs)."""
    return "max_num_seqs", len(scheduler.running), scheduler.max_num_running_reqs


def refused_blocks(scheduler: Any, request: Any, num_new_tokens: int, args: tuple,
                   kwargs: dict[str, Any]) -> tuple[int, int]:
    """0.33's count of a refused allocation, with 0.18's block arithmetic."""
    return family_v033.refused_blocks(scheduler, request, num_new_tokens, args, kwargs,
                                      reach=blocks_to_reach)
