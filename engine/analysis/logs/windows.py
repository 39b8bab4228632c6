"""A sim run's stats lines, computed the way vLLM V0's StatLogger computes its own.

vLLM 0.5 (`vllm/engine/metrics.py`): every step appends its prompt and generation token counts;
when `now - last_local_log > 5 s` it logs sum(tokens) / (now - last_local_log) and the queue
and KV figures of that step, then starts a new window at `now`. Here `now` is simulated time.
The stats clock starts when the engine is built, before the first step, so a run whose first
step came `warmup_s` after that (tokenizing 10,000 prompts, say) has a first window that is
part idle: `last_local_log` starts at `-warmup_s`.
"""

from __future__ import annotations

from typing import Iterable

import msgspec

from engine.analysis.logs.timeline import STATS_INTERVAL_S
from engine.stream.records import LogWindow, StepRecord

METRICS = ("prompt_tps", "gen_tps", "running", "swapped", "pending", "gpu_pct", "cpu_pct")


Point = tuple[float, int, int, int, int, int, float, float]
"""What a window needs of one step: sim_s, prompt tokens, generated tokens, running, swapped,
waiting, GPU %, CPU %."""


def points(steps: Iterable[StepRecord]) -> list[Point]:
    return [(s.sim_s, s.prompt_tokens, s.generated_tokens, s.running, s.swapped, s.waiting,
             s.gpu_pct, s.cpu_pct) for s in steps]


def sim_windows(steps: Iterable[Point], warmup_s: float = 0.0,
                interval_s: float = STATS_INTERVAL_S) -> list[LogWindow]:
    """The stats lines vLLM would have printed; `t_s` is simulated seconds (stats clock minus
    `warmup_s`) and `line` the window's index."""
    windows: list[LogWindow] = []
    last = -warmup_s
    prompt = generated = 0
    for sim_s, p, g, running, swapped, waiting, gpu, cpu in steps:
        prompt += p
        generated += g
        if sim_s - last > interval_s:
            elapsed = sim_s - last
            windows.append(LogWindow(
                t_s=round(sim_s, 3), clock=None, line=len(windows),
                prompt_tps=round(prompt / elapsed, 1), gen_tps=round(generated / elapsed, 1),
                running=running, swapped=swapped, pending=waiting,
                gpu_pct=round(gpu, 1), cpu_pct=round(cpu, 1)))
            prompt = generated = 0
            last = sim_s
    return windows


def as_rows(windows: list[LogWindow]) -> list[dict[str, float | None]]:
    return [{name: getattr(w, name) for name in ("t_s", *METRICS)} for w in windows]


def encode_windows(windows: list[LogWindow]) -> bytes:
    return msgspec.json.encode(windows)
