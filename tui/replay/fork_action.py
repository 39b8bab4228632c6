"""`f` / `F` on a recorded run: fork it at the step on screen with the fix switched on, and
open the fork beside the original (the A/B compare screen), playheads linked, the first
differing step marked.

The screen that offers it (replay, and live once the run aborted) makes a `ForkAction` for its
recording. It starts the recording's fork host at once (engine.fork_link: a process that re-runs
the recording in the background and leaves snapshots on its way), so that by the time a step
is chosen, a fork there starts in about a second. A fork asked for before the re-run has got
there waits for it, and the screen's status line says how far it has got. The fork writes a
recording of its own beside the original (engine.analysis.fork.fork_path); this follows that
file and, once the fork has run past the fork step, hands it to a CompareScreen, which keeps
following it as it grows.

The host's messages and the fork file's growth come in as messages of their own (ForkSaid,
ForkGrew), so they never mix with the screen's own source.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from textual.message import Message
from textual.message_pump import MessagePump

from engine.errors import ObservatoryError
from tui.messages import RecordsArrived, StreamEnded
from tui.run_source import FollowSource
from tui.run_view import RunView


class ForkSaid(Message):
    """The fork host sent a message (engine.fork_link: Ready, At, Forked, Failed)."""

    def __init__(self, said: Any) -> None:
        super().__init__()
        self.said = said


class ForkGrew(Message):
    """The fork's recording has new records (or ended: `ended`)."""

    def __init__(self, ended: bool = False, error: str | None = None) -> None:
        super().__init__()
        self.ended = ended
        self.error = error

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ForkGrew) and not self.ended and not message.ended


class ForkFollow(FollowSource):
    """The fork's recording as it grows. Until `hand_to` it announces itself as ForkGrew to
    the screen that asked for the fork; then as any source, to the compare screen."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self._announce = True

    def _post(self, message: Any) -> None:
        if self._announce:
            if isinstance(message, RecordsArrived):
                message = ForkGrew()
            elif isinstance(message, StreamEnded):
                message = ForkGrew(ended=True, error=message.error)
        super()._post(message)

    def hand_to(self, target: MessagePump) -> None:
        self._announce = False
        self._target = target


class ForkAction:
    """One recording's fork host and the fork asked of it, for one screen."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.link: Any = None
        self.ready = False
        self.last: int | None = None  # the latest step a fork can switch before
        self.at: int | None = None  # how far the host's re-run has got
        self.asked: tuple[int, str, str] | None = None  # (step, policy, out) in flight
        self.fork_view: RunView | None = None
        self.follow: ForkFollow | None = None
        self.failed: str | None = None

    @staticmethod
    def spawn(path: str) -> Any:
        """The fork host for `path`, started now (a process: returns at once): the replay
        command starts it before its screen, whose start-up it then overlaps. None if it
        cannot start (the screen says why when `f` is pressed)."""
        from engine.fork_link import ForkLink

        try:
            return ForkLink.spawn(path)
        except ObservatoryError:
            return None

    def start(self, screen: MessagePump, link: Any = None) -> None:
        """Start the host (unless `link` is one started already) and the thread that reads
        it."""
        from engine.fork_link import ForkLink

        if link is None:
            try:
                link = ForkLink.spawn(self.path)
            except ObservatoryError as exc:
                self.failed = str(exc)
                return
        self.link = link

        def read() -> None:
            for said in link.messages():
                screen.post_message(ForkSaid(said))

        threading.Thread(target=read, name="observatory-fork-host", daemon=True).start()

    @property
    def busy(self) -> bool:
        return self.asked is not None

    def ask(self, step: int, policy: str) -> str | None:
        """Fork at `step` under `policy`; None, or why not (one line)."""
        from engine.analysis.fork import fork_path

        if self.failed is not None:
            return self.failed
        if self.link is None or self.link.closed:
            return "the fork host is not running"
        if self.asked is not None:
            return f"a fork at step {self.asked[0]:,} is on its way"
        if self.last is not None and step > self.last:
            return f"the recording ends before step {step:,}: fork at {self.last:,} or before"
        out = str(fork_path(self.path, step, policy))
        self.asked = (step, policy, out)
        try:
            self.link.fork(step, policy, out)
        except OSError:
            self.asked = None
            return "the fork host is gone"
        return None

    def heard(self, said: Any, screen: MessagePump) -> str | None:
        """Take a host message; returns a line to tell the user, if any."""
        from engine.fork_link import At, Failed, Forked, Ready

        kind = type(said)
        if kind is Ready:
            self.ready, self.last = True, said.last
        elif kind is At:
            self.at = said.step
        elif kind is Forked:
            self.fork_view = RunView(path=said.out)
            self.follow = ForkFollow(said.out)
            self.follow.start(screen)
        elif kind is Failed:
            if said.step is None:
                self.failed = said.message
            self.asked = None
            return said.message
        return None

    def grew(self) -> list:
        """The fork's new records, added to its view."""
        if self.follow is None or self.fork_view is None:
            return []
        items = self.follow.drain()
        for item in items:
            self.fork_view.add(item)
        return items

    @property
    def past_fork_step(self) -> bool:
        """The fork has run its first step under the new policy (or ended before)."""
        view = self.fork_view
        if view is None or self.asked is None:
            return False
        return bool(view.steps) and view.last_step >= self.asked[0] or view.finished is not None

    def handed(self) -> None:
        """The compare screen follows the fork from here: ready for another."""
        self.asked = None
        self.follow = None
        self.fork_view = None

    def progress(self) -> str:
        """The status line's words while a fork is on its way (or what f will do)."""
        if self.failed is not None:
            return f"no fork: {self.failed}"
        if self.asked is None:
            return ""
        step, policy, _ = self.asked
        if self.fork_view is not None and self.fork_view.steps:
            return (f"fork at step {step:,} under {policy}: step "
                    f"{self.fork_view.last_step:,} of {step:,}")
        if not self.ready:
            return f"fork at step {step:,} under {policy}: building the engine"
        return (f"fork at step {step:,} under {policy}: re-running the recording, step "
                f"{self.at or 0:,} of {step:,}")

    def close(self) -> None:
        if self.follow is not None:
            self.follow.close()
        if self.link is not None:
            self.link.close()


