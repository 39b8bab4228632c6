"""Fidelity on V1 (issue 18, item 8; issue 27, item 5): the installed release's own
`tests/v1/core/test_scheduler.py`, with the observatory attached (`engine.attach`) to every
Scheduler it builds under `off`, gives every test the outcome it has bare
(tests/fidelity_v1/bare-<version>.txt, one per release). vLLM's file is not ours: it comes from
that release's sdist, pinned by URL and sha256 and cached outside the clone
(tests/fidelity_v1/vllm_tests.py); where it is neither cached nor downloadable the test skips
and says so. A run in which vLLM's file ran no test (collection errors, missing test
dependencies) fails (run.NothingRan), never passes as "0 changed"."""

from __future__ import annotations

import re

import pytest

from v1_required import needs_v1

pytestmark = needs_v1


def test_vllms_scheduler_tests_keep_their_outcomes_with_the_observatory_attached():
    from tests.fidelity_v1 import run as fidelity
    from tests.fidelity_v1.vllm_tests import Unavailable

    try:
        observed, summary = fidelity.run("off")
    except Unavailable as exc:
        pytest.skip(str(exc))
    assert fidelity.BARE.exists(), f"no bare outcomes for this release: {fidelity.BARE.name}"
    bare = fidelity.read_bare()
    print(fidelity.tally_line(observed, bare))  # tests run, passed, failing bare too
    assert set(observed) == set(bare)
    changed = {name: (bare[name], outcome) for name, (outcome, _) in observed.items()
               if outcome != bare[name]}
    assert not changed, changed
    attached = re.match(r"observatory fidelity: attached to (\d+) of (\d+) schedulers "
                        r"\(policy off\), a hook failed in (\d+) tests", summary)
    assert attached, summary
    # every scheduler attached, and a run that proves something: vLLM's file ran (a collection
    # error or a missing test dependency is one `error` case, not a bare test id) and most of
    # it passed bare (0.33.0: 215 of 281; 0.18.0: 65 of 94)
    assert int(attached.group(1)) == int(attached.group(2)) > 0  # 0.18.0: 69 of 69
    assert attached.group(3) == "0"
    passed = sum(outcome == "passed" for outcome in bare.values())
    assert passed >= len(bare) // 2 and passed > 50, (passed, len(bare))


def test_a_run_of_vllms_tests_in_which_no_test_ran_fails():
    """A -k that selects nothing stands for every way vLLM's file can run no test (pytest
    exits 5; a collection error exits 2): the run raises instead of reporting 0 changes."""
    from tests.fidelity_v1 import run as fidelity
    from tests.fidelity_v1.vllm_tests import Unavailable

    try:
        fidelity.tests_root()
    except Unavailable as exc:
        pytest.skip(str(exc))
    with pytest.raises(fidelity.NothingRan, match="did not run"):
        fidelity.run("off", k="observatory_selects_no_test_of_vllm")
