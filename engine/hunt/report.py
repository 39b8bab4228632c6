"""What a hunt shows: a progress bar while it runs (a line every few seconds when stderr is
not a terminal), and at the end a summary table that fits 80 columns, one row per distinct
finding, plus the totals. `report.json` in the output directory holds the same, whole."""

from __future__ import annotations

import json
import sys
import time
from typing import IO

from engine.hunt.hunt import HuntReport
from engine.sweep.progress import note_line

WIDTH = 80
LINE_INTERVAL_S = 5.0


class HuntProgress:
    """`advance(done, findings)` after each workload taken; `close()` before the table."""

    def __init__(self, total: int, budget_s: float, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.total, self.budget_s = total, budget_s
        self.started = self._last = time.monotonic()
        self._bar = None
        if self.stream.isatty():
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn)

            self._bar = Progress(TextColumn("hunt"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[findings]} found"),
                                 TimeElapsedColumn(), console=Console(file=self.stream),
                                 transient=True)
            self._task = self._bar.add_task("workloads", total=total, findings=0)
            self._bar.start()

    def note(self, text: str) -> None:
        note_line(self._bar, self.stream, text)

    def advance(self, done: int, findings: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=done, findings=findings)
            return
        now = time.monotonic()
        if now - self._last >= LINE_INTERVAL_S:
            self._last = now
            self.note(f"hunt: {done} workloads, {findings} found, "
                      f"{now - self.started:.0f} of {self.budget_s:.0f} s")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def table(report: HuntReport) -> str:
    """The summary: totals, then one row per finding (detector, policy, workload, requests
    before and after shrinking, step, repeats, reproduced, seconds into the hunt when its
    workload was taken), then each bundle's path."""
    ran = report.workloads - report.refused
    rate = ran / report.elapsed_s if report.elapsed_s else 0.0
    lines = [f"hunt seed {report.seed} on vLLM {report.vllm}"
             + (f", policy {report.policy}" if report.policy else "")
             + f": {report.workloads} workloads (0-{max(report.workloads - 1, 0)}) in "
             f"{report.elapsed_s:.0f} s, {rate:.2f}/s",
             f"  {ran} ran ({report.steps:,} steps), {report.refused} refused by the "
             f"release, {report.hits} hits, {len(report.findings)} distinct"]
    if report.errors:
        lines.append(f"  {len(report.errors)} tasks failed (the observatory's own code): "
                     f"{report.errors[0]}"[:WIDTH])
    if not report.findings:
        lines.append(f"  nothing found in {ran} workloads")
        return "\n".join(lines)
    header = f"{'#':>2} {'detector':<14}{'policy':<16}{'workload':>8} {'requests':>9} " \
             f"{'step':>6} {'seen':>5} {'repro':>5} {'at s':>5}"
    lines += ["", header, "-" * len(header)]
    for number, f in enumerate(report.findings, 1):
        small = len(f.minimal.rows) if f.minimal is not None else f.requests
        step = f.minimal_outcome.fired(f.hit.detector) if f.minimal_outcome else None
        lines.append(f"{number:>2} {f.hit.detector:<14}{f.policy[:15]:<16}{f.index:>8} "
                     f"{f'{f.requests}->{small}':>9} "
                     f"{(step or f.hit).step:>6} {f.repeats + 1:>5} "
                     f"{'yes' if f.reproduced else 'no':>5} {f.found_s:>5.0f}")
    lines.append("")
    for number, f in enumerate(report.findings, 1):
        lines.append(f"{number:>2} {f.bundle or '(not bundled)'}"[:WIDTH])
    return "\n".join(lines)


def to_json(report: HuntReport) -> str:
    return json.dumps({
        "seed": report.seed, "policy": report.policy, "vllm": report.vllm,
        "workloads": report.workloads, "refused": report.refused, "ends": dict(report.ends),
        "hits": report.hits, "elapsed_s": round(report.elapsed_s, 3),
        "build_s": round(report.build_s, 3), "run_s": round(report.run_s, 3),
        "steps": report.steps, "errors": report.errors,
        "findings": [{"detector": f.hit.detector, "policy": f.policy, "workload": f.index,
                      "state": f.hit.state, "what": f.hit.what, "requests": f.requests,
                      "minimal_requests": len(f.minimal.rows) if f.minimal else None,
                      "repeats": f.repeats, "bundle": str(f.bundle) if f.bundle else None,
                      "reproduced": f.reproduced, "shrink_runs": f.tries,
                      "found_s": round(f.found_s, 1)}
                     for f in report.findings]}, indent=2)
