"""A V1 run's stats lines, computed the way vLLM V1's LoggingStatLogger computes its own.

vLLM 0.33 (`vllm/v1/metrics/loggers.py`): every step's token counts are added up; every
VLLM_LOG_STATS_INTERVAL (10 s by default) it logs sum(tokens) / (now - last log) and the
scheduler's last counts: running, waiting, the KV cache usage. Here `now` is simulated time and
the stats clock starts `warmup_s` before the first step (vLLM builds its logger with the engine;
0 by default, fitted by `observatory fit`).

What counts as a prompt token differs a little: vLLM counts a request's locally computed prompt
tokens once, at its first output token (`PromptTokenStats.computed`), and never counts recompute
after a preemption. The step records count prompt tokens chunk by chunk as they are scheduled;
here recompute is left out, as vLLM leaves it out, unless `recompute_as_prompt`. Over a 10-s
window the two differ by the chunks in flight at its edges.

`stats_log` prints the windows in 0.33's own format, so a sim's log imports back to the same
numbers (tests/test_v1_logs.py).
"""

from __future__ import annotations

from typing import Iterable

from engine.analysis.logs.timeline import V1_STATS_INTERVAL_S
from engine.stream.records import LogWindow, V1StepRecord


V1Point = tuple[float, int, int, int, int, float, int]
"""What a V1 window needs of one step: sim_s, prompt tokens as vLLM counts them, generated
tokens, running, waiting, GPU KV %, preemptions."""


def v1_points(steps: Iterable[V1StepRecord], recompute_as_prompt: bool = False) -> list[V1Point]:
    return [(s.sim_s, s.prompt_tokens - (0 if recompute_as_prompt else s.recomputed_tokens),
             s.generated_tokens, s.running, s.waiting,
             100.0 * s.gpu_used / max(1, s.gpu_total), len(s.preempted)) for s in steps]


def v1_point_windows(points: Iterable[V1Point], warmup_s: float = 0.0,
                     interval_s: float = V1_STATS_INTERVAL_S) -> list[LogWindow]:
    """The stats lines of `points` (engine.analysis.logs.fit re-times a run's points without
    running it again). `warmup_s`: the logger started that long before the first step (vLLM
    builds it with the engine), so the first window is that much shorter on the sim clock."""
    windows: list[LogWindow] = []
    last = -warmup_s
    prompt = generated = preempted = 0
    for sim_s, p, g, running, waiting, gpu_pct, preemptions in points:
        prompt += p
        generated += g
        preempted += preemptions
        if sim_s - last >= interval_s:
            elapsed = sim_s - last
            windows.append(LogWindow(
                t_s=round(sim_s, 3), clock=None, line=len(windows),
                prompt_tps=round(prompt / elapsed, 1), gen_tps=round(generated / elapsed, 1),
                running=running, swapped=None, pending=None, waiting=waiting,
                gpu_pct=round(gpu_pct, 1), cpu_pct=None,
                engine=0, kv_device="GPU", preemptions=preempted or None))
            prompt = generated = preempted = 0
            last = sim_s
    return windows


def v1_sim_windows(steps: Iterable[V1StepRecord], interval_s: float = V1_STATS_INTERVAL_S,
                   recompute_as_prompt: bool = False, warmup_s: float = 0.0) -> list[LogWindow]:
    """The stats lines vLLM V1 would have printed; `t_s` is simulated seconds since the first
    step, `line` the window's index, `engine` 0."""
    return v1_point_windows(v1_points(steps, recompute_as_prompt), warmup_s, interval_s)


def stats_log(windows: Iterable[LogWindow], start: str = "12-04 10:00:00") -> str:
    """The windows as vLLM 0.33 prints them (`Engine 000: ...`), stamped from `start`
    (MM-DD HH:MM:SS) plus each window's `t_s`."""
    from datetime import datetime, timedelta

    zero = datetime.strptime("2000-" + start, "%Y-%m-%d %H:%M:%S")
    lines = []
    for w in windows:
        stamp = (zero + timedelta(seconds=w.t_s or 0.0)).strftime("%m-%d %H:%M:%S")
        parts = [f"Avg prompt throughput: {w.prompt_tps:.1f} tokens/s",
                 f"Avg generation throughput: {w.gen_tps:.1f} tokens/s",
                 f"Running: {w.running} reqs", f"Waiting: {w.waiting} reqs"]
        if w.preemptions:
            parts.append(f"Preemptions: {w.preemptions}")
        parts.append(f"{w.kv_device or 'GPU'} KV cache usage: {w.gpu_pct:.1f}%")
        lines.append(f"INFO {stamp} [loggers.py:335] Engine {w.engine or 0:03d}: "
                     + ", ".join(parts))
    return "\n".join(lines) + "\n"
