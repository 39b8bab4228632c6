"""The `observatory` console script: every subcommand, registered once here (the headless ones
from engine/cli/, then the three that open the Textual app), the parser, and `entry`.

It lives in tui/ because it is the one place that knows both halves; engine/ never imports the
UI. A bare `observatory` is `observatory live` with the defaults (sim, seed-5578, policy off,
recording on). Textual is imported only when a TUI command runs, so `observatory run` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from engine import console
from engine.cli.base import CLISubcommand
from engine.cli.registry import HEADLESS, build_parser, dispatch
from tui.cli.live import Live
from tui.cli.replay import Replay
from tui.cli.sweep_browse import SweepBrowse

SUBCOMMANDS: tuple[CLISubcommand, ...] = (*HEADLESS, Live(), Replay(), SweepBrowse())
"""Every subcommand of `observatory`, in the order `--help` lists them."""

DEFAULT = Live.name  # what a bare `observatory [flags]` runs


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The parsed command line; with no subcommand named, the default's."""
    console.stub_missing_streams()  # before argparse writes help or an error
    parser, _ = build_parser(SUBCOMMANDS)
    argv = list(argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = [DEFAULT, *argv]  # bare `observatory [flags]` is the live monitor
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    return dispatch(parse(sys.argv[1:] if argv is None else argv))


def entry() -> None:
    """The console script (pyproject: `observatory = "tui.cli:entry"`)."""
    from engine.adapters.v1.platform import reexec_for_v1_sim

    reexec_for_v1_sim(sys.orig_argv[1:])  # a V1 sim engine needs PYTHONHASHSEED=0 from start
    args = parse(sys.argv[1:])
    code = dispatch(args)
    if args.subcommand.fast_exit:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    sys.exit(code)
