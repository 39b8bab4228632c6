"""The headless subcommands, registered once each, and the parser, dispatch and `main` of
`python -m engine.cli` (the same commands without the TUI).

tui/cli/registry.py builds the `observatory` console script from `HEADLESS` plus the TUI's own
subcommands; engine/ never imports the UI. Every user error ends as one line on stderr and exit
2: argparse's own errors included (engine.cli.base.OneLineParser).
"""

from __future__ import annotations

import argparse
from typing import Any, Sequence

from engine import console, exit_status
from engine.adapters.versions import speaks
from engine.cli.base import CLISubcommand, OneLineParser
from engine.cli.compare import Compare
from engine.cli.engines import Engines
from engine.cli.exec import Exec
from engine.cli.export import Export
from engine.cli.fit import Fit
from engine.cli.fork import Fork
from engine.cli.hunt import Hunt
from engine.cli.import_log import ImportLog
from engine.cli.releases import Releases
from engine.cli.run import Run
from engine.cli.serve import Serve
from engine.cli.summary import Summary
from engine.cli.sweep import Sweep
from engine.cli.sweep_report import SweepReport
from engine.cli.tiny_model import TinyModel
from engine.cli.verify import Verify
from engine.cli.versions import Versions
from engine.errors import ObservatoryError
from engine.exit_status import ExitStatus
from engine.safe_text import safe

HEADLESS: tuple[CLISubcommand, ...] = (
    Run(), Serve(), Exec(), Engines(), Summary(), Compare(), Export(), Verify(), Fork(),
    ImportLog(), Fit(), Sweep(), SweepReport(), Hunt(), Releases(), Versions(), TinyModel())
"""Every headless subcommand, in the order `--help` lists them."""


def build_parser(subcommands: Sequence[CLISubcommand] = HEADLESS,
                 prog: str = "observatory") -> tuple[argparse.ArgumentParser, Any]:
    """The parser with one subparser per subcommand; the parsed args carry `subcommand`."""
    parser = OneLineParser(
        prog=prog,
        description=f"Watch vLLM's scheduler decide, one step at a time, on {speaks()}: V0's "
                    f"chunked prefill starving its swap space (vLLM issue #5578), V1 "
                    f"preempting the same requests again and again (#25538) or admitting no "
                    f"one while its KV cache has room (#31731, #53130). Flip the fix on live, "
                    f"and record, replay, compare and export every step.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for subcommand in subcommands:
        subcommand.subparser_init(sub)
    return parser, sub


def dispatch(args: argparse.Namespace) -> int:
    """Run a parsed command; an ObservatoryError becomes one line on stderr and its exit status
    (engine.exit_status: 2), and so does a failed write to stdout or stderr (engine.console).
    The Textual commands own the terminal, so their output is not guarded."""
    subcommand: CLISubcommand = args.subcommand
    guard_output = not subcommand.owns_terminal
    if guard_output:
        console.guard()
    else:
        console.stub_missing_streams()
    try:
        code = int(subcommand.cmd(args))
    except ObservatoryError as exc:
        console.say(f"observatory: error: {safe(exc)}")  # may quote a file's content
        code = exit_status.for_error(exc)
    except console.OutputError as exc:
        return console.fail(exc)
    return console.finish(code) if guard_output else code


def main(argv: Sequence[str] | None = None) -> int:
    console.stub_missing_streams()  # before argparse writes help or an error
    parser, _ = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "subcommand", None):
        parser.print_help()
        return ExitStatus.USAGE
    return dispatch(args)
