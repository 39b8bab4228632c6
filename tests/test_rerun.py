"""Any recording is a workload (issue #38), on the V0 engine: a run of the seed preset and an
`observatory exec --sim` recording of a verl-style script each export to a trace that re-runs
every decision, verify (the exec one from its recorded requests, output lengths and prompt
blocks), and fail verify at the step whose decision was changed; `fork` switches the fix at a
step and says whether it saved the run; the fork host forks a re-run from its snapshots.
Real vLLM (the installed V0 release), the sim executor; `exec` in a real subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.adapters.versions import installed_version, release_for
from engine.cli.registry import main
from rerun_checks import (first_difference, steps_of, trace_reruns_every_decision,
                          verify_passes_and_names_a_changed_step)

_release = release_for(installed_version())
pytestmark = [pytest.mark.skipif(
    _release is None or _release.engine != "v0", reason="needs a V0 vLLM (0.5.0.post1-0.10.2)")]

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "fixtures" / "attach" / "verl_rollout.py"
MODEL = ROOT / "engine" / "adapters" / "models" / "opt-125m"
SEED_STEPS = 470  # past the seed's first swap-outs (step ~450), well before its abort


@pytest.fixture(scope="module")
def seed(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("seed") / "seed.jsonl.zst"
    assert main(["run", "--preset", "seed-5578", "--max-steps", str(SEED_STEPS),
                 "--record", str(path)]) == 0
    return path


@pytest.fixture(scope="module")
def verl(tmp_path_factory) -> Path:
    """`observatory exec --sim` on verl's rollout shape: two batches of n=8 requests."""
    runs = tmp_path_factory.mktemp("verl")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "exec", "--sim", "--record",
                           str(runs), "--", sys.executable, str(SCRIPT), str(MODEL)],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = runs.glob("*.jsonl.zst")
    return path


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    """The demo preset under `off`: vLLM aborts within a few hundred steps."""
    path = tmp_path_factory.mktemp("demo") / "demo-off.jsonl.zst"
    assert main(["run", "--preset", "demo", "--record", str(path)]) == 3  # vLLM aborted
    return path


def test_a_seed_run_is_a_trace_that_reruns_every_decision(seed, tmp_path, capsys):
    from engine.stream.reader import load

    assert any(s.swapped_out for s in steps_of(seed))  # the bug's mechanism is in it
    trace = trace_reruns_every_decision(seed, tmp_path, capsys)
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    arrivals = load(seed).arrivals
    assert len(lines) == sum(len(a.request_ids) for a in arrivals) == 10_000
    first = lines[0]  # Mooncake's fields, then the observatory's own
    assert set(first) >= {"timestamp", "input_length", "output_length", "hash_ids", "n"}
    assert (first["n"], first["step"], first["max_tokens"]) == (8, 0, 1000)
    assert first["input_length"] == arrivals[0].prompt_tokens[0]
    # the seed's prompts are slices of one file: none shares a whole block with another
    assert len({tuple(line["block_ids"]) for line in lines}) == 10_000


def test_a_seed_run_verifies_and_names_a_changed_decision(seed, tmp_path, capsys):
    verify_passes_and_names_a_changed_step(seed, tmp_path, capsys, step=120)


