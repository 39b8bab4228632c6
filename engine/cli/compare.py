"""`observatory compare A B [...]`: recorded runs side by side, with a CPU KV plot."""

from __future__ import annotations

import argparse
import sys

from engine.cli.base import CLISubcommand, add_json_flag, add_lenient_flag
from engine.cli.reading import note_cut
from engine.errors import ConfigError
from engine.exit_status import ExitStatus


class Compare(CLISubcommand):
    name = "compare"
    help = "compare recordings side by side, with a CPU KV plot"
    description = ("Compare recorded runs: peak CPU KV %, peak swapped, abort step, "
                   "throughput and TTFT on each recording's time axis (simulated, or measured "
                   "on a GPU), withheld-prefill steps, and the first step where each run's "
                   "decisions differ from the first run's (a fork and its original); then one "
                   "terminal plot of CPU KV-cache usage over steps. Each run is a letter (A, "
                   "B, ...): its column in the table, its mark on the plot and its line in "
                   "the key. Fits the terminal's width (80 columns when there is none).")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("paths", metavar="PATH", nargs="+", help="two or more recordings")
        add_json_flag(parser, help="print the metrics as JSON, no plot")
        parser.add_argument("--no-plot", action="store_true", help="print the table only")
        parser.add_argument("--wide", action="store_true",
                            help="every run side by side in one table, however wide (by "
                                 "default the runs that fit the terminal's width, or 80 "
                                 "columns without one, form a block, and the rest follow)")
        add_lenient_flag(parser)

    def cmd(self, args: argparse.Namespace) -> int:
        from engine.analysis.compare import (compare_json, compare_text, mark_divergence,
                                             run_metrics)
        from engine.stream.reader import load

        if len(args.paths) < 2:
            raise ConfigError("compare needs at least two recordings: observatory compare A B "
                              "[...]")
        recordings = [load(path, lenient=args.lenient) for path in args.paths]
        for recording in recordings:
            note_cut(recording)
        metrics = [run_metrics(r) for r in recordings]
        mark_divergence(metrics, recordings)
        if args.json:
            sys.stdout.write(compare_json(metrics) + "\n")
        else:
            sys.stdout.write(compare_text(metrics, recordings, plot=not args.no_plot,
                                          wide=args.wide) + "\n")
        return ExitStatus.OK
