"""`observatory verify PATH`: re-run a recording on the sim backend and check every decision.
Exit 0 if all match, 1 naming the first difference."""

from __future__ import annotations

import argparse
import sys

from engine.cli.base import CLISubcommand
from engine.errors import ObservatoryError
from engine.exit_status import ExitStatus
from engine.safe_text import safe


class Verify(CLISubcommand):
    name = "verify"
    help = "re-run a recording on the sim backend and check every decision"
    description = ("Re-run the recording's config on the sim backend, with its policy changes "
                   "and bursts at their recorded steps, and check that every step decides "
                   "the same. Exit 0 if all match, 1 naming the first difference.")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("path", metavar="PATH", help="a recording made with --backend sim")

    def cmd(self, args: argparse.Namespace) -> int:
        from engine.analysis.verify import verify_file

        try:
            result = verify_file(args.path, progress=sys.stderr)
        except ObservatoryError as exc:  # name the file (a header's spec does not know its path)
            text = str(exc)
            raise type(exc)(text if text.startswith(args.path) else f"{args.path}: {text}") \
                from None
        if result.ok:
            sys.stdout.write(f"verified: {safe(result.message)}\n")
            return ExitStatus.OK
        sys.stdout.write(f"verify failed: {safe(result.message)}\n")
        return ExitStatus.DIFFERENCE
