"""docs/performance.md shows, for every bench figure, the committed result the bench wrote
(bench/results/NAME.json, by `python bench/all.py`): the docs build renders each marker from its
result (docs/hooks/reference.py), so the page can only say what the data says (issue #37, "docs
that cannot go stale"). Every section that quotes a number names the command that makes it.

No vLLM here (the docs venv runs it too): bench/all.py is read as a module, never run; what
the page says is checked against its FIGURES table, the results and the files under bench/.
"""

from __future__ import annotations

import datetime as _dt
import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "performance.md"
BENCH_CMD = re.compile(r"\bpython3?(?:\.\d+)? (bench/[\w./-]+\.py)")


def bench_all():
    spec = importlib.util.spec_from_file_location("bench_all", ROOT / "bench" / "all.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_figure_of_bench_all_is_on_the_page_once():
    module = bench_all()
    assert sorted(module.markers(PAGE.read_text())) == sorted(f.name for f in module.FIGURES)


def test_every_figure_has_a_result_its_bench_printed():
    module = bench_all()
    for figure in module.FIGURES:
        result = module.read_result(figure.name)
        assert (ROOT / figure.script).is_file(), f"{figure.name}: no {figure.script}"
        assert result["name"] == figure.name and result["extra"] == figure.extra
        assert result["command"] == figure.command(result["quick"])
        assert not result["quick"], f"{figure.name}: a --quick smoke run is not a figure"
        keep = re.compile(figure.keep)
        assert result["lines"]
        for line in result["lines"]:  # the bench printed it, so the filter keeps it
            assert keep.search(line), f"{figure.name}: {line!r} is not a line the bench prints"
        rendered = module.render(result)
        assert f"`{figure.command()}`" in rendered
        assert re.search(r"load average [\d.]+ before and [\d.]+ after", rendered)


def test_the_results_hold_no_figure_the_page_does_not_show():
    module = bench_all()
    names = {f.name for f in module.FIGURES}
    assert {p.stem for p in (ROOT / "bench" / "results").glob("*.json")} == names


def test_every_section_with_figures_names_a_bench_command_that_exists():
    """Each `##`/`###` section that quotes a number names a command; every `bench/` script
    the page names exists."""
    text = PAGE.read_text()
    for script in BENCH_CMD.findall(text):
        assert (ROOT / script).is_file(), f"docs/performance.md names {script}, which is gone"
    sections = re.split(r"^#{2,3} ", text, flags=re.M)[1:]
    assert sections
    for section in sections:
        title = section.splitlines()[0]
        if re.search(r"\d", section.split("\n", 1)[1]):
            assert re.search(r"`[^`]*(?:python|pytest|observatory|pip|uv|\.ci/|vllm )[^`]*`",
                             section), f"section {title!r} quotes figures but names no command"


def test_a_result_round_trips_and_renders_its_header(tmp_path):
    module = bench_all()
    figure = module.FIGURES[0]
    result = module.result_of(figure, ["v1-thrash, 2,000 steps x 5 alternating pairs: ..."],
                              quick=False, load=(1.25, 2.0),
                              when=_dt.datetime(2026, 12, 5, 20, 0, tzinfo=_dt.timezone.utc),
                              where="2-core test")
    module.write_result(result, tmp_path)
    again = module.read_result(figure.name, tmp_path)
    assert again == result
    text = module.render(again)
    assert text.startswith(f"Command: `{figure.command()}`")
    assert "load average 1.2 before and 2.0 after" in text and "2026-12-05 20:00 UTC" in text
