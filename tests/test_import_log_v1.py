"""`observatory import-log` on vLLM V1 logs (issue 18, item 7): every shape V1's stats line takes
in the wild gives back the same numbers, read by key. The fixtures under fixtures/logs/v1/ hold
the same two records (A then B, ten seconds apart) in each layout; their headers say where the
layout comes from, their numbers are the suite's own. B carries `Preemptions: 3` where 0.33's
LoggingStatLogger.log puts that field (after Waiting and Deferred, before the KV usage), though
0.33 itself never prints it. `v033-logger.log` was printed by vLLM 0.33.0's own
LoggingStatLogger (fixtures/logs/v1/make_v033_logger_log.py) with every optional field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.analysis.logs.importer import import_log
from engine.analysis.logs.reference import Reference
from engine.analysis.summary import summarize
from engine.cli import main
from engine.errors import RecordingError
from engine.stream.reader import load

FIXTURES = Path(__file__).parent / "fixtures" / "logs" / "v1"
A = dict(prompt_tps=6335.3, gen_tps=4.8, running=9, waiting=0, pending=None, gpu_pct=62.8,
         prefix_hit_pct=0.0, preemptions=None, swapped=None, cpu_pct=None)
B = dict(prompt_tps=0.0, gen_tps=1226.3, running=18, waiting=42, pending=None, gpu_pct=95.5,
         prefix_hit_pct=12.5, preemptions=3, swapped=None, cpu_pct=None)


def _values(window) -> dict:
    return {name: getattr(window, name) for name in A}


@pytest.mark.parametrize("name, engine, gap", [
    ("early-no-engine.log", None, 5.0),  # 0.7.x: no `Engine NNN:` prefix, 5-s interval
    ("apiserver-specdecode.log", 0, 10.0),  # (APIServer pid=N), SpecDecoding lines between
    ("docker-compose-ansi.log", 0, 10.0),  # compose prefix, docker stamps, ANSI, MFU field
    ("hard-wrapped.log", 0, 10.0),  # 80 columns, once mid-key
    ("glued.log", 0, 10.0),  # two records on one line
])
def test_every_v1_layout_gives_the_same_two_records(name: str, engine: int | None,
                                                    gap: float) -> None:
    log = import_log((FIXTURES / name).read_bytes(), name)
    assert log.header.engine == "v1"
    assert [_values(w) for w in log.windows] == [A, B]
    assert {w.engine for w in log.windows} == {engine}
    assert {w.kv_device for w in log.windows} == {"GPU"}
    assert not any(w.partial for w in log.windows)
    times = [w.t_s for w in log.windows]
    assert times[1] - times[0] == pytest.approx(gap, abs=0.01)
    assert times[0] == pytest.approx(gap)  # time zero: the first window's start
    assert log.header.engine_config["stats_interval_s"] == gap


def test_stats_logged_at_debug_by_an_idle_engine_are_records_too() -> None:
    log = import_log((FIXTURES / "debug-idle.log").read_bytes())
    idle, *rest = log.windows
    assert [_values(w) for w in rest] == [A, B]
    # the idle record has no prefix-cache field (nothing was queried): absent, not partial
    assert idle.running == 0 and idle.prefix_hit_pct is None and not idle.partial


def test_data_parallel_engines_are_separate_series() -> None:
    log = import_log((FIXTURES / "data-parallel.log").read_bytes())
    by_engine: dict[int | None, list] = {}
    for w in log.windows:
        by_engine.setdefault(w.engine, []).append(w)
    assert sorted(by_engine, key=lambda e: (e is None, e)) == [-1, 0, 1]
    assert [_values(w) for w in by_engine[0]] == [A, B]
    assert [w.running for w in by_engine[1]] == [2, 3]
    assert by_engine[-1][0].running == 11  # `2 Engines Aggregated:`
    assert log.header.engine_config["engines"] == [-1, 0, 1]
    assert log.header.engine_config["stats_interval_s"] == 10.0
    ref = Reference(log.windows, "dp", kind="v1")
    assert ref.engine == 0 and [w.running for w in ref.windows] == [9, 18]
    assert [w.running for w in Reference(log.windows, "dp", kind="v1", engine=1).windows] == [2, 3]
    with pytest.raises(RecordingError, match="no engine 7"):
        Reference(log.windows, "dp", kind="v1", engine=7)


def test_a_v1_record_cut_mid_value_is_partial_never_a_wrong_number() -> None:
    log = import_log((FIXTURES / "cut.log").read_bytes())
    first, cut = log.windows
    assert _values(first) == A
    assert cut.partial and cut.missing == ["gpu_pct"] and cut.gpu_pct is None
    assert cut.preemptions == 3 and cut.waiting == 42
    assert log.warnings and "gpu_pct" in log.warnings[0]


def test_v033_logger_every_optional_field_by_key() -> None:
    """Lines printed by vLLM 0.33.0's LoggingStatLogger itself, the optional fields on and off."""
    log = import_log((FIXTURES / "v033-logger.log").read_bytes())
    plain, full, cpu = log.windows
    assert (plain.prefix_hit_pct, plain.preemptions, plain.external_prefix_hit_pct,
            plain.mm_hit_pct, plain.deferred) == (None, None, None, None, None)
    # 7 preemptions were recorded, but 0.33 resets its counter before printing it: no field
    assert full.preemptions is None and full.deferred == 2 and full.waiting == 5
    assert full.prefix_hit_pct == 25.0 and full.external_prefix_hit_pct == 50.0
    assert full.mm_hit_pct == 75.0 and full.gpu_pct == 40.0
    assert cpu.kv_device == "CPU" and cpu.gpu_pct == 10.0 and cpu.cpu_pct is None
    assert not any(w.partial for w in log.windows)


