"""The records of every preset, byte for byte as the stream carried them when these goldens were
captured (issue #41: the stream's producer and reader were rebuilt with behaviour unchanged).

Each scenario runs a preset of the installed engine kind on the sim (a Session, the engine the
observatory drives) or a script under `observatory exec --sim` (an Observer, the engine a user's
program drives), encodes every item as the stream does, and compares the lines with
tests/golden/<vLLM version>/<scenario>.jsonl.zst. Between them the scenarios produce every record
kind a live stream carries: the Header, Arrivals (workload, burst, a trace's arrivals over
time), PolicyChanged (toggle-at and a burst's command), steps, LogLine (vLLM's and the trace's
own), EngineAborted, ObserverError and RunFinished.

Lines are compared byte for byte; a line that differs only by fields the golden's record
does not have (a field added since, with its default: records.py's rule for schema changes)
still matches, so adding a field does not mean new goldens. What may differ between two runs of
the same code is set aside, and nothing else:
- wall-clock fields (`wall_s`, `exec_s` of steps, aborts and the end; the header's
  `started_at`, `host`, `observatory_version`; an attached engine's name, which holds its pid);
- this checkout's path (the model directory, a trace's path) becomes `<ROOT>`;
- LogLines at step 0 (vLLM's start-up lines depend on what the process imported before and on
  the machine's memory) and vLLM's metrics lines (every ~5 s of wall clock).

Write the goldens again (after a change that is meant to change records) with
OBSERVATORY_WRITE_GOLDEN=1; the goldens of a release whose venv is not here are left alone.
V1 scenarios need PYTHONHASHSEED=0, as every V1 sim run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import pytest

from engine.adapters.versions import installed_version, release_for
from engine.stream.records import (STEP_TYPES, EngineAborted, Header, LogLine, RunFinished,
                                   encode)

ROOT = Path(__file__).resolve().parent.parent
RELEASE = release_for(installed_version())
KIND = RELEASE.engine if RELEASE is not None else None
GOLDEN = ROOT / "tests" / "golden" / (RELEASE.version if RELEASE is not None else "none")
WRITE = os.environ.get("OBSERVATORY_WRITE_GOLDEN") == "1"
METRICS_LOGGERS = ("vllm.engine.metrics", "vllm.v1.metrics.loggers")
TRACE = ROOT / "tests" / "fixtures" / "traces" / "mooncake.jsonl"

pytestmark = pytest.mark.skipif(RELEASE is None, reason="needs a supported vLLM release")


# ---- what is set aside ----------------------------------------------------------------------

def normalized(items: list[Any]) -> list[bytes]:
    """Each item's stream line, with what differs between runs of the same code set aside."""
    root = str(ROOT).encode()
    out = []
    for item in items:
        kind = type(item)
        if kind is Header:
            config = dict(item.engine_config)
            if "attached" in config:
                config["attached"] = {"name": "<attached>"}
            item = msgspec.structs.replace(item, started_at="<started>", host="<host>",
                                           observatory_version="<version>",
                                           engine_config=config)
        elif kind in STEP_TYPES:
            item = msgspec.structs.replace(item, wall_s=0.0, exec_s=0.0)
        elif kind is EngineAborted or kind is RunFinished:
            item = msgspec.structs.replace(item, wall_s=0.0)
        elif kind is LogLine and (item.step == 0 or item.logger in METRICS_LOGGERS):
            continue
        out.append(encode(item).replace(root, b"<ROOT>"))
    return out


def compare(name: str, lines: list[bytes]) -> None:
    """`lines` against the golden `name` (or, with OBSERVATORY_WRITE_GOLDEN=1, written as it)."""
    import zstandard

    path = GOLDEN / f"{name}.jsonl.zst"
    text = b"\n".join(lines) + b"\n"
    if WRITE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(zstandard.ZstdCompressor(level=19).compress(text))
        return
    if not path.exists():
        pytest.fail(f"no golden {path.relative_to(ROOT)}: capture it from the commit before a "
                    f"change, with OBSERVATORY_WRITE_GOLDEN=1")
    golden = zstandard.ZstdDecompressor().decompress(path.read_bytes()).split(b"\n")[:-1]
    for i, (want, got) in enumerate(zip(golden, lines)):
        if got != want:
            assert _without_newer_fields(got, want) == msgspec.json.decode(want), \
                f"{name}: line {i + 1} differs:\n  golden {want[:600]!r}\n  now    {got[:600]!r}"
    assert len(lines) == len(golden), f"{name}: {len(lines)} lines, the golden has {len(golden)}"


