"""When the sim's CPU-tier transfers finish, on the simulated clock.

The sim executor plays the worker side of vLLM's offloading connector, so it decides when each
load (CPU -> GPU) and store (GPU -> CPU) is done. A transfer of B bytes takes B / bandwidth
seconds. As on vLLM's CPU worker (`v1/kv_offload/cpu/gpu_worker.py`), each direction is one copy
stream: a job starts when it is submitted or when the one before it in that direction ends,
whichever is later.

A job is reported complete at the end of the first step that certainly ends after it: the
step's start, plus any wait the step made for transfers, plus the least the cost model charges
for that step (engine.costmodel without its per-cached-token term, which only adds). A long
transfer thus delays its completion by as many steps as its time covers, and a step that must
wait for a transfer (a flushed store, a sync load) is charged the wait.

No vLLM here: the times are plain floats, so the same spec gives the same completions.
"""

from __future__ import annotations

from dataclasses import dataclass

LOAD, STORE = "load", "store"


@dataclass(frozen=True)
class Transfer:
    job_id: int
    kind: str  # LOAD or STORE
    req_id: str
    nbytes: int
    seconds: float  # nbytes / bandwidth
    end_s: float  # when it is done on the simulated clock
    sync: bool = False  # a load vLLM runs before this step's forward pass


class TransferClock:
    """The in-flight transfers of one sim worker and the two copy streams they queue on."""

    def __init__(self, bandwidth_bytes_per_s: float) -> None:
        if not bandwidth_bytes_per_s > 0:
            raise ValueError("the transfer bandwidth must be positive")
        self.bandwidth = bandwidth_bytes_per_s
        self._busy_until = {LOAD: 0.0, STORE: 0.0}
        self._inflight: dict[int, Transfer] = {}  # job id -> transfer, in submission order

    def __len__(self) -> int:
        return len(self._inflight)

    def submit(self, job_id: int, kind: str, req_id: str, nbytes: int, now_s: float,
               sync: bool = False) -> Transfer:
        """Queue a job on its direction's stream at `now_s`."""
        if job_id in self._inflight:
            raise ValueError(f"transfer job {job_id} submitted twice")
        seconds = nbytes / self.bandwidth
        start = max(now_s, self._busy_until[kind])
        transfer = Transfer(job_id, kind, req_id, nbytes, seconds, start + seconds, sync)
        self._busy_until[kind] = transfer.end_s
        self._inflight[job_id] = transfer
        return transfer

    def wait_for(self, job_ids: set[int] | frozenset[int], now_s: float) -> float:
        """Seconds from `now_s` until every one of `job_ids` in flight is done (0: none)."""
        ends = [t.end_s for jid, t in self._inflight.items() if jid in job_ids]
        return max(0.0, max(ends, default=now_s) - now_s)

    def finish(self, job_ids: set[int] | frozenset[int]) -> list[Transfer]:
        """Take `job_ids` out of flight now (the step waited for them), in submission order."""
        done = [t for jid, t in self._inflight.items() if jid in job_ids]
        for t in done:
            del self._inflight[t.job_id]
        return done

    def finished_by(self, end_s: float) -> list[Transfer]:
        """Take out every transfer done by `end_s`, in submission order."""
        done = [t for t in self._inflight.values() if t.end_s <= end_s]
        for t in done:
            del self._inflight[t.job_id]
        return done
