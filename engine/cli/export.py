"""`observatory export PATH --format csv|perfetto|trace`: one row per step, a Chrome trace, or
the recording's requests as a request trace that `run --trace` re-runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

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
        parser.add_argument("--format", choices=("csv", "perfetto", "trace"), required=True,
                            help="csv, perfetto, or trace (its requests as Mooncake-style "
                                 "JSONL, which `run --trace` re-runs, and its engine's "
                                 "settings beside it as OUT's .toml)")
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
        if args.format == "trace":
            self._settings(recording, out)
        return ExitStatus.OK

    @staticmethod
    def _settings(recording, out: str) -> None:  # noqa: ANN001
        """The trace's engine beside it (OUT's .toml), and the command that re-runs it."""
        from engine.analysis.export import trace_settings
        from engine.errors import ConfigError
        from engine.outpath import write_output

        text = trace_settings(recording)
        if out == "-":
            sys.stderr.write("its engine (a --config file for `observatory run --trace`):\n"
                             + text)
            return
        config = str(Path(out).with_suffix("")) + ".toml" if out.endswith(".jsonl") \
            else out + ".toml"
        try:
            write_output(config, text.encode())
        except OSError as exc:
            raise ConfigError(f"cannot write {config}: {exc.strerror or exc}") from None
        sys.stderr.write(f"wrote {config} (its engine); re-run it: observatory run --config "
                         f"{config} --trace {out}\n")
