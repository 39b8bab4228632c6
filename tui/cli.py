"""The `observatory` console script: the headless commands from engine.cli plus `live` and
`replay`, which open the Textual app.

It lives in tui/ because it is the one place that knows both halves; engine/ never imports the
UI. A bare `observatory` is `observatory live` with the defaults (sim, seed-5578, policy off,
recording on). Textual is imported only when a TUI command runs, so `observatory run` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from engine import console
from engine.cli import add_run_flags, build_parser, dispatch, spec_from_args
from engine.errors import ConfigError
from engine.options import bounded

DEFAULT_WINDOW = 2000
MAX_WINDOW = 1_000_000  # steps of plot history kept in memory per series


def need_terminal() -> None:
    """Textual reads keys from stdin and draws on stdout: both must exist."""
    if sys.__stdin__ is None or sys.__stdout__ is None:
        closed = "stdin" if sys.__stdin__ is None else "stdout"
        raise ConfigError(f"{closed} is closed: the TUI needs a terminal (for headless use: "
                          f"observatory run, summary, ...)")


def cmd_live(args: argparse.Namespace) -> int:
    from tui.launch import live

    need_terminal()
    overlay = {"reference": args.reference, "reference_offset": args.reference_offset}
    if args.connect:
        return live(None, window=args.window, connect=(args.connect, read_token(args)),
                    **overlay)
    spec = spec_from_args(args)
    record = None if args.no_record else (args.record or "auto")
    return live(spec, record, window=args.window, **overlay)  # refuses --record - itself


def add_reference_flags(parser: argparse.ArgumentParser) -> None:
    """--reference and its offset, the same for live and replay."""
    parser.add_argument("--reference", metavar="REF",
                        help="overlay a real run (from `observatory import-log`) on the plots")
    parser.add_argument("--reference-offset", default=0.0, metavar="S",
                        type=bounded(float, -86_400, 86_400, "--reference-offset"),
                        help="shift the reference by S seconds (e.g. a warm-up in its first "
                             "window)")


def read_token(args: argparse.Namespace) -> str:
    """The shared secret for --connect: --token-file, else $OBSERVATORY_TOKEN."""
    if args.token_file:
        try:
            token = Path(args.token_file).read_text().strip()
        except OSError as exc:
            raise ConfigError(f"cannot read --token-file {args.token_file}: "
                              f"{exc.strerror or exc}") from None
    else:
        token = os.environ.get("OBSERVATORY_TOKEN", "").strip()
    if not token:
        raise ConfigError("--connect needs the server's token: --token-file FILE (serve "
                          "prints the token, or writes it with its own --token-file) or "
                          "$OBSERVATORY_TOKEN")
    return token


def cmd_replay(args: argparse.Namespace) -> int:
    from tui.launch import replay

    need_terminal()
    return replay(args.paths, speed=args.speed, follow=args.follow, lenient=args.lenient,
                  reference=args.reference, reference_offset=args.reference_offset)


def build_full_parser() -> argparse.ArgumentParser:
    parser, sub = build_parser()
    live = sub.add_parser("live", help="open the live monitor (the default command)")
    add_run_flags(live)
    live.add_argument("--window", type=bounded(int, 10, MAX_WINDOW, "--window"),
                      default=DEFAULT_WINDOW,
                      help=f"steps shown in the live plots (default {DEFAULT_WINDOW})")
    add_reference_flags(live)
    attach = live.add_argument_group("attach to a running `observatory serve`")
    attach.add_argument("--connect", metavar="HOST:PORT",
                        help="watch and steer a server's run instead of starting an engine")
    attach.add_argument("--token-file", metavar="FILE",
                        help="file holding the server's token (default: $OBSERVATORY_TOKEN)")
    live.set_defaults(func=cmd_live)
    replay = sub.add_parser("replay", help="replay a recording (two: side by side)")
    replay.add_argument("paths", nargs="+", metavar="PATH", help="recording file, or - (stdin)")
    replay.add_argument("--speed", type=float, default=1.0, help="steps per tick multiplier")
    replay.add_argument("--follow", action="store_true", help="keep reading a growing file")
    replay.add_argument("--lenient", action="store_true", help="skip corrupt lines")
    add_reference_flags(replay)
    replay.set_defaults(func=cmd_replay)
    from tui.sweeps.sweep_command import register as register_sweep_browse

    register_sweep_browse(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    console.stub_missing_streams()  # before argparse writes help or an error
    parser = build_full_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = ["live", *argv]  # bare `observatory [flags]` is the live monitor
    args = parser.parse_args(argv)
    return dispatch(args, guard_output=args.command not in TUI_COMMANDS)


TUI_COMMANDS = ("live", "replay", "sweep-browse")
"""Commands that open the Textual app, which owns the terminal: their stdout is not wrapped
(engine.console guards the headless commands' output)."""

FAST_EXIT_COMMANDS = ("live", "replay")
"""Commands that end by skipping the interpreter's teardown (seconds on a loaded machine, with
a whole widget tree and run index to free). Safe because a UI process owns no file: the engine
process writes the recording. Commands that own files or child services (run, serve, sweep)
exit normally."""


def entry() -> None:
    from engine.adapters.v1.platform import reexec_for_v1_sim

    reexec_for_v1_sim(sys.orig_argv[1:])  # a V1 sim engine needs PYTHONHASHSEED=0 from start
    argv = sys.argv[1:]
    code = main(argv)
    command = next((a for a in argv if not a.startswith("-")), "live")
    if command in FAST_EXIT_COMMANDS:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    entry()
