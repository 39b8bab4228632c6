"""What every number the observatory shows means: decided once, here, and followed by every
surface (the live and replay screens, `summary`, `compare`, `export`, the events, the docs).

The record-format reference prints this docstring from its third paragraph on, at build time
(docs/hooks/reference.py), and tests/test_one_number.py holds every surface of every shipped
recording to it.

**A step's index and a count of steps.** `step`, in a record and as "step N" anywhere, is a
step's index: the number of `step()` calls vLLM made before it, so a run's first step is step 0
(a recording switched on mid-run starts at its header's `starts_at_step`). `steps` (the
summary's, `compare`'s, the end record's, "N steps") counts the steps that completed. A run
recorded from its start whose last step is step 9,530 has 9,531 steps: a surface that says the
end of a run names the range, which is both ("run finished: completed; steps 0–9,530
completed").

**The aborting step.** When vLLM raises out of its `step()` number N, step N never completes:
the abort is "at step N" everywhere (the summary's and `compare`'s `abort_step`, the banner, the
status line, the events, `export`'s last row), and the steps that completed are 0 to N−1, so
`steps` is N too. What vLLM left when it raised (queues and KV blocks, `EngineAborted`) is step
N's state: the screens and `export` show step N as one more step, marked aborted, whose
decisions vLLM never returned (blank in CSV, nothing in the step detail), and every peak
includes it. On 0.5.0.post1 `seed-5578` under `off` completes steps 0 to 804 with 103 groups
swapped, swaps one more out in step 805 and raises there: `abort_step` 805, `steps` 805,
`peak_swapped` 104.

**Request ids are names.** A request id (`"30"`) is never a count: prose writes it `#30`
("finished #30", "preempted #12 ×20"), and a count says its noun ("1 request preempted").

**Per request and per admission.** A V1 request is admitted once, then again after each
preemption (`resumed`). A count per admission counts every admission; per request counts each
request once, at its first admission. Names say which: `cached_tokens_per_request` (prompt
tokens each request found already computed when first admitted: at most its prompt) and
`cached_tokens_per_admission` (found at every admission, so a preempted request counts again
and the total can pass the prompts'). A share of the prompts uses the per-request count.

**Percentages.** A `_pct` (and a `%`) is a share of a whole it names, from 0 to 100: KV blocks
used of all blocks, free of all, cached prompt tokens of those the trace allows. A quantity
that can pass its reference is a ratio written `×`, never a percentage: the committed KV
demand over GPU + CPU blocks is `committed ×`, and 1× is where the swap space can run out.

Shown with fewer digits, a percentage is rounded but never to 100 or 0 when it is not: 99.9 %
of the KV blocks reads "99%" at 0 decimals, not "100%".

**Values at a step, and peaks.** A value "at step N" is read at step N's end, the moment vLLM
reads its own stats. A peak is the largest such value of any step, the aborting step
included. A stall's `kv_free_pct` is the least KV free at any of its steps' ends: the most the
watchdog can promise was free throughout (the reason's "N free" is vLLM's own count when its
scan turned the head request down, at the start of the stall's last step).
"""

from __future__ import annotations

from typing import Iterable


def request_ids(ids: Iterable[str], limit: int = 40) -> str:
    """Request ids as names, `#7, #12`, the first `limit` of them then "… (+N)"; "—" for none.
    The ids come from a file: the caller makes the text safe where it prints it."""
    ids = list(ids)
    if not ids:
        return "—"
    shown = ", ".join(f"#{rid}" for rid in ids[:limit])
    return shown if len(ids) <= limit else f"{shown} … (+{len(ids) - limit})"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """"1 request", "3 requests": a count always says what it counts."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def pct_text(value: float, digits: int = 1) -> str:
    """A percentage with `digits` decimals, never rounded up to 100 (or down to 0) when it is
    not: 99.9 % of the blocks is not "100%" (a full cache) at 0 decimals but "99%"."""
    text = f"{value:.{digits}f}"
    if text == f"{100:.{digits}f}" and value < 100:
        return f"{100 - 10 ** -digits:.{digits}f}"
    if float(text) == 0 and value > 0:
        return f"{10 ** -digits:.{digits}f}"
    return text


def ratio_text(part: float, whole: float) -> str:
    """A quantity that can pass its reference, as a ratio: "4.22×" (engine.conventions)."""
    return f"{part / whole:.2f}×" if whole else "–"


def percent(part: float, whole: float) -> float:
    """`part` of `whole` in % (0 when `whole` is 0). A part larger than its whole is a bug in
    the caller's choice of whole, never a percentage: ValueError."""
    if whole <= 0:
        return 0.0
    if part > whole or part < 0:
        raise ValueError(f"{part} is not a part of {whole}: a percentage runs 0-100")
    return 100.0 * part / whole
