"""vLLM 0.29's offloading-connector API family: every vLLM name the CPU tier touches.

The same connector as 0.33's (engine.adapters.v1.tier_v033, whose functions this module takes),
checked against the 0.29.0 wheel, with two differences:

- its `CPUOffloadingManager` counts blocks, not chunks: `_num_blocks` (capacity),
  `_num_allocated_blocks` less `_free_list` (resident; 0.33 renamed them `_num_chunks` and
  `_num_allocated_chunks`);
- a `TransferJob` has no `sync` flag (0.33 added sync loads, completed before the step's
  forward pass): every 0.29 load is asynchronous, reported in `finished_recving` when done.

What else is read or built is 0.33's list: `EngineArgs(kv_offloading_size=...,
kv_transfer_config=KVTransferConfig(kv_connector_extra_config={"eviction_policy": ...}))`;
`OffloadingConnectorMetadata.load_jobs` / `store_jobs` (`TransferJob(req_id, src_spec,
dst_spec)`, `block_ids`) and `jobs_to_flush`; `KVConnectorOutput(finished_recving=...,
kv_connector_worker_meta=OffloadingWorkerMetadata(...))` with `mark_completed` and
`transfer_stats`; `Scheduler.connector.connector_scheduler` (`manager`, `_jobs`),
`prepare_store` (`evicted_keys`), `update_state_after_alloc` and `has_pending_push_work()`.
"""

from __future__ import annotations

from typing import Any, Iterator

from engine.adapters.v1.tier_v033 import (  # noqa: F401  (the tier's interface)
    COUNTED_ONLY_ON_OUTPUT_STEPS,
    bytes_per_block,
    connector_of,
    connector_output,
    engine_kwargs,
    evicted_count,
    has_pending_work,
    is_offloading,
    jobs_in_flight,
    jobs_to_flush,
    kv_cache_config_of,
    manager_of,
    metadata_of,
    store_jobs,
)


def load_jobs(meta: Any) -> Iterator[tuple[int, str, int, bool]]:
    """(job id, request id, GPU blocks, sync) of each load the step issued: never sync on
    0.29, whose loads are all asynchronous."""
    for job_id, job in meta.load_jobs.items():
        yield job_id, job.req_id, len(job.dst_spec.block_ids), False


def capacity_chunks(manager: Any) -> int:
    return manager._num_blocks


def resident_chunks(manager: Any) -> int:
    """Blocks holding KV (stored or being stored): allocated less those freed by eviction."""
    return manager._num_allocated_blocks - len(manager._free_list)
