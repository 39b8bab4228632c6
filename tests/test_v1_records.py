"""V1 step records through the shared stream: framing, checks, the run index and the V1
summary. Synthetic records, so these run in every venv (no vLLM needed)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from engine.analysis.summary import SummaryBuilder, V1Summary, summarize
from engine.errors import ConfigError
from engine.policy import Policy, parse_policy, require_engine_kind
from engine.spec import preset_spec
from engine.stream.reader import load
from engine.stream.records import (SCHEMA_VERSION, Header, RunFinished, V1StepRecord,
                                   decode_record, encode)
from engine.stream.recorder import Recorder
from engine.stream.run import Run


def v1_header(**over: Any) -> Header:
    fields: dict[str, Any] = dict(
        schema=SCHEMA_VERSION, observatory_version="0.1.0", vllm_version="0.33.0",
        backend="sim", model="llama-16k", spec=preset_spec("v1-thrash").to_dict(),
        engine_config={}, started_at="2026-01-01T00:00:00+00:00", host="test", engine="v1")
    fields.update(over)
    return Header(**fields)


def v1_step(i: int, **over: Any) -> V1StepRecord:
    fields: dict[str, Any] = dict(
        step=i, wall_s=(i + 1) * 0.001, sim_s=(i + 1) * 0.01, sim_step_s=0.01, policy="off",
        running=2, waiting=3, finished_total=0, gpu_used=100, gpu_total=1199, kv_tokens=1600,
        batched_tokens=512, token_budget=512, new=[], resumed=[], scheduled=[("0", 511),
                                                                           ("1", 1)],
        preempted=[], prefix_hit_tokens=0, recomputed_tokens=0, prompt_tokens=511,
        generated_tokens=1, decode_reqs=1, first_tokens=[], finished=[], withheld=False,
        held_back=0, computed_total=(i + 1) * 512, recomputed_total=0, preemptions_total=0)
    fields.update(over)
    return V1StepRecord(**fields)


def thrash_items() -> list:
    """Request 0 preempted three times (losing 4096, 512 and 1024 tokens), 1 once."""
    steps = [v1_step(0, new=[("0", 512)], scheduled=[]),
             v1_step(1, preempted=[("0", 4096, 1)], recomputed_tokens=0),
             v1_step(2, resumed=[("0", 512)], recomputed_tokens=512, scheduled=[]),
             v1_step(3, preempted=[("0", 512, 2), ("1", 300, 1)], recomputed_tokens=256),
             v1_step(4, preempted=[("0", 1024, 3)], finished=["1"], finished_total=1,
                     recomputed_tokens=512)]
    return [v1_header(), *steps, RunFinished(steps=5, reason="completed", sim_s=0.05,
                                             wall_s=0.005)]


def test_a_v1_step_round_trips_through_the_stream_with_its_own_tag():
    record = v1_step(7, preempted=[("3", 4096, 2)], resumed=[("4", 128)])
    line = encode(record)
    assert b'"kind":"step_v1"' in line
    assert decode_record(line) == record
    # the V0 vocabulary reads as V1 has it: no swap space, recompute preemptions
    assert (record.swapped, record.cpu_used, record.swapped_out, record.recomputed) == \
        (0, 0, [], ["3"])
    assert record.lost_tokens == 4096


def test_a_v1_step_with_a_negative_count_is_refused():
    line = encode(v1_step(0)).replace(b'"running":2', b'"running":-2')
    with pytest.raises(msgspec.ValidationError):
        decode_record(line)


def test_the_v1_summary_counts_preemptions_and_the_recompute_tax():
    summary = summarize(thrash_items())
    assert isinstance(summary, V1Summary)
    assert (summary.engine, summary.vllm_version) == ("v1", "0.33.0")
    assert summary.preemptions == 4 and summary.preempted_requests == 2
    assert summary.max_preemptions_per_request == 3
    assert summary.lost_tokens == 4096 + 512 + 300 + 1024
    assert summary.recomputed_tokens == 512 + 256 + 512
    assert summary.computed_tokens == 5 * 512
    assert summary.recompute_tax == round(1280 / 2560, 4)
    assert summary.finished_requests == 1 and summary.steps == 5


def test_a_v1_step_carries_the_run_so_far():
    step = v1_step(9, computed_total=4000, recomputed_total=1000, preemptions_total=3)
    assert step.recompute_tax == 0.25
    assert v1_step(0, computed_total=0).recompute_tax == 0.0


def test_a_v1_recording_writes_loads_and_indexes(tmp_path):
    path = tmp_path / "v1.jsonl"
    items = thrash_items()
    recorder = Recorder(str(path), fold=SummaryBuilder)
    for item in items:
        recorder.sink(item)
    recorder.close()
    run = load(str(path))
    assert run.header.engine == "v1" and len(run) == 5
    assert run.steps_of("recompute") == [1, 3, 4]  # preemptions, V1's only kind
    assert any(e.kind == "swapout" and "GPU KV" in e.text for e in run.log)
    assert run.column("gpu_pct")[0] == pytest.approx(100 * 100 / 1199)
    assert summarize(run.all_items()) == summarize(items)


def test_a_v1_recording_with_more_blocks_used_than_exist_is_refused(tmp_path):
    from engine.stream.reader import RecordingError

    path = tmp_path / "bad.jsonl"
    recorder = Recorder(str(path), fold=SummaryBuilder)
    for item in [v1_header(), v1_step(0, gpu_used=2000)]:
        recorder.sink(item)
    recorder.close()
    with pytest.raises(RecordingError) as error:
        load(str(path))
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("text, kinds, admission, victim", [
    ("off", ("v0", "v1"), "off", "last"),
    ("whole-context", ("v1",), "whole-context", "last"),
    ("full-isl", ("v1",), "full-isl", "last"),
    ("least-computed", ("v1",), "off", "least-computed"),
    ("least-computed+whole-context", ("v1",), "whole-context", "least-computed"),
    ("strict", ("v0",), "off", "last"),
])
def test_v1_policies_parse_and_name_their_engine(text, kinds, admission, victim):
    policy = parse_policy(text)
    assert (policy.engine_kinds, policy.admission, policy.victim) == (kinds, admission, victim)
    assert parse_policy(str(policy)) == policy


@pytest.mark.parametrize("text, name, admission, victim, order", [
    ("skip-and-continue", "skip-and-continue", "off", "last", "skip-and-continue"),
    ("skip-and-continue+full-isl", "full-isl+skip-and-continue", "full-isl", "last",
     "skip-and-continue"),
    ("skip-and-continue+least-computed+whole-context",
     "whole-context+least-computed+skip-and-continue", "whole-context", "least-computed",
     "skip-and-continue"),
    ("whole-context", "whole-context", "whole-context", "last", "stop"),
])
def test_the_scan_order_combines_with_the_other_rules(text, name, admission, victim, order):
    """skip-and-continue (PR #35852) is a third kind of V1 rule, written after the others."""
    policy = parse_policy(text)
    assert (policy.name, policy.admission, policy.victim, policy.order) == (
        name, admission, victim, order)
    assert policy.engine_kinds == ("v1",) and parse_policy(str(policy)) == policy


@pytest.mark.parametrize("text", ["whole-context+full-isl", "whole-context+fast", "fast+x",
                                  "skip-and-continue+skip-and-continue"])
def test_a_bad_v1_combination_is_one_line(text):
    with pytest.raises(ConfigError) as error:
        parse_policy(text)
    assert "\n" not in str(error.value)


def test_a_policy_of_the_other_engine_is_one_line():
    for policy, kind in ((Policy("strict"), "v1"), (parse_policy("whole-context"), "v0")):
        with pytest.raises(ConfigError) as error:
            require_engine_kind(policy, kind)
        assert "\n" not in str(error.value) and f"runs the {kind} engine" in str(error.value)


def test_the_fix_key_reaches_each_v1_presets_own_fix():
    """`f` cycled off → full-isl → whole → whole+least → off and never reached
    skip-and-continue, v1-head-of-line's own fix: now it switches off <-> the preset's fix."""
    from engine.spec import PRESETS, preset_fix

    fixes = {name: preset_fix(name, "v1") for name in PRESETS if name.startswith("v1-")}
    assert fixes["v1-head-of-line"] == "skip-and-continue"
    assert fixes["v1-async-seats"] == "per-iteration-count"
    assert fixes["v1-thrash"] == "whole-context"
    for fix in fixes.values():
        assert "v1" in parse_policy(fix).engine_kinds


@pytest.mark.parametrize("width", [80, 160])
def test_the_status_speaks_v1_at_every_width(width):
    """The live status keeps the key numbers on one line: for a V1 run the preemptions so far
    and the recompute tax take swapped's and CPU KV's place."""
    from tui.run_view import RunView
    from tui.widgets.status_bar import Status, StatusBar

    items = thrash_items()
    items[4] = v1_step(4, preempted=[("0", 1024, 3)], computed_total=2560,
                       recomputed_total=1280, preemptions_total=4)
    view = RunView.from_items(items[:-1])
    text = StatusBar.compose_text(view, Status(state="running"), width=width)
    line1 = text.plain.splitlines()[0]
    assert len(line1) <= width
    assert "tax 0.50" in line1 and "swap" not in line1 and "CPU" not in line1
    assert "4" in line1.split("pre")[1]


def test_a_v1_policy_on_a_v0_engine_is_one_line():
    """The reverse of the V1 tests' check, where a V0 release is installed: refused before
    vLLM is even imported."""
    import subprocess
    import sys

    from engine.adapters.versions import installed_version, release_for

    release = release_for(installed_version())
    if release is None or release.engine != "v0":
        pytest.skip("needs a V0 release of vLLM installed (e.g. the vllm050 extra)")
    out = subprocess.run([sys.executable, "-m", "tui.cli", "run", "--preset", "demo",
                          "--policy", "whole-context", "--no-record"],
                         capture_output=True, text=True, timeout=300)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert "policy whole-context acts on the v1 engine, and this vLLM runs the v0" in lines[0]


def test_the_first_line_of_a_v1_run_is_the_observatorys():
    """Every V1 run printed four torch warnings (its deprecations, "No CUDA runtime is found")
    before the observatory's first line: they are captured now, with vLLM's lines."""
    import subprocess
    import sys

    from engine.adapters.versions import installed_engine

    if installed_engine() != "v1":
        pytest.skip("needs a V1 release of vLLM installed (e.g. the vllm033 extra)")
    out = subprocess.run([sys.executable, "-m", "engine.cli", "run", "--preset", "v1-thrash",
                          "--max-steps", "5", "--no-record"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    first, second = out.stderr.splitlines()[:2]
    assert first == "policy off", out.stderr[:2000]  # the policy's own line, then the steps'
    assert second.split()[:2] == ["step", "0"], out.stderr[:2000]
