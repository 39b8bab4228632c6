"""Entry points the CLI (tui/cli.py) calls: `live` and `replay`. Each returns an exit code.

Bad input (a broken recording, a bad flag value) is a one-line message on stderr and exit
code 2, never a traceback. `live_app` / `replay_app` build the App without running it, for
tests, snapshots and the benchmark.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from engine.errors import ConfigError
from engine.spec import RunSpec
from tui.app import ObservatoryApp
from tui.run_view import RunView

MIN_SPEED, MAX_SPEED = 0.25, 64.0


def _fail(message: str) -> int:
    print(f"observatory: error: {message}", file=sys.stderr)
    return 2


def live_app(spec: RunSpec, record: str | None, window: int = 2000,
             session_factory=None) -> ObservatoryApp:
    from tui.live_screen import LiveScreen

    if record == "-":
        raise ConfigError("live mode draws on the terminal, so it cannot record to stdout "
                          "(-): give a file path or --no-record")
    kwargs = {} if session_factory is None else {"session_factory": session_factory}
    return ObservatoryApp(lambda: LiveScreen(spec, record, window, **kwargs))


def live(spec: RunSpec, record: str | None, window: int = 2000) -> int:
    """Run `spec` on the live monitor. `record`: a file path, or None for no recording."""
    try:
        spec = spec.validated()
        app = live_app(spec, record, window)
    except ConfigError as exc:
        return _fail(str(exc))
    try:
        code = app.run()
    finally:
        screen = app.main_screen
        if screen is not None:
            screen.shutdown()  # idempotent: stop the engine, close the recording
    recordings = getattr(app.main_screen, "recordings", [])
    for path in recordings:
        print(f"recording: {path}", file=sys.stderr)
    return code if isinstance(code, int) else 0


def _display_name(path: str) -> str:
    return "stdin" if path == "-" else Path(path).name


def load_view(path: str, lenient: bool = False) -> tuple[RunView, str | None]:
    """A whole recording as a RunView, plus a notice if it was truncated or had bad lines.

    Raises engine.stream.reader.RecordingError (a ConfigError) with the reader's message.
    """
    from engine.stream.reader import load

    view = load(path, lenient=lenient, into=RunView)
    recording = view
    notes = []
    if recording.truncated:
        notes.append("the recording is truncated (its writer stopped mid-line); "
                     "replaying what is there")
    if recording.skipped_lines:
        notes.append(f"{recording.skipped_lines} corrupt line(s) skipped (--lenient)")
    if recording.finished is None and not recording.truncated:
        notes.append("the recording has no end record: the run did not finish cleanly")
    return view, "; ".join(notes) or None


def replay_app(paths: list[str], speed: float = 1.0, follow: bool = False,
               lenient: bool = False, autoplay: bool = True) -> ObservatoryApp:
    """Build the replay (one path) or compare (two paths) app; raises ConfigError."""
    from tui.compare_screen import CompareScreen
    from tui.replay_screen import ReplayScreen

    if not 1 <= len(paths) <= 2:
        raise ConfigError(f"replay takes one recording, or two to compare; got {len(paths)}")
    if not MIN_SPEED <= speed <= MAX_SPEED:
        raise ConfigError(f"--speed must be between {MIN_SPEED:g} and {MAX_SPEED:g}, "
                          f"got {speed:g}")
    if follow:
        if len(paths) != 1:
            raise ConfigError("--follow follows one recording; compare needs finished ones")
        from engine.stream.reader import follow as follow_items

        path = paths[0]
        if path != "-" and not os.path.exists(path):
            raise ConfigError(f"{path}: no such file: start the writer first, or pass - to "
                              f"read a recording from stdin")
        view = RunView()

        def items(stop):
            return follow_items(path, stop=stop, lenient=lenient)

        return ObservatoryApp(lambda: ReplayScreen(view, title=_display_name(path),
                                                   speed=speed, autoplay=autoplay,
                                                   follow=items))
    loaded = [load_view(p, lenient) for p in paths]
    if len(paths) == 2:
        views = [v for v, _ in loaded]
        names = [_display_name(p) for p in paths]
        return ObservatoryApp(lambda: CompareScreen(views, names))
    view, notice = loaded[0]
    return ObservatoryApp(lambda: ReplayScreen(view, title=_display_name(paths[0]),
                                               speed=speed, autoplay=autoplay, notice=notice))


def _stdin_to_tty() -> None:
    """Replaying from a pipe: the recording comes in on stdin, keys must come from the terminal.

    Keep the pipe as `sys.stdin` (what the reader reads) and put the terminal on fd 0 (what
    Textual's driver reads).
    """
    if sys.stdin is None or sys.stdin.isatty():
        return
    pipe_fd = os.dup(0)
    try:
        tty = os.open("/dev/tty", os.O_RDONLY)
    except OSError:
        os.close(pipe_fd)
        return
    os.dup2(tty, 0)
    os.close(tty)
    sys.stdin = os.fdopen(pipe_fd, "r")
    sys.__stdin__ = open(0, "r", closefd=False)  # noqa: SIM115  (Textual reads sys.__stdin__)


def replay(paths: list[str], speed: float = 1.0, follow: bool = False,
           lenient: bool = False) -> int:
    """Replay one recording (or compare two); `follow` keeps up with a growing file or stdin."""
    from engine.stream.reader import RecordingError

    try:
        if "-" in paths and not follow:
            # Read the whole pipe first, then give fd 0 back to the terminal for the keys.
            app = replay_app(paths, speed, follow, lenient)
            _stdin_to_tty()
        else:
            if "-" in paths:
                _stdin_to_tty()
            app = replay_app(paths, speed, follow, lenient)
    except RecordingError as exc:
        return _fail(str(exc))
    except ConfigError as exc:
        return _fail(str(exc))
    code = app.run()
    return code if isinstance(code, int) else 0
