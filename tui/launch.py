"""Entry points the CLI (tui/cli/) calls: `live` and `replay`. Each returns an exit code.

Bad input (a broken recording, a bad flag value) is a one-line message on stderr and exit
code 2, never a traceback. `live_app` / `replay_app` build the App without running it, for
tests, snapshots and the benchmark.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import ConfigError, ObservatoryError
from engine.exit_status import ExitStatus
from engine.safe_text import safe
from engine.spec import RunSpec
from tui.playhead import MAX_SPEED, MIN_SPEED

if TYPE_CHECKING:  # textual and the run index load late: `live --connect` refuses before them
    from tui.app import ObservatoryApp
    from tui.live.live_screen import SourceFactory


def _fail(message: str) -> int:
    print(f"observatory: error: {safe(message)}", file=sys.stderr)  # may quote a file
    return ExitStatus.USAGE


RecordMode = str | None
"""Where a live run records: None (not at all), "auto" (runs/<time>-<preset>-<policy>,
named anew for every restart, so the name always says the policy that ran), or a path (the
first run; restarts then go back to "auto")."""


class LocalEngines:
    """The SourceFactory of a local engine: each spec runs in an engine child process
    (tui.run_source), held to `pace` steps per second if given, and holding `hold_s` seconds at
    the first sign of trouble (engine.host.attention) if given (wall clock only: neither is part
    of the spec). `prestart` starts the first one before the UI exists: vLLM's import, the
    longest part of start-up, then runs while the UI imports Textual and draws."""

    def __init__(self, record: RecordMode, pace: float | None = None,
                 hold_s: float | None = None) -> None:
        self.record, self.pace, self.hold_s = record, pace, hold_s
        self._paths = [record] if record not in (None, "auto") else []
        self._last = None  # the previous run's source: a restart waits for its engine
        self._early = None  # (spec, path, link) started by prestart, for the first source

    def _path(self, spec: RunSpec) -> str | None:
        from engine.stream.recorder import default_recording_path

        if self.record is None:
            return None
        return self._paths.pop() if self._paths else str(default_recording_path(spec))

    def prestart(self, spec: RunSpec) -> None:
        """Start the engine child for `spec` now (ConfigError, EngineError: one line)."""
        from engine.child import spawn_local

        path = self._path(spec)
        self._early = (spec, path, spawn_local(spec, path, pace=self.pace, hold_s=self.hold_s))

    def __call__(self, spec: RunSpec):
        from engine.child import spawn_local
        from tui.run_source import EngineSource

        early, self._early = self._early, None
        if early is not None and early[0] == spec:
            source = EngineSource(lambda: early[2])
            source.planned_recording = early[1]
        else:
            path = self._path(spec)
            before = self._last

            def open_link():
                if before is not None:  # on the new source's reader thread, not the UI's
                    before.wait_gone()  # the old engine process is gone before the new one
                return spawn_local(spec, path, pace=self.pace, hold_s=self.hold_s)

            source = EngineSource(open_link)
            source.planned_recording = path
        self._last = source
        return source


def local_engine_source(record: RecordMode, pace: float | None = None,
                        hold_s: float | None = None) -> LocalEngines:
    """Sources that run each spec in a local engine child process (LocalEngines)."""
    return LocalEngines(record, pace, hold_s)


def remote_engine_source(address: str, token: str, link=None,
                         engine: str | None = None) -> "SourceFactory":
    """A source attached to `observatory serve` at `address` (one run; no restart), through
    `link` if the caller has already connected; `engine` names one behind an exec hub."""
    from engine.stream.client import connect
    from tui.run_source import EngineSource

    return lambda _spec: EngineSource(
        lambda: link if link is not None else connect(address, token, client="tui",
                                                      engine=engine))


class HubEngines:
    """The engines behind an `observatory exec --serve` hub, for the live screen's `e`."""

    def __init__(self, address: str, token: str) -> None:
        self.address, self.token = address, token

    def engines(self) -> list:
        from engine.stream.client import list_engines

        return list_engines(self.address, self.token)

    def source(self, name: str) -> "SourceFactory":
        return remote_engine_source(self.address, self.token, None, name)


def _reference(path: str | None, offset_s: float, engine: int | None = None):
    """The real log to overlay (`--reference`), loaded before the app starts so that a bad file
    is a one-line error, not a broken screen."""
    if path is None:
        return None
    from engine.analysis.logs.reference import Reference

    return Reference.load(path, offset_s, engine)


