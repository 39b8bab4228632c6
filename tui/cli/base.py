"""What the subcommands that open the Textual app share: they own the terminal, so they need
one, and live and replay take the same --reference flags."""

from __future__ import annotations

import argparse
import sys

from engine.cli.base import CLISubcommand
from engine.errors import ConfigError
from engine.options import bounded


class TUISubcommand(CLISubcommand):
    """A subcommand that opens the Textual app, which owns the terminal: its output is not
    wrapped (engine.cli.registry.dispatch). Textual is imported only in `cmd`, so building the
    parser stays as cheap as for the headless commands."""

    owns_terminal = True


def need_terminal() -> None:
    """Textual reads keys from stdin and draws on stdout: both must exist."""
    if sys.__stdin__ is None or sys.__stdout__ is None:
        closed = "stdin" if sys.__stdin__ is None else "stdout"
        raise ConfigError(f"{closed} is closed: the TUI needs a terminal (for headless use: "
                          f"observatory run, summary, ...)")


def add_reference_flags(parser: argparse.ArgumentParser) -> None:
    """--reference, its offset and (V1, data parallel) its engine, the same for live and
    replay."""
    parser.add_argument("--reference", metavar="REF",
                        help="overlay a real run (from `observatory import-log`) on the plots")
    parser.add_argument("--reference-offset", default=0.0, metavar="S",
                        type=bounded(float, -86_400, 86_400, "--reference-offset"),
                        help="shift the reference by S seconds (e.g. a warm-up in its first "
                             "window)")
    parser.add_argument("--reference-engine", default=None, metavar="N",
                        type=bounded(int, -1, 1_000_000, "--reference-engine"),
                        help="a V1 log of several data-parallel engines: draw engine N's "
                             "series (default the lowest; -1 the log's aggregate line)")
