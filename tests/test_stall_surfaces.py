"""The admission watchdog on every surface: `summary` and `run --json`, the end reason of a run
left with requests, `compare` and sweep rows, the live status and step detail, and `exec`'s
stderr lines.

The stall is real, on vLLM 0.33 with its defaults (`scheduler_reserve_full_isl` on, FCFS):
three requests on 1,100 blocks of 16 tokens. Request 0 (4,593 prompt tokens) is admitted at
once; request 1 (13,383: 837 blocks) needs its whole prompt's blocks free and only 761-812 are
while request 0 decodes, so vLLM's waiting loop stops at it and request 2 (2,772 tokens), which
would fit, waits behind it (#31731's head-of-line blocking): nothing is admitted for ~835
steps with ~70% of the KV cache free. `tests/fixtures/stall/v1-hol-stall.jsonl.zst` is that run,
recorded by (vllm033 venv; `verify` re-runs it below):

    observatory run --preset v1-thrash --requests 3 --prompt-len 2000 --prompt-len-max 14000 \\
      --min-tokens 600 --max-tokens 1000 --num-gpu-blocks 1101 --seed 167 --reserve-full-isl \\
      --record tests/fixtures/stall/v1-hol-stall.jsonl.zst

`tests/fixtures/stall/v1_hol_stall.py` is the same three prompts as a user's script, for
`exec`. The tests that read the recording run in every venv; the ones that run an engine need
vLLM 0.33 and PYTHONHASHSEED=0 (`PYTHONHASHSEED=0 pytest tests/test_stall_surfaces.py`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.analysis.compare import format_table, run_metrics
from engine.analysis.stall import (ENDED, MIN_STEPS, STARTED, StallWatch, seat_limit,
                                   stall_text, stalled_step)
from engine.analysis.summary import summarize
from engine.stream.reader import load
from engine.stream.records import RunFinished, V1StepRecord, encode
from test_v1_records import v1_header, v1_step
from v1_required import needs_v1

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "stall" / "v1-hol-stall.jsonl.zst"
SCRIPT = ROOT / "tests" / "fixtures" / "stall" / "v1_hol_stall.py"
HEALTHY = ROOT / "recordings" / "v1-thrash-whole-context.jsonl.zst"
MODEL = str(ROOT / "engine" / "adapters" / "models" / "llama-16k")
STALL_FLAGS = ["--preset", "v1-thrash", "--requests", "3", "--prompt-len", "2000",
               "--prompt-len-max", "14000", "--min-tokens", "600", "--max-tokens", "1000",
               "--num-gpu-blocks", "1101", "--seed", "167", "--reserve-full-isl"]


def observatory(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONHASHSEED="0")
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def longest_run_without_admission(steps: list[V1StepRecord]) -> tuple[int, int]:
    """(length, first step) of the longest run of steps that admitted no one while requests
    waited: counted straight from the records, not by the watchdog."""
    best, best_since, run, since = 0, -1, 0, -1
    for s in steps:
        if s.waiting > 0 and not s.new and not s.resumed:
            if run == 0:
                since = s.step
            run += 1
            if run > best:
                best, best_since = run, since
        else:
            run = 0
    return best, best_since


# ------------------------------------------------------------------ the watchdog over a stream
def test_the_watch_says_when_a_stall_starts_and_when_it_ends():
    steps = ([v1_step(0, new=[("0", 512)], waiting=2)]
             + [v1_step(i, gpu_used=300, waiting=2, new=[], resumed=[]) for i in range(1, 151)]
             + [v1_step(151, gpu_used=900, waiting=1, new=[("1", 512)])])
    watch = StallWatch()
    said = [(s.step, watch.add(s)) for s in steps]
    assert [(step, what) for step, what in said if what] == [(MIN_STEPS, STARTED),
                                                             (151, ENDED)]
    assert watch.current is None and watch.ended == watch.longest
    assert (watch.longest.since, watch.longest.steps, watch.longest.waiting) == (1, 150, 2)


def test_a_full_house_of_seats_is_capacity_not_a_stall():
    """The header's `max_num_seqs` (vLLM's SchedulerConfig): with every seat taken the waiting
    wait for a seat, which is not a stall; with one free, the same steps are."""
    assert seat_limit(v1_header(engine_config={"scheduler": {"max_num_seqs": 4}})) == 4
    assert seat_limit(v1_header()) is None  # a header that does not say: seats not checked
    full = v1_step(1, running=4, gpu_used=200, waiting=3, new=[], resumed=[])
    spare = v1_step(1, running=3, gpu_used=200, waiting=3, new=[], resumed=[])
    assert not stalled_step(full, max_seqs=4) and stalled_step(spare, max_seqs=4)
    assert stalled_step(full)  # unknown seats: the watchdog goes by KV alone


def test_a_stall_says_what_its_head_request_waits_for_as_recorded():
    """The stall takes the reason its last step recorded (engine.analysis.reasons words it);
    a recording made before reasons were kept says nothing more than before."""
    # the four seats' requests all scheduled (#45257's under-filling says how many were not)
    steps = [v1_step(i, gpu_used=200, waiting=3, new=[], resumed=[], head_reason="seats",
                     head_need=4, head_limit=4, running=4,
                     scheduled=[(str(k), 1) for k in range(4)]) for i in range(MIN_STEPS)]
    watch = StallWatch()
    for s in steps:
        watch.add(s)
    assert watch.current is not None and watch.current.reason == \
        "seats (max_num_seqs 4 reached)"
    assert stall_text(watch.current, compact=False).endswith(
        "3 waiting): head request waits for seats (max_num_seqs 4 reached)")
    assert stall_text(watch.current, compact=True).endswith(
        ": waits for seats (max_num_seqs 4 reached)")
    old = StallWatch()
    for i in range(MIN_STEPS):
        old.add(v1_step(i, gpu_used=200, waiting=3, new=[], resumed=[]))
    assert old.current is not None and old.current.reason == ""
    assert stall_text(old.current, compact=False).endswith("3 waiting)")


# ------------------------------------------------------------------ summary, compare, sweep rows
def test_the_summary_names_the_longest_stall_of_the_real_run():
    recording = load(FIXTURE)
    summary = summarize(recording.all_items())
    length, since = longest_run_without_admission(recording.steps)
    assert length >= MIN_STEPS
    assert (summary.longest_stall_steps, summary.longest_stall_since) == (length, since)
    last = recording.step(since + length - 1)
    assert summary.longest_stall_waiting == last.waiting == 2
    # the least KV free at any of its steps' ends (engine.conventions), not its last step's
    stalled = [recording.step(n) for n in range(since, since + length)]
    least = min(s.gpu_total - s.gpu_used for s in stalled)
    assert summary.longest_stall_kv_free_pct == round(100.0 * least / last.gpu_total, 1)
    assert summary.longest_stall_kv_free_pct <= 100.0 * (last.gpu_total - last.gpu_used) \
        / last.gpu_total
    # the stall ends when the head of the queue, request 1, is admitted at last
    assert [rid for rid, _ in recording.step(since + length).new] == ["1"]
    assert summary.end_reason == "completed"
    assert (summary.unfinished_requests, summary.never_started_requests) == (0, 0)


def test_the_summary_command_prints_the_stall(tmp_path):
    """`observatory summary` reads the summary folded into the recording's index; --json and
    the text say the same as the records."""
    expected = summarize(load(FIXTURE).all_items())
    proc = observatory("summary", str(FIXTURE), "--json")
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    for field in ("longest_stall_steps", "longest_stall_since", "longest_stall_waiting",
                  "longest_stall_kv_free_pct", "unfinished_requests", "end_reason"):
        assert printed[field] == getattr(expected, field), field
    text = observatory("summary", str(FIXTURE)).stdout
    assert f"{expected.longest_stall_steps}" in next(
        line for line in text.splitlines() if line.startswith("longest_stall_steps"))


def test_a_healthy_run_has_no_stall_and_nothing_left():
    summary = summarize(load(HEALTHY).all_items())
    assert summary.longest_stall_steps == 0 and summary.longest_stall_since is None
    assert summary.end_reason == "completed" and summary.unfinished_requests == 0


def test_a_run_that_says_completed_with_requests_left_summarizes_as_unfinished():
    """The real run cut at step 300, in the middle of its stall, with the end record that
    `exec`'s observer wrote for a program that exited there before it said `unfinished`
    (RunFinished "completed"): the records show three requests that never finished, two that
    never started, so the summary does not say completed. (An edited stream: what the
    observer writes now is tested on a real `exec` below.)"""
    import msgspec

    from engine.stream.records import Header

    recording = load(FIXTURE)
    items = [i for i in recording.all_items()
             if not isinstance(i, RunFinished) and getattr(i, "step", 0) < 300]
    items.append(RunFinished(steps=300, reason="completed", sim_s=1.0, wall_s=1.0))
    assert summarize(items).end_reason == "completed"  # a run the observatory drove: vLLM's word
    attached = {"attached": {"name": "e"}}  # as exec's observer heads its stream
    items = [msgspec.structs.replace(i, engine_config={**i.engine_config, **attached})
             if isinstance(i, Header) else i for i in items]
    summary = summarize(items)
    assert summary.end_reason == "unfinished"
    assert (summary.unfinished_requests, summary.never_started_requests) == (3, 2)
    assert summary.longest_stall_steps == 299  # steps 1..299: still going at the end


def test_compare_and_sweep_rows_carry_the_stall():
    from engine.spec import preset_spec
    from engine.sweep.cell import CellOutcome
    from engine.sweep.grid import Cell
    from engine.sweep.rows import columns, make_row

    stalled, healthy = run_metrics(load(FIXTURE)), run_metrics(load(HEALTHY))
    summary = summarize(load(FIXTURE).all_items())
    assert (stalled.longest_stall_steps, healthy.longest_stall_steps) == (
        summary.longest_stall_steps, 0)
    table = format_table([stalled, healthy]).splitlines()
    (row,) = [line for line in table if line.startswith("longest stall (steps)")]
    assert row.split()[-2:] == [f"{summary.longest_stall_steps:,}", "0"]
    (since,) = [line for line in table if line.startswith("stalled since step")]
    assert since.split()[-2:] == [f"{summary.longest_stall_since:,}", "-"]
    # the fixture predates the reasons: the shipped head-of-line run has one
    blocked = run_metrics(load(ROOT / "recordings" / "v1-head-of-line-off.jsonl.zst"))
    assert blocked.longest_stall_reason == "KV blocks (needs 803, 581 free)"
    assert healthy.longest_stall_reason is None
    # a value that long is said under the table, one line per run (80 columns)
    lines = format_table([blocked, healthy]).splitlines()
    at = lines.index("stall waits for:")
    assert lines[at + 1:at + 3] == ["  A  KV blocks (needs 803, 581 free)", "  B  -"]
    assert max(map(len, lines)) <= 80

    cell = Cell(index=0, key="k", params={}, spec=preset_spec("v1-thrash"))
    row = make_row(cell, CellOutcome(status="ok", v1_summary=summary), None)
    assert "longest_stall_steps" in columns([], "v1")
    assert (row["longest_stall_steps"], row["longest_stall_since"],
            row["unfinished_requests"]) == (summary.longest_stall_steps,
                                            summary.longest_stall_since, 0)


# ------------------------------------------------------------------ the live screen
def plain(renderable) -> str:
    """What a widget's renderable says, wide enough that no line wraps."""
    import io

    from rich.console import Console

    console = Console(width=400, file=io.StringIO(), record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


async def test_the_live_status_and_step_detail_show_the_stall_at_the_step_it_starts(tmp_path):
    """The live screen following the real run as it is written, step by step: nothing at the
    step before the watchdog's MIN_STEPS, the warning at that step, in the status and in the
    step detail. (The engine wrote the recording; here a file grows with its records.)"""
    from tui.app import ObservatoryApp
    from tui.live.live_screen import LiveScreen
    from tui.run_source import FollowSource
    from tui.widgets.status_bar import StatusBar
    from tui.widgets.step_detail import StepDetail

    recording = load(FIXTURE)
    _, since = longest_run_without_admission(recording.steps)
    starts = since + MIN_STEPS - 1
    items = [i for i in recording.all_items() if not isinstance(i, RunFinished)]
    cut = lambda step: [i for i in items if getattr(i, "step", -1) <= step]  # noqa: E731
    path = tmp_path / "growing.jsonl"
    written = cut(starts - 1)
    path.write_bytes(b"".join(encode(i) + b"\n" for i in written))

    app = ObservatoryApp(lambda: LiveScreen(None, lambda _: FollowSource(str(path)),
                                            restartable=False))
    async with app.run_test(size=(160, 50)) as pilot:
        screen = app.main_screen

        async def shown(step: int) -> tuple[str, str]:
            deadline = time.monotonic() + 60
            while screen.view.last_step != step or screen.query_one(
                    StepDetail).border_title != f"step {step:,}":
                assert time.monotonic() < deadline, f"step {step} never shown"
                await pilot.pause(0.05)
            await pilot.pause()
            return (screen.query_one(StatusBar).render().plain,
                    plain(screen.query_one(StepDetail).content))

        status, detail = await shown(starts - 1)
        assert "no admission" not in status and "no admission" not in detail
        with path.open("ab") as f:
            f.write(b"".join(encode(i) + b"\n" for i in items
                             if getattr(i, "step", -1) == starts))
        status, detail = await shown(starts)
        assert f"⚠ no admission for {MIN_STEPS} steps while KV has room" in status, status
        assert f"no admission for {MIN_STEPS} steps" in detail and \
            f"since step {since}" in detail, detail
        await pilot.press("q")


# ------------------------------------------------------------------ on the engine (vLLM 0.33)
@needs_v1
def test_run_json_reports_a_stall_still_going_and_what_is_left():
    """Stopped at step 400, in the middle of the stall: `run --json` says how long it has
    lasted so far, and that all three requests are unfinished, two never started."""
    proc = observatory("run", *STALL_FLAGS, "--max-steps", "400", "--no-record", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["end_reason"] == "max_steps"
    assert (summary["unfinished_requests"], summary["never_started_requests"]) == (3, 2)
    assert summary["longest_stall_since"] == 1 and summary["longest_stall_steps"] == 399
    assert summary["longest_stall_waiting"] == 2 and summary["longest_stall_kv_free_pct"] > 50


@needs_v1
def test_the_stall_recording_verifies():
    proc = observatory("verify", str(FIXTURE))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def _exec(tmp_path: Path, *script_args: str) -> tuple[subprocess.CompletedProcess, Path]:
    proc = observatory("exec", "--sim", "--record", str(tmp_path), "--", sys.executable,
                       str(SCRIPT), MODEL, *script_args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = tmp_path.glob("*.jsonl.zst")
    return proc, path


def _stall_lines(stderr: str) -> tuple[list[str], list[str]]:
    lines = [x for x in stderr.splitlines() if x.startswith("WARNING observatory: engine ")]
    return [x for x in lines if " stalls: " in x], [x for x in lines if " admits again " in x]


@needs_v1
def test_exec_says_one_line_when_the_engine_stalls_and_one_when_it_admits_again(tmp_path):
    proc, path = _exec(tmp_path)
    started, recovered = _stall_lines(proc.stderr)
    summary = summarize(load(path).all_items())
    stall = summary.longest_stall_steps
    assert stall >= MIN_STEPS
    assert len(started) == 1 and len(recovered) == 1, proc.stderr[-3000:]
    assert (f"no admission for {MIN_STEPS} steps (since step {summary.longest_stall_since:,})"
            in started[0])
    assert f"after a stall of {stall:,} steps" in recovered[0]
    # the reason vLLM's scan gave at that step: its full-ISL check refused request 1's blocks
    assert "; the head request waits for KV blocks (needs " in started[0], started[0]
    assert summary.longest_stall_reason.startswith("KV blocks (needs ")
    assert summary.finished_requests == 3 and summary.unfinished_requests == 0
    text = observatory("summary", str(path)).stdout
    assert f"{stall}" in next(line for line in text.splitlines()
                              if line.startswith("longest_stall_steps"))


@needs_v1
def test_exec_of_a_program_that_gives_up_on_a_stalled_engine_ends_unfinished(tmp_path):
    proc, path = _exec(tmp_path, "give-up")
    started, recovered = _stall_lines(proc.stderr)
    assert len(started) == 1 and not recovered, proc.stderr[-3000:]
    recording = load(path)
    assert recording.finished is not None and recording.finished.reason == "unfinished"
    summary = summarize(recording.all_items())
    assert summary.end_reason == "unfinished"
    assert (summary.unfinished_requests, summary.never_started_requests) == (3, 2)
    assert summary.longest_stall_steps == len(recording.steps) - summary.longest_stall_since


def test_compare_counts_the_under_filled_steps_of_45257():
    """The shipped #45257 pair: `off` under-fills (seats counted full, fewer scheduled) as its
    summary counts it, the fix never does, and compare prints the row."""
    off_path = ROOT / "recordings" / "v1-async-seats-off.jsonl.zst"
    fix_path = ROOT / "recordings" / "v1-async-seats-per-iteration-count.jsonl.zst"
    off, fix = run_metrics(load(off_path)), run_metrics(load(fix_path))
    assert off.underfilled_steps == summarize(load(off_path).all_items()).underfilled_steps > 0
    assert fix.underfilled_steps == 0
    (row,) = [line for line in format_table([off, fix]).splitlines()
              if line.startswith("under-filled steps")]
    assert row.split()[-2:] == [f"{off.underfilled_steps:,}", "0"]
