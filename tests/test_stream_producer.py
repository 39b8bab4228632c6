"""The stream's contract, held by its one writer (engine.stream.producer.RunStream): a Header
first, then records, and exactly one RunFinished last; measured times at the header's
resolution; the run's counters (step, clocks, requests not finished); what a broken sink does;
and the end a sealer writes after the last step it saw (`Ending`).

The engine is the installed release's real one (its driver, the sim executor), fed by the
test instead of a Session, so the contract is held apart from either of the producer's two
feeders. And the rule that makes it the one writer: no module outside engine/stream/producer.py
builds one of the records it writes.
"""

from __future__ import annotations

import ast
import time
from pathlib import Path

import pytest

from engine.adapters.versions import installed_version, release_for
from engine.stream.producer import Ending, RunStream, end_record
from engine.stream.records import (MEASURED_RESOLUTION_S, STEP_TYPES, Arrivals, EngineAborted,
                                   Header, LogLine, ObserverError, PolicyChanged, RunFinished)

ROOT = Path(__file__).resolve().parent.parent
RELEASE = release_for(installed_version())
pytestmark = pytest.mark.skipif(RELEASE is None, reason="needs a supported vLLM release")


@pytest.fixture(scope="module")
def engine_run():
    """(spec, driver, workload): a small run of the installed kind, its engine built once."""
    from engine.adapters.driver import open_driver
    from engine.policy import parse_policy
    from engine.spec import preset_spec
    from engine.workload import Workload

    if RELEASE.engine == "v1":
        from v1_required import require_hash_seed

        require_hash_seed()
        spec = preset_spec("v1-async-seats", requests=6, max_tokens=3).validated()
    else:
        spec = preset_spec("demo", requests=6, n=1, max_tokens=3).validated()
    driver = open_driver(spec, parse_policy("off"))
    workload = Workload(spec, driver.max_model_len, driver.count_tokens,
                        fan_out_samples=driver.kind == "v1")
    return spec, driver, workload


def _stream(engine_run, **options) -> tuple[RunStream, list]:
    spec, driver, _ = engine_run
    items: list = []
    stream = RunStream([items.append], **options)
    stream.open(spec, driver, spec.cost)
    return stream, items


def _hand_over(stream: RunStream, engine_run, requests) -> None:
    _, driver, _ = engine_run
    tokens = [driver.add_request(r, time.time()) for r in requests]
    stream.arrivals("workload", [r.request_id for r in requests], tokens,
                    [r.arrival_s for r in requests])


def test_a_run_is_a_header_its_records_and_one_end(engine_run) -> None:
    _, driver, workload = engine_run
    stream, items = _stream(engine_run)
    stream.begin()
    stream.begin()  # once only
    _hand_over(stream, engine_run, list(workload.initial()))
    assert stream.end_reason() == "unfinished"  # handed over, none finished yet
    stream.policy_changed("off", "off", "test")
    while driver.has_unfinished_requests():
        driver.step()
        stream.step_done(stream.read_step())
    assert stream.end_reason() == "completed"  # every request's finish was in a step record
    end = stream.finish()
    assert stream.finish("stopped") is None  # exactly once: a second finish sends nothing
    kinds = [type(i) for i in items]
    assert kinds[0] is Header and kinds.count(Header) == 1
    assert kinds[-1] is RunFinished and kinds.count(RunFinished) == 1
    assert kinds[1:3] == [Arrivals, PolicyChanged]
    steps = [i for i in items if type(i) in STEP_TYPES]
    assert [s.step for s in steps] == list(range(len(steps))) and steps
    assert end is items[-1] and end.reason == "completed" and end.steps == len(steps)
    assert end.sim_s == steps[-1].sim_s == stream.sim_s
    header = items[0]
    assert header.engine == driver.kind and header.time_resolution_s == MEASURED_RESOLUTION_S
    for step in steps:  # measured times at the header's resolution (whole microseconds)
        for seconds in (step.wall_s, step.exec_s):
            assert round(seconds / MEASURED_RESOLUTION_S, 6) == round(seconds * 1e6)


def test_the_header_comes_first_whatever_is_sent_first(engine_run) -> None:
    stream, items = _stream(engine_run)
    stream.log("INFO", "observatory.test", "before anything")
    stream.finish("stopped")
    assert [type(i) for i in items] == [Header, LogLine, RunFinished]
    assert items[2].steps == 0 and items[2].reason == "stopped"


def test_an_abort_and_our_own_failure_are_told_apart(engine_run) -> None:
    stream, items = _stream(engine_run)
    stream.begin()
    stream.aborted(RuntimeError("Aborted due to the lack of CPU swap space\nsecond line"))
    stream.observer_error("build_step_record", KeyError("gpu_used"))
    stream.finish("aborted")
    abort, error, end = items[1:]
    assert type(abort) is EngineAborted and abort.step == 0
    assert abort.message == "Aborted due to the lack of CPU swap space"
    assert abort.error == "RuntimeError" and abort.gpu_total > 0  # the engine's own state
    assert type(error) is ObserverError and error.where == "build_step_record"
    assert (error.error, error.message) == ("KeyError", "'gpu_used'")
    assert end.reason == "aborted"


def test_a_broken_sink_is_reported_and_the_others_go_on(engine_run) -> None:
    seen, failures = [], []

    def broken(item) -> None:
        raise OSError("disk full")

    spec, driver, _ = engine_run
    stream = RunStream([broken, seen.append],
                       on_sink_error=lambda sink, exc: failures.append((sink, exc)))
    stream.open(spec, driver, spec.cost)
    stream.finish("stopped")
    assert [type(i) for i in seen] == [Header, RunFinished]
    assert [(sink, str(exc)) for sink, exc in failures] == [(broken, "disk full")] * 2
    stream = RunStream([broken])  # without a handler the failure is the caller's
    stream.open(spec, driver, spec.cost)
    with pytest.raises(OSError, match="disk full"):
        stream.begin()


def test_a_sealer_ends_a_cut_stream_after_its_last_step() -> None:
    from engine.stream.reader import load

    items = load(ROOT / "recordings" / "seed-5578-strict.jsonl.zst").all_items()
    ending = Ending()
    assert ending.record("interrupted") == end_record("interrupted", 0, 0.0, 0.0)
    steps = 0
    for item in items[:400]:
        ending.note(item)
        steps += type(item) in STEP_TYPES
    last = ending.last
    assert last is not None and last.step + 1 == steps and not ending.ended
    assert ending.record("process_ended") == RunFinished(
        steps=steps, reason="process_ended", sim_s=last.sim_s, wall_s=last.wall_s)
    for item in items[400:]:
        ending.note(item)
    assert ending.ended  # the run's own end came: nothing for a sealer to add


# ---- one writer ---------------------------------------------------------------------------

WRITTEN_BY_THE_PRODUCER = ("Header", "Arrivals", "PolicyChanged", "EngineAborted",
                           "ObserverError", "RunFinished", "LogLine")


def test_the_producer_is_the_only_writer_of_its_records() -> None:
    """No module of the observatory but engine/stream/producer.py calls the constructor of a
    record the producer writes (step records are read by the taps: the producer sends them)."""
    writers: dict[str, list[str]] = {name: [] for name in WRITTEN_BY_THE_PRODUCER}
    for package in ("engine", "tui"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                        and node.func.id in writers:
                    writers[node.func.id].append(str(path.relative_to(ROOT)))
    assert {name: sorted(set(paths)) for name, paths in writers.items()} == {
        name: ["engine/stream/producer.py"] for name in WRITTEN_BY_THE_PRODUCER}
