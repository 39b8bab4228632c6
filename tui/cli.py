"""The `observatory` console script: the headless commands from engine.cli plus `live` and
`replay`, which open the Textual app.

It lives in tui/ because it is the one place that knows both halves; engine/ never imports the
UI. A bare `observatory` is `observatory live` with the defaults (sim, seed-5578, policy off,
recording on). Textual is imported only when a TUI command runs, so `observatory run` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from engine.cli import add_run_flags, build_parser, dispatch, spec_from_args
from engine.errors import ConfigError

DEFAULT_WINDOW = 2000


def cmd_live(args: argparse.Namespace) -> int:
    from tui.launch import live

    spec = spec_from_args(args)
    if args.window < 10:
        raise ConfigError(f"--window must be at least 10 steps, got {args.window}")
    record = None
    if not args.no_record:
        from engine.stream.recorder import default_recording_path

        record = args.record or str(default_recording_path(spec))
    return live(spec, record, window=args.window)  # refuses --record - itself


def cmd_replay(args: argparse.Namespace) -> int:
    from tui.launch import replay

    return replay(args.paths, speed=args.speed, follow=args.follow, lenient=args.lenient)


def build_full_parser() -> argparse.ArgumentParser:
    parser, sub = build_parser()
    live = sub.add_parser("live", help="open the live monitor (the default command)")
    add_run_flags(live)
    live.add_argument("--window", type=int, default=DEFAULT_WINDOW,
                      help=f"steps shown in the live plots (default {DEFAULT_WINDOW})")
    live.set_defaults(func=cmd_live)
    replay = sub.add_parser("replay", help="replay a recording (two: side by side)")
    replay.add_argument("paths", nargs="+", metavar="PATH", help="recording file, or - (stdin)")
    replay.add_argument("--speed", type=float, default=1.0, help="steps per tick multiplier")
    replay.add_argument("--follow", action="store_true", help="keep reading a growing file")
    replay.add_argument("--lenient", action="store_true", help="skip corrupt lines")
    replay.set_defaults(func=cmd_replay)
    from tui.sweep_command import register as register_sweep_browse

    register_sweep_browse(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_full_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = ["live", *argv]  # bare `observatory [flags]` is the live monitor
    args = parser.parse_args(argv)
    return dispatch(args)


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
