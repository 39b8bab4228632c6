"""What vLLM's CPU KV tier did in one step, read from vLLM's own objects.

The tier is vLLM's OffloadingConnector (engine.adapters.v1.tier_v033 names every part of it this
module reads). Per step it gives the step record (engine.stream.records.V1StepRecord):

- loads and stores the step issued, as jobs and bytes, from the step's
  `OffloadingConnectorMetadata`: each job's GPU blocks times the bytes a block holds over all
  layers, the arithmetic of vLLM's own worker (so the run's totals equal vLLM's
  `kv_offload_load_bytes` / `kv_offload_store_bytes` counters once every job is done);
- chunks evicted: the `evicted_keys` of each `CPUOffloadingManager.prepare_store` call, seen
  by wrapping that bound method on the manager instance (the call and its result unchanged);
- tokens served from the tier: the `num_external_tokens` vLLM's scheduler hands the connector's
  `update_state_after_alloc` for each request it admits with a tier hit;
- chunks resident and the tier's capacity, and the jobs vLLM still waits for, at the step's end;
- on the sim, the seconds the step waited for transfers (engine.adapters.v1.sim_offload_worker).

It also sets up the sim worker's clock before each step: when the step starts, and the least it
will last by the cost model (its prompt tokens and decoding requests, known once vLLM has
scheduled it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from engine.adapters.hook_base import OwnCode
from engine.adapters.v1.current import tier

_OWN_STORE = OwnCode("hook prepare_store")
_OWN_ALLOC = OwnCode("hook update_state_after_alloc")


@dataclass
class TierStep:
    """The tier's part of one step record."""

    chunks: int = 0  # resident at the step's end
    chunks_total: int = 0
    loads: int = 0
    load_bytes: int = 0
    stores: int = 0
    store_bytes: int = 0
    evictions: int = 0
    hit_tokens: int = 0
    in_flight: int = 0
    wait_s: float = 0.0


class TierObserver:
    """Attached to a scheduler whose vLLM runs the offloading connector."""

    def __init__(self, scheduler: Any, connector: Any, worker: Any = None) -> None:
        self.scheduler = scheduler
        self.connector = connector
        self.manager = tier.manager_of(connector)
        self.worker = worker  # SimOffloadWorker on the sim backend, None on a GPU
        self.capacity = tier.capacity_chunks(self.manager)
        self.block_bytes = tier.bytes_per_block(tier.kv_cache_config_of(scheduler))
        self._evictions = 0
        self._hit_tokens = 0
        self._originals: dict[str, Callable[..., Any]] = {}

    # ------------------------------------------------------------------ attach / detach
    def attach(self) -> "TierObserver":
        manager, connector = self.manager, self.connector
        for obj, name in ((manager, "prepare_store"), (connector, "update_state_after_alloc")):
            if name in vars(obj):
                raise RuntimeError(f"{type(obj).__name__} already has an instance attribute "
                                   f"{name!r}; is an observatory tier observer attached?")
            self._originals[name] = getattr(obj, name)
        manager.prepare_store = self._prepare_store
        connector.update_state_after_alloc = self._update_state_after_alloc
        return self

    def detach(self) -> None:
        vars(self.manager).pop("prepare_store", None)
        vars(self.connector).pop("update_state_after_alloc", None)
        self._originals.clear()

    def _prepare_store(self, *args, **kwargs):  # noqa: ANN002, ANN003
        result = self._originals["prepare_store"](*args, **kwargs)
        with _OWN_STORE:
            self._evictions += tier.evicted_count(result)
        return result

    def _update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int):
        with _OWN_ALLOC:
            self._hit_tokens += num_external_tokens
        return self._originals["update_state_after_alloc"](request, blocks, num_external_tokens)

    # ------------------------------------------------------------------ the sim's clock
    def configure_sim(self, bandwidth_bytes_per_s: float,
                      min_step_s: Callable[[], float]) -> None:
        if self.worker is not None:
            self.worker.clock.bandwidth = bandwidth_bytes_per_s
            self.worker.min_step_s = min_step_s

    def before_step(self, now_s: float) -> None:
        if self.worker is not None:
            self.worker.now_s = now_s

    # ------------------------------------------------------------------ reading
    def pending(self) -> bool:
        """vLLM still waits for transfers: the engine must keep stepping to complete them."""
        return tier.has_pending_work(self.connector)

    def resident(self) -> int:
        return tier.resident_chunks(self.manager)

    def take(self, output: Any) -> TierStep:
        """The step that just ran (its SchedulerOutput `output`); resets the tallies."""
        step = TierStep(chunks=self.resident(), chunks_total=self.capacity,
                        evictions=self._evictions, hit_tokens=self._hit_tokens,
                        in_flight=tier.jobs_in_flight(self.connector),
                        wait_s=self.worker.wait_s if self.worker is not None else 0.0)
        self._evictions = self._hit_tokens = 0
        meta = tier.metadata_of(output) if output is not None else None
        if meta is not None:
            size = self.block_bytes
            for _, _, blocks, _ in tier.load_jobs(meta):
                step.loads += 1
                step.load_bytes += blocks * size
            for _, _, blocks in tier.store_jobs(meta):
                step.stores += 1
                step.store_bytes += blocks * size
        return step


def attach(scheduler: Any, executor: Any) -> TierObserver | None:
    """A TierObserver on `scheduler` if its vLLM runs the offloading connector, else None."""
    connector = tier.connector_of(scheduler)
    if connector is None:
        return None
    return TierObserver(scheduler, connector, getattr(executor, "offload", None)).attach()
