"""Replay: the run screen over a recording, with play/pause and speed.

The plots show the whole run (or everything followed so far) with a cursor line; the table,
detail and event log show the run as it stood at the cursor. 1x plays at the pace the run was
recorded (its wall-clock times); `<`/`>` halve and double that between 0.25x and 64x. With
`--follow` a FollowSource keeps appending and the cursor follows the newest step until you move
it (`end` follows again).

A long recording with an index opens on a window of its last steps, paused at the last one
(tui.run_window), while a WholeRunLoader reads the whole file; a jump outside the window
before that lands decodes the frames it needs, and the whole run then replaces the window
where the cursor is. The same widgets draw both.

`f` forks the run at the step on screen with the fix switched on, `F` with a policy picked:
the recording is re-run in the background from the moment the screen opens
(tui.replay.fork_action), and the fork opens beside it in the A/B compare screen.
"""

from __future__ import annotations

from textual.binding import Binding

from tui.live.policy_picker import PolicyPicker
from tui.messages import RunLoaded
from tui.playhead import MAX_SPEED, MIN_SPEED
from tui.playhead_keys import FASTER, PLAY, SLOWER
from tui.replay.fork_action import ForkKeys
from tui.run_screen import NAVIGATION, RunScreen
from tui.run_source import RunSource
from tui.run_view import RunView
from tui.widgets.status_bar import Status

__all__ = ["ReplayScreen", "MIN_SPEED", "MAX_SPEED"]


class ReplayScreen(ForkKeys, RunScreen):
    """Move a cursor over `view`; a `source` (a followed file) keeps appending to it. With
    `fork_path` (the recording's file), `f` / `F` fork the run at the step on screen
    (tui.replay.fork_action)."""

    BINDINGS = [
        PLAY,
        Binding("f", "fork_fix", "fork with the fix here"),
        Binding("F", "fork_pick", "fork: pick policy"),
        SLOWER,
        FASTER,
        *NAVIGATION,
    ]
    HELP_TITLE = "replay keys"
    HELP_FOOTER = ("Click a point on a plot to seek there; choose a decisions row to seek to it. "
                   "f re-runs the recording with the fix switched on from the step on screen "
                   "(F picks the policy) and opens the fork beside it; escape comes back.")

    def __init__(self, view: RunView, *, title: str = "", speed: float = 1.0,
                 autoplay: bool = True, source: RunSource | None = None,
                 notice: str | None = None, indexed=None, loader=None,
                 fork_path: str | None = None, fork_link=None) -> None:
        super().__init__(view, source=source, following=source is not None, title=title,
                         speed=speed, playing=autoplay and source is None and loader is None,
                         notice=notice)
        self.indexed = indexed  # engine.stream.reader.IndexedFile while on a window
        self.loader = loader  # tui.run_window.WholeRunLoader, reading the whole run
        self.fork_path = fork_path  # the recording's file: f forks it (None: no forks)
        self._fork_link = fork_link  # its fork host, if the command started it already
        if loader is not None:
            self.playhead.seek(view.last_step)
            self._show_playhead()

    @property
    def windowed(self) -> bool:
        """On a window of the run (the whole run is still being read)."""
        return self.indexed is not None

    def begin(self) -> None:
        super().begin()
        if self.loader is not None:  # once the window is on screen: it must not wait for this
            self.call_after_refresh(self.loader.start, self)
        if self.fork_path is not None:  # the re-run a fork starts from, in the background
            self.start_forks(self.fork_path, self._fork_link)

    def on_unmount(self) -> None:
        if self.forks is not None:
            self.forks.close()

    def on_screen_resume(self) -> None:
        """Back from a fork's compare screen, which moved the view's cursor."""
        self._show_playhead()
        self.draw(plots=True)

    def status(self) -> Status:
        status = super().status()
        status.hint = self.fork_hint()
        return status

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The fork keys only where this replay can fork (a recording file, re-run in the
        background: not --no-fork, a followed stream or stdin)."""
        if action in ("fork_fix", "fork_pick"):
            return self.fork_path is not None
        return True

    def action_fork_fix(self) -> None:
        if self._fork_refused():
            return
        self.fork_here(self.fork_policy())

    def action_fork_pick(self) -> None:
        if self._fork_refused():
            return
        self.app.push_screen(PolicyPicker(self.view.policy, self.view.engine),
                             lambda picked: picked and self.fork_here(picked))

    def _fork_refused(self) -> bool:
        if self.windowed:
            self.notify("still reading the whole recording: fork once it is loaded", timeout=4)
            return True
        return False

    def span(self) -> tuple[int, int]:
        index = self.indexed.index if self.indexed is not None else None
        if index is not None and index.first_step is not None and index.last_step is not None:
            aborted = (index.summary or {}).get("abort_step")  # shown after the last step
            if isinstance(aborted, int) and aborted == index.last_step + 1:
                return index.first_step, aborted
            return index.first_step, index.last_step
        return super().span()

    def adopt(self, view: RunView) -> None:
        """Show `view` (the whole run, or another window) where the cursor is, playing on if
        it was."""
        head = self.playhead
        self.view = view
        self.playhead = self._playhead_for(view, speed=head.speed, playing=False,
                                           following=False, ended=head.ended)
        self.playhead.seek(head.position)
        self.playhead.playing = head.playing
        self._show_playhead()
        self.query_one("#panel").reset()
        self.draw(plots=True)

    def on_run_loaded(self, message: RunLoaded) -> None:
        if message.view is None:
            self.view.notice(f"could not read the whole recording: {message.error}", "error")
            self.notify(message.error or "", title="recording", severity="error", timeout=10)
            self.indexed = None
            return
        self.indexed = None
        self.adopt(message.view)  # type: ignore[arg-type]

    def on_key(self, _event) -> None:
        self._busy()

    def _busy(self) -> None:
        if self.loader is not None and self.indexed is not None:
            self.loader.busy()  # the whole read pauses while the user moves

    def action_goto(self) -> None:
        self._busy()
        super().action_goto()

    def go(self, step: int) -> None:
        """A jump outside the window, before the whole run is read: decode its frames."""
        self._busy()
        view = self.view
        if self.indexed is not None and view.header is not None \
                and not view.first_step <= step <= view.last_step:
            from tui.run_window import IndexDamaged, window_at

            first, last = self.span()
            try:
                window = window_at(self.indexed, view.header, max(first, min(last, step)))
            except (IndexDamaged, OSError) as exc:
                self.notify(f"that part of the file cannot be read yet ({exc})", timeout=3)
            else:
                window.cursor = view.cursor
                self.view = window
                self.playhead = self._playhead_for(window, speed=self.playhead.speed,
                                                   ended=True)
        super().go(step)

    def action_seek_end(self) -> None:
        self._busy()
        if self.indexed is not None:
            self.go(self.span()[1])
            return
        super().action_seek_end()

    def redraw(self, force_plots: bool = True) -> None:
        """Paint now (tests and the benchmark call this directly)."""
        self.draw(plots=force_plots)
