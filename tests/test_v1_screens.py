"""Every screen in V1's words, and every command on V1 recordings and engines.

The screen tests read the shipped V1 recordings (recordings/v1-thrash-*) or synthetic V1
records, so they run in every venv. The tests that run a V1 engine (live, serve and --connect,
verify, sweep, the dry run) need a V1 release (`pip install -e '.[vllm033,test]'`) and
PYTHONHASHSEED=0 from the interpreter's start; elsewhere they skip.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgspec
import pytest

from engine.adapters.v1.platform import PLUGIN_SIM_ENV, SIM_ENV, SIM_PLATFORM
from engine.adapters.versions import installed_version, release_for
from engine.analysis.stall import MIN_STEPS, admission_stall, stall_text
from engine.stream.reader import load
from engine.stream.records import EngineAborted, PolicyChanged, V1StepRecord
from screens_harness import live_status, panel_app, view_until
from test_v1_records import thrash_items, v1_header, v1_step
from tui.run_view import RunView
from tui.widgets.abort_banner import AbortBanner
from tui.widgets.decisions_table import (REPEAT_PREEMPTIONS, V1_COLUMNS, DecisionsTable,
                                         layout_columns, preempted_parts)
from tui.widgets.status_bar import Status, StatusBar
from v1_required import NEEDS_V1

ROOT = Path(__file__).resolve().parents[1]
RECORDINGS = ROOT / "recordings"
V1_OFF = RECORDINGS / "v1-thrash-off.jsonl.zst"
V1_FIXED = RECORDINGS / "v1-thrash-whole-context.jsonl.zst"
V1_TOGGLED = RECORDINGS / "v1-thrash-off-then-whole-context.jsonl.zst"
TOGGLE_STEP = 3000  # recordings/make_examples.py: --toggle-at 3000:whole-context

_release = release_for(installed_version())
V1_ENGINE = _release is not None and _release.engine == "v1"
needs_v1 = pytest.mark.skipif(not V1_ENGINE, reason=NEEDS_V1)
V0_WORDS = ("swap", "group")  # V1 has no swap space and no sequence groups


def observatory(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


async def settle(pilot) -> None:
    await pilot.pause()
    await pilot.pause()


# ------------------------------------------------------------------ the screens, V1's words
@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
async def test_the_live_panel_speaks_v1_mid_thrash(size):
    """Mid-thrash on the shipped recording: no swap and no groups anywhere on screen; the
    recompute tax in the status, V1's plots, and a request preempted again and again in its
    highlight."""
    view = view_until(V1_OFF, 2991)  # request 12 is preempted the 20th time at step 2991
    app = panel_app(view, live_status(view))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        screen_text = app.export_screenshot().replace("&#160;", " ")
        status = app.screen.query_one(StatusBar).render().plain
        table = app.screen.query_one(DecisionsTable)
        first_row = "".join(segment.text for segment in table.render_line(1))
        repeat = next(s for s in table.render_line(1) if "12×20" in s.text)
        error = app.theme_variables["error"]
        plots = {p.id: p.legend(200).plain for p in app.screen.query("RunPlot")}
    for word in V0_WORDS:
        assert word not in screen_text.lower(), word
    assert "tax 0.93" in status and ("preempted 288" in status or "pre 288" in status)
    assert first_row.startswith("2991") and "12×20" in first_row
    assert repeat.style is not None and repeat.style.bgcolor is not None
    assert repeat.style.bgcolor.triplet.hex.lower() == error.lower()
    assert "requests" in plots["plot-queues"] and "preempted" in plots["plot-queues"]
    assert "recompute %" in plots["plot-kv"] and "recomputed" in plots["plot-tokens"]


def test_a_repeated_preemption_stands_out_and_a_first_one_does_not():
    parts = preempted_parts([("3", 4096, 1), ("7", 512, REPEAT_PREEMPTIONS)], 20)
    assert [(text, role) for text, role in parts if text.strip(",")] == \
        [("3×1", "out"), (f"7×{REPEAT_PREEMPTIONS}", "repeat")]
    # what does not fit is counted, never cut
    narrow = preempted_parts([("10", 1, 1), ("11", 1, 1), ("12", 1, 1)], 9)
    assert "".join(t for t, _ in narrow) == "10×1 +2"
    assert all(sum(w for _, w in layout_columns(width, V1_COLUMNS)) <= width
               for width in (40, 78, 94, 154))


def test_the_v1_step_detail_names_what_a_preemption_lost():
    from tui.widgets.step_detail import StepDetail

    text = StepDetail.describe(view_until(V1_OFF, 2991).current).plain
    lines = text.splitlines()
    assert len(lines) <= 13  # the pane's height, inside its border
    assert "preempted #12 (lost 509 tok, ×20)" in text  # an id, not a count
    assert "waiting 20" in text and "swap" not in text.lower()
    assert "so far    288 preemptions · tax 0.93" in text
    # every label takes the same 10 cells, `preempted` included: what follows lines up
    labels = ("queues", "KV", "tokens", "again", "new", "resumed", "running", "preempted",
              "done", "so far")
    labelled = [(label, line) for line in lines for label in labels
                if line.startswith(label + " ")]
    assert len(labelled) == len(labels)
    assert all(line[:10] == label.ljust(10) and line[10] != " " for label, line in labelled)


def test_the_v1_abort_banner_and_event_say_no_swap():
    items = [*thrash_items()[:-1]]
    abort = EngineAborted(step=5, message="boom", error="RuntimeError", sim_s=0.05, wall_s=0.01,
                          running=2, swapped=0, waiting=3, gpu_used=1000, gpu_total=1199,
                          cpu_used=0, cpu_total=0)
    view = RunView.from_items([*items, abort])
    for compact in (True, False):
        text = AbortBanner.describe(abort, "", None, compact, view.engine).plain
        assert "swap" not in text.lower() and "CPU" not in text and "waiting 3" in text
    assert "GPU KV 83.4%" in view.events[-1].text and "swap" not in view.events[-1].text


async def test_the_help_lists_the_v1_policies():
    from tui.widgets.help_screen import HelpScreen

    view = view_until(V1_OFF, 100)
    app = panel_app(view, live_status(view))
    async with app.run_test(size=(120, 60)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        text = help_screen.help_text(help_screen._below).plain
    for policy in ("full-isl", "whole-context", "least-computed", "7×5"):
        assert policy in text
    assert "strict" not in text and "swap" not in text.lower()


async def test_the_cpu_tier_is_labelled_and_counted_when_the_run_has_one():
    """vLLM's offloading tier (V1StepRecord.cpu_chunks): "CPU tier" in the status and the KV
    plot, its loads and stores in the detail; never the swap runway (V1 has no swap space)."""
    from tui.widgets.step_detail import StepDetail

    tier = dict(cpu_chunks=128, cpu_chunks_total=512, cpu_stores=2, cpu_store_bytes=75_000_000,
                cpu_loads=1, cpu_load_bytes=37_500_000, cpu_hit_tokens=512)
    view = RunView.from_items([v1_header(), *(v1_step(i, **tier) for i in range(30))])
    for width in (80, 160):
        text = StatusBar.compose_text(view, Status(state="running"), width=width).plain
        # the status's percent: one decimal where the width allows, none at 80 columns
        assert re.search(r"CPU( tier)? 25(\.0)?%", text) and "swap" not in text, text
    detail = StepDetail.describe(view.current).plain
    assert "CPU tier  128/512 (25%)  load 1 (38MB)  store 2 (75MB)" in detail
    assert "(CPU tier hits 512)" in detail
    app = panel_app(view, live_status(view))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        legend = app.screen.query_one("#plot-kv").legend(200).plain
        status = app.screen.query_one(StatusBar).render().plain
    assert "CPU tier" in legend and "swap" not in status
    # without a tier: no CPU line, no CPU number
    plain = RunView.from_items(thrash_items())
    assert "CPU" not in StatusBar.compose_text(plain, Status(state="running")).plain


async def test_the_policy_picker_offers_v1s_policies():
    from textual.app import App

    from tui.live.policy_picker import PolicyPicker

    picked: list[str | None] = []

    class PickerApp(App[None]):
        def on_mount(self) -> None:
            self.push_screen(PolicyPicker("full-isl", "v1"), picked.append)

    app = PickerApp()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        options = app.screen.query_one("#picker-options")
        ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
        assert ids == ["off", "full-isl", "whole-context", "least-computed",
                       "whole-context+least-computed", "skip-and-continue",
                       "per-iteration-count"]
        assert options.highlighted == 1 and not app.screen.query("#picker-level")
        await pilot.press("down", "enter")
        await settle(pilot)
    assert picked == ["whole-context"]


# ------------------------------------------------------------------ the admission watchdog
def _stalled(n: int, **over) -> list[V1StepRecord]:
    """n steps with requests waiting, nothing admitted, KV mostly free."""
    fields = dict(gpu_used=200, waiting=5, scheduled=[("0", 1)], new=[], resumed=[])
    fields.update(over)
    return [v1_step(i, **fields) for i in range(n)]


def test_the_watchdog_speaks_after_min_steps_without_admission_while_kv_has_room():
    steps = [v1_step(0, new=[("0", 512)]), *_stalled(MIN_STEPS + 5)[1:]]
    assert admission_stall(steps[:MIN_STEPS]) is None  # one step short
    stall = admission_stall(steps)
    assert (stall.since, stall.step, stall.steps, stall.waiting) == (1, MIN_STEPS + 4,
                                                                    MIN_STEPS + 4, 5)
    assert stall_text(stall, compact=False).startswith(
        f"⚠ no admission for {MIN_STEPS + 4} steps while KV has room (≥83% free throughout")
    # its KV free is the least at any of its steps' ends (engine.conventions)
    low = v1_step(60, gpu_used=500, waiting=5, scheduled=[("0", 1)])
    dip = [*steps[:60], low, *steps[61:]]
    assert admission_stall(dip).free_pct == pytest.approx(
        100.0 * (low.gpu_total - 500) / low.gpu_total)
    # asked at an earlier step, the run ending there decides
    assert admission_stall(steps, end=50) is None


@pytest.mark.parametrize("over, why", [
    (dict(gpu_used=1000), "the KV cache is full: no room, no stall"),
    (dict(waiting=0), "nobody waits"),
    (dict(withheld=True), "the policy refuses on purpose"),
    (dict(resumed=[("1", 64)]), "a preempted request was admitted again"),
])
def test_the_watchdog_stays_quiet(over, why):
    assert admission_stall(_stalled(2 * MIN_STEPS, **over)) is None, why


def test_a_v0_run_never_trips_the_v1_watchdog():
    from screens_harness import OFF

    assert admission_stall(view_until(OFF).steps) is None


def test_the_watchdog_is_quiet_on_the_shipped_v1_runs():
    """The thrash and its fix admit within a few steps whenever the blocks are there."""
    from engine.analysis.stall import stalled_step

    for path in (V1_OFF, V1_FIXED, V1_TOGGLED):
        longest = run = 0
        for s in load(path).steps:
            run = run + 1 if stalled_step(s) else 0
            longest = max(longest, run)
        assert longest < MIN_STEPS, (path, longest)


def test_the_status_shows_the_watchdog():
    view = RunView.from_items([v1_header(), *_stalled(MIN_STEPS + 20)])
    for width in (80, 160):
        text = StatusBar.compose_text(view, Status(state="running"), width=width).plain
        assert "no admission" in text.splitlines()[1], text
    healthy = RunView.from_items(thrash_items())
    assert "no admission" not in StatusBar.compose_text(healthy, Status(state="running")).plain


# ------------------------------------------------------------------ the recordings and commands
def test_the_shipped_toggle_stops_the_thrash_from_its_step_on():
    """`--toggle-at 3000:whole-context` in the middle of the thrash: the recording has the
    change at that step, and no request is preempted more than once after it."""
    run = load(V1_TOGGLED)
    assert run.header.engine == "v1"
    changes = run.policy_changes
    assert [(c.step, c.old, c.new, c.source) for c in changes] == \
        [(TOGGLE_STEP, "off", "whole-context", "toggle-at")]
    assert run.step(TOGGLE_STEP - 1).policy == "off"
    assert run.step(TOGGLE_STEP).policy == "whole-context"
    before = max(n for s in run.steps[:TOGGLE_STEP] for _, _, n in s.preempted)
    after: dict[str, int] = {}
    for s in run.steps[TOGGLE_STEP:]:
        for rid, _, _ in s.preempted:
            after[rid] = after.get(rid, 0) + 1
    assert before >= 5 and max(after.values(), default=0) <= 1
    assert run.finished.reason == "completed"
    for path in (V1_OFF, V1_FIXED, V1_TOGGLED):
        assert path.stat().st_size < 310_000, path


def test_summary_of_a_v1_recording():
    out = observatory("summary", str(V1_OFF), "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert (summary["engine"], summary["vllm_version"]) == ("v1", "0.33.0")  # recorded on it
    assert summary["max_preemptions_per_request"] >= 5 and summary["recompute_tax"] >= 0.5
    text = observatory("summary", str(V1_FIXED))
    assert text.returncode == 0 and "swap" not in text.stdout.lower(), text.stdout


def test_compare_two_v1_recordings():
    out = observatory("compare", str(V1_OFF), str(V1_FIXED))
    assert out.returncode == 0, out.stderr
    assert "recompute" in out.stdout.lower() and "swap" not in out.stdout.lower(), out.stdout


def test_export_a_v1_recording(tmp_path):
    target = tmp_path / "off.csv"
    out = observatory("export", str(V1_TOGGLED), "--format", "csv", "-o", str(target))
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    assert len(rows) == len(load(V1_TOGGLED).steps)
    assert {"preemptions_total", "recomputed_tokens", "policy"} <= set(rows[0])
    assert rows[TOGGLE_STEP]["policy"] == "whole-context"
    trace = tmp_path / "off.json"
    out = observatory("export", str(V1_TOGGLED), "--format", "perfetto", "-o", str(trace))
    assert out.returncode == 0, out.stderr
    events = json.loads(trace.read_text())["traceEvents"]
    assert "swap" not in trace.read_text()
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert counters == {"KV cache %", "requests", "recompute"}
    step = next(e for e in events if e.get("name") == "step 2991")
    assert step["args"]["preempted"] == ["12 lost 509 (x20)"]
    assert sum(e["name"].startswith("preempted x") for e in events) == \
        len(load(V1_TOGGLED).steps_of("recompute"))


async def test_replay_and_ab_replay_of_v1_recordings():
    from tui.launch import replay_app
    from tui.replay.compare_screen import CompareScreen

    app = replay_app([str(V1_TOGGLED)], autoplay=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        screen = app.main_screen
        await pilot.press("home")  # it opens on the run's last frames
        await pilot.press("n")  # the next event: the first preemption burst
        await settle(pilot)
        assert screen.view.current_step == load(V1_TOGGLED).steps_of("recompute")[0]
        screen.seek(TOGGLE_STEP)
        await settle(pilot)
        status = screen.query_one(StatusBar).render().plain
        assert "whole-context" in status and "tax" in status and "swap" not in status
    app = replay_app([str(V1_OFF), str(V1_FIXED)], autoplay=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        screen = app.main_screen
        assert isinstance(screen, CompareScreen)
        titles = [p.title for p in screen.query("RunPlot")]
        assert titles == ["GPU KV %", "preemptions so far", "running requests"]



def test_ab_replay_of_a_v1_and_a_v0_run_is_one_line_naming_compare(capsys):
    """A/B steps two runs of one engine side by side (its plots, its first difference); a V1
    and a V0 run are told apart in one line that names `compare`, which tables both."""
    from engine.errors import ConfigError
    from tui.launch import replay, replay_app

    v0 = str(RECORDINGS / "seed-5578-off.jsonl.zst")
    with pytest.raises(ConfigError, match=r"is V1 and .* is V0: compare them with "
                                          r"`observatory compare"):
        replay_app([str(V1_OFF), v0], autoplay=False)
    assert replay([str(V1_OFF), v0]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "observatory compare" in err[0]

# ------------------------------------------------------------------ commands on a V1 engine
TIMEOUT_S = 240.0  # an engine process imports vLLM: slow on a loaded 2-core machine


async def wait_for(pilot, condition, what: str) -> None:
    """Let the app run until `condition` holds (no fixed sleeps)."""
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def wait_for_exit(pid: int | None, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while pid is not None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"engine process {pid} still running after {timeout} s")
        time.sleep(0.05)


async def drive_the_fix_key(app) -> None:
    """Follow the V1 run until it thrashes, press `f` (off -> whole-context, v1-thrash's fix),
    wait until the engine applies it; check the screen speaks V1 meanwhile; quit."""
    screen = app.main_screen
    await wait_for(pilot_of(app), lambda: screen.view.header is not None
                   and any(s.preempted for s in screen.view.steps), "the first preemption")
    assert screen.view.engine == "v1"
    bar = screen.query_one(StatusBar)
    await wait_for(pilot_of(app), lambda: "tax" in bar.render().plain, "the V1 status")
    assert "swap" not in bar.render().plain
    assert screen.query_one("#plot-queues").title == "requests"
    screen.action_toggle_fix()  # what `f` does
    assert "→ whole" in screen.query_one(StatusBar).render().plain  # pending, in the badge's slot
    await wait_for(pilot_of(app), lambda: screen.view.policy == "whole-context",
                   "a step governed by whole-context")


_pilots: dict[int, object] = {}


def pilot_of(app):
    return _pilots[id(app)]


@needs_v1
async def test_live_on_the_v1_engine_switches_the_fix_with_a_key(tmp_path):
    from engine.spec import preset_spec
    from tui.launch import live_app

    path = tmp_path / "live.jsonl"
    app = live_app(preset_spec("v1-thrash", max_steps=4000).validated(), str(path))
    async with app.run_test(size=(160, 48)) as pilot:
        _pilots[id(app)] = pilot
        await drive_the_fix_key(app)
        pid = getattr(app.main_screen.source, "pid", None)
        await pilot.press("q")
    wait_for_exit(pid)
    recording = load(path)
    assert recording.header.engine == "v1"
    changes = recording.policy_changes
    assert [(c.old, c.new, c.source) for c in changes] == [("off", "whole-context", "tui")]
    assert recording.step(changes[0].step).policy == "whole-context"


class Serve:
    """`observatory serve` on a V1 engine, on 127.0.0.1; stopped by its PID."""

    def __init__(self, tmp: Path) -> None:
        self.record = tmp / "served.jsonl.zst"
        token_file = tmp / "token"
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "engine.cli", "serve", "--preset", "v1-thrash", "--listen",
             "127.0.0.1:0", "--token-file", str(token_file), "--record", str(self.record)],
            cwd=tmp, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        self.log: list[str] = []
        self.address: str | None = None
        self._listening = threading.Event()
        threading.Thread(target=self._read_log, daemon=True).start()
        assert self._listening.wait(TIMEOUT_S), f"serve did not start: {self.log}"
        self.token = token_file.read_text().strip()

    def _read_log(self) -> None:
        for line in self.process.stderr:
            self.log.append(line.rstrip("\n"))
            if "listening on " in line:
                self.address = line.rsplit("listening on ", 1)[1].strip()
                self._listening.set()

    def stop(self) -> int:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
        try:
            return self.process.wait(60)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            return self.process.wait(10)


@needs_v1
async def test_serve_a_v1_engine_and_switch_its_fix_from_live_connect(tmp_path):
    from tui.launch import live_app

    server = Serve(tmp_path)
    try:
        app = live_app(None, connect=(server.address, server.token))
        async with app.run_test(size=(160, 48)) as pilot:
            _pilots[id(app)] = pilot
            await drive_the_fix_key(app)
            await pilot.press("q")
    finally:
        code = server.stop()
    assert code in (0, 143), server.log[-5:]
    recording = load(server.record)
    assert recording.header.engine == "v1"
    assert [(c.old, c.new) for c in recording.policy_changes] == [("off", "whole-context")]


@needs_v1
def test_run_records_a_v1_toggle_and_verify_replays_it(tmp_path):
    path = tmp_path / "toggle.jsonl.zst"
    out = observatory("run", "--preset", "v1-thrash", "--max-steps", "400", "--toggle-at",
                      "200:whole-context", "--record", str(path))
    assert out.returncode == 0, out.stderr
    assert [(c.step, c.new) for c in load(path).policy_changes] == [(200, "whole-context")]
    checked = observatory("verify", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("verified"), checked.stdout


@needs_v1
def test_a_v1_sweep_reports_v1s_numbers(tmp_path):
    out_dir = tmp_path / "v1sweep"
    out = observatory("sweep", "--preset", "v1-thrash", "--max-steps", "300", "--grid",
                      "policy=off,whole-context", "--serial", "-o", str(out_dir))
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in (out_dir / "results.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["ok", "ok"], rows
    assert {r["engine"] for r in rows} == {"v1"} and all(r["steps"] == 300 for r in rows)
    off, fixed = sorted(rows, key=lambda r: r["cell"])
    assert off["recompute_tax"] > fixed["recompute_tax"]
    assert off["swap_outs"] is None  # V1 has no swap space: not a zero, nothing
    report = observatory("sweep-report", str(out_dir))
    assert report.returncode == 0, report.stderr
    words = " ".join(report.stdout.split())  # a header may take two lines (80 columns)
    assert "recompute" in words and "tax" in words and "swap" not in words.lower()
    assert max(map(len, report.stdout.splitlines())) <= 80


@needs_v1
@pytest.mark.parametrize("backend", ["sim", "gpu"])
def test_the_dry_run_resolves_a_v1_engine(backend, monkeypatch):
    for name in {*SIM_ENV, *PLUGIN_SIM_ENV}:  # a sim engine earlier in this process left
        monkeypatch.delenv(name, raising=False)  # them behind, not a user
    out = observatory("run", "--preset", "v1-thrash", "--backend", backend, "--dry-run",
                      "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert (data["vllm_version"], data["engine"], data["api_family"]) == (
        installed_version(), "v1", _release.family)
    args = data["engine_args"]
    assert (args["max_num_batched_tokens"], args["scheduler_reserve_full_isl"],
            args["enable_prefix_caching"]) == (512, False, False)
    if backend == "sim":
        assert data["executor_class"] == "engine.adapters.v1.sim_executor.SimExecutor"
        # vLLM's CPU platform, or from 0.34 the observatory's (its plugin: 0.34's CPU
        # platform refuses without triton-cpu)
        assert data["platform_class"] == (SIM_PLATFORM if _release.sim_plugin
                                          else "vllm.platforms.cpu.CpuPlatform")
    else:  # vLLM's own executor; without CUDA its platform detection finds no device
        assert data["executor_class"] == "vllm.v1.executor.uniproc_executor.UniProcExecutor"
        assert "CpuPlatform" not in data["platform_class"]
        if not data["cuda_available"]:
            assert any("no CUDA device" in note for note in data["notes"])
    from engine.dry_run import format_text

    text = format_text(data)  # what the command prints without --json
    assert f"engine v1, adapter family {_release.family}" in text
    assert "scheduler_reserve_full_isl" in text
