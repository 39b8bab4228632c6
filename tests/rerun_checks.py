"""Checks every kind of recording shares (tests/test_rerun.py, test_rerun_v1.py,
test_v1_serve.py): its trace re-runs every decision, `verify` passes on it and names the
step where one decision in a resealed copy was changed. In-process (engine.cli's main), as a
user's commands."""

from __future__ import annotations

from pathlib import Path

import msgspec

from engine.cli.registry import main

MEASURED = frozenset({"wall_s", "exec_s"})


def steps_of(path: Path) -> list:
    from engine.stream.reader import load
    from engine.stream.records import STEP_TYPES

    return [item for item in load(path).all_items() if type(item) in STEP_TYPES]


def first_difference(a: list, b: list) -> str | None:
    """Where two runs' step records first differ (every field but the measured ones, and but
    those `a` did not record: an attached engine computes the committed demand only under
    `reserve`, as verify knows)."""
    for x, y in zip(a, b):
        for name in x.__struct_fields__:
            if name in MEASURED or getattr(x, name) is None:
                continue
            if getattr(x, name) != getattr(y, name):
                return f"step {x.step}: {name} {getattr(x, name)!r} != {getattr(y, name)!r}"
    if len(a) != len(b):
        return f"{len(a)} steps against {len(b)}"
    return None


def trace_reruns_every_decision(path: Path, tmp: Path, capsys) -> Path:
    """`export --format trace` then `run --config T.toml --trace T.jsonl`: the same steps.
    Returns the trace."""
    trace = tmp / f"{path.name}.trace.jsonl"
    assert main(["export", str(path), "--format", "trace", "-o", str(trace)]) == 0
    err = capsys.readouterr().err
    config = trace.with_suffix(".toml")
    assert f"observatory run --config {config} --trace {trace}" in err
    rerun = tmp / f"{path.name}.rerun.jsonl.zst"
    status = main(["run", "--config", str(config), "--trace", str(trace), "--record", str(rerun)])
    said = capsys.readouterr()
    assert rerun.exists(), (status, said.err[-2000:])
    original, again = steps_of(path), steps_of(rerun)
    assert original
    assert first_difference(original, again) is None, first_difference(original, again)
    return trace


def verify_passes_and_names_a_changed_step(path: Path, tmp: Path, capsys, step: int) -> None:
    """`verify` passes on `path`, and on a copy whose step `step` says one more batched token
    (resealed, so only its decision is wrong) fails naming that step."""
    from engine.analysis.summary import SummaryBuilder
    from engine.stream.reader import load
    from engine.stream.recorder import Recorder
    from engine.stream.records import STEP_TYPES

    assert main(["verify", str(path)]) == 0, capsys.readouterr()
    assert "verified:" in capsys.readouterr().out
    recording = load(path)
    changed = tmp / f"changed-{path.name}"
    with Recorder(changed, recording.header, background_flush=False,
                  fold=SummaryBuilder) as rec:
        for item in recording.items:
            if type(item) in STEP_TYPES and item.step == step:
                item = msgspec.structs.replace(item, batched_tokens=item.batched_tokens + 1)
            rec.write(item)
    assert main(["verify", str(changed)]) == 1
    out = capsys.readouterr().out
    assert f"verify failed: step {step}: field batched_tokens differs" in out, out
