"""vLLM's own counters for its CPU KV tier, as `/metrics` would show them.

vLLM's V1 engine always records its stats into Prometheus (`PrometheusStatLogger`, which on
start unregisters any earlier engine's `vllm:` collectors, so the values are the latest
engine's); with the offloading connector those include the bytes its worker reported moved
(`vllm:kv_offload_load_bytes`, `vllm:kv_offload_store_bytes`, fed by the sim worker's
`transfer_stats`) and the tokens requests found in the tier
(`vllm:external_prefix_cache_hits`). Reading them from the registry is how a test checks that
the step records agree with vLLM's own accounting, through a path the observatory does not
compute.

Where vLLM's offline engine records a step's stats only when the step produced a request output
(0.24: the tier module's COUNTED_ONLY_ON_OUTPUT_STEPS), the counters leave out what the
connector drained into the other steps' stats; `load_bytes_in` reads those from a step's
`SchedulerStats`.
"""

from __future__ import annotations

from msgspec import Struct

LOAD_BYTES = "vllm:kv_offload_load_bytes_total"
STORE_BYTES = "vllm:kv_offload_store_bytes_total"
EXTERNAL_HITS = "vllm:external_prefix_cache_hits_total"
_STEP_LOAD_BYTES = "vllm:kv_offload_load_bytes"  # its name in a step's connector stats


class OffloadCounters(Struct, frozen=True, kw_only=True):
    load_bytes: int
    store_bytes: int
    external_hit_tokens: int


def _total(registry, name: str) -> float:
    return sum(sample.value for metric in registry.collect() for sample in metric.samples
               if sample.name == name)


def read_counters() -> OffloadCounters:
    """The counters of the engine built last in this process (0 where vLLM has none)."""
    from prometheus_client import REGISTRY

    return OffloadCounters(load_bytes=int(_total(REGISTRY, LOAD_BYTES)),
                           store_bytes=int(_total(REGISTRY, STORE_BYTES)),
                           external_hit_tokens=int(_total(REGISTRY, EXTERNAL_HITS)))


def load_bytes_in(scheduler_stats) -> int:
    """The load bytes the offloading connector drained into one step's `SchedulerStats` (its
    `kv_connector_stats` payload: `{"data": {metric: {label values: value}}}`); 0 if none."""
    payload = getattr(scheduler_stats, "kv_connector_stats", None) or {}
    return int(sum(payload.get("data", {}).get(_STEP_LOAD_BYTES, {}).values()))
