"""Make the docs' pictures (README.md shows two): Textual SVG screenshots of the shipped recordings.

The live look (live mid-run, the abort, the fix draining the swapped queue) is drawn by the
test harness (tests/screens_harness.py: the live screen's RunPanel fed a recording cut at a
step), the A/B replay by `observatory replay A B` itself, and the calibrated runs against the
seed's GPU log by `observatory replay RUN --reference REF`. Every picture is of a real run on the
sim backend: the recordings in recordings/.

Usage: python docs/screenshots.py   (writes docs/*.svg; `--v1` only the V1 pictures)
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from screens_harness import (LATE, OFF, TOGGLED, V1_TOGGLED, live_status,  # noqa: E402
                             panel_app, view_until)
from tui.launch import replay_app  # noqa: E402

SIZE = (160, 48)
RECORDINGS = ROOT / "recordings"
REAL = RECORDINGS / "reference" / "seed-5578-gpu.jsonl.zst"
FITTED_OFF = RECORDINGS / "seed-5578-fitted-off.jsonl.zst"
FITTED_STRICT = RECORDINGS / "seed-5578-fitted-strict.jsonl.zst"
FOOTER = "Everything stays on screen for inspection. R restarts the run, q quits."


async def shoot(app, name: str, keys: tuple[str, ...] = ()) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
        await pilot.pause(0.3)
        path = ROOT / "docs" / f"{name}.svg"
        app.save_screenshot(str(path))
        print(path.relative_to(ROOT))


async def main() -> None:
    mid = view_until(OFF, 700)
    await shoot(panel_app(mid, live_status(mid)), "live-mid-run")
    late = view_until(LATE)
    await shoot(panel_app(late, live_status(late, restart_policy="strict"),
                          banner_footer=FOOTER), "abort-fix-too-late")
    drain = view_until(TOGGLED, 1100)
    await shoot(panel_app(drain, live_status(drain)), "fix-draining-swapped")
    await shoot(replay_app([str(OFF), str(TOGGLED)]), "ab-replay",
                ("shift+right",) * 4)
    await shoot(replay_app([str(FITTED_OFF)], autoplay=False, reference=str(REAL)),
                "fitted-off-vs-real", ("end",))
    # strict at the step where off aborted (46 s): the real log's windows all in view
    await shoot(replay_app([str(FITTED_STRICT)], autoplay=False, reference=str(REAL)),
                "fitted-strict-vs-real", ("g", *"2606", "enter"))
    await v1_shots()


async def v1_shots() -> None:
    """vLLM 0.33's V1 engine: #25538's thrash, and whole-context switched on at step 3,000."""
    fixed = view_until(V1_TOGGLED, 3600)
    await shoot(panel_app(fixed, live_status(fixed)), "v1-thrash-fix-mid-run")


if __name__ == "__main__":
    asyncio.run(v1_shots() if "--v1" in sys.argv[1:] else main())