def name_of(path: str) -> str:
    return os.path.basename(path)


class ForkKeys:
    """What a screen with `f`/`F` forks has (replay; live after an abort): `forks` (a
    ForkAction or None), `fork_here(policy)`, the fork messages' handlers, and the status line's
    words. The screen says which step is on screen (`view.current_step`) and opens nothing
    else: the compare screen is pushed over it and `escape` comes back."""

    forks: ForkAction | None = None

    def start_forks(self, path: str, link: Any = None) -> None:
        if self.forks is None:
            self.forks = ForkAction(path)
            self.forks.start(self, link)  # type: ignore[arg-type]

    def fork_policy(self) -> str:
        """`f`: the run's fix where the step on screen runs without it, else `off`."""
        from engine.analysis.fork import fix_for

        view = self.view  # type: ignore[attr-defined]
        fix = fix_for(view.header.spec if view.header is not None else {}, view.engine)
        return "off" if view.policy == fix else fix

    def fork_here(self, policy: str) -> None:
        forks = self.forks
        if forks is None:
            self.notify("this recording cannot be forked here", timeout=4)  # type: ignore
            return
        step = self.view.current_step  # type: ignore[attr-defined]
        why = forks.ask(step, policy)
        if why is not None:
            self.notify(why, title="fork", severity="warning", timeout=6)  # type: ignore
        else:
            self.notify(f"forking at step {step:,} under {policy}: it opens beside this run "
                        f"when it gets there", title="fork", timeout=4)  # type: ignore
        self.request_frame()  # type: ignore[attr-defined]

    def on_fork_said(self, message: ForkSaid) -> None:
        forks = self.forks
        if forks is None:
            return
        line = forks.heard(message.said, self)  # type: ignore[arg-type]
        if line is not None:
            self.notify(line, title="fork", severity="error", timeout=10)  # type: ignore
        self.request_frame()  # type: ignore[attr-defined]

    def on_fork_grew(self, message: ForkGrew) -> None:
        forks = self.forks
        if forks is None or forks.follow is None:
            return
        forks.grew()
        if message.ended and message.error:
            self.notify(f"the fork's recording: {message.error}", title="fork",
                        severity="error", timeout=10)  # type: ignore
        if forks.past_fork_step or message.ended:
            self._open_fork()
        else:
            self.request_frame()  # type: ignore[attr-defined]

    def _open_fork(self) -> None:
        from tui.replay.compare_screen import CompareScreen

        forks = self.forks
        assert forks is not None and forks.fork_view is not None and forks.follow is not None
        view, follow = forks.fork_view, forks.follow
        step = forks.asked[0] if forks.asked else None
        names = [name_of(forks.path), name_of(view.path)]
        screen = CompareScreen([self.view, view], names,  # type: ignore[attr-defined]
                               sources=[None, follow], back=True, at=step)
        follow.hand_to(screen)
        forks.handed()
        self.app.push_screen(screen)  # type: ignore[attr-defined]

    def fork_hint(self) -> str:
        if self.forks is None:
            return ""
        return self.forks.progress() or "f: fork here with the fix (F: pick the policy)"
