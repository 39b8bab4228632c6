"""vLLM 0.24's offloading-connector API family: 0.29's (engine.adapters.v1.tier_v029), but for
how a transfer job holds its blocks.

Checked against the 0.24.0 wheel: a `TransferJob` is `(req_id, transfer_spec)`, the spec the
pair `(src, dst)` of `LoadStoreSpec`s (`vllm.v1.kv_offload.worker.worker.TransferSpec`), where
0.29 gives it `src_spec` and `dst_spec`. A load's GPU blocks are its destination's
`block_ids`, a store's its source's. Everything else the tier reads is 0.29's list.

vLLM's own counters of the tier differ too (COUNTED_ONLY_ON_OUTPUT_STEPS): 0.24's
`LLMEngine.step` records a step's stats only when the step produced a request output.
"""

from __future__ import annotations

from typing import Any, Iterator

from engine.adapters.v1.tier_v029 import (  # noqa: F401  (the tier's interface, as on 0.29)
    bytes_per_block,
    capacity_chunks,
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
    resident_chunks,
)


COUNTED_ONLY_ON_OUTPUT_STEPS = True
"""0.24's `LLMEngine.step` records stats only `if ... len(outputs.outputs) > 0` (checked against
the 0.24.0 wheel; vLLM #48668 removed the condition before 0.29): the bytes a transfer reports
on a step with no request output (every request still waiting for its load, say) reach the
connector, which drains them into that step's `SchedulerStats`, and no further, so
`vllm:kv_offload_load_bytes` counts less than the worker moved."""


def load_jobs(meta: Any) -> Iterator[tuple[int, str, int, bool]]:
    """(job id, request id, GPU blocks, sync) of each load the step issued: never sync on
    0.24, whose loads are all asynchronous."""
    for job_id, job in meta.load_jobs.items():
        yield job_id, job.req_id, len(job.transfer_spec[1].block_ids), False


def store_jobs(meta: Any) -> Iterator[tuple[int, str, int]]:
    """(job id, request id, GPU blocks) of each store the step issued."""
    for job_id, job in meta.store_jobs.items():
        yield job_id, job.req_id, len(job.transfer_spec[0].block_ids)
