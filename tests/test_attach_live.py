"""`observatory live --connect` on `observatory exec --serve` (issue #19), headless with Pilot:
a script builds two engines in one process; the screen opens on the newest, `e` lists both
and switches to the other, `f` switches that engine's policy, and the change lands in its
recording with the screen's remote source. Real vLLM (V0), the sim executor, real sockets."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.adapters.versions import installed_version, release_for

_release = release_for(installed_version())
pytestmark = pytest.mark.skipif(_release is None or _release.engine != "v0",
                                reason="needs a V0 vLLM (0.5.0.post1-0.10.2)")

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "fixtures" / "attach" / "two_engines.py"
MODEL = ROOT / "engine" / "adapters" / "models" / "opt-125m"
TIMEOUT_S = 180.0


async def wait_for(pilot, condition, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


async def test_live_lists_the_engines_switches_and_steers_one(tmp_path):
    from engine.stream.reader import load
    from engine.stream.records import PolicyChanged
    from tui.launch import live_app

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "exec", "--sim", "--record", str(tmp_path),
         "--serve", "127.0.0.1:0", "--", sys.executable, str(SCRIPT), str(MODEL)],
        env=env, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        token = address = None
        for line in proc.stderr:
            if line.startswith("observatory exec: token "):
                token = line.split()[-1]
            if line.startswith("observatory exec: serving on "):
                address = line.split()[4].rstrip(";")
                break
        for line in proc.stdout:
            if line.strip() == "READY":  # both engines built, announced, one batch each
                break
        app = live_app(None, connect=(address, token))
        async with app.run_test(size=(160, 50)) as pilot:
            screen = app.main_screen

            def watching() -> str:
                header = screen.view.header
                return (header.engine_config.get("attached", {}).get("name", "")
                        if header is not None else "")

            await wait_for(pilot, lambda: watching().endswith("/1"), "the newest engine")
            await wait_for(pilot, lambda: len(screen.view.steps) > 0, "its steps so far")
            await pilot.press("e")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "EnginePicker",
                           "the engine list")
            await pilot.press("enter")  # the first listed: the oldest, engine 0
            await wait_for(pilot, lambda: watching().endswith("/0"), "the other engine")
            await wait_for(pilot, lambda: len(screen.view.steps) > 0, "its steps so far")
            await pilot.press("f")  # off -> the next policy, sent to engine 0
            wanted = screen.pending_policy
            assert wanted and wanted != "off"
            proc.stdin.write("go\n")
            proc.stdin.flush()
            await wait_for(pilot, lambda: screen.view.policy_changes, "the policy change")
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    recordings = sorted(tmp_path.glob("*.jsonl.zst"), key=lambda p: p.name)
    assert [p.name.rsplit("-", 1)[1] for p in recordings] == ["0.jsonl.zst", "1.jsonl.zst"]
    changes = [[(i.new, i.source) for i in load(p).all_items() if type(i) is PolicyChanged]
               for p in recordings]
    assert changes == [[(wanted, "remote:tui")], []]
