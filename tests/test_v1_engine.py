"""vLLM's V1 engine (0.33, 0.34) under the observatory: the real LLMEngine, EngineCore,
Scheduler and KVCacheManager with the sim executor, #25538's thrash and its fixes, switched live,
recorded and verified.

Runs only where a V1 release is installed (`pip install -e '.[vllm033,test]'`), and needs
PYTHONHASHSEED=0 from the interpreter's start (vLLM walks sets of request ids; the
`observatory` command sets it itself): `PYTHONHASHSEED=0 pytest tests/test_v1_*.py`.
"""

from __future__ import annotations

import subprocess
import sys

import msgspec
import pytest

from engine.adapters.versions import installed_version

from v1_required import RELEASE, needs_v1, require_hash_seed

pytestmark = needs_v1
require_hash_seed()

from engine.analysis.summary import summarize  # noqa: E402
from engine.errors import ConfigError  # noqa: E402
from engine.session import Session  # noqa: E402
from engine.spec import preset_spec  # noqa: E402
from engine.stream.records import (Header, PolicyChanged, RunFinished,  # noqa: E402
                                   V1StepRecord)

_runs: dict[tuple, list] = {}


def run(preset: str, policy: str = "off", **over) -> list:
    """Everything a session emitted for the preset, once per argument set."""
    key = (preset, policy, repr(sorted(over.items())))
    if key not in _runs:
        items: list = []
        session = Session(preset_spec(preset, policy=policy, **over).validated())
        session.subscribe(items.append)
        session.run()
        _runs[key] = items
    return _runs[key]


def steps_of(items: list) -> list[V1StepRecord]:
    return [i for i in items if type(i) is V1StepRecord]


def test_the_installed_release_is_the_v1_line():
    assert RELEASE.engine == "v1" and RELEASE.version == installed_version().split("+")[0]
    header = next(i for i in run("v1-thrash", max_steps=3) if isinstance(i, Header))
    assert (header.engine, header.vllm_version) == ("v1", installed_version())
    from engine.adapters.v1.current import fam

    scheduler = header.engine_config["scheduler"]
    if not fam.NATIVE_FULL_ISL:  # no such option (0.18): the hook enforces the rule
        assert "scheduler_reserve_full_isl" not in scheduler
    else:
        assert scheduler["scheduler_reserve_full_isl"] is False


def test_thrash_under_off_and_whole_context():
    """#25538 as reported thrashes; whole-context admits only what fits and ends sooner."""
    off = summarize(run("v1-thrash"))
    fixed = summarize(run("v1-thrash", "whole-context"))
    assert off.engine == "v1" and off.vllm_version == installed_version()
    assert off.max_preemptions_per_request >= 5 and off.recompute_tax >= 0.5
    assert fixed.max_preemptions_per_request <= 1
    assert fixed.recompute_tax < off.recompute_tax / 3
    assert fixed.finished_requests == off.finished_requests == 32
    assert fixed.end_reason == "completed" and fixed.sim_seconds < off.sim_seconds
    assert fixed.admission_withheld_steps > 0


def test_concurrent_prefill_thrashes_under_the_default_until_whole_context():
    off = summarize(run("v1-concurrent-prefill"))
    fixed = summarize(run("v1-concurrent-prefill", "whole-context"))
    assert off.max_preemptions_per_request >= 3
    assert fixed.max_preemptions_per_request <= 1
    assert fixed.finished_requests == 32


def test_full_isl_is_vllms_own_option_switched_live():
    """The preset turns vLLM's option off; the policy turns it back on (the default from 0.23
    on)."""
    summary = summarize(run("v1-thrash", "full-isl"))
    assert summary.max_preemptions_per_request <= 2
    assert summary.recompute_tax < summarize(run("v1-thrash")).recompute_tax / 3


def test_toggle_at_stops_the_thrash_from_that_step_on():
    off = steps_of(run("v1-thrash"))
    at = next(s.step for s in off if any(n >= 5 for _, _, n in s.preempted))  # mid-thrash
    items = run("v1-thrash", toggles=[(at, "whole-context")])
    change = next(i for i in items if isinstance(i, PolicyChanged))
    assert (change.step, change.old, change.new) == (at, "off", "whole-context")
    steps = steps_of(items)
    assert [s.policy for s in steps[at - 1:at + 1]] == ["off", "whole-context"]
    # the same decisions as off up to the toggle (same spec, deterministic engine)
    assert [_without_wall(s) for s in steps[:at]] == [_without_wall(s) for s in off[:at]]
    after: dict[str, int] = {}
    for s in steps[at:]:
        for rid, _, _ in s.preempted:
            after[rid] = after.get(rid, 0) + 1
    assert max(after.values(), default=0) <= 1
    assert summarize(items).finished_requests == 32


