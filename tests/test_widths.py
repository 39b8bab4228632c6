"""Every table the headless CLI prints fits an 80-column terminal (engine.widths), chosen by
columns rather than wrapped: `compare` of the README's own twelve recordings, `sweep-report`
of the shipped sweep, `summary` of every shipped recording. And `compare`'s plot: its legend
under the plot, each run drawn with the letter the legend shows, whole-step ticks.

`observatory versions` is not here: its table belongs to the releases work (issue #37 left it
to that change).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from shipped import ROOT, shipped_recordings

SEED = [p for p in shipped_recordings() if p.name.startswith("seed-5578-")]
V1 = [p for p in shipped_recordings() if p.name.startswith("v1-")]


def observatory(*argv: str, columns: int | None = 80) -> str:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    done = subprocess.run([sys.executable, "-m", "engine.cli", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


@pytest.mark.parametrize("paths", [SEED, V1], ids=["seed-5578", "v1"])
def test_compare_fits_80_columns_in_blocks_of_runs(paths):
    text = observatory("compare", *map(str, paths))
    assert widest(text) <= 80
    letters = "ABCDEFGHIJKL"[:len(paths)]
    for letter, path in zip(letters, paths):  # the key: each run's letter and file
        assert f"  {letter}  {path.name}" in text
    heads = [line.split() for line in text.splitlines() if re.fullmatch(r"[A-Z ]+", line)
             and line.strip()]
    assert [letter for head in heads for letter in head] == list(letters)  # every run, once
    assert len(heads) > 1  # twelve runs do not fit side by side in 80 columns
    # --wide: one block, however wide
    wide = observatory("compare", "--wide", "--no-plot", *map(str, paths))
    assert len([line for line in wide.splitlines() if re.fullmatch(r"[A-Z ]+", line)
                and line.strip()]) == 1


def test_compare_plot_legend_outside_marks_as_shown_whole_steps():
    text = observatory("compare", *map(str, SEED[:3]))
    plot = text[text.index("KV-cache usage"):]
    lines = plot.splitlines()
    bottom = max(k for k, line in enumerate(lines) if line.lstrip().startswith("└"))
    inside = "\n".join(lines[1:bottom])
    legend = lines[bottom + 3:]  # under the tick labels and the axis title
    assert all(name not in inside for name in ("fitted", "jsonl"))  # no legend in the plot
    for letter in "ABC":
        assert letter in inside  # each run drawn with its letter ...
        assert any(re.search(rf"(^|\s){letter} \S", line) for line in legend)  # ... as shown
    ticks = lines[bottom + 1].split()
    assert ticks and all(re.fullmatch(r"[\d,]+", t) for t in ticks)  # whole steps, no 399.8


def test_sweep_report_fits_80_columns():
    text = observatory("sweep-report", str(ROOT / "sweeps" / "demo-cpu-blocks"))
    assert widest(text) <= 80
    assert "…" not in text  # no header or cell cut short
    assert "(columns 1 of" in text  # too wide for one block: in blocks of columns
    for header in ("abort", "peak", "TTFT", "withheld"):
        assert header in text


@pytest.mark.parametrize("path", shipped_recordings(), ids=lambda p: p.name)
def test_summary_fits_80_columns(path):
    text = observatory("summary", str(path))
    assert widest(text) <= 80
    assert observatory("summary", str(path), columns=200).split() == text.split()