def test_an_exec_recording_records_what_a_rerun_needs(verl):
    from engine.stream.reader import load

    recording = load(verl)
    (first, second) = recording.arrivals  # the script's two batches
    assert first.step == 0 and second.step > 0
    assert first.n == second.n == [8] * 6 and first.max_tokens == [24] * 6
    # prompts of 60 + 25 i tokens, distinct: each its own blocks, the last one partial
    assert first.prefix == [(0, -(-n // 16)) for n in first.prompt_tokens]
    lens = [length for s in recording.steps for _, length in (s.seq_finished or ())]
    assert lens == [24] * 12 * 8  # every sample's output length, at its finish


def test_an_exec_recording_is_a_trace_that_reruns_every_decision(verl, tmp_path, capsys):
    trace_reruns_every_decision(verl, tmp_path, capsys)


def test_releases_from_an_exec_recording_runs_its_requests(verl):
    """`observatory releases --from REC` takes a program's own engine's recording as its
    workload (engine.analysis.rerun.workload_from_recording): its requests, its engine."""
    from engine.cli.releases import _recorded_spec

    layer = _recorded_spec(str(verl))
    assert (layer["trace"], layer["trace_format"], layer["preset"]) == (
        str(verl.resolve()), "recording", "recorded")
    assert (layer["max_num_batched_tokens"], layer["max_num_seqs"]) == (512, 64)
    assert "toggles" not in layer and "swap_space_gib" not in layer


def test_an_exec_recording_verifies_from_its_requests(verl, tmp_path, capsys):
    verify_passes_and_names_a_changed_step(verl, tmp_path, capsys, step=30)


def test_early_ends_rerun_sample_by_sample(tmp_path, capsys):
    """Samples that end early (the sim's output-length model, as EOS on a GPU) end at the
    same step in the re-run from the trace: each sequence's length is recorded at its end."""
    path = tmp_path / "early.jsonl.zst"
    assert main(["run", "--preset", "demo", "--policy", "reserve", "--lengths",
                 "early_share=0.4,request_corr=0.3,early_mean_tokens=30", "--record",
                 str(path)]) == 0
    ends = [n for s in steps_of(path) for _, n in (s.seq_finished or ())]
    assert min(ends) < 256 and max(ends) == 256
    capsys.readouterr()
    trace_reruns_every_decision(path, tmp_path, capsys)


def test_fork_saves_the_run_or_says_it_came_too_late(demo, tmp_path, capsys):
    from engine.stream.reader import load

    abort = load(demo).abort.step
    out = tmp_path / "fork.jsonl.zst"
    assert main(["fork", str(demo), "--at", "40", "--policy", "reserve", "-o",
                 str(out)]) == 0
    said = capsys.readouterr().out
    assert "in time: switched to reserve at step 40" in said
    assert "decisions first differ from demo-off.jsonl.zst's at step 40" in said
    fork = load(out)
    assert fork.abort is None and fork.steps[-1].step > abort
    assert first_difference(steps_of(demo)[:40], fork.steps[:40]) is None
    assert main(["compare", str(demo), str(out), "--no-plot"]) == 0
    assert "B: decisions first differ from A's at step 40" in capsys.readouterr().out
    assert main(["verify", str(out)]) == 0  # a fork is a recording like any other
    capsys.readouterr()
    late = tmp_path / "late.jsonl.zst"
    assert main(["fork", str(demo), "--at", str(abort), "--policy", "strict", "-o",
                 str(late)]) == 3
    said = capsys.readouterr().out
    assert said.startswith(f"too late: switched to strict at step {abort}, vLLM still aborts")
    assert main(["fork", str(demo), "--at", str(abort + 1), "--policy", "reserve"]) == 2
    assert f"fork at a step from 0 to {abort}" in capsys.readouterr().err


def test_the_fork_host_forks_a_rerun_from_its_snapshots(demo, tmp_path):
    """Two forks asked of one host: one before the re-run gets there, one behind it (run from
    a snapshot); each a whole recording that equals the original up to its step."""
    from engine.fork_link import Failed, Forked, ForkLink, Ready

    link = ForkLink.spawn(str(demo))
    forks: dict[int, str] = {}
    try:
        for said in link.messages():
            assert type(said) is not Failed, said.message
            if type(said) is Ready:
                link.fork(150, "reserve", str(tmp_path / "late.jsonl.zst"))
            elif type(said) is Forked:
                forks[said.step] = said.out
                if said.step == 150:  # the re-run is past 30 now: a snapshot runs this one
                    link.fork(30, "strict", str(tmp_path / "early.jsonl.zst"))
                else:
                    break
        recordings = {step: _when_ended(out) for step, out in forks.items()}
    finally:
        assert link.wait_gone() is not None  # the host and its snapshots go with the link
    original = steps_of(demo)
    for step, recording in recordings.items():
        assert recording.finished is not None and not recording.truncated
        assert first_difference(original[:step], recording.steps[:step]) is None
        assert recording.steps[step].policy != original[step].policy
    assert set(forks) == {150, 30}


def _when_ended(path: str):
    """A fork's recording once its process has ended it (it runs in a process of its own)."""
    from engine.stream.reader import load

    deadline = time.monotonic() + 300
    while True:
        try:
            recording = load(path)
        except Exception:  # noqa: BLE001  still being written: its last frame is open
            recording = None
        if recording is not None and recording.finished is not None \
                or time.monotonic() > deadline:
            return recording
        time.sleep(0.5)


def test_recordings_that_are_no_workload_say_why_in_one_line(tmp_path, capsys):
    log = ROOT / "tests" / "fixtures" / "logs" / "v0-metrics.log"
    imported = tmp_path / "log.jsonl.zst"
    assert main(["import-log", str(log), "-o", str(imported)]) == 0
    capsys.readouterr()
    assert main(["export", str(imported), "--format", "trace", "-o",
                 str(tmp_path / "t.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "an imported log holds vLLM's stats lines" in err


def test_v0_block_names_are_vllms_prefix_cache_hashes():
    """engine.fingerprint.chained_names computes vLLM's own V0 prefix-cache hash
    (PrefixCachingBlock.hash_block_tokens, chained) for every full block."""
    from vllm.core.block.prefix_caching_block import PrefixCachingBlock

    from engine.fingerprint import chained_names

    tokens = [3 + (7 * k) % 1000 for k in range(100)]
    names = chained_names(tokens, 16)
    previous = None
    for i in range(6):
        previous = PrefixCachingBlock.hash_block_tokens(previous is None, previous,
                                                        tokens[16 * i:16 * i + 16])
        assert names[i] == previous
    assert len(names) == 7  # and the partial seventh


async def test_f_in_replay_opens_the_fork_beside_the_run(demo):
    """`f` at step 40 of a run that aborted: the recording's re-run (started when the replay
    opened) forks there with the fix, and the fork opens beside the run in the A/B screen,
    first difference marked, still growing past the step the original aborted at; escape comes
    back. The fork host goes when the app does."""
    from engine.stream.reader import load
    from tui.launch import replay_app
    from tui.replay.compare_screen import CompareScreen

    abort = load(demo).abort.step
    app = replay_app([str(demo)], autoplay=False, fork=True)
    async with app.run_test(size=(160, 50)) as pilot:
        screen = app.main_screen
        link = screen.forks.link
        screen.seek(40)
        await pilot.press("f")
        deadline = time.monotonic() + 300
        while not isinstance(app.screen, CompareScreen) and time.monotonic() < deadline:
            await pilot.pause(0.2)
        compare = app.screen
        assert isinstance(compare, CompareScreen), screen.fork_hint()
        assert compare.difference == 40 and compare.steps() == [40, 40]
        fork = compare.views[1]
        assert fork.steps[40].policy == "reserve" and fork.steps[39].policy == "off"
        while fork.last_step <= abort and time.monotonic() < deadline:
            await pilot.pause(0.2)
        assert fork.last_step > abort and fork.abort is None
        await pilot.press("escape")
        assert app.screen is screen
    assert link.wait_gone() is not None
