"""The attached mode on vLLM's V1 engine (0.29.0, 0.33.0) (issue #19): `LLM(scheduler_cls=
engine.ObservedScheduler)` configured by the OBSERVATORY_* environment, and
`engine.attach(scheduler)` on a Scheduler vLLM built, both in-process with the sim executor,
and `observatory exec --sim` on a script whose EngineCore runs in its own process. The
recording says what the script saw; a V0 policy is refused in one line.

Needs a V1 vLLM and PYTHONHASHSEED=0 (like tests/test_v1_engine.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from v1_required import needs_v1

pytestmark = needs_v1

ROOT = Path(__file__).resolve().parent.parent
MODEL = str(ROOT / "engine" / "adapters" / "models" / "llama-16k")
PROMPTS = [{"prompt_token_ids": [3 + (i * 7 + k) % 1000 for k in range(200 + 50 * i)]}
           for i in range(10)]


def _recorded(path: Path) -> tuple[list, list[str]]:
    from engine.stream.reader import load
    from engine.stream.records import RunFinished, V1StepRecord

    recording = load(path)
    assert not recording.truncated  # ended with its end record, even in a spawned EngineCore
    items = recording.all_items()
    assert type(items[-1]) is RunFinished
    steps = [i for i in items if type(i) is V1StepRecord]
    return steps, sorted(rid for s in steps for rid in s.finished)


def _whole_and_indexed(path: Path) -> str:
    """`observatory summary` reads it from its index with no notice of a cut: the scribe
    sealed it, however the EngineCore process ended. Returns the summary's text."""
    from engine.stream.reader import open_indexed

    assert open_indexed(path) is not None, "the recording has no index"
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "summary", str(path)],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "cut" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def llm_factory():
    """Builds in-process V1 `LLM`s on the sim executor (the environment a V1 sim needs)."""
    from engine.adapters.v1.platform import prepare_sim_process

    prepare_sim_process()
    built = []

    def make(**kwargs):
        from vllm import LLM

        import engine

        llm = LLM(model=MODEL, skip_tokenizer_init=True, enforce_eager=True,
                  distributed_executor_backend=engine.SimExecutor,
                  num_gpu_blocks_override=400, max_num_batched_tokens=256, max_num_seqs=16,
                  max_model_len=4096, **kwargs)
        built.append(llm)
        return llm

    yield make
    for llm in built:
        llm.llm_engine.engine_core.shutdown()


def _generate(llm) -> list[str]:
    from vllm import SamplingParams

    params = SamplingParams(n=1, max_tokens=30, ignore_eos=True, detokenize=False)
    outs = llm.generate(PROMPTS, params, use_tqdm=False)
    return sorted(o.request_id for o in outs if o.finished)


def test_observed_scheduler_records_from_the_environment(llm_factory, tmp_path, monkeypatch):
    import engine
    from engine.attached import registry

    monkeypatch.setenv("OBSERVATORY_RECORD", str(tmp_path))
    monkeypatch.setenv("OBSERVATORY_POLICY", "whole-context")
    llm = llm_factory(scheduler_cls=engine.ObservedScheduler)
    finished = _generate(llm)
    registry.close_all()  # what exit does: every stream gets its end record
    (path,) = tmp_path.glob("*.jsonl.zst")
    steps, recorded = _recorded(path)
    assert recorded == finished and len(finished) == 10
    assert steps and {s.policy for s in steps} == {"whole-context"}
    assert sum(s.generated_tokens for s in steps) == 10 * 30


def test_attach_to_a_v1_scheduler(llm_factory, tmp_path):
    import engine
    from engine.adapters.v1.current import fam
    from engine.errors import ConfigError

    llm = llm_factory()
    scheduler = fam.scheduler_of(fam.engine_core_of(llm.llm_engine))
    with pytest.raises(ConfigError, match="V0|v0"):
        engine.attach(scheduler, policy="strict")
    bare = engine.attach(scheduler)  # what vLLM's own scheduler tests call: nothing to disk
    assert bare.observer is not None and bare.address is None
    bare.close()
    assert "schedule" not in vars(scheduler)  # vLLM's own methods are back
    handle = engine.attach(scheduler, record=str(tmp_path / "v1.jsonl.zst"))
    handle.set_policy("whole-context")
    finished = _generate(llm)
    handle.close()
    steps, recorded = _recorded(tmp_path / "v1.jsonl.zst")
    assert recorded == finished and len(finished) == 10
    assert steps[0].policy == "whole-context"


