"""`observatory run` and `observatory serve`: one engine, headless, through EngineHost (the same
recorder path as the live TUI's engine child).

- `run` runs the spec to its end in this process, prints a progress line about once a second and
  a summary, and records (engine.host).
- `serve` runs the same, and streams it to any number of clients over TCP (engine.stream.server):
  `observatory live --connect HOST:PORT --token-file F` attaches the TUI. It prints its address
  and token on stderr. When the run ends it goes on serving the finished run's history to
  clients that attach later, until SIGINT, SIGTERM or SIGHUP; `--exit-when-done` exits instead.

Exit codes: 0 finished (or reached --max-steps), 3 vLLM aborted, 4 the observatory's own code
failed (an ObserverError: a bug to report), 2 bad usage, 128+N stopped by signal N (130 for
Ctrl-C). The first SIGINT, SIGTERM or SIGHUP stops at the next step boundary and closes the
recording with its end record; a second one gives up on the engine at once.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
import threading
import time
from pathlib import Path

from engine import exit_status
from engine.cli import add_run_flags, spec_from_args
from engine.errors import ConfigError, EngineError, PeerError
from engine.exit_status import ExitStatus
from engine.safe_text import safe
from engine.stream.protocol import RecordingStatus
from engine.stream.records import (RECORD_TYPES, Header, LogLine, ObserverError, StepRecord,
                                   V1StepRecord)

EXIT_OBSERVER_ERROR = ExitStatus.OBSERVER_ERROR
DEFAULT_LISTEN = "127.0.0.1:0"
_LOOPBACK = ("127.0.0.1", "::1", "localhost")
_RUN_ITEMS = (Header, *RECORD_TYPES)  # what a summary reads (not the service messages)


def register(sub) -> None:
    run = sub.add_parser("run", help="run headless, print progress and a summary")
    add_run_flags(run)
    run.add_argument("--json", action="store_true", help="print the summary as JSON")
    run.add_argument("--dry-run", action="store_true",
                     help="resolve what the run would start with (vLLM, executor, platform, "
                          "engine arguments, model) and print it, without building the "
                          "engine; offline, no CUDA needed")
    run.add_argument("-v", "--verbose", action="store_true",
                     help="print every vLLM log line (default: scheduler warnings only)")
    run.set_defaults(func=cmd_run)

    serve = sub.add_parser(
        "serve", help="run headless and let TUIs attach over TCP (observatory live --connect)",
        description="Run one engine headless and stream it to clients that attach with "
                    "`observatory live --connect HOST:PORT --token-file F`; they see the whole "
                    "run so far, then the live tail, and can switch the policy, pause, burst, "
                    "stop and toggle recording. The server records, as `run` does.")
    add_run_flags(serve)
    serve.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                       help="address to listen on (default 127.0.0.1 on a free port, printed "
                            "on stderr); use ssh -L to reach it from another machine")
    serve.add_argument("--token-file", metavar="FILE",
                       help="shared secret clients must present: read from FILE, or, if FILE "
                            "does not exist, generated and written there (mode 600). Without "
                            "it a token is generated and printed")
    serve.add_argument("--exit-when-done", action="store_true",
                       help="exit when the run ends instead of serving its history until "
                            "SIGINT/SIGTERM")
    serve.add_argument("-v", "--verbose", action="store_true",
                       help="print every vLLM log line (default: scheduler warnings only)")
    serve.set_defaults(func=cmd_serve)


# ---------------------------------------------------------------------- shared
class _Progress:
    """One stderr line about once a second: enough to see Swapped climb without a TUI. Also the
    things a headless user must not miss: a recording that stopped, an observatory bug."""

    def __init__(self, stream, verbose: bool = False) -> None:
        self.stream = stream
        self.verbose = verbose
        self.last = 0.0

    def __call__(self, item) -> None:
        kind = type(item)
        if kind is StepRecord:
            now = time.monotonic()
            if now - self.last >= 1.0:
                self.last = now
                self._line(f"step {item.step:>6}  running {item.running:>4}  swapped "
                           f"{item.swapped:>4}  waiting {item.waiting:>5}  GPU "
                           f"{item.gpu_pct:5.1f}%  CPU {item.cpu_pct:5.1f}%  policy "
                           f"{item.policy}")
        elif kind is V1StepRecord:
            now = time.monotonic()
            if now - self.last >= 1.0:
                self.last = now
                self._line(f"step {item.step:>6}  running {item.running:>4}  waiting "
                           f"{item.waiting:>5}  GPU {item.gpu_pct:5.1f}%  preempted "
                           f"{len(item.preempted):>3}  finished {item.finished_total:>5}  "
                           f"policy {item.policy}")
        elif kind is LogLine and (self.verbose or (
                item.level in ("WARNING", "ERROR", "CRITICAL")
                and item.logger.startswith("vllm.core"))):
            times = f" (x{item.repeats})" if item.repeats > 1 else ""
            self._line(f"vllm {item.level.lower()}: {safe(item.message[:200])}{times}")
        elif kind is RecordingStatus and item.error is not None and item.closed is None:
            self._line(f"observatory: warning: recording stopped: {item.path}: {item.error}")
        elif kind is ObserverError:
            self._line(f"observatory: internal error at step {item.step} in {item.where} (a bug "
                       f"in the observatory, not in vLLM): {item.error}: {item.message}")

    def _line(self, text: str) -> None:
        try:
            self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away (SIGHUP follows): run on
            pass


def _record_target(args: argparse.Namespace, spec) -> str | None:
    if args.no_record:
        return None
    if args.record:
        return args.record
    from engine.stream.recorder import default_recording_path

    return str(default_recording_path(spec))


def _exit_code(host, signals: list[int]) -> int:
    if host.start_error is not None and host.finished is None:
        if signals:
            return exit_status.for_signal(signals[0])
        raise EngineError(host.start_error)
    if signals:
        return exit_status.for_signal(signals[0])
    reason = host.finished.reason if host.finished is not None else "interrupted"
    return exit_status.for_run_end(reason)


def _count_signals(host) -> list[int]:
    """Record which signal stopped the run (for the exit code), then let the host handle it."""
    seen: list[int] = []
    handlers = {}

    def wrapper(signum, frame) -> None:  # noqa: ANN001
        seen.append(signum)
        handlers[signum](signum, frame)

    host.install_signal_handlers()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        handlers[sig] = signal.getsignal(sig)
        signal.signal(sig, wrapper)
    return seen


# ---------------------------------------------------------------------- run
def cmd_run(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)  # before importing vLLM: bad flags fail in milliseconds
    if args.dry_run:
        from engine import dry_run

        return dry_run.run(spec, args.json)

    from engine.analysis.summary import SummaryBuilder, format_summary, summary_json
    from engine.host import EngineHost

    record = _record_target(args, spec)
    host = EngineHost(spec, record)
    host.open_recording()  # a bad --record PATH fails before vLLM loads
    builder = SummaryBuilder()
    host.subscribe(lambda item: builder.add(item) if isinstance(item, _RUN_ITEMS) else None)
    host.subscribe(_Progress(sys.stderr, verbose=args.verbose))
    signals = _count_signals(host)
    host.start()
    host.wait()
    code = _exit_code(host, signals)

    if host.finished is not None:
        summary = builder.result()
        out = sys.stderr if record == "-" else sys.stdout
        out.write((summary_json(summary) if args.json else format_summary(summary)) + "\n")
        out.flush()
    for status in host.closed_recordings:
        if status.error is not None:
            sys.stderr.write(f"observatory: warning: recording stopped early: {status.error}\n")
        elif status.closed != "-":
            sys.stderr.write(f"recorded {status.records} records to {status.closed} "
                             f"({status.bytes:,} bytes)\n")
    return code


# ---------------------------------------------------------------------- serve
def _listen_address(text: str) -> tuple[str, int]:
    from engine.stream.client import parse_address

    host, sep, port = text.rpartition(":")
    if sep and port == "0" and host:
        return host.strip("[]"), 0
    return parse_address(text)


def _token(path: str | None, err) -> str:
    if path is None:
        return secrets.token_urlsafe(24)
    file = Path(path)
    if file.exists():
        try:
            token = file.read_text().strip()
        except OSError as exc:
            raise ConfigError(f"cannot read --token-file {path}: {exc.strerror}") from None
        if not token:
            raise ConfigError(f"--token-file {path} is empty: put a secret in it, or delete "
                              f"it to have one generated")
        return token
    token = secrets.token_urlsafe(24)
    try:
        fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
    except OSError as exc:
        raise ConfigError(f"cannot write --token-file {path}: {exc.strerror}") from None
    err.write(f"observatory serve: wrote a new token to {path}\n")
    return token


def cmd_serve(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    address = _listen_address(args.listen)
    err = sys.stderr
    token = _token(args.token_file, err)

    from engine.host import EngineHost
    from engine.stream.server import Server

    record = _record_target(args, spec)
    if record == "-":
        raise ConfigError("serve records to a file (its stdout is free for nothing else): give "
                          "--record PATH or --no-record")
    host = EngineHost(spec, record)
    host.open_recording()

    def log(line: str) -> None:
        try:
            err.write(f"observatory serve: {line}\n")
            err.flush()
        except (OSError, ValueError):
            pass

    try:
        server = Server(host, address, token, log=log)
    except OSError as exc:
        raise PeerError(f"cannot listen on {args.listen}: {exc.strerror or exc}") from None
    log(f"listening on {server.address}")
    hint = f"--token-file {args.token_file}" if args.token_file else "--token-file FILE"
    if args.token_file is None:
        log(f"token {token}")
    log(f"attach with: observatory live --connect {server.address} {hint}")
    if address[0] not in _LOOPBACK:
        log("warning: the stream is not encrypted and the token is the only protection; "
            "prefer --listen 127.0.0.1:PORT with ssh -L")
    host.subscribe(_Progress(err, verbose=args.verbose))
    server.start()
    signals = _count_signals(host)
    host.start()
    host.wait()
    code = _exit_code(host, signals)
    for status in host.closed_recordings:
        log(f"recorded {status.records} records to {status.closed} ({status.bytes:,} bytes)"
            + (f"; stopped early: {status.error}" if status.error else ""))
    if not args.exit_when_done and not signals:
        log("the run is over; still serving its history to clients that attach. "
            "Ctrl-C (or SIGTERM) exits")
        quit_now = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, lambda signum, frame: quit_now.set())
        while not quit_now.wait(1.0):
            pass
    server.close()
    return code
