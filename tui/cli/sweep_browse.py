"""`observatory sweep-browse DIR`: the sweep's cells on the TUI (tui/sweeps/sweep_screen.py)."""

from __future__ import annotations

import argparse

from tui.cli.base import TUISubcommand


class SweepBrowse(TUISubcommand):
    name = "sweep-browse"
    help = "browse a sweep's cells; Enter replays a kept recording"
    description = ("List a sweep's cells in a table sortable by any column (s, or click a "
                   "header); Enter replays the cell's recording when the sweep kept it "
                   "(--record-cells).")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("directory", metavar="DIR", help="a sweep directory")

    def cmd(self, args: argparse.Namespace) -> int:
        code = browse_app(args.directory).run()
        return code if isinstance(code, int) else 0


def browse_app(directory: str):
    """The app showing the sweep in `directory`; raises ConfigError for a bad directory."""
    from engine.sweep.report import load
    from tui.app import ObservatoryApp
    from tui.sweeps.sweep_screen import SweepScreen

    report = load(directory)
    return ObservatoryApp(lambda: SweepScreen(directory, report))