def live_app(spec: RunSpec | None, record: RecordMode = "auto", window: int = 2000, *,
             connect: tuple[str, str] | None = None, reference: str | None = None,
             reference_offset: float = 0.0, link=None,
             reference_engine: int | None = None, pace: float | None = None,
             hold_s: float | None = None, prestart: bool = False,
             launched_at: float | None = None) -> ObservatoryApp:
    """The live monitor on a local engine child running `spec`, or attached to a server
    (`connect=(address, token)`, `spec` None), with a real log overlaid if `reference` names
    one. `pace` and `hold_s`: the local engine's (engine.session, engine.host.attention); the
    command line gives live's defaults, a caller that gives none gets neither. `prestart`:
    start the engine child now, before the app (LocalEngines.prestart); `launched_at`: the
    monotonic time the start-up clock counts from (default: when the screen starts). Raises
    ConfigError for bad arguments, EngineError if the engine process cannot start."""
    if record == "-":
        raise ConfigError("live mode draws on the terminal, so it cannot record to stdout "
                          "(-): give a file path or --no-record")
    ref = _reference(reference, reference_offset, reference_engine)
    factory = None
    if connect is None:
        assert spec is not None
        spec = spec.validated()
        factory = local_engine_source(record, pace, hold_s)
        if prestart:  # before Textual loads: the engine's start-up runs meanwhile
            factory.prestart(spec)
    from tui.app import ObservatoryApp
    from tui.live.live_screen import LiveScreen

    if connect is not None:
        address, token, *rest = connect
        engine = rest[0] if rest else None
        factory = remote_engine_source(address, token, link, engine)
        return ObservatoryApp(lambda: LiveScreen(None, factory, window, restartable=False,
                                                 title=engine or address, reference=ref,
                                                 hub=HubEngines(address, token)))
    title = f"paced {pace:g} steps/s" if pace else ""
    return ObservatoryApp(lambda: LiveScreen(spec, factory, window, reference=ref,
                                             title=title, launched_at=launched_at))


def live(spec: RunSpec | None, record: RecordMode = "auto", window: int = 2000, *,
         connect: tuple[str, str] | None = None, reference: str | None = None,
         reference_offset: float = 0.0, reference_engine: int | None = None,
         pace: float | None = None, hold_s: float | None = None) -> int:
    """Run the live monitor; print the recordings the engine wrote when it closes.

    With `connect`, the handshake comes first, before the app takes the terminal: a refusal
    (a wrong token, a closed port, a peer that is not an observatory) is one line and exit 2
    within the handshake's timeout, with no screen drawn and taken down again."""
    from tui.live.startup import process_age_s

    launched_at = time.monotonic() - process_age_s()
    link = None
    if connect is not None:
        from engine.stream.client import connect as open_link

        try:
            address, token, *rest = connect
            link = open_link(address, token, client="tui", engine=rest[0] if rest else None)
        except ObservatoryError as exc:  # PeerError: refused, unreachable, not an observatory
            return _fail(str(exc))
    try:
        app = live_app(spec, record, window, connect=connect, reference=reference,
                       reference_offset=reference_offset, link=link,
                       reference_engine=reference_engine, pace=pace, hold_s=hold_s,
                       prestart=connect is None, launched_at=launched_at)
    except ObservatoryError as exc:
        if link is not None:
            link.close()
        return _fail(str(exc))
    code = app.run()
    screen = app.main_screen
    refusal = getattr(screen, "refusal", None)
    if refusal:  # a wrong token, a closed port, a peer that is not an observatory
        return _fail(refusal)
    for line in closing_lines(screen):
        print(line, file=sys.stderr)
    return code if isinstance(code, int) else 0


def closing_lines(screen) -> list[str]:
    """What `live` says on stderr once the app has closed: a run cut short before its first
    step, and each recording the engine wrote that is on disk. A run quit while the engine was
    still being built had announced its path and written nothing, and `recording: PATH` named a
    file that was not there, right under "nothing was recorded"."""
    lines = []
    view = getattr(screen, "view", None)
    if view is not None and view.header is None and getattr(screen, "stage", ""):
        # quit before the first step (a model can take minutes to load): say what was cut short
        lines.append(f"observatory: quit before the first step ({screen.stage}): the engine "
                     f"process was stopped and nothing was recorded")
    lines += [f"recording: {path}" for path in getattr(screen, "recordings", [])
              if os.path.exists(path)]
    return lines


def _display_name(path: str) -> str:
    return "stdin" if path == "-" else Path(path).name


