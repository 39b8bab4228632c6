"""What every `observatory` subcommand is: a `CLISubcommand` (model: vLLM's
`vllm/entrypoints/cli/types.py`), and the parser they all hang from.

A subcommand says its name, its help and its flags in one class and runs in `cmd`; the parser
for it is made by `subparser_init` from those, so no module repeats the argparse set-up. The
registries (engine/cli/registry.py for the headless set, tui/cli/registry.py for all of them)
list the instances once each.

- A new flag of one subcommand: a line in its `add_arguments`, read in its `cmd` (one module).
- A new run setting: one annotated RunSpec field (engine/spec.py) is a flag of every command
  that takes the run flags, a --config key and a --grid key.
- A new subcommand: a module with one CLISubcommand (in tui/cli/ if it opens the app), and its
  instance in one registry's tuple.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, ClassVar

from engine import console
from engine.exit_status import ExitStatus


class OneLineParser(argparse.ArgumentParser):
    """argparse prints the whole usage block on error; we print one line that names the fix."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(ExitStatus.USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def _print_message(self, message: str, file: Any = None) -> None:
        """argparse drops a failed write (`--help > /dev/full` would exit 0): say so instead."""
        stream = file or sys.stderr
        if not message or stream is None:
            return super()._print_message(message, file)
        try:
            stream.write(message)
            stream.flush()
        except (OSError, ValueError) as exc:
            name = "stdout" if stream is sys.stdout else "stderr"
            console.fail(console.OutputError(getattr(exc, "errno", None) or 5,
                                             f"cannot write to {name}: "
                                             f"{getattr(exc, 'strerror', None) or exc}"))
            sys.exit(console.EXIT_OUTPUT)


class CLISubcommand:
    """One subcommand. Subclasses set `name` and `help` (and `description` for the
    subcommand's own --help), add their flags in `add_arguments`, and run in `cmd`, which
    returns the exit status (engine.exit_status) and raises an ObservatoryError (one line) for
    bad input.

    Heavy imports (vLLM, Ray, Textual) belong inside `cmd`, so that building the parser, and
    so `observatory --help` and the light commands, never pays for them.
    """

    name: ClassVar[str]
    help: ClassVar[str]
    description: ClassVar[str | None] = None
    owns_terminal: ClassVar[bool] = False
    """Opens the Textual app, which owns the terminal: stdout is not wrapped (engine.console
    guards the headless commands' output)."""
    fast_exit: ClassVar[bool] = False
    """Ends by skipping the interpreter's teardown (seconds on a loaded machine, with a whole
    widget tree and run index to free). Only for commands that own no file: in the TUI the
    engine process writes the recording. Commands that own files or child services (run,
    serve, sweep) exit normally."""

    def subparser_init(self, subparsers: Any) -> argparse.ArgumentParser:
        """Add this subcommand's parser to `subparsers`; the parsed args carry `self`."""
        parser = subparsers.add_parser(self.name, help=self.help, description=self.description)
        self.add_arguments(parser)
        parser.set_defaults(subcommand=self)
        return parser

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """This subcommand's flags and positionals (none by default)."""

    def cmd(self, args: argparse.Namespace) -> int:
        raise NotImplementedError(f"{type(self).__name__}.cmd")


# ---------------------------------------------------------------------- flags several share
def add_json_flag(parser: argparse.ArgumentParser,
                  help: str = "print the summary as JSON") -> None:
    parser.add_argument("--json", action="store_true", help=help)


def add_verbose_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print every vLLM log line (default: scheduler warnings only)")


def add_lenient_flag(parser: argparse.ArgumentParser,
                     help: str = "skip damaged lines and blocks (counted and reported) instead "
                                 "of refusing the file") -> None:
    parser.add_argument("--lenient", action="store_true", help=help)
