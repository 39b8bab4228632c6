"""Snapshots at 80x24, 120x40, 160x48 and 220x60: live mid-run, the abort, the fix that came too
late, and the A/B replay; plus the replay screen; and vLLM's V1 engine (0.33) at 80x24 and
160x48: #25538's thrash live, and the fix switched on in its middle.

All are made from the shipped recordings, so they are deterministic. The live look is drawn by
tests/screens_harness.py (RunPanel fed a recording cut at a step, with a live status: running,
recording on, a fixed steps/s), so it does not depend on how the live screen drives the engine;
replay shows no wall-clock values, and nothing blinks.

Update after an intended change: pytest tests/test_tui_snapshots.py --snapshot-update
"""

from __future__ import annotations

import pytest

from screens_harness import (LATE, OFF, SIZES, TOGGLED, V1_OFF, V1_TOGGLED, live_status,
                             panel_app, view_until)
from tui.launch import replay_app

SIZE_IDS = [f"{w}x{h}" for w, h in SIZES]
BANNER_FOOTER = "Everything stays on screen for inspection. R restarts the run, q quits."


async def settle(pilot) -> None:
    await pilot.pause()
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_live_mid_run(snap_compare, size):
    view = view_until(OFF, 700)
    app = panel_app(view, live_status(view))
    assert snap_compare(app, terminal_size=size, run_before=settle)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_live_abort(snap_compare, size):
    view = view_until(OFF)
    app = panel_app(view, live_status(view, restart_policy="off"),
                    banner_footer=BANNER_FOOTER)
    assert snap_compare(app, terminal_size=size, run_before=settle)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_ab_replay(snap_compare, size):
    app = replay_app([str(OFF), str(TOGGLED)])
    assert snap_compare(app, terminal_size=size, run_before=settle)


def test_fix_came_too_late(snap_compare):
    view = view_until(LATE)
    app = panel_app(view, live_status(view, restart_policy="strict"),
                    banner_footer=BANNER_FOOTER)
    assert snap_compare(app, terminal_size=(160, 48), run_before=settle)


def test_fix_draining_the_swapped_queue(snap_compare):
    view = view_until(TOGGLED, 1100)
    app = panel_app(view, live_status(view))
    assert snap_compare(app, terminal_size=(160, 48), run_before=settle)


def test_replay_screen(snap_compare):
    app = replay_app([str(TOGGLED)], autoplay=False)

    async def run_before(pilot) -> None:
        await pilot.pause()
        pilot.app.main_screen.seek(640)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(160, 50), run_before=run_before)


def test_replay_at_the_abort(snap_compare):
    app = replay_app([str(OFF)], autoplay=False)
    assert snap_compare(app, terminal_size=(160, 50), press=["end"])


V1_SIZES = [(80, 24), (160, 48)]
V1_SIZE_IDS = [f"{w}x{h}" for w, h in V1_SIZES]


@pytest.mark.parametrize("size", V1_SIZES, ids=V1_SIZE_IDS)
def test_v1_live_mid_thrash(snap_compare, size):
    """Request 12 preempted for the 20th time (step 2991): V1's words, its plots, the tax."""
    view = view_until(V1_OFF, 2991)
    app = panel_app(view, live_status(view))
    assert snap_compare(app, terminal_size=size, run_before=settle)


@pytest.mark.parametrize("size", V1_SIZES, ids=V1_SIZE_IDS)
def test_v1_fix_switched_on_mid_thrash(snap_compare, size):
    """whole-context from step 3000: the marker, the recompute share falling to 0."""
    view = view_until(V1_TOGGLED, 3600)
    app = panel_app(view, live_status(view))
    assert snap_compare(app, terminal_size=size, run_before=settle)
