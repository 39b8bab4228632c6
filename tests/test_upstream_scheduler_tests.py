"""vLLM's own scheduler tests (tests/core/test_scheduler.py and test_chunked_prefill_scheduler.py
of the installed release's sdist) with the observatory attached to every Scheduler they build.

Under `off` the hooks must be invisible: every test ends as it does on bare vLLM. Under `reserve`
exactly the tests docs/versions.md lists change outcome, each for the reason given
there. The sdist is downloaded once (pinned URL and sha256) into a cache outside the clone
(engine.adapters.v0.upstream_tests.sdist_cache); without network the tests skip.
"""

from __future__ import annotations

import pytest

from engine.adapters.versions import installed_version

pytestmark = pytest.mark.every_vllm

CHUNKED = "tests/core/test_chunked_prefill_scheduler.py::"

# release -> the tests `reserve` changes (all from passed to failed); docs/versions.md says why
RESERVE_CHANGES: dict[str, set[str]] = {
    "0.5.0.post1": {CHUNKED + "test_running_prefill_prioritized_over_swap"},
    "0.6.3.post1": {CHUNKED + "test_running_prefill_prioritized_over_swap"},
    "0.7.3": set(),  # the test is gone (best_of left the scheduler)
    "0.10.2": set(),
}


@pytest.fixture(scope="module")
def upstream():
    if installed_version() not in ("0.5.0.post1", "0.6.3.post1", "0.7.3", "0.10.2"):
        pytest.skip("vLLM's V0 scheduler tests need a V0 release of vLLM")
    from engine.adapters.v0 import upstream_tests

    try:
        upstream_tests.tests_tree()
    except upstream_tests.SdistUnavailable as exc:
        pytest.skip(str(exc))
    return upstream_tests


@pytest.fixture(scope="module")
def bare(upstream):
    return upstream.run(upstream.BARE)


def test_off_changes_no_outcome_of_vllms_own_tests(upstream, bare):
    off = upstream.run("off")
    assert len(bare) >= 30  # the two files were found and collected
    assert upstream.changed(bare, off) == {}


def test_reserve_changes_only_the_listed_tests(upstream, bare):
    reserve = upstream.run("reserve")
    expected = RESERVE_CHANGES[installed_version()]
    assert upstream.changed(bare, reserve) == {name: ("passed", "failed") for name in expected}
