"""A sim run written out as the vLLM V0 log it would have printed: one stats line per 5-s window
(engine.analysis.logs.windows) and the abort.

What the fit is checked against: a "real" log whose true parameters are known, because the sim
made it (tests/test_fit.py, bench/fit_recovery.py). The lines use vLLM 0.5's layout, so they go
through the same importer as a user's log.
"""

from __future__ import annotations

from engine.analysis.logs.simrun import SimResult
from engine.analysis.logs.windows import sim_windows

START_S = 10 * 3600  # the log's clock at the stats logger's start: 10:00:00


def _clock(t: float) -> str:
    seconds = START_S + t
    return f"06-16 {int(seconds // 3600):02d}:{int(seconds // 60 % 60):02d}:{seconds % 60:06.3f}"


def stats_log(result: SimResult, warmup_s: float = 0.0) -> str:
    """The log of `result` (its trace on its own clock); `warmup_s` is how long the stats logger
    ran before the first step."""
    lines = []
    for w in sim_windows(result.trace, warmup_s):
        lines.append(f"INFO {_clock(w.t_s + warmup_s)} metrics.py:341] Avg prompt throughput: "
                     f"{w.prompt_tps:.1f} tokens/s, Avg generation throughput: {w.gen_tps:.1f} "
                     f"tokens/s, Running: {w.running} reqs, Swapped: {w.swapped} reqs, Pending: "
                     f"{w.pending} reqs, GPU KV cache usage: {w.gpu_pct:.1f}%, CPU KV cache "
                     f"usage: {w.cpu_pct:.1f}%.")
    if result.aborted and result.abort_s is not None:
        lines.append(f"ERROR {_clock(result.abort_s + warmup_s)} llm_engine.py:1] RuntimeError: "
                     f"Aborted due to the lack of CPU swap space.")
    return "\n".join(lines) + "\n"
