"""The no-progress guard (issue #40: the observatory never hangs): its step rule over records,
the end reason's state and exit status, and its wall-clock rule ending a real session whose
step is blocked, with the recording sealed. CI: the full suite on vllm050 (the session part
runs on whichever engine is installed; the V1 CPU tier's stuck load is in test_v1_tier.py).
"""

from __future__ import annotations

import threading
from typing import Any

from engine.analysis.progress import LOGGER, REASON, ProgressGuard
from engine.exit_status import ExitStatus, for_run_end
from engine.run_state import RunState, state_for_end
from engine.stream.records import LogLine, RunFinished, V1StepRecord


def _step(i: int, **over: Any) -> V1StepRecord:
    fields: dict[str, Any] = dict(
        step=i, wall_s=0.001 * (i + 1), sim_s=0.01 * (i + 1), sim_step_s=0.01, policy="off",
        running=0, waiting=2, finished_total=0, gpu_used=10, gpu_total=199, kv_tokens=0,
        batched_tokens=0, token_budget=2048, new=[], resumed=[], scheduled=[],
        preempted=[], prefix_hit_tokens=0, recomputed_tokens=0, prompt_tokens=0,
        generated_tokens=0, decode_reqs=0, first_tokens=[], finished=[], withheld=False,
        held_back=0, computed_total=0, recomputed_total=0, preemptions_total=0,
        head_reason="kv_load")
    fields.update(over)
    return V1StepRecord(**fields)


def test_steps_that_move_nothing_while_requests_wait_are_stuck_at_the_limit():
    guard = ProgressGuard(steps=5)
    said = [guard.add(_step(i)) for i in range(7)]
    assert said[:4] == [None] * 4 and said[5:] == [None, None]
    stuck = said[4]
    assert (stuck.since, stuck.step, stuck.steps) == (0, 4, 5)
    assert "0 running, 2 waiting" in stuck.what and "async KV load" in stuck.what


def test_any_progress_restarts_the_count_and_an_empty_engine_is_never_stuck():
    guard = ProgressGuard(steps=3)
    records = [_step(0), _step(1), _step(2, batched_tokens=1), _step(3), _step(4),
               _step(5, cpu_in_flight=2, cpu_loads=2), _step(6, cpu_in_flight=1),  # issued, done
               _step(7, cpu_in_flight=1), _step(8, cpu_in_flight=1), _step(9, cpu_in_flight=1)]
    assert [guard.add(r) for r in records[:9]] == [None] * 9
    assert guard.add(records[9]).since == 7  # 7 to 9 held the same transfer
    idle = ProgressGuard(steps=2)
    assert all(idle.add(_step(i, waiting=0)) is None for i in range(10))


def test_a_step_busy_past_the_limit_is_overdue_once():
    guard = ProgressGuard(seconds=2.0)
    assert guard.overdue(7, 1.9) is None
    stuck = guard.overdue(7, 2.5)
    assert stuck.step == 7 and "step 7 has not returned" in stuck.what
    assert guard.overdue(7, 9.0) is None


def test_the_end_reason_has_its_own_state_and_exit_status():
    assert state_for_end(REASON) is RunState.STUCK and RunState.STUCK.over
    assert for_run_end(REASON) is ExitStatus.STUCK == 5


def test_a_session_whose_step_never_returns_is_ended_and_its_recording_sealed(tmp_path):
    """A sink that blocks (as a step of vLLM's that never returns would) keeps the loop from
    its next step: the guard's thread ends the run, the recording is whole, and the blocked
    thread emits nothing more once released."""
    from engine.session import Session
    from engine.spec import preset_spec
    from engine.stream.reader import load
    from engine.analysis.summary import SummaryBuilder
    from engine.stream.recorder import Recorder

    kind = _engine_kind()
    spec = preset_spec("demo" if kind == "v0" else "v1-thrash", max_steps=50).validated()
    session = Session(spec, guard=ProgressGuard(seconds=0.2))
    path = tmp_path / "blocked.jsonl.zst"
    recorder = Recorder(str(path), fold=SummaryBuilder)
    session.subscribe(recorder.sink)
    release, ended = threading.Event(), threading.Event()
    seen: list = []

    def block_at_step_3(item: Any) -> None:
        seen.append(item)
        if type(item) is RunFinished:
            ended.set()
        elif getattr(item, "step", None) == 3 and hasattr(item, "batched_tokens"):
            release.wait()

    session.subscribe(block_at_step_3)
    session.start()
    try:
        assert ended.wait(120), "the guard never ended the blocked run"
        recorder.close()
        (end,) = [r for r in seen if type(r) is RunFinished]
        assert end.reason == REASON and end.steps == 4  # step 3 recorded
        (line,) = [r for r in seen if type(r) is LogLine and r.logger == LOGGER]
        assert "step 3 has not returned" in line.message
        recording = load(path)
        assert not recording.truncated
        assert type(recording.all_items()[-1]) is RunFinished
        assert session.state is RunState.STUCK
    finally:
        release.set()
        session.join(60)
    count = len(seen)
    assert not session._thread.is_alive() and len(seen) == count  # nothing after the end


def _engine_kind() -> str:
    from engine.adapters.driver import installed_engine_kind

    return installed_engine_kind()
