"""`observatory sweep` without Ray: the grid, the refusals, the store, the report and heatmaps,
and the cell browser. Cells run for real (`--serial`: the same run_cell a Ray worker runs, in
the sweep's own process), on the demo preset with --max-steps so the suite stays quick.
Ray itself is exercised in test_sweep_ray.py."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from engine.analysis.summary import summarize
from engine.errors import ConfigError
from engine.spec import preset_spec
from engine.stream.reader import load as load_recording
from engine.sweep.grid import build_axes, cell_count, expand, parse_axis
from engine.sweep.heatmap import ABORTED, SURVIVED, heatmaps
from engine.sweep.report import load as load_report, render
from engine.sweep.rows import SUMMARY_COLUMNS, VOLATILE_COLUMNS, columns
from engine.sweep.store import SweepDir, SweepSpec

ROOT = Path(__file__).resolve().parents[1]
GRID = ["--grid", "num_cpu_blocks=128,512", "--grid", "policy=off,strict"]
BASE = ["--preset", "demo", "--max-steps", "300"]


def observatory(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def serial_sweep(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """A real 4-cell sweep (CPU blocks x policy) run one by one, recordings kept."""
    out = tmp_path_factory.mktemp("sweep") / "demo"
    result = observatory("sweep", *BASE, *GRID, "--serial", "--record-cells", "-o", str(out))
    return out, result


# ---------------------------------------------------------------------- the grid
def test_grid_values_take_their_field_types():
    base = preset_spec("demo")
    axes = build_axes(["n=2,4", "swap-space=0.5,1", "arrival_rate=none,2.5",
                       "policy=off,watermark:0.3"], seeds=2, base=base)
    assert [a.key for a in axes] == ["n", "swap_space_gib", "arrival_rate", "policy", "seed"]
    assert axes[0].values == (2, 4) and axes[1].values == (0.5, 1.0)
    assert axes[2].values == (None, 2.5) and axes[4].values == (0, 1)
    cells = expand(base, axes)
    assert len(cells) == cell_count(axes) == 32
    assert len({c.key for c in cells}) == 32  # every cell is a different spec
    last = cells[-1]
    assert (last.spec.n, last.spec.swap_space_gib, last.spec.arrival_rate, last.spec.policy,
            last.spec.seed) == (4, 1.0, 2.5, "watermark:0.3", 1)
    reserve = expand(base, build_axes(["policy=off,reserve"], seeds=None, base=base))
    assert [c.spec.policy for c in reserve] == ["off", "reserve"]
    # the key is the spec's: same spec, same key, whatever the grid looked like
    again = expand(base, build_axes(["policy=watermark:0.3", "n=4", "seed=1", "arrival_rate=2.5",
                                     "swap_space=1"], seeds=None, base=base))
    assert again[0].key == last.key


BAD_GRIDS = [
    (["nope=1,2"], "not a RunSpec field"),
    (["n"], "malformed --grid"),
    (["n=2,,4"], "empty value"),
    (["n=two"], "--grid n=two must be an integer from 1 to"),
    (["seed=-1"], "--grid seed=-1 must be an integer from 0 to"),
    (["swap_space=nan"], "finite"),
    (["block_size=16,24"], "--grid block_size=24 must be one of 8, 16, 32"),
    (["n=2,2"], "given twice"),
    (["policy=watermark:0.5,watermark:0.50"], "given twice"),
    (["policy=fast"], "unknown policy"),
    (["policy=off,reserve:1"], "policy 'reserve' takes no level"),
    (["policy=reserve,RESERVE"], "given twice"),
    (["preset=demo,seed-5578"], "run one sweep per preset"),
    (["n=2", "n=4"], "given twice"),
    (["num_cpu_blocks=1,2", "swap_space=1,2"], "not both"),
]


@pytest.mark.parametrize("grid, message", BAD_GRIDS, ids=[" ".join(g) for g, _ in BAD_GRIDS])
def test_bad_grids_are_one_line_errors(grid, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")) as caught:
        build_axes(grid, None, preset_spec("demo"))
    assert "\n" not in str(caught.value)


def test_a_cell_our_checks_reject_is_a_usage_error_naming_the_cell():
    axes = [parse_axis("n=2,100")]  # the demo preset runs at most 64 sequences
    with pytest.raises(ConfigError, match=r"cell n=100: --n 100 is more than --max-num-seqs 64"):
        expand(preset_spec("demo"), axes)


def test_sweep_spec_round_trips_through_toml():
    base = preset_spec("demo", toggles=[(50, "strict")], arrival_rate=3.0, max_steps=20)
    spec = SweepSpec(base=base, axes=build_axes(["n=1,2", "policy=off,watermark:0.5"], 2, base),
                     record_cells=True, max_cells=7)
    back = SweepSpec.from_toml(spec.to_toml(), "sweep.toml")
    assert back == spec
    assert [c.key for c in expand(back.base, back.axes)] == \
        [c.key for c in expand(base, spec.axes)]


# ---------------------------------------------------------------------- refusals
def test_max_cells_refusal_says_the_count(tmp_path):
    out = tmp_path / "big"
    result = observatory("sweep", "--preset", "demo", "--grid", "n=1,2,3,4,5", "--grid",
                         "max_tokens=8,16,32", "--max-cells", "10", "-o", str(out))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        "observatory: error: the grid has 15 cells (5 n x 3 max_tokens), more than "
        "--max-cells 10: shrink the grid or raise --max-cells")
    assert not out.exists()  # nothing written, nothing started
    default = observatory("sweep", "--preset", "demo", "--grid",
                          "n=" + ",".join(str(i) for i in range(1, 12)), "--grid",
                          "max_tokens=" + ",".join(str(i) for i in range(8, 18)), "--grid",
                          "seed=" + ",".join(str(i) for i in range(10)), "-o", str(out))
    assert default.returncode == 2
    assert "the grid has 1,100 cells" in default.stderr and "--max-cells 1,000" in default.stderr


SWEEP_BAD = [
    (["sweep", *BASE, "--grid", "n=1,2"], "give -o DIR for a new sweep"),
    (["sweep", *BASE, "-o", "{tmp}/x"], "needs at least one --grid"),
    (["sweep", *BASE, "--grid", "n=1,2", "-o", "{tmp}/x", "--record", "r.jsonl"],
     "--record-cells"),
    (["sweep", *BASE, "--backend", "gpu", "--grid", "n=1,2", "-o", "{tmp}/x"], "sim backend"),
    (["sweep", "--preset", "demo", "--num-cpu-blocks", "64", "--grid", "swap_space=1,2", "-o",
      "{tmp}/x"], "drop one of them"),
    (["sweep", *BASE, "--grid", "n=1,2", "-o", "{tmp}/x", "--workers", "0"],
     "--workers must be at least 1"),
    (["sweep", *BASE, "--grid", "n=1,2", "-o", "{tmp}/x", "--serial", "--address", "auto"],
     "--serial runs cells in this process"),
    (["sweep", *BASE, "--grid", "n=1,2", "-o", "{tmp}/x", "--address", "127.0.0.1:1"],
     "cannot reach the Ray cluster at 127.0.0.1:1"),
    (["sweep", *BASE, "--grid", "n=1,2", "-o", "{tmp}/x", "--address", "nohost"],
     "use HOST:PORT"),
    (["sweep", "--resume", "{tmp}"], "no sweep.toml here"),
    (["sweep", "--resume", "{tmp}", "--grid", "n=1,2"], "drop --grid"),
    (["sweep", "--resume", "{tmp}", "--n", "2"], "drop --n"),
    (["sweep-report", "{tmp}/missing"], "no sweep.toml here"),
    (["sweep-browse", "{tmp}/missing"], "no sweep.toml here"),
    (["sweep", *BASE, "--grid", "n=1,2", "--seeds", "0", "-o", "{tmp}/x"],
     "--seeds must be from 1 to 1,000,000, got 0"),
]


@pytest.mark.parametrize("args, message", SWEEP_BAD, ids=[" ".join(a) for a, _ in SWEEP_BAD])
def test_bad_sweep_usage_is_one_line_and_exit_2(tmp_path, args, message):
    result = observatory(*(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0] and message in lines[0], result.stderr
    assert not (tmp_path / "x").exists()


def test_an_existing_sweep_is_not_overwritten(serial_sweep):
    out, _ = serial_sweep
    before = (out / "results.jsonl").read_bytes()
    result = observatory("sweep", *BASE, *GRID, "--serial", "-o", str(out))
    assert result.returncode == 2 and "already holds a sweep" in result.stderr
    assert (out / "results.jsonl").read_bytes() == before


# ---------------------------------------------------------------------- a real sweep
def test_serial_sweep_rows_are_the_cells_summaries(serial_sweep):
    out, result = serial_sweep
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("sweep: 4 cells (4 ok, 0 failed)")
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["cell"] for r in rows] == [0, 1, 2, 3]
    assert list(rows[0]) == columns(["num_cpu_blocks", "policy"])
    with open(out / "results.csv", newline="") as file:
        table = list(csv.DictReader(file))
    assert [int(r["cell"]) for r in table] == [0, 1, 2, 3]
    assert [r["key"] for r in table] == [r["key"] for r in rows]
    for row in rows:
        assert row["status"] == "ok" and row["node"] is None and row["attempts"] == 1
        assert row["engine_start_s"] > 0
        # the kept recording summarizes to the row: one definition of every number
        recording = load_recording(out / row["recording"])
        summary = msgspec.to_builtins(summarize(recording.all_items()))
        assert summary.pop("time_axis") == "sim" and summary.pop("exec_seconds") > 0  # not rows
        assert summary.pop("trace") is None  # a trace is a grid column, not a row's struct
        assert {k: row[k] for k in SUMMARY_COLUMNS} == summary
        assert recording.header.spec["num_cpu_blocks"] == row["num_cpu_blocks"]
        assert recording.header.spec["policy"] == row["policy"]
    assert rows[0]["import_s"] > 0 and all(r["import_s"] == 0 for r in rows[1:])
    # the shape the issue is about: off aborts where strict survives
    by = {(r["num_cpu_blocks"], r["policy"]): r for r in rows}
    assert by[(512, "off")]["aborted"] and not by[(512, "strict")]["aborted"]
    assert by[(512, "strict")]["prefill_blocked_steps"] > 0


def test_the_heatmap_agrees_with_the_rows(serial_sweep):
    out, _ = serial_sweep
    report = load_report(str(out))
    (heat,) = heatmaps(report.spec.axes, report.rows)
    assert (heat.x_key, heat.y_key) == ("num_cpu_blocks", "policy")
    assert heat.x_values == ["128", "512"] and heat.y_values == ["off", "strict"]
    for row in report.rows:
        cell = heat.cells[heat.y_values.index(row["policy"])][
            heat.x_values.index(str(row["num_cpu_blocks"]))]
        if row["aborted"]:
            assert cell.state == ABORTED and cell.text == f"✗ {row['abort_step']}"
        else:
            assert cell.state == SURVIVED and cell.text == "✓"


def test_one_heatmap_per_policy_when_two_other_keys_vary():
    base = preset_spec("demo")
    axes = build_axes(["num_cpu_blocks=64,128,256", "n=2,4", "policy=off,strict"], None, base)
    rows = [{"cell": c.index, "status": "ok", "aborted": c.params["num_cpu_blocks"] < 256,
             "abort_step": c.index} for c in expand(base, axes)]
    maps = heatmaps(axes, rows)
    assert [m.title for m in maps] == ["abort step under policy off",
                                       "abort step under policy strict"]
    assert all((m.x_key, m.y_key) == ("num_cpu_blocks", "n") for m in maps)
    assert [[c.state for c in line] for line in maps[0].cells] == [[ABORTED, ABORTED,
                                                                    SURVIVED]] * 2


def test_report_formats(serial_sweep):
    out, _ = serial_sweep
    report = load_report(str(out))
    as_json = json.loads(render(report, "json"))
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert as_json == rows
    assert render(report, "csv") == (out / "results.csv").read_text()
    text = render(report, "table", color=False)
    assert "abort step (x: num_cpu_blocks, y: policy)" in text
    assert "\x1b[" not in text and "4 of 4 cells have rows" in text
    markdown = render(report, "markdown")
    assert "| num_cpu_blocks | policy | status |" in markdown
    assert "| policy \\ num_cpu_blocks | 128 | 512 |" in markdown
    via_cli = observatory("sweep-report", str(out), "--format", "markdown")
    assert via_cli.returncode == 0 and via_cli.stdout == markdown


def test_resume_with_nothing_left_runs_nothing(serial_sweep):
    out, _ = serial_sweep
    before = (out / "results.jsonl").read_bytes()
    result = observatory("sweep", "--resume", str(out), "--serial", "--no-report")
    assert result.returncode == 0, result.stderr
    assert "0 cells (0 ok, 0 failed), 4 already done" in result.stderr
    assert (out / "results.jsonl").read_bytes() == before


def test_volatile_columns_are_only_timings_and_placement():
    assert VOLATILE_COLUMNS == {"wall_seconds", "engine_start_s", "import_s", "cell_s",
                                "cpu_s", "attempts", "node"}
    grid_keys = [f for f in preset_spec("demo").__struct_fields__]
    assert len(set(columns(grid_keys))) == len(columns(grid_keys))  # no name collides


def test_sweep_dir_is_locked_while_a_sweep_writes(tmp_path):
    first, second = SweepDir(tmp_path), SweepDir(tmp_path)
    first.lock()
    try:
        with pytest.raises(ConfigError, match="another sweep is writing"):
            second.lock()
    finally:
        first.close()
    second.lock()
    second.close()


def test_a_torn_last_line_is_skipped_and_the_next_row_starts_clean(tmp_path):
    store = SweepDir(tmp_path)
    store.append_row({"cell": 0, "key": "a", "status": "ok"})
    store.close()
    with open(store.jsonl_path, "ab") as file:
        file.write(b'{"cell": 1, "key": "b", "sta')  # the driver was killed mid-write
    rows, bad = store.read_rows()
    assert list(rows) == ["a"] and bad == 1
    store.append_row({"cell": 1, "key": "b", "status": "ok"})
    store.close()
    rows, bad = store.read_rows()
    assert list(rows) == ["a", "b"] and bad == 1


# ---------------------------------------------------------------------- the browser
async def test_browser_sorts_and_replays_a_kept_cell(serial_sweep):
    from textual.widgets import DataTable

    from tui.cli.sweep_browse import browse_app
    from tui.sweeps.sweep_screen import CellReplayScreen, SweepScreen

    out, _ = serial_sweep
    app = browse_app(str(out))
    async with app.run_test(size=(180, 40)) as pilot:
        screen: SweepScreen = app.main_screen  # type: ignore[assignment]
        table = screen.query_one(DataTable)
        assert table.row_count == 4
        column = screen.column_keys.index("abort_step")
        await pilot.press(*["right"] * column)
        await pilot.press("s")
        steps = [r["abort_step"] for r in screen.ordered_rows()]
        present = [s for s in steps if s is not None]
        assert present == sorted(present) and steps[-1] is None  # survivors sort last
        await pilot.press("s")
        steps = [r["abort_step"] for r in screen.ordered_rows()]
        present = [s for s in steps if s is not None]
        assert present == sorted(present, reverse=True) and steps[-1] is None
        top = screen.ordered_rows()[0]
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, CellReplayScreen)
        assert app.screen.view.steps[-1].step == top["steps"] - 1
        assert app.screen.view.abort is not None  # the top row aborted, so does its replay
        await pilot.press("q")
        await pilot.pause()
        assert app.screen is screen


# ---------------------------------------------------------------------- the shipped example
SHIPPED = ROOT / "sweeps" / "demo-cpu-blocks"


def test_the_shipped_report_is_the_report_of_the_shipped_rows(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")  # report.txt is what an 80-column terminal shows
    report = load_report(str(SHIPPED))
    assert len(report.rows) == report.total_cells == 30 and report.bad_lines == 0
    assert render(report, "markdown") == (SHIPPED / "report.md").read_text()
    assert render(report, "table", color=False) == (SHIPPED / "report.txt").read_text()
    # the boundary docs/guides/sweeps.md shows: off aborts where strict and watermark survive
    (heat,) = heatmaps(report.spec.axes, report.rows)
    states = {policy: [c.state for c in line] for policy, line in zip(heat.y_values, heat.cells)}
    first_ok = {p: s.index(SURVIVED) for p, s in states.items()}
    assert first_ok["off"] > first_ok["strict"] == first_ok["watermark:0.5"]
    assert all(s[first_ok[p]:] == [SURVIVED] * (len(s) - first_ok[p]) for p, s in states.items())


def test_rows_that_match_no_cell_are_left_out(tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(SHIPPED, copy)
    rows = (copy / "results.jsonl").read_text().splitlines()
    stale = json.loads(rows[0]) | {"key": "0" * 16}  # e.g. a row written under another spec
    (copy / "results.jsonl").write_text("\n".join([*rows, json.dumps(stale)]) + "\n")
    report = load_report(str(copy))
    assert len(report.rows) == 30 and report.stale_rows == 1
    assert "1 row(s) matching no cell of sweep.toml left out" in render(report, "markdown")


def test_a_shipped_cell_runs_again_to_its_row():
    """The example is a regression test too: re-running one of its cells (the cheap one, off
    at 512 CPU blocks, aborts in about a second) gives its row back, found by its key."""
    from engine.sweep.cell import decode_outcome, run_cell
    from engine.sweep.rows import deterministic_part, make_row

    report = load_report(str(SHIPPED))
    cells = expand(report.spec.base, report.spec.axes)
    cell = next(c for c in cells if c.params == {"num_cpu_blocks": 512, "policy": "off"})
    shipped = next(r for r in report.rows if r["key"] == cell.key)
    outcome = decode_outcome(run_cell(msgspec.json.encode(cell.spec), False))
    again = make_row(cell, outcome, None)
    # Columns added since the example was made (the committed demand) are not in its rows: every
    # column it has must come back equal, and the new ones must be there.
    rerun = deterministic_part(again)
    old = deterministic_part(shipped)
    assert {k: rerun[k] for k in old} == old
    assert set(rerun) - set(old) <= {"peak_committed_blocks", "capacity_blocks",
                                      "overcommitted_at_step"}
    assert rerun["capacity_blocks"] == 512 + 512  # the demo's GPU blocks + this cell's CPU
    assert again["aborted"] and again["abort_step"] == 211


def test_seeds_fold_into_one_heatmap_cell():
    from engine.sweep.heatmap import FAILED, PARTIAL

    base = preset_spec("demo")
    axes = build_axes(["num_cpu_blocks=64,128", "policy=off,strict"], 2, base)
    cells = expand(base, axes)
    aborted = {(64, "off"): [True, True], (128, "off"): [True, False],
               (64, "strict"): [False, False]}
    rows = []
    for cell in cells:
        where = (cell.params["num_cpu_blocks"], cell.params["policy"])
        if where == (128, "strict"):
            rows.append({"cell": cell.index, "status": "failed"})
            continue
        hit = aborted[where][cell.params["seed"]]
        rows.append({"cell": cell.index, "status": "ok", "aborted": hit,
                     "abort_step": 100 + cell.index if hit else None})
    (heat,) = heatmaps(axes, rows)
    assert [[c.state for c in line] for line in heat.cells] == [[ABORTED, PARTIAL],
                                                                [SURVIVED, FAILED]]
    assert heat.cells[0][1].text == "1/2"
    assert heat.cells[0][0].text == "✗ 100"  # median_low of the seeds' abort steps (100, 101)


def test_retry_failed_reruns_only_the_failed_cells(tmp_path):
    out = tmp_path / "out"
    first = observatory("sweep", "--preset", "demo", "--max-steps", "20", "--grid",
                        "prompt_len=64,5000", "--serial", "--no-report", "-o", str(out))
    assert first.returncode == 1, first.stderr  # a cell failed
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["ok", "failed"]
    again = observatory("sweep", "--resume", str(out), "--retry-failed", "--serial",
                        "--no-report")
    assert again.returncode == 1 and "1 already done" in again.stderr
    lines = (out / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["prompt_len"] for line in lines] == [64, 5000, 5000]
    with open(out / "results.csv", newline="") as file:
        assert [r["prompt_len"] for r in csv.DictReader(file)] == ["64", "5000"]
