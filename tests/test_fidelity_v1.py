"""Fidelity on V1 (issue 18, item 8): the installed release's own
`tests/v1/core/test_scheduler.py`, with the observatory attached (`engine.attach`) to every
Scheduler it builds under `off`, gives every test the outcome it has bare
(tests/fidelity_v1/bare-<version>.txt). vLLM's file is not ours: it comes from the release's
sdist (pinned by URL and sha256), cached outside the clone (tests/fidelity_v1/vllm_tests.py);
where it is neither cached nor downloadable the test skips and says so."""

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
    bare = fidelity.read_bare()
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
