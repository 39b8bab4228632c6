"""`observatory export PATH --format csv|perfetto`: one row per step, or a Chrome trace."""

from __future__ import annotations

import argparse
import sys

from engine.cli.base import CLISubcommand, add_lenient_flag
from engine.cli.reading import note_cut
from engine.exit_status import ExitStatus


class Export(CLISubcommand):
    name = "export"
    help = "export a recording as CSV (one row per step) or a Perfetto trace"
    description = ("Export a recording: CSV with one row per step, or a Chrome-trace JSON "
                   "that opens in ui.perfetto.dev (steps on the recording's time axis: "
                   "simulated, or measured on a GPU).")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("path", metavar="PATH", help="a recording")
        parser.add_argument("--format", choices=("csv", "perfetto"), required=True,
                            help="csv or perfetto")
        parser.add_argument("-o", "--output", metavar="OUT",
                            help="output file (- for stdout); default: next to the recording")
        add_lenient_flag(parser)

    def cmd(self, args: argparse.Namespace) -> int:
        from engine.analysis.export import default_output, export
        from engine.stream.reader import load

        recording = load(args.path, lenient=args.lenient)
        note_cut(recording)
        out = args.output or str(default_output(args.path, args.format))
        written = export(recording, args.format, out)
        if out != "-":
            aborted = (f" and step {recording.abort.step:,}, where vLLM aborted"
                       if recording.aborting_step() is not None else "")
            sys.stderr.write(f"wrote {out} ({args.format}, {len(recording):,} steps{aborted}, "
                             f"{written:,} bytes)\n")
        return ExitStatus.OK
