"""`observatory sweep-report DIR`: a sweep's rows as a table, with abort heatmaps."""

from __future__ import annotations

import argparse
import sys

from engine.cli.base import CLISubcommand
from engine.exit_status import ExitStatus

FORMATS = ("table", "csv", "json", "markdown")  # engine.sweep.report renders each


class SweepReport(CLISubcommand):
    name = "sweep-report"
    help = "print a sweep's table and abort heatmaps"
    description = ("Print the rows of a sweep directory as a table, with a heatmap of the "
                   "abort step (or survival) where two grid keys vary (one per policy when "
                   "policy varies too). Works on a sweep that is still running.")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("directory", metavar="DIR", help="a sweep directory")
        parser.add_argument("--format", choices=FORMATS, default="table",
                            help="table (default), csv, json or markdown")

    def cmd(self, args: argparse.Namespace) -> int:
        from engine.sweep.report import load, render

        report = load(args.directory)
        sys.stdout.write(render(report, args.format, color=sys.stdout.isatty()))
        return ExitStatus.OK
