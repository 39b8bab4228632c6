"""`observatory run`: run the spec to its end in this process, headless, print a progress line
about once a second and a summary, and record (engine.host; exit statuses: engine/cli/hosting.py).
"""

from __future__ import annotations

import argparse
import sys

from engine.cli.base import CLISubcommand, add_json_flag, add_verbose_flag
from engine.cli.hosting import Progress, count_signals, exit_code
from engine.cli.run_flags import add_run_flags, record_target, spec_from_args
from engine.stream.records import RECORD_TYPES, Header

_RUN_ITEMS = (Header, *RECORD_TYPES)  # what a summary reads (not the service messages)


class Run(CLISubcommand):
    name = "run"
    help = "run headless, print progress and a summary"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_run_flags(parser)
        add_json_flag(parser)
        parser.add_argument("--dry-run", action="store_true",
                            help="resolve what the run would start with (vLLM, executor, "
                                 "platform, engine arguments, model) and print it, without "
                                 "building the engine; offline, no CUDA needed")
        add_verbose_flag(parser)

    def cmd(self, args: argparse.Namespace) -> int:
        spec = spec_from_args(args)  # before importing vLLM: bad flags fail in milliseconds
        if args.dry_run:
            from engine import dry_run

            return dry_run.run(spec, args.json)

        from engine.analysis.summary import SummaryBuilder, format_summary, summary_json
        from engine.host import EngineHost
        record = record_target(args, spec)
        host = EngineHost(spec, record)
        host.open_recording()  # a bad --record PATH fails before vLLM loads
        builder = SummaryBuilder()
        host.subscribe(lambda item: builder.add(item) if isinstance(item, _RUN_ITEMS) else None)
        host.subscribe(Progress(sys.stderr, verbose=args.verbose))
        signals = count_signals(host)
        host.start()
        host.wait()
        code = exit_code(host, signals)

        if host.finished is not None:
            summary = builder.result()
            out = sys.stderr if record == "-" else sys.stdout
            out.write((summary_json(summary) if args.json else format_summary(summary)) + "\n")
            out.flush()
        for status in host.closed_recordings:
            if status.error is not None:
                sys.stderr.write(f"observatory: warning: recording stopped early: "
                                 f"{status.error}\n")
            elif status.closed != "-":
                sys.stderr.write(f"recorded {status.records} records to {status.closed} "
                                 f"({status.bytes:,} bytes)\n")
        return code