def test_import_log_cli_writes_a_v1_reference_that_summary_reads(tmp_path, capsys) -> None:
    out = tmp_path / "v1.reference.jsonl.zst"
    assert main(["import-log", str(FIXTURES / "data-parallel.log"), "-o", str(out)]) == 0
    recording = load(out)
    assert recording.header.engine == "v1" and recording.header.backend == "log"
    assert summarize([recording.header, *recording.items]).engine == "v1"
    assert Reference.load(str(out)).engines == [-1, 0, 1]


def test_fit_of_a_v1_log_without_the_v1_engine_is_one_line(capsys, tmp_path) -> None:
    """A V1 log is fitted with vLLM's V1 engine: in a V0 venv, `fit` says which venv in one
    line (tests/test_fit_v1.py fits V1 logs in the vllm033 one)."""
    from engine.adapters.versions import installed_version, release_for

    release = release_for(installed_version())
    if release is None or release.engine == "v1":
        pytest.skip("needs a V0 vLLM")
    assert main(["fit", str(FIXTURES / "glued.log"), "-o", str(tmp_path / "f.toml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a V1 log" in err and "vllm033" in err


async def test_replay_draws_the_chosen_data_parallel_engine(tmp_path) -> None:
    """`--reference-engine N` picks one engine's series of a data-parallel V1 log (here over
    a shipped V0 run: the log's running, waiting and KV, no swap); an engine the log lacks is
    one error before any screen."""
    from tui.launch import replay_app
    from tui.widgets.run_plot import RunPlot

    run = Path(__file__).resolve().parents[1] / "recordings" / "seed-5578-off.jsonl.zst"
    ref = tmp_path / "dp.reference.jsonl.zst"
    assert main(["import-log", str(FIXTURES / "data-parallel.log"), "-o", str(ref)]) == 0
    app = replay_app([str(run)], autoplay=False, reference=str(ref), reference_engine=1)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.press("end")
        await pilot.pause()
        plot = app.main_screen.query_one("#plot-queues", RunPlot)
        real = {line.label: list(line.ys) for line in plot._lines if "real log" in line.label}
        # the run lasts 11.5 s: engine 1's window at 10 s is drawn (engine 0's says 9 and 0),
        # the one at 20 s is past the run's end
        assert real == {"run (real log)": [2.0], "wait (real log)": [1.0]}
    with pytest.raises(RecordingError, match="no engine 7"):
        replay_app([str(run)], autoplay=False, reference=str(ref), reference_engine=7)


def test_a_v1_window_recorded_with_v0s_pending_reads_as_waiting() -> None:
    """Recordings imported before V1 windows had `waiting` kept `Waiting:` in `pending`; they
    decode with it in `waiting`, and V0 windows keep `pending`."""
    from engine.stream.records import decode_record as decode

    old = {"kind": "log_window", "t_s": 0.0, "clock": None, "line": 1, "prompt_tps": 1.0,
           "gen_tps": 2.0, "running": 3, "swapped": None, "pending": 42, "gpu_pct": 5.0,
           "cpu_pct": None, "engine": 0, "kv_device": "GPU"}
    window = decode(json.dumps(old).encode())
    assert (window.waiting, window.pending) == (42, None)
    v0 = dict(old, swapped=1, cpu_pct=0.0, engine=None, kv_device=None)
    window = decode(json.dumps(v0).encode())
    assert (window.waiting, window.pending) == (None, 42)
