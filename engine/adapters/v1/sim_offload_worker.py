"""The worker side of vLLM's offloading connector, played by the sim executor.

vLLM's real worker (`OffloadingConnectorWorker`, `distributed/kv_transfer/kv_connector/v1/
offloading/worker.py`) copies KV blocks between the GPU and pinned CPU memory; on this machine
it refuses to start ("only CUDA/XPU"), and the sim has no KV tensors anyway. This class keeps
the worker's contract with vLLM's scheduler side exactly, with the copies timed on the simulated
clock (engine.adapters.v1.tier_clock) instead of made:

- each step, before the forward pass: stores deferred from the step before are submitted, any
  job in `jobs_to_flush` is submitted and waited for, then the step's loads are submitted and
  its sync loads waited for (the worker's `handle_preemptions` and `start_kv_transfers`);
- after it: the step's other stores are deferred to the next step (`prepare_store_kv`), and
  every job done by the step's end is reported: `completed_jobs` for every load and store, with
  its bytes and seconds in `transfer_stats` (what vLLM's `kv_offload` byte counters add up),
  and `finished_recving` for each async load's request (`get_finished`).

Every job is reported once, whatever became of its request (finished, preempted, aborted):
vLLM's scheduler frees an aborted request's blocks only when its load is reported, and a
store never reported keeps the engine stepping for good. Bytes per job are the GPU blocks it
moves times the bytes one block holds over all layers, as the real worker counts them.
"""

from __future__ import annotations

from typing import Any, Callable

from engine.adapters.v1.current import tier
from engine.adapters.v1.tier_clock import LOAD, STORE, Transfer, TransferClock
from engine.costmodel import CostModel

DEFAULT_STEP_S = CostModel().base_s


class SimOffloadWorker:
    """One simulated worker (vLLM's world size 1: one report completes a job)."""

    def __init__(self, bytes_per_block: int, bandwidth_bytes_per_s: float = 25e9) -> None:
        self.bytes_per_block = bytes_per_block
        self.clock = TransferClock(bandwidth_bytes_per_s)
        self._deferred: list[tuple[int, str, int]] = []  # stores for the next step
        # When the step starts on the simulated clock, and the least it will last (a function:
        # the step's tokens are known only once vLLM has scheduled it). The driver sets both
        # from the cost model (engine.adapters.v1.tier); without it (vLLM driving the executor
        # alone, a bare bench) each step lasts the cost model's fixed base and the clock runs
        # on by itself, so transfers still complete.
        self.now_s = 0.0
        self.min_step_s: Callable[[], float] = lambda: DEFAULT_STEP_S
        self.wait_s = 0.0  # what the last step waited for transfers (flushes, sync loads)

    def step(self, meta: Any) -> Any:
        """Play one step of the worker for the step's metadata; return its KVConnectorOutput
        (None when the step has no tier metadata)."""
        self.wait_s = 0.0
        if meta is None:
            return None
        clock, now = self.clock, self.now_s
        size = self.bytes_per_block
        flush = tier.jobs_to_flush(meta)
        for job_id, req_id, blocks in self._deferred:
            clock.submit(job_id, STORE, req_id, blocks * size, now)
        self._deferred = []
        later: list[tuple[int, str, int]] = []
        for job_id, req_id, blocks in tier.store_jobs(meta):
            if job_id in flush:
                clock.submit(job_id, STORE, req_id, blocks * size, now)
            else:
                later.append((job_id, req_id, blocks))
        done: list[Transfer] = []
        if flush:
            wait = clock.wait_for(flush, now)
            done += clock.finish(flush)
            self.wait_s += wait
        start = now + self.wait_s
        sync: set[int] = set()
        for job_id, req_id, blocks, is_sync in tier.load_jobs(meta):
            clock.submit(job_id, LOAD, req_id, blocks * size, start, sync=is_sync)
            if is_sync:
                sync.add(job_id)
        if sync:
            self.wait_s += clock.wait_for(sync, start)
            done += clock.finish(sync)
        self._deferred = later
        end = now + self.wait_s + self.min_step_s()
        done += clock.finished_by(end)
        self.now_s = end  # the next step's start, unless the driver says otherwise
        return self._report(done)

    def _report(self, done: list[Transfer]) -> Any:
        if not done:
            return None
        loads = [(t.job_id, t.nbytes, t.seconds) for t in done if t.kind == LOAD]
        stores = [(t.job_id, t.nbytes, t.seconds) for t in done if t.kind == STORE]
        recving = {t.req_id for t in done if t.kind == LOAD and not t.sync}
        return tier.connector_output(loads, stores, recving)

    @property
    def in_flight(self) -> int:
        """Jobs submitted or deferred and not yet reported."""
        return len(self.clock) + len(self._deferred)
