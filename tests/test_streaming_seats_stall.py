"""vLLM #53130's arithmetic (filed against 0.27.1): admission stops for good once running
requests plus "deferred" ones reach `max_num_seqs`, with the KV cache mostly free.

The deferred requests that hold seats are paused streaming-input sessions
(WAITING_FOR_STREAMING_REQ): vLLM keeps them in `skipped_waiting` (its `deferred` reason)
and adds them to `len(running)` against `max_num_seqs` (`num_waiting_for_streaming_input`).
Async KV loads and grammar waits sit in the same queue but take no seat. The user's script
(tests/fixtures/stall/v1_streaming_seats.py) opens four sessions on four seats and never
resumes them; four plain prompts wait behind them for good. It stalls alike on every V1 line
(0.27.1, 0.29.0, 0.33.0 and 0.34.0 were run): this is vLLM's design for a session, which a
client that never sends its next chunk nor closes turns into a wedge.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.analysis.stall import MIN_STEPS
from engine.analysis.summary import summarize
from engine.stream.reader import load
from v1_required import RELEASE, needs_v1

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "fixtures" / "stall" / "v1_streaming_seats.py"
MODEL = str(ROOT / "engine" / "adapters" / "models" / "llama-16k")
SEATS = 4  # the script's max_num_seqs, its sessions and its plain prompts


@needs_v1
@pytest.mark.skipif(RELEASE is not None and RELEASE.family == "v018",
                    reason="on 0.18 the script's sessions finish like plain requests (run: 8 "
                           "finished, no stall): nothing holds a seat")
@pytest.mark.skipif(RELEASE is not None and RELEASE.family == "v024",
                    reason="0.24's scan counts running requests only: paused sessions take no "
                           "seat (test_on_024_paused_sessions_take_no_seat)")
def test_paused_streaming_sessions_hold_every_seat_and_the_stall_says_so(tmp_path):
    proc, warnings = _exec(tmp_path)
    assert len(warnings) == 1, proc.stderr[-3000:]
    # every seat counted taken (by the paused sessions), and no one scheduled in them
    assert (f"the head request waits for seats (max_num_seqs {SEATS} reached, 0 scheduled)"
            in warnings[0])
    (path,) = tmp_path.glob("*.jsonl.zst")
    recording = load(path)
    summary = summarize(recording.all_items())
    # the sessions answered their first chunk; the plain prompts never started
    assert (summary.unfinished_requests, summary.never_started_requests) == (SEATS, SEATS)
    assert summary.end_reason == "unfinished"
    # it never recovers: the stall runs from the sessions' pause to the program's last step
    assert summary.longest_stall_steps >= MIN_STEPS
    assert summary.longest_stall_since + summary.longest_stall_steps == len(recording.steps)
    assert summary.longest_stall_reason == f"seats (max_num_seqs {SEATS} reached, 0 scheduled)"
    assert summary.longest_stall_kv_free_pct > 90.0
    last = recording.steps[-1]
    # vLLM's own count says "deferred" for the sessions, "capacity" for the prompts
    assert last.running == 0
    assert last.waiting_by_reason == {"capacity": SEATS, "deferred": SEATS}
    assert (last.head_reason, last.head_need, last.head_limit) == ("seats", SEATS, SEATS)


def _exec(tmp_path: Path):
    """The script under `exec --sim --record`: the process, and exec's stall warning lines."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONHASHSEED="0")
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "exec", "--sim", "--record",
                           str(tmp_path), "--", sys.executable, str(SCRIPT), MODEL],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, [x for x in proc.stderr.splitlines()
                  if x.startswith("WARNING observatory: engine ") and " stalls: " in x]


@needs_v1
@pytest.mark.skipif(RELEASE is None or RELEASE.family != "v024", reason="0.24's scan only")
def test_on_024_paused_sessions_take_no_seat(tmp_path):
    """0.24 predates #53130's arithmetic: its waiting scan stops at `len(running) ==
    max_num_seqs` and does not add `num_waiting_for_streaming_input` (0.26 does). The four
    sessions pause in `skipped_waiting` (vLLM's `deferred`) holding no seat, the four plain
    prompts are admitted and finish, and the watchdog rightly says nothing. (Issue #39 had
    held this as a strict xfail, "the sessions hold the seats but no stall is seen"; run, the
    sessions hold nothing: there is no stall to see.)"""
    proc, warnings = _exec(tmp_path)
    assert warnings == [], proc.stderr[-3000:]
    (path,) = tmp_path.glob("*.jsonl.zst")
    recording = load(path)
    finished = {rid for s in recording.steps for rid in s.finished}
    assert {f"plain-{i}" for i in range(SEATS, 2 * SEATS)} <= finished  # (the sessions
    # are listed too: each answered its chunk)
    assert summarize(recording.all_items()).longest_stall_steps == 0
    last = recording.steps[-1]
    assert last.running == 0
    assert last.waiting_by_reason == {"capacity": 0, "deferred": SEATS}
