"""vLLM #45257 under `off` and under `per-iteration-count` (PR #45339's rule), from recordings.

Record the `v1-async-seats` preset once per policy, then read both here:

    PYTHONHASHSEED=0 observatory run --preset v1-async-seats --policy off --record off.jsonl
    PYTHONHASHSEED=0 observatory run --preset v1-async-seats --policy per-iteration-count \
        --record fix.jsonl
    python bench/async_seats.py off.jsonl fix.jsonl

For each: steps, simulated seconds, simulated tokens per second (tokens scheduled / sim_s, and
generated tokens / sim_s as the README's stall table counts them),
mean admission (simulated seconds from a request's arrival to the step that first scheduled
it), and the under-filled steps (engine.analysis.seats: seats counted full while fewer than
max_num_seqs were scheduled) with their longest run.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.analysis.seats import underfill  # noqa: E402
from engine.analysis.stall import seat_limit  # noqa: E402
from engine.stream.reader import load  # noqa: E402
from engine.stream.records import Arrivals  # noqa: E402


def figures(path: str) -> dict[str, object]:
    run = load(path)
    steps = run.steps
    arrived: dict[str, float] = {}
    for item in run.items:
        if isinstance(item, Arrivals):
            for rid in item.request_ids:
                arrived.setdefault(rid, item.sim_s)
    admitted: dict[str, float] = {}
    for s in steps:
        start = s.sim_s - s.sim_step_s
        for rid, _ in s.new:
            admitted.setdefault(rid, start)
    waits = [admitted[rid] - arrived.get(rid, 0.0) for rid in admitted]
    sim_s = steps[-1].sim_s
    seats = seat_limit(run.header) or 0
    under = underfill(steps, seats)
    return {"policy": steps[-1].policy, "vllm": run.header.vllm_version, "steps": len(steps),
            "sim_s": round(sim_s, 4),
            "tok_per_s": round(steps[-1].computed_total / sim_s, 1),
            "generated_tok_per_s": round(sum(x.generated_tokens for x in steps) / sim_s, 1),
            "mean_admission_s": round(sum(waits) / len(waits), 4),
            "underfilled_steps": under.steps, "longest_underfilled": under.longest}


def main(paths: list[str]) -> int:
    if not paths:
        print("usage: python bench/async_seats.py RECORDING...", file=sys.stderr)
        return 2
    for path in paths:
        print(figures(path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
