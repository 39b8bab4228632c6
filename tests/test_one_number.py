"""One number everywhere: every surface of every shipped recording states the same facts.

The conventions are engine.conventions' (a step's index vs a count of steps; the aborting step;
request ids; per request vs per admission; percentages). For each shipped recording this reads
what a user reads: `summary` (text and --json), `compare` (table and --json), `export` (CSV and
the Perfetto JSON), and the replay/live screens' text as the TUI's own view models and widgets
compose it (the status line, the abort banner, the step detail, the decisions table's row, the
events). Then it holds the facts they state to each other: the steps that completed, the
aborting step, the peak swapped and CPU/GPU KV, finished requests, V1's preemptions, recompute
tax, stall and cached tokens; and no percentage anywhere above 100.

Reading recordings needs no vLLM engine: this runs on every release's venv.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest

from engine.cli.registry import main
from engine.stream.reader import load
from shipped import shipped_recordings
from tui.run_view import RunView
from tui.widgets.abort_banner import AbortBanner
from tui.widgets.decisions_table import aborting_segments
from tui.widgets.status_bar import Status, StatusBar
from tui.widgets.step_detail import StepDetail


def cli(capsys, *argv: str) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def summary_text(text: str) -> dict[str, str]:
    """`summary`'s `name  value` lines (a long value goes on under its column)."""
    fields: dict[str, str] = {}
    name = ""
    for line in text.splitlines():
        if line.startswith(" "):
            fields[name] += " " + line.strip()
        else:
            name, _, value = line.partition("  ")
            fields[name] = value.strip()
    return fields


def compare_rows(text: str) -> dict[str, str]:
    """`compare --no-plot` of one run twice: each row's value for run A, whether the row is in
    the table or under it (a long value)."""
    rows: dict[str, str] = {}
    lines = text.splitlines()
    for k, line in enumerate(lines):
        if line.endswith(":") and k + 1 < len(lines) and lines[k + 1].startswith("  A  "):
            rows[line[:-1]] = lines[k + 1][5:]
        m = re.match(r"^(\S.*?)\s{2,}(\S+)\s+(\S+)$", line)
        if m and not line.startswith("-") and m.group(2) == m.group(3):
            rows.setdefault(m.group(1), m.group(2))
    return rows


def number(text: str) -> float | None:
    return None if text in ("-", "") else float(text.replace(",", ""))


def read_all(path: Path, out: Path, capsys) -> dict[str, Any]:
    s: dict[str, Any] = {"path": path}
    s["summary"] = json.loads(cli(capsys, "summary", str(path), "--json"))
    s["summary_text"] = summary_text(cli(capsys, "summary", str(path)))
    (s["compare"], _) = json.loads(cli(capsys, "compare", str(path), str(path), "--json"))
    s["compare_text"] = compare_rows(cli(capsys, "compare", str(path), str(path), "--no-plot"))
    csv_path, trace_path = out / "steps.csv", out / "trace.json"
    cli(capsys, "export", str(path), "--format", "csv", "-o", str(csv_path))
    cli(capsys, "export", str(path), "--format", "perfetto", "-o", str(trace_path))
    s["csv"] = list(csv.DictReader(csv_path.open()))
    s["trace"] = json.loads(trace_path.read_text())["traceEvents"]
    recording = load(str(path))
    view = RunView.from_items(recording.all_items())  # the screens' own view model
    s["view"] = view
    state = "aborted" if view.abort is not None else "finished"
    s["status"] = StatusBar.compose_text(view, Status(state=state, source="replay"),
                                         None, 400).plain.split("\n")[0]
    s["detail"] = (StepDetail.describe_abort(view.current, view.abort).plain
                   if view.aborting is not None else StepDetail.describe(view.current).plain)
    s["banner"] = (AbortBanner.describe(view.abort, "", None, False, view.engine).plain
                   if view.abort is not None else "")
    s["row"] = ("".join(seg.text for seg in aborting_segments(view.aborting, [6, 60], {}))
                if view.aborting is not None else "")
    s["events"] = [(e.step, e.kind, e.text) for e in view.events]
    return s


