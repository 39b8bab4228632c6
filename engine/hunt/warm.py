"""Warm engines: a worker keeps the engines it built and hands one back, reset, to the next
workload with the same engine settings, instead of building another.

Why: importing vLLM takes a new process 10-40 s, and even in a warm process building an
engine costs a second or more on V1 (vLLM's EngineCore runs full garbage collections as it
builds and as the previous engine shuts down: bench/hunt_throughput.py), against a small
workload's fraction of a second. The reset is the driver's (`reset(spec, policy)` in
engine/adapters/<kind>/driver.py): vLLM's own reset APIs empty its prefix cache and CPU tier,
and the observatory's hook, reader and sim clock start anew, so a workload run on a reused
engine makes the same records as on a new one (tests/test_hunt*.py compare them). An engine is
kept only after a workload that completed (nothing left in it); one that aborted or was cut
off is dropped.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from engine.policy import parse_policy
from engine.spec import RunSpec

ENGINE_FIELDS = ("backend", "model", "tokenizer", "block_size", "num_gpu_blocks",
                 "num_cpu_blocks", "swap_space_gib", "max_num_batched_tokens", "max_num_seqs",
                 "enable_chunked_prefill", "preemption_mode", "enable_prefix_caching",
                 "scheduler_reserve_full_isl", "long_prefill_token_threshold",
                 "async_scheduling", "kv_offloading_gib", "offload_eviction",
                 "offload_bandwidth_gbps", "seed", "eos_prob")
"""The RunSpec fields an engine is built from; the others (the workload, the policy, the
cost model, the step limit) change nothing a reset cannot."""


def engine_key(spec: RunSpec) -> tuple:
    return tuple(repr(getattr(spec, name)) for name in ENGINE_FIELDS)


class WarmEngines:
    """The engines one process keeps (at most `keep`, the most recently used)."""

    def __init__(self, keep: int = 2) -> None:
        self.keep = keep
        self._drivers: OrderedDict[tuple, Any] = OrderedDict()
        self.built = self.reused = 0

    def take(self, spec: RunSpec) -> Any | None:
        """A kept engine for `spec`, reset for it; None: build one (and count it)."""
        driver = self._drivers.pop(engine_key(spec), None)
        if driver is not None and driver.reset(spec, parse_policy(spec.policy)):
            self.reused += 1
            return driver
        self.built += 1
        return None

    def give(self, spec: RunSpec, driver: Any) -> None:
        """Keep `driver` (its workload completed) for the next workload of its settings."""
        self._drivers[engine_key(spec)] = driver
        while len(self._drivers) > self.keep:
            self._drivers.popitem(last=False)