def _without_newer_fields(line: bytes, golden: bytes) -> Any:
    """`line` decoded, without the fields the golden's record does not have: a field added
    since (with its default, as records.py's rule for a schema change says) is not a change
    of what was recorded. Every field the golden holds must be as it was, byte for byte in
    value."""
    got, want = msgspec.json.decode(line), msgspec.json.decode(golden)
    if not isinstance(got, dict) or not isinstance(want, dict):
        return got
    trimmed = {key: value for key, value in got.items() if key in want}
    for key in ("spec", "engine_config"):  # the header's own dicts gain keys the same way
        if isinstance(trimmed.get(key), dict) and isinstance(want.get(key), dict):
            trimmed[key] = {k: v for k, v in trimmed[key].items() if k in want[key]}
    return trimmed


# ---- the engine the observatory drives: a Session per preset ---------------------------------

class Scenario(NamedTuple):
    """A Session's run: a preset with settings, and what happens to it besides."""

    preset: str
    settings: dict[str, Any]
    switch: str | None = None  # a burst, then this policy, as commands queued before step 0
    broken_sink: bool = False  # a subscriber that fails at step 120 (ObserverError)


SCENARIOS: dict[str, Scenario] = {name: s for name, s in {
    "seed-5578": Scenario("seed-5578", {"max_steps": 150, "toggles": [(60, "reserve")]},
                          "strict"),
    "seed-5578-fitted": Scenario("seed-5578-fitted",
                                 {"max_steps": 150, "toggles": [(60, "strict")]}),
    "demo-abort": Scenario("demo", {"policy": "off"}),
    "demo-observer-error": Scenario("demo", {"policy": "reserve"}, broken_sink=True),
    "demo-trace": Scenario("demo", {"policy": "reserve", "trace": str(TRACE),
                                    "trace_format": "mooncake", "max_steps": 400}),
    "v1-thrash": Scenario("v1-thrash", {"max_steps": 150, "toggles": [(60, "off")]},
                          "whole-context"),
    "v1-concurrent-prefill": Scenario("v1-concurrent-prefill", {"max_steps": 150}),
    "v1-head-of-line": Scenario("v1-head-of-line",
                                {"max_steps": 150, "toggles": [(60, "skip-and-continue")]}),
    "v1-async-seats": Scenario("v1-async-seats", {"toggles": [(20, "per-iteration-count")]}),
    "v1-prefix-offload": Scenario("v1-prefix-offload", {"max_steps": 150}),
    "v1-observer-error": Scenario("v1-thrash", {"max_steps": 200}, broken_sink=True),
}.items() if name.startswith("v1-") == (KIND == "v1")}


class _BrokenSink:
    """A subscriber that fails at step 120: the observatory's own failure (ObserverError,
    where="sink _BrokenSink", as the goldens hold)."""

    def __call__(self, item: Any) -> None:
        if type(item) in STEP_TYPES and item.step == 120:
            raise RuntimeError("a sink that breaks at step 120")


def _run(scenario: Scenario) -> list[Any]:
    """Everything the Session emits for `scenario`, in order."""
    from engine.session import Session
    from engine.spec import preset_spec

    items: list[Any] = []
    session = Session(preset_spec(scenario.preset, **scenario.settings).validated(),
                      freeze_gc=False)
    session.subscribe(items.append)
    if scenario.broken_sink:
        session.subscribe(_BrokenSink())
    if scenario.switch is not None:  # commands queued before the run apply at step 0
        session.add_burst(8, source="golden")
        session.set_policy(scenario.switch, source="golden")
    session.run()
    return items


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_preset_streams_the_records_it_streamed(name: str) -> None:
    if KIND == "v1":
        from v1_required import require_hash_seed

        require_hash_seed()
    if name == "v1-prefix-offload":
        from v1_required import cpu_tier_refusal

        if cpu_tier_refusal():
            pytest.skip(cpu_tier_refusal())
    items = _run(SCENARIOS[name])
    kinds = {type(i).__name__ for i in items}
    assert type(items[0]) is Header and type(items[-1]) is RunFinished, kinds
    compare(name, normalized(items))


# ---- the engine a user's program drives: `observatory exec --sim` ----------------------------

SCRIPTS = {"v0": ("verl_rollout.py", "opt-125m"), "v1": ("v1_rollout.py", "llama-16k")}


def test_an_attached_engine_streams_the_records_it_streamed(tmp_path: Path) -> None:
    from engine.stream.reader import load

    script, model = SCRIPTS[KIND]
    record = tmp_path / "exec.jsonl.zst"
    # V1: the engine core in the script's own process, so that each request reaches it at the
    # same step every run (in a process of its own, how many arrive before step 0 is a race)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0",
           "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli", "exec", "--sim", "--record", str(record), "--",
         sys.executable, str(ROOT / "tests" / "fixtures" / "attach" / script),
         str(ROOT / "engine" / "adapters" / "models" / model)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=580)
    assert proc.returncode == 0, proc.stderr[-3000:]
    recording = load(record)
    assert not recording.truncated
    compare(f"exec-{script.removesuffix('.py')}", normalized(recording.all_items()))
