"""The figures the README and the guides quote from the project's committed data, rendered from
it: a shipped recording's summary (recordings/), the shipped sweep (sweeps/demo-cpu-blocks/).

A page writes such a figure as `<!--fact:NAME-->805<!--/fact-->` (invisible on GitHub and on the
site: the docs build replaces the whole of it with the value, docs/hooks/reference.py). What the
value is comes from FACTS below, computed from the data, never typed: `python docs/facts.py`
rewrites the pages whose figures moved (after `recordings/make_examples.py` or a new sweep), and
tests/test_facts.py fails while any page says other than the data. No vLLM: recordings are read,
not re-run (most answer from their index).

The bench figures (speed, memory) are rendered the same way from bench/results/ (bench/all.py);
the reference pages from the code.
"""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FACT = re.compile(r"<!--fact:(?P<name>[\w.-]+)-->(?P<value>.*?)<!--/fact-->", re.S)


@functools.lru_cache(maxsize=None)
def summary(name: str) -> Any:
    """The summary of recordings/NAME.jsonl.zst, as `observatory summary` prints it."""
    from engine.analysis.summary import summarize
    from engine.stream.reader import load

    return summarize(load(str(ROOT / "recordings" / f"{name}.jsonl.zst")).all_items())


@functools.lru_cache(maxsize=None)
def compared(name: str) -> Any:
    """`observatory compare`'s metrics of recordings/NAME.jsonl.zst (throughput, TTFT)."""
    from engine.analysis.compare import run_metrics
    from engine.stream.reader import load

    return run_metrics(load(str(ROOT / "recordings" / f"{name}.jsonl.zst")))


@functools.lru_cache(maxsize=None)
def sweep_rows() -> list[dict[str, Any]]:
    from engine.sweep.report import load

    return load(str(ROOT / "sweeps" / "demo-cpu-blocks")).rows


def survives_from(policy: str) -> str:
    """The fewest CPU blocks of the shipped demo sweep with which `policy` survived, and every
    larger grid value too."""
    rows = sorted((r for r in sweep_rows() if r["policy"] == policy),
                  key=lambda r: r["num_cpu_blocks"])
    for k, row in enumerate(rows):
        if not any(r["aborted"] for r in rows[k:]):
            return f"{row['num_cpu_blocks']:,}"
    return "none"


def peak_swapped_where_it_survives(policy: str) -> str:
    """The peak swapped groups of `policy` at the fewest CPU blocks it survived with."""
    blocks = int(survives_from(policy).replace(",", ""))
    (row,) = [r for r in sweep_rows() if r["policy"] == policy and r["num_cpu_blocks"] == blocks]
    return f"{row['peak_swapped']:,}"


def _int(value: int) -> str:
    return f"{value:,}"


FACTS: dict[str, Callable[[], str]] = {
    # the seed on 0.5.0.post1 under off (engine.conventions: the abort is the step that raised)
    "seed-off.abort_step": lambda: _int(summary("seed-5578-off").abort_step),
    "seed-off.peak_swapped": lambda: _int(summary("seed-5578-off").peak_swapped),
    # V1's thrash under off, and the fix
    "thrash-off.preemptions": lambda: _int(summary("v1-thrash-off").preemptions),
    "thrash-off.most_of_one": lambda: _int(summary("v1-thrash-off").max_preemptions_per_request),
    "thrash-off.tax": lambda: f"{summary('v1-thrash-off').recompute_tax:.2f}",
    # #31731's head-of-line stall, and skip-and-continue
    "hol-off.stall_steps": lambda: _int(summary("v1-head-of-line-off").longest_stall_steps),
    "hol-off.stall_since": lambda: _int(summary("v1-head-of-line-off").longest_stall_since),
    "hol-off.stall_waiting": lambda: _int(summary("v1-head-of-line-off").longest_stall_waiting),
    "hol-off.stall_reason": lambda: summary("v1-head-of-line-off").longest_stall_reason,
    "hol-off.tok_s": lambda: f"{compared('v1-head-of-line-off').throughput_tok_s:.0f}",
    "hol-fix.tok_s": lambda: f"{compared('v1-head-of-line-skip-and-continue').throughput_tok_s:.0f}",
    # #45257's under-filled steps under async scheduling, and per-iteration-count
    "seats-off.underfilled": lambda: _int(summary("v1-async-seats-off").underfilled_steps),
    "seats-off.steps": lambda: _int(summary("v1-async-seats-off").steps),
    "seats-fix.steps": lambda: _int(summary("v1-async-seats-per-iteration-count").steps),
    "seats-off.tok_s": lambda: f"{compared('v1-async-seats-off').throughput_tok_s:.0f}",
    "seats-fix.tok_s":
        lambda: f"{compared('v1-async-seats-per-iteration-count').throughput_tok_s:.0f}",
    "seats-off.sim_s": lambda: f"{summary('v1-async-seats-off').sim_seconds:.3f}",
    "seats-fix.sim_s": lambda: f"{summary('v1-async-seats-per-iteration-count').sim_seconds:.3f}",
    # the shipped demo sweep: the CPU blocks each policy needs
    "sweep.off_survives_from": lambda: survives_from("off"),
    "sweep.strict_survives_from": lambda: survives_from("strict"),
    "sweep.off_peak_swapped": lambda: peak_swapped_where_it_survives("off"),
    "sweep.strict_peak_swapped": lambda: peak_swapped_where_it_survives("strict"),
}
"""Every figure a page may quote from the data, by name."""


def render(text: str, keep_markers: bool = True) -> str:
    """`text` with every fact's value as the data says it; without the markers for the site.
    An unknown fact is a KeyError naming it."""
    def value(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in FACTS:
            raise KeyError(f"no fact {name!r} in docs/facts.py (FACTS)")
        shown = FACTS[name]()
        return f"<!--fact:{name}-->{shown}<!--/fact-->" if keep_markers else shown

    return FACT.sub(value, text)


def main() -> int:
    """Rewrite every page whose facts moved; say which."""
    changed = 0
    for page in PAGES:
        text = page.read_text()
        new = render(text)
        if new != text:
            page.write_text(new)
            changed += 1
            print(f"rewrote {page.relative_to(ROOT)}")
    print(f"{changed} page(s) rewritten" if changed else "every page says what the data says")
    return 0


if __name__ == "__main__":
    sys.exit(main())
