"""Measure how long the model executor takes for each step: the `exec_s` of every StepRecord.

The cost model's `sim_s` is a model; `exec_s` is a measurement, which is what a calibration
against real hardware needs. It times exactly vLLM's `model_executor.execute_model(...)` call
inside `LLMEngine.step()`, so scheduling, output processing, stats and the observer's own work
are all outside it.

- gpu: CUDA kernels run asynchronously, so a host timer around the call alone would measure
  launch time (or, worse, time spent waiting for the *previous* step's kernels). The timer
  synchronizes the device before starting the clock and again before stopping it, so `exec_s`
  is the time from "device idle, inputs ready" to "this step's kernels done". The cost of the
  two synchronizations (a few microseconds when the device is idle) is measured by
  bench/bench_exec_timing.py.
- sim: the executor computes nothing; `exec_s` is the real time its Python takes (sampling ids
  from a seeded RNG), so a sim recording's measured column is honest about being tiny.

What the executor call contains in vLLM 0.5 (no async output processing yet): the worker's
swap-in/swap-out/copy of KV blocks for this step, preparing the input tensors, the forward pass
(a CUDA graph for small decode batches unless eager) and sampling, whose results come back to
the host. So on issue #5578's workload `exec_s` includes the cost of the swapping itself.

The wrapper replaces `execute_model` on the executor *instance* (never on the class, so two
engines in one process never share a timer) and leaves everything else of vLLM untouched.
"""

from __future__ import annotations

import time
from typing import Any, Callable


class ExecTimer:
    """Wraps one engine's executor; `take()` returns the seconds measured since the last take."""

    def __init__(self, engine: Any, synchronize: Callable[[], None] | None = None) -> None:
        self._executor = engine.model_executor
        self._inner = self._executor.execute_model
        self._sync = synchronize
        self._total = 0.0
        self.calls = 0
        self._executor.execute_model = self._timed

    def _timed(self, *args: Any, **kwargs: Any) -> Any:
        sync = self._sync
        if sync is not None:
            sync()
        start = time.perf_counter()
        try:
            return self._inner(*args, **kwargs)
        finally:
            if sync is not None:
                sync()
            self._total += time.perf_counter() - start
            self.calls += 1

    def take(self) -> float:
        """Seconds spent in `execute_model` since the previous take (0.0 if it was not called:
        vLLM skips the executor on a step that scheduled nothing)."""
        total, self._total = self._total, 0.0
        return total

    def detach(self) -> None:
        """Put the executor's own method back."""
        if self._executor.__dict__.get("execute_model") == self._timed:
            del self._executor.execute_model


def cuda_synchronize() -> Callable[[], None]:
    """`torch.cuda.synchronize` for the current device (imported only on the gpu backend)."""
    import torch

    return torch.cuda.synchronize


def attach(engine: Any, backend: str) -> ExecTimer:
    """Time `engine`'s executor: CUDA-synchronised on the gpu backend, plain on the sim."""
    return ExecTimer(engine, cuda_synchronize() if backend == "gpu" else None)
