"""`replay RUN --reference REF`: a real log's windows over the run's plots, as dots, labelled."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.analysis.logs.reference import Reference
from engine.cli import main
from engine.errors import ConfigError, RecordingError
from engine.stream.reader import load
from tui.launch import replay_app
from tui.replay.replay_screen import ReplayScreen
from tui.widgets.run_plot import RunPlot

ROOT = Path(__file__).resolve().parents[1]
OFF = ROOT / "recordings" / "seed-5578-off.jsonl.zst"
FIXTURE = ROOT / "tests" / "fixtures" / "logs" / "no-year-preemption.log"


@pytest.fixture
def reference(tmp_path) -> Path:
    out = tmp_path / "ref.jsonl.zst"
    assert main(["import-log", str(FIXTURE), "-o", str(out)]) == 0
    return out


def test_windows_land_on_the_first_step_at_their_time(reference) -> None:
    ref = Reference.load(str(reference))
    run = load(OFF)
    sim_s = run.column("sim_s")
    xs, ys = ref.series("swapped", sim_s, run.first_step, run.first_step, run.last_step)
    # the fixture's windows are 5 s apart from t=0 (no tqdm: time zero is the first window's
    # start), the run lasts 11.5 s: windows at 5 and 10 s are drawn
    assert list(ys) == [0.0, 61.0]
    for x, window in zip(xs, ref.windows):
        i = int(x) - run.first_step
        assert sim_s[i] >= window.t_s > (sim_s[i - 1] if i else -1)
    shifted = Reference.load(str(reference), offset_s=3.0)
    xs2, _ = shifted.series("swapped", sim_s, run.first_step, run.first_step, run.last_step)
    assert len(xs2) == 1 and xs2[0] > xs[0]  # 13 s is past the run's end


def test_not_a_reference_is_refused() -> None:
    with pytest.raises(RecordingError, match="import-log"):
        Reference.load(str(OFF))
    with pytest.raises(ConfigError, match="--reference"):
        replay_app([str(OFF), str(OFF)], reference=str(OFF))


async def test_replay_draws_the_real_log_as_labelled_dots(reference) -> None:
    app = replay_app([str(OFF)], autoplay=False, reference=str(reference))
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        screen: ReplayScreen = app.main_screen  # type: ignore[assignment]
        await pilot.press("end")
        await pilot.pause()
        plot = screen.query_one("#plot-queues", RunPlot)
        real = [line for line in plot._lines if line.marker != "braille"]
        assert {line.label for line in real} == {"run (real log)", "swap (real log)"}
        assert "swap (real log)" in plot.legend(200).plain
        kv = screen.query_one("#plot-kv", RunPlot)
        assert any("real log" in line.label and len(line.xs) for line in kv._lines)


def test_a_narrow_legend_folds_the_real_series_into_one_entry() -> None:
    """At 80 columns a plot is ~26 cells wide: "•GPU·real •CPU·real" cannot fit beside the
    run's own entries, so one "• real" entry says what the dots are, and nothing is cut."""
    import numpy as np

    from tui.widgets import theme
    from tui.widgets.run_plot import Line, legend_text

    xs = np.arange(3.0)
    lines = [Line("GPU", xs, xs, theme.GPU_KV), Line("CPU", xs, xs, theme.CPU_KV),
             Line("GPU (real log)", xs, xs, theme.GPU_KV, short="GPU·real", marker="•"),
             Line("CPU (real log)", xs, xs, theme.CPU_KV, short="CPU·real", marker="•")]
    wide = legend_text("KV cache %", "KV%", lines, [], 200, lambda _: (9, 9, 9)).plain
    assert "GPU (real log)" in wide and "CPU (real log)" in wide
    narrow = legend_text("KV cache %", "KV%", lines, [], 26, lambda _: (9, 9, 9))
    assert narrow.cell_len <= 26
    assert narrow.plain.split() == ["━GPU", "━CPU", "•real"]
