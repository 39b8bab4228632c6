"""`observatory import-log`: every log format of issue #11 from hand-written fixtures, the seed
log, and the refusals. The fixtures hold the same two stats records (A then B) in each layout,
so every format must give back exactly those numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.analysis.logs.importer import import_log
from engine.analysis.summary import summarize
from engine.cli import main
from engine.errors import RecordingError
from engine.stream.reader import load
from shipped import shipped

FIXTURES = Path(__file__).parent / "fixtures" / "logs"
SEED_LOG = Path("/work/shared/seed/vllm-issue-5578.txt")
A = dict(prompt_tps=707.6, gen_tps=15.2, running=12, swapped=0, pending=9988, gpu_pct=3.4,
         cpu_pct=0.0)
B = dict(prompt_tps=0.0, gen_tps=14147.8, running=37, swapped=61, pending=9870, gpu_pct=88.3,
         cpu_pct=33.1)


def _values(window) -> dict:
    return {name: getattr(window, name) for name in A}


@pytest.mark.parametrize("name", [
    "v0-pre031-llm_engine.log",  # llm_engine.py:N] before 0.3.1, no trailing '.'
    "v0-metrics.log",  # metrics.py:N] with the trailing '.'
    "v0-08-brackets-companion.log",  # [metrics.py:N] and a prefix-cache companion line
    "prefixes-ray-rank-fork.log",  # Ray actor tags, [rank0]:, a fork's extra field
    "docker-compose.log",  # `svc  | `, uvicorn access and request-finished lines
    "custom-format-full-date.log",  # full dates, logger name instead of file:line
    "two-records-one-line.log",  # a lost newline
    "hard-wrapped.log",  # wrapped at 80 columns and mid-key (`GPU KV cache u` / `sage`)
    "tqdm-ansi-cr.log",  # ANSI colours, \r redraws, tqdm bars glued to log lines
])
def test_every_layout_gives_the_same_two_records(name: str) -> None:
    log = import_log((FIXTURES / name).read_bytes(), name)
    assert [_values(w) for w in log.windows] == [A, B]
    assert not any(w.partial for w in log.windows)
    times = [w.t_s for w in log.windows]
    assert times[1] - times[0] == pytest.approx(5.0, abs=0.01)


def test_a_record_cut_by_a_dollar_marker_is_partial_never_a_wrong_number() -> None:
    log = import_log((FIXTURES / "dollar-cut.log").read_bytes())
    first, cut = log.windows
    assert _values(first) == A
    assert cut.partial and cut.missing == ["gpu_pct", "cpu_pct"]
    assert cut.gpu_pct is None and cut.running == 37  # not 8%, not joined with anything
    assert log.warnings and "gpu_pct" in log.warnings[0]


def test_tqdm_gives_progress_time_zero_and_the_abort() -> None:
    log = import_log((FIXTURES / "tqdm-ansi-cr.log").read_bytes())
    assert log.header.engine_config["time_zero"] == "tqdm start"
    events = [r for r in log.records if getattr(r, "event", None) in ("progress", "abort")]
    assert [(e.event, e.finished) for e in events][-2:] == [("progress", 7), ("abort", 7)]
    assert events[-1].t_s == 7.0
    assert log.header.model == "facebook/opt-125m"


def test_preemption_blocks_and_timestamps_without_a_year() -> None:
    log = import_log((FIXTURES / "no-year-preemption.log").read_bytes())
    (pre,) = [r for r in log.records if getattr(r, "event", None) == "preemption"]
    assert (pre.mode, pre.group, pre.cumulative) == ("SWAP", "37", 51)
    assert log.header.spec["num_gpu_blocks"] == 8192
    assert log.header.spec["num_cpu_blocks"] == 7281
    assert pre.t_s - log.windows[0].t_s == pytest.approx(2.0)


def test_a_log_with_v0_and_v1_stats_lines_is_refused_in_one_line(capsys, tmp_path) -> None:
    mixed = tmp_path / "mixed.log"
    mixed.write_bytes((FIXTURES / "v0-metrics.log").read_bytes()
                      + (FIXTURES / "v1-engine.log").read_bytes())
    with pytest.raises(RecordingError, match="two runs"):
        import_log(mixed.read_bytes())
    assert main(["import-log", str(mixed), "-o", "/dev/null"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "split the log" in err


def test_no_stats_records_is_refused_with_exit_2(capsys, tmp_path) -> None:
    assert main(["import-log", str(FIXTURES / "no-stats.log"), "-o",
                 str(tmp_path / "x.jsonl.zst")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("observatory: error:") and err.count("\n") == 1
    assert not (tmp_path / "x.jsonl.zst").exists()


@pytest.mark.skipif(not SEED_LOG.exists(), reason="the seed log is not on this machine")
def test_seed_log_imports_to_ten_records_and_the_abort(tmp_path) -> None:
    out = tmp_path / "seed.reference.jsonl.zst"
    assert main(["import-log", str(SEED_LOG), "-o", str(out)]) == 0
    recording = load(out)
    windows = [r for r in recording.items if type(r).__name__ == "LogWindow"]
    assert len(windows) == 10 and not any(w.partial for w in windows)
    assert [w.swapped for w in windows] == [0, 0, 29, 87, 69, 61, 100, 137, 125, 129]
    summary = summarize(recording.all_items())
    assert summary.aborted and summary.peak_swapped == 137 and summary.finished_requests == 63
    assert summary.sim_seconds == pytest.approx(47.0, abs=1.0)
    assert recording.header.spec["num_cpu_blocks"] == 7281
    assert recording.header.spec["enable_chunked_prefill"] is True


def stats_lines(recording) -> list:
    return [item for item in recording.items
            if type(item).__name__ == "LogLine" and item.message.startswith("Avg prompt")]


def test_a_sim_runs_own_stats_lines_reimport_to_its_numbers(tmp_path) -> None:
    """vLLM's StatLogger printed these lines inside a sim run (captured as LogLine records);
    written out as a log and re-imported, they must give back the queue and KV figures of the
    step that printed them, and token rates that match the steps between two lines."""
    # vLLM prints one every 5 s of wall time: take the shipped recording that has the most
    recordings = [load(p) for p in shipped("seed-5578-*.jsonl.zst")]
    recording = max(recordings, key=lambda r: len(stats_lines(r)))
    lines, expected = [], []
    for item in stats_lines(recording):
        step = recording.step(item.step)
        clock = 3600 * 21 + 23 * 60 + step.wall_s
        stamp = f"{int(clock // 3600):02d}:{int(clock // 60 % 60):02d}:{clock % 60:06.3f}"
        lines.append(f"INFO 06-16 {stamp.replace('.', ',')} metrics.py:341] {item.message}")
        expected.append(step)
    assert len(expected) >= 2
    log = import_log("\n".join(lines) + "\n")
    assert len(log.windows) == len(expected)
    for window, step in zip(log.windows, expected):
        assert (window.running, window.swapped, window.pending) == (step.running, step.swapped,
                                                                    step.waiting)
        assert window.gpu_pct == pytest.approx(step.gpu_pct, abs=0.051)
        assert window.cpu_pct == pytest.approx(step.cpu_pct, abs=0.051)
    # the second line's rate covers the steps after the first line, over the wall time between
    first, second = expected[0], expected[1]
    generated = sum(s.generated_tokens for s in recording.steps
                    if first.step < s.step <= second.step)
    elapsed = log.windows[1].t_s - log.windows[0].t_s
    assert log.windows[1].gen_tps * elapsed == pytest.approx(generated, rel=0.05)