def test_exec_sim_runs_a_v1_script_with_its_engine_core_in_a_process(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = ROOT / "tests" / "fixtures" / "attach" / "v1_rollout.py"
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "exec", "--sim", "--record",
                           str(tmp_path), "--", sys.executable, str(script), MODEL],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    seen = json.loads(line[len("RESULT "):])
    (path,) = tmp_path.glob("*.jsonl.zst")
    steps, recorded = _recorded(path)
    assert recorded == seen["finished"] and len(recorded) == 10
    assert sum(s.generated_tokens for s in steps) == seen["generated"] == 300
    _whole_and_indexed(path)  # sealed before exec returned, on every release (0.18 too)


def test_a_killed_engine_core_leaves_a_whole_indexed_recording(tmp_path):
    """SIGKILL the EngineCore process mid-run (its pid is in the recording's name): it can
    seal nothing, its scribe seals what it sent: every whole step, then RunFinished saying
    the process ended, then the index; exec returns once the file is sealed. (Whether vLLM
    itself then notices its dead core is vLLM's matter: the test ends the program.)"""
    from engine.stream.reader import load
    from engine.stream.records import RunFinished, V1StepRecord

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = ROOT / "tests" / "fixtures" / "attach" / "v1_until_killed.py"
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "exec", "--sim", "--record",
                             str(tmp_path), "--", sys.executable, str(script), MODEL],
                            env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        for line in proc.stdout:  # the first batch is recorded; the second one is running
            if line.startswith("BATCH 1"):
                break
        (path,) = tmp_path.glob("*.jsonl.zst")
        core = int(path.name.removesuffix(".jsonl.zst").rsplit("-", 2)[1])
        assert core != proc.pid
        os.kill(core, signal.SIGKILL)
        # vLLM 0.33's `LLM.generate` waits on for a dead core (nothing the observatory
        # does): end the program as a user would, with TERM to its group; exec returns only
        # once the scribe has sealed the file
        os.killpg(proc.pid, signal.SIGTERM)
        proc.stdout.read()
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    items = load(path).all_items()
    steps = [i for i in items if type(i) is V1StepRecord]
    assert [s.step for s in steps] == list(range(len(steps)))
    assert sum(len(s.finished) for s in steps) >= 10  # the first batch, whole
    end = items[-1]
    assert type(end) is RunFinished and end.reason == "process_ended"
    assert end.steps == len(steps)
    assert "process_ended" in _whole_and_indexed(path)


def test_exec_sim_runs_a_verl_style_rollout_with_n_samples_and_chunked_prefill(tmp_path):
    """verl's vLLM rollout (verl pins 0.29.0): `LLM(...)` with chunked prefill and prefix
    caching, `generate` with n=4 samples per prompt. vLLM fans each prompt out into 4 child
    requests; the recording sees every one finish, and the tokens the script got."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = ROOT / "tests" / "fixtures" / "attach" / "v1_verl_rollout.py"
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "exec", "--sim", "--record",
                           str(tmp_path), "--", sys.executable, str(script), MODEL],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    seen = json.loads(line[len("RESULT "):])
    assert (seen["prompts"], seen["samples"], seen["finished"]) == (6, 24, 6)
    (path,) = tmp_path.glob("*.jsonl.zst")
    steps, recorded = _recorded(path)
    assert len(recorded) == len(set(recorded)) == seen["samples"]
    assert sum(s.generated_tokens for s in steps) == seen["generated"] == 24 * 40
    # chunked prefill: the longest prompt (600 tokens) takes several 256-token steps
    assert max(s.prompt_tokens for s in steps) <= 256 < sum(s.prompt_tokens for s in steps)
