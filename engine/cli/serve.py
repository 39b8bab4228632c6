"""`observatory serve`: run one engine headless, as `run` does, and stream it to any number of
clients over TCP (engine.stream.server): `observatory live --connect HOST:PORT --token-file F`
attaches the TUI. It prints its address and token on stderr. When the run ends it goes on
serving the finished run's history to clients that attach later, until SIGINT, SIGTERM or
SIGHUP; `--exit-when-done` exits instead. Exit statuses: engine/cli/hosting.py.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from engine.cli.base import CLISubcommand, add_verbose_flag
from engine.cli.hosting import Progress, count_signals, exit_code
from engine.cli.run_flags import add_pace_flag, add_run_flags, record_target, spec_from_args
from engine.errors import ConfigError, PeerError

DEFAULT_LISTEN = "127.0.0.1:0"
_LOOPBACK = ("127.0.0.1", "::1", "localhost")


class Serve(CLISubcommand):
    name = "serve"
    help = "run headless and let TUIs attach over TCP (observatory live --connect)"
    description = ("Run one engine headless and stream it to clients that attach with "
                   "`observatory live --connect HOST:PORT --token-file F`; they see the whole "
                   "run so far, then the live tail, and can switch the policy, pause, burst, "
                   "stop and toggle recording. The server records, as `run` does.")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_run_flags(parser)
        add_pace_flag(parser)
        parser.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                            help="address to listen on (default 127.0.0.1 on a free port, "
                                 "printed on stderr); use ssh -L to reach it from another "
                                 "machine")
        parser.add_argument("--token-file", metavar="FILE",
                            help="shared secret clients must present: read from FILE, or, if "
                                 "FILE does not exist, generated and written there (mode 600). "
                                 "Without it a token is generated and printed")
        parser.add_argument("--exit-when-done", action="store_true",
                            help="exit when the run ends instead of serving its history until "
                                 "SIGINT/SIGTERM")
        add_verbose_flag(parser)

    def cmd(self, args: argparse.Namespace) -> int:
        spec = spec_from_args(args)
        address = _listen_address(args.listen)
        err = sys.stderr
        token = _token(args.token_file, err)

        from engine.host import EngineHost
        from engine.stream.server import Server

        record = record_target(args, spec)
        if record == "-":
            raise ConfigError("serve records to a file (its stdout is free for nothing else): "
                              "give --record PATH or --no-record")
        host = EngineHost(spec, record, pace=args.pace or None)
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
            raise PeerError(f"cannot listen on {args.listen}: {exc.strerror or exc}") \
                from None
        log(f"listening on {server.address}")
        hint = f"--token-file {args.token_file}" if args.token_file else "--token-file FILE"
        if args.token_file is None:
            log(f"token {token}")
        log(f"attach with: observatory live --connect {server.address} {hint}")
        if address[0] not in _LOOPBACK:
            log("warning: the stream is not encrypted and the token is the only protection; "
                "prefer --listen 127.0.0.1:PORT with ssh -L")
        host.subscribe(Progress(err, verbose=args.verbose))
        server.start()
        signals = count_signals(host)
        host.start()
        host.wait()
        code = exit_code(host, signals)
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


def _listen_address(text: str) -> tuple[str, int]:
    from engine.stream.client import parse_address

    host, sep, port = text.rpartition(":")
    if sep and port == "0" and host:
        return host.strip("[]"), 0
    return parse_address(text)


def _token(path: str | None, err: Any) -> str:
    """--token-file's secret: read it, or generate one (and write it there, mode 600)."""
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
