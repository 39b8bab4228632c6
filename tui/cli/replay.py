"""`observatory replay PATH [PATH]`: a recording on the TUI (two: side by side)."""

from __future__ import annotations

import argparse

from engine.cli.base import add_lenient_flag
from tui.cli.base import TUISubcommand, add_reference_flags, need_terminal


class Replay(TUISubcommand):
    name = "replay"
    help = "replay a recording (two: side by side)"
    fast_exit = True

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("paths", nargs="+", metavar="PATH",
                            help="recording file, or - (stdin)")
        parser.add_argument("--speed", type=float, default=1.0, help="steps per tick multiplier")
        parser.add_argument("--follow", action="store_true", help="keep reading a growing file")
        add_lenient_flag(parser, help="skip corrupt lines")
        parser.add_argument("--no-fork", action="store_true",
                            help="do not re-run the recording in the background (f and F, "
                                 "which fork the run at the step on screen, then say so)")
        add_reference_flags(parser)

    def cmd(self, args: argparse.Namespace) -> int:
        from tui.launch import replay

        need_terminal()
        return replay(args.paths, speed=args.speed, follow=args.follow, lenient=args.lenient,
                      reference=args.reference, reference_offset=args.reference_offset,
                      reference_engine=args.reference_engine, fork=not args.no_fork)