def test_least_computed_puts_the_least_computed_request_where_vllm_takes_its_victim():
    """On vLLM's real running list mid-run (several prefills in flight, computed tokens that
    differ), the hook moves the least-computed request after the one being allocated to the
    end, where vLLM's FCFS preemption takes `running[-1]`, and keeps the others' order."""
    session = Session(preset_spec("v1-concurrent-prefill", policy="least-computed",
                                  max_steps=60).validated())
    session.run()
    hook = session.driver.hook
    running = session.driver.scheduler.running
    assert len(running) >= 3
    computed = [r.num_computed_tokens for r in running]
    before = list(running)
    hook._put_victim_last(before[0])
    victim = min(range(len(before)), key=lambda i: (computed[i], -i))  # the latest on a tie
    assert running[-1] is before[victim]
    assert [r for r in running[:-1]] == [r for i, r in enumerate(before) if i != victim]
    # on thrash the last admitted has computed the least, so the choice is vLLM's own
    assert summarize(run("v1-thrash", "least-computed", max_steps=800)).preemptions == \
        summarize(run("v1-thrash", max_steps=800)).preemptions


def _without_wall(step: V1StepRecord) -> V1StepRecord:
    return msgspec.structs.replace(step, wall_s=0.0, exec_s=0.0)


def test_two_runs_make_the_same_decisions_and_the_recording_verifies(tmp_path):
    from engine.analysis.verify import verify_file
    from engine.analysis.summary import SummaryBuilder
    from engine.stream.recorder import Recorder

    spec = preset_spec("v1-thrash", max_steps=600, toggles=[(300, "whole-context")])
    path = tmp_path / "v1.jsonl"
    first: list = []
    recorder = Recorder(str(path), fold=SummaryBuilder)
    session = Session(spec.validated())
    session.subscribe(first.append)
    session.subscribe(recorder.sink)
    session.run()
    recorder.close()
    second = run("v1-thrash", max_steps=600, toggles=[(300, "whole-context")])
    a, b = steps_of(first), steps_of(second)
    assert len(a) == 600 and any(s.preempted for s in a)
    assert [_without_wall(s) for s in a] == [_without_wall(s) for s in b]
    result = verify_file(str(path))
    assert result.ok, result.message
    assert result.steps_checked == 600

    # a tampered copy fails in one line, exit 1 or 2, before any re-run
    text = path.read_bytes()
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_bytes(text.replace(b'"running":2,', b'"running":3,', 1))
    assert tampered.read_bytes() != text
    out = subprocess.run([sys.executable, "-m", "tui.cli", "verify", str(tampered)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode in (1, 2), out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr


def test_a_v0_policy_on_the_v1_engine_is_one_line():
    with pytest.raises(ConfigError) as error:
        Session(preset_spec("v1-thrash", policy="strict").validated()).prepare()
    assert "\n" not in str(error.value) and "runs the v1 engine" in str(error.value)
    out = subprocess.run([sys.executable, "-m", "tui.cli", "run", "--preset", "v1-thrash",
                          "--policy", "watermark", "--no-record"],
                         capture_output=True, text=True, timeout=600)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert lines[0].startswith("observatory: error: policy watermark")


def test_a_v0_preset_on_the_v1_engine_is_one_line():
    with pytest.raises(ConfigError) as error:
        Session(preset_spec("demo").validated()).prepare()
    assert "\n" not in str(error.value)


def test_the_run_command_reports_the_v1_summary_as_json():
    out = subprocess.run([sys.executable, "-m", "tui.cli", "run", "--preset", "v1-thrash",
                          "--max-steps", "200", "--json", "--no-record"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    summary = msgspec.json.decode(out.stdout)
    assert (summary["engine"], summary["vllm_version"], summary["steps"]) == \
        ("v1", installed_version(), 200)
    for key in ("preemptions", "max_preemptions_per_request", "recomputed_tokens",
                "computed_tokens", "recompute_tax", "finished_requests", "sim_seconds"):
        assert key in summary
    assert summary["computed_tokens"] > 0


def test_the_stream_ends_with_one_end_record():
    items = run("v1-thrash", max_steps=50)
    assert isinstance(items[0], Header) and isinstance(items[-1], RunFinished)
    assert sum(isinstance(i, RunFinished) for i in items) == 1
    assert [s.step for s in steps_of(items)] == list(range(50))


def test_the_abort_state_is_vllms_own_counts_mid_run():
    """What EngineAborted would carry if vLLM raised now, against vLLM's own
    `get_request_counts()` and its KV manager's `usage` (the driver and an attached tap read
    it through the same function)."""
    from msgspec.structs import replace

    session = Session(replace(preset_spec("v1-thrash"), max_steps=120).validated())
    session.run()
    state = session.driver.abort_state()
    scheduler = session.driver.scheduler
    running, waiting = scheduler.get_request_counts()
    assert running > 0 and waiting > 0  # mid-thrash: both queues hold requests
    assert (state["running"], state["waiting"], state["swapped"]) == (running, waiting, 0)
    usage = scheduler.kv_cache_manager.usage
    assert state["gpu_used"] > 0
    assert abs(state["gpu_used"] / state["gpu_total"] - usage) < 1e-9
    assert (state["cpu_used"], state["cpu_total"]) == (0, 0)  # no CPU tier in this preset
