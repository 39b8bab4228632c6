"""docs/performance.md names, for every figure, the bench command that makes it, and
`python bench/all.py` can regenerate every generated block (issue #30, "Performance").

No vLLM here (the docs venv runs it too): bench/all.py is read as a module, never run; what
the page says is checked against its FIGURES table and the files under bench/.
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


def test_every_generated_block_is_a_figure_of_bench_all():
    module = bench_all()
    on_page = module.blocks(PAGE.read_text())
    assert set(on_page) == {figure.name for figure in module.FIGURES}


def test_every_generated_block_names_its_command_and_the_script_exists():
    module = bench_all()
    on_page = module.blocks(PAGE.read_text())
    for figure in module.FIGURES:
        body = on_page[figure.name]
        assert (ROOT / figure.script).is_file(), f"{figure.name}: no {figure.script}"
        assert f"`{figure.command()}`" in body or f"`{figure.command(True)}`" in body, (
            f"block {figure.name} does not name its command {figure.command()}")
        lines = re.search(r"```text\n(.*?)\n```", body, re.S)
        assert lines, f"block {figure.name} has no bench output"
        keep = re.compile(figure.keep)
        for line in lines[1].splitlines():  # the bench printed it, so the filter keeps it
            assert keep.search(line), f"{figure.name}: {line!r} is not a line the bench prints"
        assert re.search(r"load average [\d.]+ before and [\d.]+ after", body)


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


def test_rewrite_replaces_only_the_blocks():
    module = bench_all()
    figure = module.FIGURES[0]
    page = (f"prose before\n{module.BEGIN.format(name=figure.name)}\nold\n"
            f"{module.END.format(name=figure.name)}\nprose after\n")
    block = module.render(figure, ["v1-thrash, 2,000 steps x 5 alternating pairs: ..."],
                          quick=False, load=(1.25, 2.0),
                          when=_dt.datetime(2026, 12, 5, 20, 0, tzinfo=_dt.timezone.utc),
                          where="2-core test")
    new = module.rewrite(page, {figure.name: block})
    assert new.startswith("prose before\n") and new.endswith("\nprose after\n")
    assert "old" not in new and "load average 1.2 before and 2.0 after" in new
    assert module.blocks(new)[figure.name].startswith(f"Command: `{figure.command()}`")
    assert module.rewrite(new, {}) == new  # nothing asked, nothing changed