@pytest.mark.parametrize("path", shipped_recordings(), ids=lambda p: p.name)
def test_every_surface_states_the_same_facts(path: Path, tmp_path: Path, capsys):
    s = read_all(path, tmp_path, capsys)
    summary, text, compare, rows = s["summary"], s["summary_text"], s["compare"], s["compare_text"]
    view = s["view"]
    v1 = summary.get("engine") == "v1"
    done = [r for r in s["csv"] if r["aborted"] == "False"]
    aborting = [r for r in s["csv"] if r["aborted"] == "True"]
    slices = [e for e in s["trace"] if e["ph"] == "X" and e.get("cat") == "step"]

    # -- `summary`: its text says what its JSON says
    for name, value in summary.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            assert number(text[name]) == pytest.approx(value), name

    # -- steps that completed: a count (engine.conventions)
    steps = summary["steps"]
    assert compare["steps"] == steps == number(rows["steps"]) == len(done) == len(slices) \
        == len(view)
    assert [int(r["step"]) for r in done] == list(range(view.first_step,
                                                        view.first_step + steps))
    finished = [t for _, kind, t in s["events"] if kind == "finished"]
    if finished:  # "run finished: completed; steps 0–9,530 completed": a range, not a count
        (said,) = finished
        first, last = map(lambda n: int(n.replace(",", "")),
                          re.search(r"steps ([\d,]+)–([\d,]+) completed", said).groups())
        assert last - first + 1 == steps

    # -- the aborting step: step N, after steps 0..N-1
    abort_step = summary["abort_step"]
    assert compare["abort_step"] == abort_step == number(rows["abort step"])
    if abort_step is None:
        assert not aborting and not s["banner"] and view.abort is None
        assert f"step {view.last_step:,}" in s["status"]
    else:
        (row,) = aborting
        assert int(row["step"]) == abort_step == view.last_step == view.first_step + steps
        (instant,) = [e for e in s["trace"] if e.get("cat") == "abort"]
        assert instant["args"]["step"] == abort_step
        assert f"ABORTED at step {abort_step:,}:" in s["banner"]
        assert f"step {abort_step:,}" in s["status"] and "aborted" in s["status"]
        assert s["row"].startswith(str(abort_step)) and "aborted" in s["row"]
        assert any(kind == "abort" and step == abort_step and f"at step {abort_step}:" in t
                   for step, kind, t in s["events"])
        # what vLLM left is the aborting step's state on every surface
        abort = view.abort
        assert int(row["running"]) == abort.running and int(row["waiting"]) == abort.waiting
        assert f"waiting {abort.waiting}" in s["detail"]
        if not v1:
            assert int(row["swapped"]) == abort.swapped
            assert f"swapped {abort.swapped}" in s["status"] and \
                f"swapped {abort.swapped} groups" in s["banner"] and \
                f"swapped {abort.swapped}" in s["detail"]

    # -- peaks: the largest at any step's end, the aborting step included
    every = done + aborting
    if not v1:
        assert compare["peak_swapped"] == summary["peak_swapped"] == \
            max(int(r["swapped"]) for r in every) == number(rows["peak swapped"])
        queues = [e["args"]["swapped"] for e in s["trace"] if e.get("name") == "queues"]
        assert max(queues) == summary["peak_swapped"]
        assert summary["peak_cpu_kv_pct"] == round(max(float(r["cpu_pct"]) for r in every), 2) \
            == compare["peak_cpu_kv_pct"]
        assert summary["finished_requests"] == sum(int(r["n_finished"]) - int(r["n_ignored"])
                                                   for r in done)
        assert summary["swap_outs"] == sum(int(r["n_swapped_out"]) for r in done)
    assert summary["peak_gpu_kv_pct"] == round(max(float(r["gpu_pct"]) for r in every), 2)

    # -- V1: preemptions, the tax, finished, stalls and cached tokens
    if v1:
        last = view.steps[-1]
        assert summary["preemptions"] == compare["preemptions"] == last.preemptions_total == \
            sum(int(r["n_preempted"]) for r in done) == number(rows["preemptions"])
        assert f"preempted {summary['preemptions']:,}" in s["status"]
        assert summary["recompute_tax"] == compare["recompute_tax"] == \
            round(last.recompute_tax, 4)
        assert f"tax {last.recompute_tax:.2f}" in s["status"]
        assert summary["finished_requests"] == last.finished_total == \
            sum(int(r["n_finished"]) for r in done)
        assert f"finished {last.finished_total} so far" in s["detail"]
        assert compare["longest_stall_steps"] == summary["longest_stall_steps"]
        reason = summary["longest_stall_reason"]
        assert compare["longest_stall_reason"] == reason
        free = re.search(r"\(needs (\d+), (\d+) free\)", reason or "")
        if free:  # the stall's KV free is the least over it: at most what vLLM's scan saw
            assert summary["longest_stall_kv_free_pct"] <= \
                100.0 * int(free.group(2)) / last.gpu_total + 0.05
        per_request = summary["cached_tokens_per_request"]
        if per_request is not None:  # each request's hits once: at most its prompt
            assert per_request <= summary["cached_tokens_per_admission"]
            assert per_request <= summary["prompt_tokens"]

    # -- no percentage above 100, on any surface
    for where in (summary, compare):
        for name, value in where.items():
            if name.endswith("_pct") and value is not None:
                assert 0.0 <= value <= 100.0, (name, value)
    for r in every:
        for name in ("gpu_pct", "cpu_pct"):
            if r.get(name):
                assert 0.0 <= float(r[name]) <= 100.0
    for shown in (s["status"], s["banner"], s["detail"], *(t for _, _, t in s["events"])):
        for pct in re.findall(r"([\d.]+)%", shown):
            assert float(pct) <= 100.0, shown