def replay_app(paths: list[str], speed: float = 1.0, follow: bool = False,
               lenient: bool = False, autoplay: bool = True, reference: str | None = None,
               reference_offset: float = 0.0, hold_whole_read=None,
               window_from_steps: int | None = None,
               reference_engine: int | None = None, freeze: bool = False,
               fork: bool = False) -> ObservatoryApp:
    """Build the replay (one path) or compare (two paths) app; raises ConfigError.
    How each file is read is the reader's choice (tui.run_source.open_replay).
    `hold_whole_read` (tests): a threading.Event the background read of an indexed recording
    waits for, so the window it opens on can be driven first. `window_from_steps`: how long
    an indexed recording must be to open on a window (tui.run_window.WINDOW_FROM_STEPS).
    `freeze`: the app owns the process (the `replay` command), so the background read moves
    the whole run out of the cyclic collector's sight when it is done (WholeRunLoader).
    `fork`: one recording file that can be re-run is re-run in the background from the start,
    so that `f` forks it at any step (tui.replay.fork_action)."""
    from tui.app import ObservatoryApp
    from tui.replay.replay_screen import ReplayScreen
    from tui.run_source import open_replay

    if not 1 <= len(paths) <= 2:
        raise ConfigError(f"replay takes one recording, or two to compare; got {len(paths)}")
    if not MIN_SPEED <= speed <= MAX_SPEED:
        raise ConfigError(f"--speed must be between {MIN_SPEED:g} and {MAX_SPEED:g}, "
                          f"got {speed:g}")
    if reference is not None and (follow or len(paths) != 1):
        raise ConfigError("--reference overlays a real log on one finished recording's replay")
    if follow and len(paths) != 1:
        raise ConfigError("--follow follows one recording; compare needs finished ones")
    if len(paths) == 1 and reference is None:  # one long recording may open on a window
        from tui.run_window import WINDOW_FROM_STEPS

        window = WINDOW_FROM_STEPS if window_from_steps is None else window_from_steps
    else:
        window = None
    opened = [open_replay(p, lenient, follow=follow, window_from_steps=window,
                          hold=hold_whole_read, freeze=freeze) for p in paths]
    if len(paths) == 2:
        from tui.replay.compare_screen import CompareScreen  # numpy, the A/B timeline: only here

        views = [o.view for o in opened]
        names = [_display_name(p) for p in paths]
        kinds = [v.engine for v in views]
        if kinds[0] != kinds[1]:  # A/B steps two runs side by side, in one engine's words
            raise ConfigError(f"A/B replay steps two runs of one engine side by side; "
                              f"{names[0]} is {kinds[0].upper()} and {names[1]} is "
                              f"{kinds[1].upper()}: compare them with `observatory compare "
                              f"{paths[0]} {paths[1]}`, or replay each alone")
        return ObservatoryApp(lambda: CompareScreen(views, names))
    (opening,) = opened
    if reference is not None:
        opening.view.reference = _reference(reference, reference_offset, reference_engine)
    fork_path = (paths[0] if fork and paths[0] != "-" and opening.source is None
                 and _forkable(opening, paths[0]) else None)
    link = _fork_host(fork_path)
    return ObservatoryApp(lambda: ReplayScreen(
        opening.view, title=_display_name(paths[0]), speed=speed, autoplay=autoplay,
        notice=opening.notice, source=opening.source, indexed=opening.indexed,
        loader=opening.loader, fork_path=fork_path, fork_link=link))


def _forkable(opening, path: str) -> bool:
    """Whether `f` can fork what replay opened: on a window of a long recording, from its
    header alone (its records are still being read); otherwise from the whole recording."""
    if opening.indexed is not None:
        return forkable_header(opening.view.header, path)
    return forkable(opening.view)


def _fork_host(path: str | None):
    """The recording's fork host, started before the app so that its engine builds while the
    screen does (tui.replay.fork_action); None without a path."""
    if path is None:
        return None
    from tui.replay.fork_action import ForkAction

    return ForkAction.spawn(path)


def forkable(recording) -> bool:
    """Whether `f` can fork this recording: the installed vLLM is its release (a fork re-runs
    it on this one) and it can be re-run (engine.analysis.rerun). Read from the loaded
    header and records: nothing is imported from vLLM."""
    from engine.analysis.rerun import is_own_sim_run
    from engine.traces.recording import lacks

    header = recording.header
    if header is None or header.backend == "log" or not recording.steps:
        return False
    try:
        from engine.analysis.verify import refuse_other_vllm

        refuse_other_vllm(recording.path, header.vllm_version)
    except ObservatoryError:
        return False
    return is_own_sim_run(header) or lacks(recording) is None


def forkable_header(header, path: str) -> bool:
    """`forkable` from a long recording's header alone (its records are still being read):
    a run of the observatory on the sim, on this vLLM. A program's own engine's recording
    forks once the whole of it is read (its requests are the workload): replay it whole."""
    from engine.analysis.rerun import is_own_sim_run

    try:
        from engine.analysis.verify import refuse_other_vllm

        refuse_other_vllm(path, header.vllm_version)
    except ObservatoryError:
        return False
    return is_own_sim_run(header)


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
           lenient: bool = False, reference: str | None = None,
           reference_offset: float = 0.0, reference_engine: int | None = None,
           fork: bool = True) -> int:
    """Replay one recording (or compare two); `follow` keeps up with a growing file or stdin."""
    try:
        if "-" in paths and not follow:
            # Read the whole pipe first, then give fd 0 back to the terminal for the keys.
            app = replay_app(paths, speed, follow, lenient, reference=reference,
                             reference_offset=reference_offset,
                             reference_engine=reference_engine, freeze=True)
            _stdin_to_tty()
        else:
            if "-" in paths:
                _stdin_to_tty()
            app = replay_app(paths, speed, follow, lenient, reference=reference,
                             reference_offset=reference_offset,
                             reference_engine=reference_engine, freeze=True, fork=fork)
    except ObservatoryError as exc:  # a damaged recording, a bad flag: one line
        return _fail(str(exc))
    # What is loaded now (the modules, a whole recording or a long one's window) lives as
    # long as the process: out of the cyclic collector's sight, a full collection during a
    # key walks only what the screen makes (a loaded 100,000-step run: ~100 ms a walk).
    gc.freeze()
    code = app.run()
    return code if isinstance(code, int) else 0
