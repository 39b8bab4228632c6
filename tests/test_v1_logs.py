"""V1 logs against V1 runs (issue 18, item 7), in the vllm033 venv: a V1 run's own stats lines,
computed as vLLM 0.33's LoggingStatLogger computes them and printed in its format, import back to
the same numbers, and a V1 log overlays a V1 run's replay (`--reference`): running and waiting
as dots, no swap queue."""

from __future__ import annotations

import subprocess
import sys

import pytest

from v1_required import needs_v1, require_hash_seed

pytestmark = needs_v1
require_hash_seed()

from engine.analysis.logs.importer import import_log  # noqa: E402
from engine.analysis.logs.reference import Reference  # noqa: E402
from engine.analysis.logs.v1windows import stats_log, v1_sim_windows  # noqa: E402
from engine.cli import main  # noqa: E402
from engine.stream.reader import load  # noqa: E402

FIELDS = ("prompt_tps", "gen_tps", "running", "waiting", "gpu_pct", "preemptions")


@pytest.fixture(scope="module")
def v1_run(tmp_path_factory):
    """A recorded v1-thrash run long enough for three 10-s windows, and its stats log."""
    tmp = tmp_path_factory.mktemp("v1logs")
    out = tmp / "run.jsonl.zst"
    # in a process of its own: a sim engine settles vLLM's platform (CPU) for its process, and
    # other V1 tests in this one (the gpu dry run) must still see the machine's own
    subprocess.run([sys.executable, "-m", "engine.cli", "run", "--preset", "v1-thrash",
                    "--policy", "off", "--max-steps", "5000", "--record", str(out)],
                   check=True, capture_output=True, timeout=600)
    run = load(out)
    windows = v1_sim_windows(run.steps)
    log = tmp / "v1.log"
    log.write_text(stats_log(windows))
    return out, run, windows, log


def test_a_v1_runs_stats_lines_import_back_to_its_numbers(v1_run) -> None:
    _, run, windows, log = v1_run
    assert len(windows) >= 3
    assert any(w.preemptions for w in windows)  # the thrash shows in the windows
    imported = import_log(log.read_bytes(), "v1.log")
    assert imported.header.engine == "v1"
    assert [[getattr(w, f) for f in FIELDS] for w in imported.windows] == \
        [[getattr(w, f) for f in FIELDS] for w in windows]
    # the log's stamps have whole seconds: its windows land within a second of the run's
    for real, sim in zip(imported.windows, windows):
        assert abs(real.t_s - sim.t_s) <= 1.0


async def test_a_v1_log_overlays_a_v1_replay_as_running_and_waiting_dots(v1_run, tmp_path):
    from tui.launch import replay_app
    from tui.replay.replay_screen import ReplayScreen
    from tui.widgets.run_plot import RunPlot

    out, run, _, log = v1_run
    ref = tmp_path / "v1.reference.jsonl.zst"
    assert main(["import-log", str(log), "-o", str(ref)]) == 0
    reference = Reference.load(str(ref))
    assert reference.kind.name == "v1" and not reference.has("swapped") and reference.has("waiting")
    xs, ys = reference.series("waiting", run.column("sim_s"), run.first_step, run.first_step,
                              run.last_step)
    assert len(xs) >= 2 and list(ys) == [w.waiting for w in reference.windows][:len(ys)]
    app = replay_app([str(out)], autoplay=False, reference=str(ref))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        screen: ReplayScreen = app.main_screen  # type: ignore[assignment]
        await pilot.press("end")
        await pilot.pause()
        plot = screen.query_one("#plot-queues", RunPlot)
        real = {line.label: len(line.xs) for line in plot._lines if "real log" in line.label}
        assert set(real) == {"run (real log)", "wait (real log)"} and all(real.values())
        kv = screen.query_one("#plot-kv", RunPlot)
        assert [line.label for line in kv._lines if "real log" in line.label] == \
            ["GPU (real log)"]
