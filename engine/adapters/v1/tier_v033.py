"""vLLM 0.33's offloading-connector API family: every vLLM name the CPU tier touches.

The tier is vLLM's own: `--kv-offloading-size` makes vLLM's config build an `OffloadingConnector`
(`VllmConfig._post_init_kv_transfer_config`), whose scheduler side (`OffloadingConnectorScheduler`)
and `CPUOffloadingManager` (LRU or ARC eviction) run unchanged in the scheduler. The sim
executor plays its worker side. Kept in one module so a release that renames these changes one
file. What is read or built:

- building: `EngineArgs(kv_offloading_size=GiB, kv_transfer_config=KVTransferConfig(
  kv_connector_extra_config={"eviction_policy": ...}))`; vLLM fills in the connector, its role
  and `cpu_bytes_to_use`;
- a step's `SchedulerOutput.kv_connector_metadata`, an `OffloadingConnectorMetadata`:
  `load_jobs` / `store_jobs` (`{job_id: TransferJob(req_id, src_spec, dst_spec, sync)}`, the GPU
  side's `block_ids` say how many GPU blocks move) and `jobs_to_flush`;
- the worker's answer: `KVConnectorOutput(finished_recving=..., kv_connector_worker_meta=
  OffloadingWorkerMetadata(completed_jobs={job_id: 1}, transfer_stats=...))`;
- the scheduler side: `Scheduler.connector` (the OffloadingConnector) `.connector_scheduler`,
  its `manager` (the CPUOffloadingManager: `_num_chunks`, `_num_allocated_chunks`, `_free_list`
  for the chunks resident, which vLLM's own usage gauge does not count; `prepare_store`, whose
  `PrepareStoreOutput.evicted_keys` are the evictions), its `_jobs` (jobs vLLM still waits for),
  `update_state_after_alloc(request, blocks, num_external_tokens)` (the tokens a request will
  load from the tier) and `has_pending_push_work()`.
"""

from __future__ import annotations

from typing import Any, Iterator

from engine.spec import RunSpec


# ---- building ---------------------------------------------------------------------------------
def engine_kwargs(spec: RunSpec) -> dict[str, Any]:
    """EngineArgs for the CPU tier (none when it is off)."""
    if not spec.kv_offloading_gib:
        return {}
    from vllm.config import KVTransferConfig

    return {"kv_offloading_size": spec.kv_offloading_gib,
            "kv_transfer_config": KVTransferConfig(
                kv_connector_extra_config={"eviction_policy": spec.offload_eviction})}


def is_offloading(vllm_config: Any) -> bool:
    config = vllm_config.kv_transfer_config
    return config is not None and config.kv_connector == "OffloadingConnector"


def bytes_per_block(kv_cache_config: Any) -> int:
    """Bytes one GPU block holds over every layer: what the worker copies per block."""
    total = sum(tensor.size for tensor in kv_cache_config.kv_cache_tensors)
    return total // kv_cache_config.num_blocks


# ---- a step's metadata (the scheduler side to the worker side) -------------------------------
def metadata_of(output: Any) -> Any:
    """The step's OffloadingConnectorMetadata, or None (no tier, or nothing built)."""
    meta = getattr(output, "kv_connector_metadata", None)
    return meta if meta is not None and hasattr(meta, "load_jobs") else None


def load_jobs(meta: Any) -> Iterator[tuple[int, str, int, bool]]:
    """(job id, request id, GPU blocks, sync) of each load the step issued."""
    for job_id, job in meta.load_jobs.items():
        yield job_id, job.req_id, len(job.dst_spec.block_ids), bool(job.sync)


def store_jobs(meta: Any) -> Iterator[tuple[int, str, int]]:
    """(job id, request id, GPU blocks) of each store the step issued."""
    for job_id, job in meta.store_jobs.items():
        yield job_id, job.req_id, len(job.src_spec.block_ids)


def jobs_to_flush(meta: Any) -> frozenset[int]:
    return frozenset(meta.jobs_to_flush or ())


# ---- the worker's answer ----------------------------------------------------------------------
def connector_output(loads: list[tuple[int, int, float]], stores: list[tuple[int, int, float]],
                     finished_recving: set[str]) -> Any:
    """A KVConnectorOutput reporting (job id, bytes, seconds) loads and stores as done."""
    from vllm.distributed.kv_transfer.kv_connector.v1.offloading.common import (
        OffloadingWorkerMetadata)
    from vllm.v1.outputs import KVConnectorOutput

    meta = OffloadingWorkerMetadata()
    for job_id, nbytes, seconds in loads:
        meta.mark_completed(job_id)
        meta.transfer_stats.load.record(nbytes, seconds)
    for job_id, nbytes, seconds in stores:
        meta.mark_completed(job_id)
        meta.transfer_stats.store.record(nbytes, seconds)
    return KVConnectorOutput(finished_sending=set(), finished_recving=finished_recving,
                             kv_connector_worker_meta=meta)


# ---- the scheduler side -----------------------------------------------------------------------
def connector_of(scheduler: Any) -> Any:
    """The scheduler's OffloadingConnector, or None when it has no CPU tier."""
    connector = getattr(scheduler, "connector", None)
    if type(connector).__name__ != "OffloadingConnector":
        return None
    return connector if connector.connector_scheduler is not None else None


def kv_cache_config_of(scheduler: Any) -> Any:
    return scheduler.kv_cache_config


def manager_of(connector: Any) -> Any:
    return connector.connector_scheduler.manager


def capacity_chunks(manager: Any) -> int:
    return manager._num_chunks


def resident_chunks(manager: Any) -> int:
    """Chunks holding KV (stored or being stored): allocated less those freed by eviction."""
    return manager._num_allocated_chunks - len(manager._free_list)


def jobs_in_flight(connector: Any) -> int:
    """Loads and stores vLLM has issued and not yet seen completed."""
    return len(connector.connector_scheduler._jobs)


def has_pending_work(connector: Any) -> bool:
    return bool(connector.has_pending_push_work())


def evicted_count(prepare_store_output: Any) -> int:
    return len(prepare_store_output.evicted_keys) if prepare_store_output is not None else 0


# ---- vLLM's counters of the tier (engine.adapters.v1.offload_metrics) ------------------------
COUNTED_ONLY_ON_OUTPUT_STEPS = False
"""Whether the offline engine (`LLMEngine.step`, which the observatory steps) leaves a step's
`SchedulerStats`, and with them the bytes its loads and stores reported, out of vLLM's
counters when the step produced no request output. Not on 0.29 and later: vLLM #48668 records
every step's stats (`# Record even when this step produced no request outputs.`)."""
