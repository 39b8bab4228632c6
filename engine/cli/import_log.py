"""`observatory import-log FILE`: a vLLM log (V0 or V1) as a reference recording, which summary,
compare and replay --reference read."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from engine.cli.base import CLISubcommand
from engine.cli.reading import read_input
from engine.errors import ConfigError
from engine.exit_status import ExitStatus
from engine.widths import wrapped


class ImportLog(CLISubcommand):
    name = "import-log"
    help = "turn a vLLM log (V0 or V1) into a reference recording"
    description = ("Read a vLLM log: V0 (stats lines every 5 s, preemption warnings, block "
                   "counts, tqdm progress, the swap-space abort) or V1 (`Engine NNN:` stats "
                   "lines, one series per data-parallel engine), and write a reference "
                   "recording that summary, compare and replay --reference read.")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("path", metavar="FILE", help="the log (- for stdin)")
        parser.add_argument("-o", "--output", metavar="OUT",
                            help="recording to write (default: FILE with "
                                 ".reference.jsonl.zst)")

    def cmd(self, args: argparse.Namespace) -> int:
        from engine.analysis.logs.importer import import_log

        log = import_log(read_input(args.path), args.path)
        out = args.output or default_output(args.path)
        write_reference(log, out)
        for warning in log.warnings:
            sys.stderr.write(f"note: {warning}\n")
        preempt = [r for r in log.records if getattr(r, "event", None) == "preemption"]
        abort = next((r for r in log.records if getattr(r, "event", None) == "abort"), None)
        complete = len(log.windows) - log.partial
        text = (f"imported {len(log.windows)} stats records ({complete} complete, "
                f"{log.partial} partial), {len(preempt)} preemption warnings"
                + (f", abort at t={abort.t_s}s with {abort.finished} requests finished"
                   if abort else ", no abort")
                + f"; time zero: {log.header.engine_config.get('time_zero')}")
        if out != "-":
            sys.stderr.write(f"{wrapped(text, 2)}\nwrote {out}\n")
        return ExitStatus.OK


def default_output(path: str) -> str:
    if path == "-":
        return "runs/log-reference.jsonl.zst"
    return str(Path(path).with_suffix("")) + ".reference.jsonl.zst"


def write_reference(log: Any, out: str) -> None:
    from engine.analysis.summary import SummaryBuilder
    from engine.stream.recorder import Recorder

    try:
        recorder = Recorder(out, log.header, background_flush=False, fold=SummaryBuilder)
    except OSError as exc:
        raise ConfigError(f"cannot write {out}: {exc.strerror or exc}: give another -o OUT") \
            from None
    for record in log.records:
        recorder.write(record)
    recorder.close()
    if recorder.error is not None:
        raise ConfigError(f"cannot write {out}: {recorder.error}")
