"""The headless half of the `observatory` command line: run flags, `run` and `serve`
(registered by engine.run_commands), and the recording commands (engine.analysis.commands).

tui/cli.py is the console script; it adds `live` and `replay` on top of what this module builds,
so the engine never imports the UI. Every user error ends as one line on stderr and exit 2:
argparse's own errors included (see `OneLineParser`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

from engine import console, exit_status, options
from engine.adapters.versions import speaks
from engine.errors import ConfigError, ObservatoryError
from engine.exit_status import ExitStatus
from engine.safe_text import safe
from engine.spec import RunSpec, resolve_spec

EXIT_OK, EXIT_VERIFY_FAILED, EXIT_USAGE, EXIT_ABORTED = (  # engine.exit_status says why
    ExitStatus.OK, ExitStatus.DIFFERENCE, ExitStatus.USAGE, ExitStatus.ABORTED)


class OneLineParser(argparse.ArgumentParser):
    """argparse prints the whole usage block on error; we print one line that names the fix."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

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


# ---------------------------------------------------------------------- run flags
def add_run_flags(parser: argparse.ArgumentParser) -> None:
    """Flags shared by `run`, `serve`, `live` and `sweep`: one per RunSpec field, generated
    from the field's declaration (engine.options), plus --config and the recording flags.
    Defaults are None ("not given") so presets and config files can supply their own."""
    g = parser.add_argument_group("workload and engine (RunSpec fields; engine/spec.py)")
    g.add_argument("--config", metavar="FILE", help="TOML file of RunSpec fields; flags win")
    options.add_flags(g)
    r = parser.add_argument_group("recording")
    r.add_argument("--record", metavar="PATH",
                   help="record to PATH ('-' = stdout); default recordings/<time>-<preset>-"
                        "<policy>.jsonl.zst")
    r.add_argument("--no-record", action="store_true", help="do not record")


def load_config_file(path: str) -> dict[str, Any]:
    """A --config TOML file as checked RunSpec field values (engine.options.load_config)."""
    return options.load_config(path)


def default_preset() -> str:
    """seed-5578, or on vLLM's V1 engine (which has no swap space) v1-thrash."""
    from engine.adapters.versions import installed_version, release_for

    release = release_for(installed_version())
    return "v1-thrash" if release is not None and release.engine == "v1" else "seed-5578"


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    """Preset, then config file, then flags. Raises ConfigError (one line) on bad input."""
    given = options.values_from_args(args)
    if "num_cpu_blocks" in given and "swap_space_gib" in given:
        raise ConfigError("give --num-cpu-blocks or --swap-space, not both")
    layers = [(args.config, load_config_file(args.config))] if args.config else []
    # the default preset depends on the engine kind (a layer's `preset` overrides it)
    return resolve_spec([("default", {"preset": default_preset()}), *layers,
                         ("flags", given)]).validated()


# ---------------------------------------------------------------------- parser
def build_parser(prog: str = "observatory") -> tuple[argparse.ArgumentParser, Any]:
    parser = OneLineParser(
        prog=prog,
        description=f"Watch vLLM's chunked-prefill scheduler starve its swap space (vLLM "
                    f"issue #5578) on {speaks()}, flip the fix on live, and record, replay, "
                    f"compare and export every step.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    from engine import run_commands  # `run` and `serve`
    from engine.analysis import commands as recording_commands

    run_commands.register(sub)
    recording_commands.register(sub)
    from engine.analysis.logs.commands import register as register_log_commands
    from engine.sweep.commands import register as register_sweep_commands

    register_log_commands(sub)

    register_sweep_commands(sub)
    from engine.versions_command import register as register_versions

    register_versions(sub)
    return parser, sub


def dispatch(args: argparse.Namespace, guard_output: bool = True) -> int:
    """Run a parsed command; an ObservatoryError becomes one line on stderr and its exit status
    (engine.exit_status: 2), and so does a failed write to stdout or stderr (engine.console). `guard_output=False` for the Textual
    commands, which own the terminal."""
    if guard_output:
        console.guard()
    else:
        console.stub_missing_streams()
    try:
        code = int(args.func(args))
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
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    return dispatch(args)


if __name__ == "__main__":
    sys.exit(main())
