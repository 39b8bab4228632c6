"""A minimal screen around RunPanel, for the widget tests and snapshots.

It draws a RunView from a shipped recording (cut at a step, or whole) the way the live screen
(newest steps, a plot window) or the replay screen (a cursor over the whole run) does, through
the two calls every screen makes: RunPanel.show_text and RunPanel.show_plots. So these tests
do not depend on how the live and replay screens drive the engine or the cursor.
"""

from __future__ import annotations

from pathlib import Path

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.screen import Screen

from engine.spec import preset_fix
from engine.stream.reader import load
from engine.stream.records import EngineAborted, RunFinished
from tui.live.live_screen import fix_hint
from tui.widgets.help_screen import HelpScreen, describe_bindings
from tui.widgets.key_footer import KeyFooter
from tui.widgets.run_panel import RunPanel
from tui.run_view import RunView
from tui.widgets.status_bar import Status

ROOT = Path(__file__).resolve().parents[1]
RECORDINGS = ROOT / "recordings"
OFF = RECORDINGS / "seed-5578-off.jsonl.zst"
TOGGLED = RECORDINGS / "seed-5578-off-then-strict.jsonl.zst"
STRICT = RECORDINGS / "seed-5578-strict.jsonl.zst"
LATE = RECORDINGS / "seed-5578-off-then-strict-late.jsonl.zst"
V1_OFF = RECORDINGS / "v1-thrash-off.jsonl.zst"  # vLLM 0.33's V1 engine: #25538's thrash
V1_TOGGLED = RECORDINGS / "v1-thrash-off-then-whole-context.jsonl.zst"
SIZES = [(80, 24), (120, 40), (160, 48), (220, 60)]
RECORDING_PATH = "recordings/20250601T120000Z-seed-5578-off.jsonl.zst"


def view_until(path: Path, until: int | None = None) -> RunView:
    """A recording as the live screen would hold it after step `until` (None: all of it)."""
    items = []
    recording = load(path)
    for item in recording.all_items():
        step = getattr(item, "step", None)
        if until is not None and (isinstance(item, (RunFinished, EngineAborted))
                                  or (step is not None and step > until)):
            continue
        items.append(item)
    return RunView.from_items(items)


def live_status(view: RunView, **overrides) -> Status:
    """What the live screen shows mid-run with recording on (fixed values: stable snapshots)."""
    over = view.abort is not None or view.finished is not None
    fields = dict(state="aborted" if view.abort else "finished" if over else "running",
                  steps_per_s=63.0, show_wall=True, recording=RECORDING_PATH,
                  recording_bytes=23_456,
                  hint="press R to restart" if over else
                  (fix_hint(preset_fix(view.header.spec.get("preset"), view.engine))
                   if view.policy == "off" else ""))
    fields.update(overrides)
    return Status(**fields)


class PanelScreen(Screen):
    """RunPanel plus the footer; `seek` moves a replay-style cursor."""

    BINDINGS = [
        Binding("f", "noop('f')", "fix on/off"),
        Binding("space", "noop('space')", "pause/resume"),
        Binding("less_than_sign", "noop('<')", "slower", key_display="<"),
        Binding("greater_than_sign", "noop('>')", "faster", key_display=">"),
        Binding("r", "noop('r')", "record on/off"),
        Binding("R", "noop('R')", "restart"),
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(self, view: RunView, status: Status, *, mode: str = "live",
                 banner_footer: str = "", window: int = 2000) -> None:
        super().__init__()
        self.view = view
        self.status_shown = status
        self.mode = mode
        self.banner_footer = banner_footer
        self.window = window

    def compose(self) -> ComposeResult:
        yield RunPanel(self.mode, id="panel")  # type: ignore[arg-type]
        yield KeyFooter()

    def on_mount(self) -> None:
        self.redraw()

    def on_resize(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        panel = self.query_one(RunPanel)
        view = self.view
        panel.show_text(view, self.status_shown, self.banner_footer)
        if self.mode == "live":
            hi = view.last_step
            panel.show_plots(view, max(view.first_step, hi - self.window + 1), hi)
        else:
            panel.show_plots(view, view.first_step, view.last_step, view.current_step)

    def seek(self, step: int) -> None:
        self.view.cursor = self.view.clamp(step)
        self.query_one(RunPanel).reset()
        self.redraw()

    def action_noop(self, key: str) -> None:
        """The live screen's keys, shown in the footer and the help; they do nothing here."""

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen("keys", describe_bindings(self.BINDINGS)))

    def action_quit(self) -> None:
        self.app.exit(0)


class HarnessApp(App[int]):
    TITLE = "vLLM scheduler observatory"
    ENABLE_COMMAND_PALETTE = False

    def __init__(self, screen: Screen) -> None:
        super().__init__()
        self._screen = screen

    def get_default_screen(self) -> Screen:
        return self._screen


def panel_app(view: RunView, status: Status, **kwargs) -> HarnessApp:
    return HarnessApp(PanelScreen(view, status, **kwargs))


def replay_status(name: str) -> Status:
    return Status(state="replay", steps_per_s=None, show_wall=False, source=f"replay {name}")
