"""The releases' runs side by side, and where each release's decisions first part from the
previous one's: one table in 80 columns, then one line per release that differs.

The figures are compare's (engine.analysis.compare.run_metrics, one definition for both
commands); the first difference is the A/B replay's (engine.analysis.divergence): the decision
fields of the steps compared by number, times and policy names left out, so two releases that
schedule alike show none however their code differs.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any, Sequence

from engine.analysis.compare import run_metrics
from engine.analysis.divergence import decision_diff, first_difference
from engine.stream.run import Recording

WIDTH = 80


@dataclass(frozen=True)
class Row:
    version: str
    metrics: Any  # RunMetrics / V1RunMetrics; None for a release that failed
    failed: str = ""  # why it has no run
    difference: int | None = None  # first step whose decisions differ from the previous run's
    what: str = ""  # what differed there
    compared_with: str = ""  # the previous release that ran


def _ids(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        parts = [(f"{v[0]}:{v[1]}" if isinstance(v, (list, tuple)) else str(v)) for v in value]
        return "[" + " ".join(parts) + "]" if parts else "none"
    return str(value)


def describe(prev_version: str, a: Any, version: str, b: Any, fields: Sequence[str]) -> str:
    """What two steps decided differently, in words: each differing field with both values
    (request id:tokens for admissions, ids for preemptions and finishes)."""
    names = {"prefills": "admitted/prefilled (id:tokens)", "recomputed": "preempted",
             "batched_tokens": "tokens scheduled", "decode_groups": "decoding requests",
             "decode_seqs": "decoding sequences", "withheld": "admission withheld"}
    shown = [f for f in fields if not (f == "decode_seqs" and "decode_groups" in fields)]
    return "; ".join(f"{names.get(f, f)} {_ids(getattr(b, f))} on {version}, "
                     f"{_ids(getattr(a, f))} on {prev_version}" for f in shown)


def build(runs: Sequence[tuple[str, Recording | None, str]]) -> list[Row]:
    """`runs`: (version, its recording or None, why it failed), oldest first."""
    rows: list[Row] = []
    prev: tuple[str, Recording] | None = None
    for version, recording, failed in runs:
        if recording is None:
            rows.append(Row(version, None, failed=failed))
            continue
        metrics = run_metrics(recording)
        difference, what, against = None, "", ""
        if prev is not None:
            against = prev[0]
            a, b = prev[1].steps, recording.steps
            difference = first_difference(a, b)
            if difference is not None:
                ra = a[difference - a[0].step] if a and a[0].step <= difference <= a[-1].step \
                    else None
                rb = b[difference - b[0].step] if b and b[0].step <= difference <= b[-1].step \
                    else None
                if ra is None or rb is None:
                    ended, other = (against, version) if ra is None else (version, against)
                    what = f"{ended}'s run had ended; {other}'s went on"
                else:
                    what = describe(against, ra, version, rb, decision_diff(ra, rb))
        rows.append(Row(version, metrics, difference=difference, what=what,
                        compared_with=against))
        prev = (version, recording)
    return rows


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}"


def render(rows: Sequence[Row], left_out: Sequence[tuple[str, str]] = (),
           workload: str = "", notes: Sequence[str] = ()) -> str:
    """The table (80 columns), then what differed, then what failed or was left out."""
    head = (f"{'vLLM':<8} {'preempt':>7} {'most/req':>8} {'tax':>5} {'stall':>5} "
            f"{'tok/sim s':>9} {'end':>10}  {'1st diff vs prev':<16}")
    out = ([f"workload: {workload}"] if workload else []) + [head, "-" * len(head)]
    for row in rows:
        m = row.metrics
        if m is None:
            out.append(f"{row.version:<8} {'failed: see below':<48}")
            continue
        end = (f"abort {m.abort_step:,}" if m.abort_step is not None else
               {"completed": "finished", "max_steps": "max steps"}.get(m.end or "", m.end or "cut"))
        diff = ("–" if not row.compared_with else
                "none" if row.difference is None else f"step {row.difference:,}")
        out.append(f"{row.version:<8} {_num(getattr(m, 'preemptions', None)):>7} "
                   f"{_num(getattr(m, 'max_preemptions_per_request', None)):>8} "
                   f"{_num(getattr(m, 'recompute_tax', None), 2):>5} "
                   f"{_num(getattr(m, 'longest_stall_steps', None)):>5} "
                   f"{_num(m.throughput_tok_s):>9} {end:>10}  {diff:<16}")
    given, notes = notes, []
    for row in rows:
        if row.metrics is not None and row.difference is not None:
            notes.append(f"{row.version} vs {row.compared_with}, first at step "
                         f"{row.difference:,}: {row.what}")
        elif row.metrics is not None and row.compared_with:
            notes.append(f"{row.version} vs {row.compared_with}: the same decisions at every "
                         f"step")
        if row.metrics is None:
            notes.append(f"{row.version}: failed: {row.failed}")
    notes += [f"{version}: left out (refused by the release table: {why})"
              for version, why in left_out]
    notes = list(given) + notes
    out.append("")
    for note in notes:
        out += textwrap.wrap(note, WIDTH, subsequent_indent="  ", break_on_hyphens=False)
    out += textwrap.wrap("preempt: preemptions; most/req: most of one request; tax: "
                         "recompute tax; stall: longest admission stall (steps); tok/sim s: "
                         "generated tokens per simulated second", WIDTH)
    return "\n".join(out)
