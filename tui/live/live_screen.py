"""The live monitor: the run screen following an engine process, plus the control keys.

The engine runs in its own process (a local child, or `observatory serve` reached over TCP) and
owns the recording; this screen only reads its record stream and sends commands. So the UI
never slows the engine down (no shared GIL), quitting never waits for a step, and killing the
UI leaves the recording whole.

A key answers at once: `f` shows the new policy as pending on the next frame, and it turns
confirmed when the first step it governs arrives. Moving back through the run (← → n N
g) is replay of what has arrived; `end` follows the newest step again.

`f` switches the fix for what is on screen: off <-> the preset's own fix (engine.spec.
PRESET_FIXES: `reserve` for the seed, `skip-and-continue` for v1-head-of-line...); `F` picks any
policy, and shows those the engine cannot take (the engine's Policies message) disabled with
the reason. A local engine holds where each kind of sign of trouble first shows
(engine.host.attention): the status says why, which key switches the fix on, and how long until
the run goes on by itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import msgspec
from textual.binding import Binding

from engine.exit_status import ExitStatus
from engine.policy import parse_policy
from engine.run_state import RunState
from engine.spec import RunSpec, preset_fix
from engine.stream.records import STEP_TYPES
from tui.messages import (CommandAcked, EngineStage, EngineStateChanged, PoliciesRefused,
                          RecordingChanged, StreamEnded)
from tui.live.policy_picker import PolicyPicker, refusal_of
from tui.live.startup import FIRST_STAGE, StartupClock
from tui.replay.fork_action import ForkKeys
from tui.run_screen import NAVIGATION, RunScreen
from tui.run_source import RunSource
from tui.run_view import RunView
from tui.widgets.status_bar import Status

if TYPE_CHECKING:
    from engine.analysis.logs.reference import Reference

MIN_WINDOW, MAX_WINDOW = 10, 100_000
RATE_SPAN = 200  # steps/s is measured over the last this many steps


def fix_hint(fix: str) -> str:
    """The hint while the fix is off: the key and the fix it switches on."""
    return f"f switches {fix} on"


@dataclass(frozen=True)
class Hold:
    """The engine paused itself at a sign of trouble (engine.host.attention)."""

    step: int  # the boundary it holds at (the steps before it have run)
    why: str  # "first swapped group"
    ends_at: float  # time.monotonic() it goes on by itself

    def left_s(self) -> float:
        return max(0.0, self.ends_at - time.monotonic())

SourceFactory = Callable[[RunSpec], RunSource]
"""Makes the source for a run of `spec`: a local engine child (restartable with another spec)
or a connection to a remote server (the spec is the server's; restart is refused)."""


class LiveScreen(ForkKeys, RunScreen):
    """Follow an engine process; `f` flips the fix while it runs. Once vLLM has aborted, `f`
    and `F` at an earlier step (← → n N g) fork the recording there instead ("what if I had
    pressed f then?": tui.replay.fork_action), its re-run started as soon as the recording is
    sealed; at the end they choose the restart's policy (R)."""

    BINDINGS = [
        Binding("f", "toggle_fix", "fix on/off"),
        Binding("F", "pick_policy", "pick policy"),
        Binding("space", "pause", "pause/resume", priority=True),
        Binding("r", "toggle_record", "record on/off"),
        Binding("a", "burst", "add burst"),
        Binding("R", "restart", "restart"),
        Binding("e", "pick_engine", "engines behind an exec hub", show=False),
        Binding("plus,equals_sign", "window(2)", "window ×2", key_display="+"),
        Binding("minus", "window(0.5)", "window ÷2", key_display="-"),
        Binding("greater_than_sign", "pace(2)", "faster (engine pace ×2)", key_display=">"),
        Binding("less_than_sign", "pace(0.5)", "slower (engine pace ÷2, from its speed so far)",
                key_display="<"),
        *NAVIGATION,
    ]
    HELP_TITLE = "live monitor keys"
    HELP_FOOTER = ("At each first sign of trouble the engine holds for a few seconds (the status "
                   "says why, live --hold sets how long): f switches the fix on at that step, "
                   "space goes on. Click a decisions row (or enter) to pin that step in the "
                   "detail pane. ← → n N g move back through the run; end follows the newest "
                   "step again.")
    PANEL_MODE = "live"

    def __init__(self, spec: RunSpec | None, open_source: SourceFactory, window: int = 2000,
                 *, restartable: bool = True, title: str = "",
                 reference: "Reference | None" = None, hub=None,
                 launched_at: float | None = None) -> None:
        super().__init__(RunView(), source=None, following=True, title=title)
        self._launch_title = title
        self.reference = reference  # a real log drawn over every run of this screen
        self.view.reference = reference
        self.spec = spec
        self.window = max(MIN_WINDOW, min(MAX_WINDOW, window))
        self.restartable = restartable
        self._open_source = open_source
        # `observatory exec --serve`'s hub: `.engines()` lists them, `.source(name)` opens one
        # (tui.launch.HubEngines); None for a plain serve or a local engine
        self.hub = hub
        self.engine_state: RunState | str = RunState.STARTING  # or "disconnected"
        self.stage = FIRST_STAGE
        self.startup = StartupClock(launched_at)  # the start-up's stages and their seconds
        self.pending_policy: str | None = None
        self.recording: str | None = None
        self.recording_bytes = 0
        self.recording_saved = False  # the last recording was closed whole
        self.recordings: list[str] = []  # every recording the engine wrote for this screen
        self.refusal: str | None = None  # why the engine could not be reached: the app exits
        self.stream_over = False
        self.refused: dict[str, str] = {}  # policies the engine cannot take, and why
        self.hold: Hold | None = None  # the engine holds at a sign of trouble

    # -- lifecycle ------------------------------------------------------------------------

    def begin(self) -> None:
        self.set_interval(0.5, self._tick)
        self._start()

    def _tick(self) -> None:
        """Redraw what counts seconds: the start-up's stage, a hold's countdown."""
        if self.engine_state == RunState.STARTING or self.hold is not None:
            self.draw()

    def _start(self) -> None:
        if self.spec is not None:
            self.view.planned_policy = self.spec.policy
        if self.restartable:  # a local engine: it runs the installed vLLM
            from engine.adapters.versions import installed_engine

            self.view.planned_engine = installed_engine()
        self.source = self._open_source(self.spec) if self.spec is not None \
            else self._open_source(None)  # type: ignore[arg-type]
        # where it records, from the first frame: the engine confirms it (RecordingChanged)
        self.recording = getattr(self.source, "planned_recording", None)
        self.stream_over = False
        if self.engine_state != RunState.STARTING or self.view.header is not None:
            self.startup = StartupClock()  # a restart counts from the key press
        self.engine_state, self.stage = RunState.STARTING, FIRST_STAGE
        self.refresh_bindings()  # a restart: pause and record again, R no longer
        self.source.start(self)

    def on_unmount(self) -> None:
        if self.forks is not None:
            self.forks.close()

    # -- what the engine says ---------------------------------------------------------------

    def arrived(self, items: list) -> None:
        for item in items:
            if type(item) in STEP_TYPES:
                if self.engine_state == RunState.STARTING:
                    self.engine_state, self.stage = RunState.RUNNING, ""
                if not self.startup.shown:  # the first step: the start-up is over
                    self.startup.shown = True
                    self.view.notice(self.startup.summary())
                if item.policy == self.pending_policy:
                    self.pending_policy = None
            # PolicyChanged alone does not confirm it: the screen shows the newest step, still
            # governed by the old policy. While the engine was paused the change arrived with
            # no step after it, the mark went, and the status said "off ... press f to switch
            # the fix on" for a fix already switched (a second f cycled past it).
        header = self.view.header
        if header is not None and self.spec is None:
            self.spec = RunSpec.from_dict(header.spec)  # attached to a server: its spec

    def on_engine_stage(self, message: EngineStage) -> None:
        self.stage = f"{message.stage}" + (f" ({message.detail})" if message.detail else "")
        self.startup.enter(message.stage, message.detail)
        self.request_frame()

    def on_engine_state_changed(self, message: EngineStateChanged) -> None:
        self.engine_state = message.state
        if message.state == RunState.PAUSED and message.hold_s:
            self._start_hold(Hold(message.step, message.why,
                                  time.monotonic() + message.hold_s))
        elif self.hold is not None:
            self._end_hold(message.state)
        self.draw()

    def _start_hold(self, hold: Hold) -> None:
        self.hold = hold  # `_tick` counts it down on the status
        self.notify(f"paused after step {hold.step - 1:,}: {hold.why}. {self.hints()[-1]}",
                    title="a sign of trouble", timeout=4)

    def _end_hold(self, state: str) -> None:
        hold, self.hold = self.hold, None
        if hold is not None and state == RunState.RUNNING and hold.left_s() <= 0.5:
            self.notify(f"going on after the pause at step {hold.step - 1:,} ({hold.why})",
                        timeout=3)

    def on_policies_refused(self, message: PoliciesRefused) -> None:
        self.refused = message.refused
        self.draw()

    def on_command_acked(self, message: CommandAcked) -> None:
        if message.ok and message.op == "pace":
            if self.restartable:  # a local engine: the bottom bar says its pace
                self.title_text = message.message if message.message.startswith("paced") else ""
            self.notify(f"engine {message.message}", timeout=2)
            self.draw()
        if not message.ok:
            if message.op == "policy":
                self.pending_policy = None
            self.notify(message.message, title=f"engine refused {message.op}",
                        severity="error", timeout=6)
            self.draw()

    def on_recording_changed(self, message: RecordingChanged) -> None:
        self.recording, self.recording_bytes = message.path, message.size
        self.recording_saved = bool(message.closed) and not message.error
        self._offer_forks()
        if message.path and message.path not in self.recordings:
            self.recordings.append(message.path)
            self.view.notice(f"recording to {message.path}")
        if message.error:
            self.view.notice(f"recording stopped: {message.error}", "error")
            self.notify(message.error, title="recording stopped", severity="error",
                        timeout=10)
        self.request_frame()

    def ended(self, message: StreamEnded) -> None:
        if message.refused and self.view.header is None:
            # nothing arrived and nothing will: leave, and let the CLI say why in one line
            self.refusal = message.error or "the engine could not be reached"
            self.app.exit(ExitStatus.USAGE, return_code=ExitStatus.USAGE)
            return
        view = self.view
        if view.abort is not None:
            self.engine_state = RunState.ABORTED
        elif view.finished is not None:
            self.engine_state = (RunState.STOPPED if view.finished.reason == "stopped"
                                 else RunState.FINISHED)
        else:
            self.engine_state = "disconnected"
        self.pending_policy = self.pending_policy if self.restartable else None
        self._end_hold(self.engine_state)
        self._offer_forks()
        self.refresh_bindings()  # the footer offers R now, no longer pause or record
        self.draw(plots=True)

    def _offer_forks(self) -> None:
        """An aborted local run whose recording is sealed: re-run it in the background, so
        that `f` forks it at the step on screen."""
        if (self.restartable and self.engine_state == RunState.ABORTED and self.recording_saved
                and self.recordings and self.forks is None):
            self.start_forks(self.recordings[-1])

    # -- drawing ----------------------------------------------------------------------------

    @property
    def over(self) -> bool:
        return self.stream_over

    @property
    def fix(self) -> str:
        """The policy `f` switches on: the run's preset's fix (engine.spec.PRESET_FIXES)."""
        header = self.view.header
        preset = header.spec.get("preset") if header is not None else (
            self.spec.preset if self.spec is not None else None)
        return preset_fix(preset, self.view.engine)

    def hints(self) -> tuple[str, ...]:
        """What to press now, most verbose first (empty: nothing): while held, the sign and
        the keys; while the fix is off, the key that switches it on."""
        if self.over:
            return () if self.restartable else ("the remote run is over; q quits",)
        fix = self.fix
        can = refusal_of(fix, self.refused) is None
        key = fix_hint(fix) if can else "F picks a fix"
        hold = self.hold
        if hold is not None and self.pending_policy is None:
            left = f"{hold.left_s():.0f} s"
            return (f"‖ {hold.why} after step {hold.step - 1:,}: {key} · space goes on · "
                    f"on by itself in {left}", f"‖ {key} · space goes on ({left})",
                    f"‖ f: {fix} · space: go on ({left})" if can else f"‖ {key} ({left})")
        if self.view.policy == "off" and self.pending_policy is None:
            return (key,)
        return ()

    def status(self) -> Status:
        state = self.engine_state
        over = self.over
        hints = self.hints()
        if self.forking or (self.forks is not None and self.forks.busy):
            hints = (self.fork_hint(),)
        if not self.following:
            where = f"browsing step {self.view.current_step:,}: end follows the newest"
            hints = (f"{where} · {hints[0]}" if hints else where, where)
        restart = (self.pending_policy or self.view.policy) if over and self.restartable \
            else None
        return Status(state=state, steps_per_s=self._steps_per_s(), show_wall=True,
                      recording=self.recording, recording_bytes=self.recording_bytes,
                      saved_bytes=self.recording_bytes if over and self.recording_saved
                      else None,
                      hint=hints[0] if hints else "", hint_short=hints[1:],
                      hint_first=self.hold is not None,
                      pending_policy=None if over else self.pending_policy,
                      stage=self.startup.text() if state == RunState.STARTING else "",
                      restart_policy=restart)

    def _steps_per_s(self) -> float | None:
        if self.engine_state != RunState.RUNNING:
            return None
        steps = self.view.steps
        if len(steps) < 2:
            return None
        last, first = steps[-1], steps[max(0, len(steps) - RATE_SPAN)]
        dt = last.wall_s - first.wall_s
        return (last.step - first.step) / dt if dt > 0 else None

    def banner_footer(self) -> str:
        if not self.restartable:
            return "Everything stays on screen for inspection. q quits."
        if self.forks is not None:
            return ("Everything stays on screen for inspection. At an earlier step (← g), f "
                    "forks the run there with the fix. R restarts the run, q quits.")
        return "Everything stays on screen for inspection. R restarts the run, q quits."

    def plot_range(self) -> tuple[int, int]:
        view = self.view
        if self.following:
            return max(view.first_step, view.last_step - self.window + 1), view.last_step
        return view.first_step, view.last_step

    # -- which keys the footer offers -------------------------------------------------------

    OVER_ONLY = frozenset({"restart"})
    """Keys that act only once the run is over: shown then, not while it runs."""
    RUNNING_ONLY = frozenset({"pause", "toggle_record", "burst", "pace"})
    """Keys that act only on a running engine: after the abort or finish they did nothing but
    still filled the footer, where `R`, the key the banner asks for, did not fit."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """False (hidden from the footer, the key unbound) for a control that cannot act on
        the run as it stands; every key stays listed in `?`."""
        if action in self.OVER_ONLY:
            return self.over and self.restartable
        if action in self.RUNNING_ONLY:
            return not self.over
        return True

    # -- control actions ----------------------------------------------------------------------

    def _send(self, op: str, arg: str | int | None = None) -> bool:
        if self.source is None or self.over:
            return False
        if self.source.send(op, arg) is None:
            self.notify("the engine is not connected yet", timeout=2)
            return False
        return True

    def action_toggle_fix(self) -> None:
        """`f`: off <-> the preset's fix (any other policy goes to the fix too); once vLLM has
        aborted, at an earlier step, `f` forks the recording there instead."""
        if self.forking:
            self.fork_here(self.fork_policy())
            return
        current = str(parse_policy(self.pending_policy or self.view.policy))
        fix = self.fix
        target = "off" if current == fix else fix
        why = refusal_of(target, self.refused)
        if why is not None:
            self.notify(f"{why}. F picks another policy", title=f"{target} is not available",
                        severity="error", timeout=6)
            return
        self._choose_policy(target)

    def action_pick_policy(self) -> None:
        current = self.pending_policy or self.view.policy
        held = self.hold is not None and self._send("pause")  # the hold must outlast the
        # choosing: it becomes a plain pause, and the pick (or escape) goes on

        def chosen(picked: str | None) -> None:
            if picked:
                self._choose_policy(picked)
            if held:
                self._send("resume")

        self.app.push_screen(PolicyPicker(current, self.view.engine, self.refused, self.fix),
                             chosen)

    @property
    def forking(self) -> bool:
        """`f` / `F` fork: the run aborted and the screen shows an earlier step (at the end
        they choose the restart's policy, as always)."""
        return self.forks is not None and not self.following

    def _choose_policy(self, policy: str) -> None:
        if self.forking:  # aborted: what if that policy had run from this step?
            self.fork_here(policy)
            return
        if self.over:
            if not self.restartable:
                self.notify("the remote run is over", timeout=3)
                return
            self.pending_policy = policy  # applies to the restart
            self.notify(f"policy {policy} will apply when you restart (R)", timeout=4)
        elif self._send("policy", policy):
            self.pending_policy = policy
        self.draw()

    def action_pause(self) -> None:
        if self.engine_state == RunState.PAUSED:
            self._send("resume")
        else:
            self._send("pause")

    def action_burst(self) -> None:
        self._send("burst")

    def action_toggle_record(self) -> None:
        if self.over:
            self.notify("the run is over: nothing left to record", timeout=4)
            return
        self._send("record", "off" if self.recording else "on")

    def action_restart(self) -> None:
        if not self.over:
            self.notify("the run is still going: R restarts after an abort or finish",
                        timeout=4)
            return
        if not self.restartable or self.spec is None:
            self.notify("this run belongs to a remote server: restart it there", timeout=4)
            return
        policy = self.pending_policy or self.view.policy
        self.spec = msgspec.structs.replace(self.spec, policy=policy, toggles=[])
        self.title_text = self._launch_title  # a new engine starts at the launch pace
        if self.source is not None:
            self.source.close()
        self._start_fresh()
        self.draw(plots=True)

    def _start_fresh(self) -> None:
        """Forget the old stream's view and watch the new source from its first step (a
        restart, or another engine behind the hub)."""
        if self.forks is not None:  # the old run's re-run: its forks run on by themselves
            self.forks.close()
            self.forks = None
        self.pending_policy = None
        self.recording, self.recording_bytes, self.recording_saved = None, 0, False
        self.view = RunView()
        self.view.reference = self.reference
        self.playhead = self._playhead_for(self.view, following=True, ended=False)
        self._plotted = None
        from tui.widgets.run_panel import RunPanel

        self.query_one(RunPanel).reset()
        self._start()

    def action_pick_engine(self) -> None:
        if self.hub is None:
            self.notify("e picks an engine behind `observatory exec --serve`; this screen "
                        "watches one engine", timeout=4)
            return
        try:
            engines = self.hub.engines()
        except Exception as exc:  # noqa: BLE001  PeerError: not a hub, gone
            self.notify(str(exc), title="cannot list engines", severity="error", timeout=6)
            return
        from tui.live.engine_picker import EnginePicker

        header = self.view.header
        current = (header.engine_config.get("attached", {}).get("name")
                   if header is not None else None)
        self.app.push_screen(EnginePicker(engines, current),
                             lambda picked: picked and picked != current
                             and self.switch_engine(picked))

    def switch_engine(self, name: str) -> None:
        """Watch engine `name` behind the hub instead: a new connection, a fresh view."""
        if self.source is not None:
            detach = getattr(self.source, "detach", None)
            if detach is not None:
                detach()  # its end must not end the new engine's stream
            self.source.close()
        self._open_source = self.hub.source(name)
        self.title_text = name
        self.spec = None
        self._start_fresh()
        self.notify(f"watching {name}", timeout=3)
        self.draw(plots=True)

    def action_pace(self, scale: float) -> None:
        self._send("pace", scale)

    def action_window(self, factor: float) -> None:
        self.window = int(max(MIN_WINDOW, min(MAX_WINDOW, self.window * factor)))
        self.notify(f"plot window: {self.window:,} steps", timeout=2)
        self.draw(plots=True)
