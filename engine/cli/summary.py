"""`observatory summary PATH`: what `run` printed for the run that made the recording."""

from __future__ import annotations

import argparse
import sys

from engine.cli.base import CLISubcommand, add_json_flag, add_lenient_flag
from engine.cli.reading import note_cut
from engine.exit_status import ExitStatus


class Summary(CLISubcommand):
    name = "summary"
    help = "print the summary of a recording (what `run` printed for it)"
    description = ("Print the summary of a recorded run: identical to what `observatory run` "
                   "printed when it made the recording.")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("path", metavar="PATH",
                            help="a recording (.jsonl or .jsonl.zst; - for stdin)")
        add_json_flag(parser)
        add_lenient_flag(parser)

    def cmd(self, args: argparse.Namespace) -> int:
        from engine.analysis.summary import format_summary, summarize, summary_json
        from engine.stream.reader import load

        recording = load(args.path, lenient=args.lenient)
        note_cut(recording)
        summary = summarize(recording.all_items())
        sys.stdout.write((summary_json(summary) if args.json else format_summary(summary))
                         + "\n")
        return ExitStatus.OK
