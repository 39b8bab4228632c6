"""The README's and the guides' figures from the committed data (docs/facts.py) say what the
data says: a page whose `<!--fact:NAME-->` value differs from what FACTS computes from the
shipped recordings and sweep fails here (fix: `python docs/facts.py` rewrites it). The docs
build renders the same values (docs/hooks/reference.py). No vLLM: recordings are read."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def facts():
    spec = importlib.util.spec_from_file_location("docs_facts", ROOT / "docs" / "facts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FACTS = facts()


@pytest.mark.parametrize("page", FACTS.PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_fact_on_a_page_is_what_the_data_says(page: Path):
    text = page.read_text()
    for match in FACTS.FACT.finditer(text):
        name = match["name"]
        assert name in FACTS.FACTS, f"{page.name}: no fact {name!r} in docs/facts.py"
        assert match["value"] == FACTS.FACTS[name](), (
            f"{page.name} says {name} is {match['value']!r}, the data "
            f"{FACTS.FACTS[name]()!r}: run python docs/facts.py")


def test_the_readme_quotes_the_seed_abort_and_every_fact_is_used():
    readme = (ROOT / "README.md").read_text()
    assert "<!--fact:seed-off.abort_step-->805<!--/fact-->" in readme
    used = {m["name"] for page in FACTS.PAGES for m in FACTS.FACT.finditer(page.read_text())}
    assert used <= set(FACTS.FACTS)
    unused = set(FACTS.FACTS) - used
    assert not unused, f"facts no page quotes: {sorted(unused)}"


def test_a_stale_value_is_rewritten_and_the_site_shows_no_marker():
    stale = "aborts at step <!--fact:seed-off.abort_step-->806<!--/fact-->."
    assert FACTS.render(stale) == "aborts at step <!--fact:seed-off.abort_step-->805<!--/fact-->."
    assert FACTS.render(stale, keep_markers=False) == "aborts at step 805."
