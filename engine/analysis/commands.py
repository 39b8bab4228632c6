"""The commands that work on recordings: `summary`, `compare`, `export`, `verify`.

`register(subparsers)` adds them to the CLI's argparse subparsers; each handler returns its exit
code and raises an ObservatoryError (one line: ConfigError for a flag, RecordingError for a
damaged file) for bad input, which the CLI prints as `observatory: error: ...` with exit 2. Imports are deferred into the handlers so that
`observatory --help` and the loading commands never pay for vLLM or torch.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from engine.errors import ConfigError, ObservatoryError
from engine.exit_status import ExitStatus
from engine.safe_text import safe

_LENIENT_HELP = ("skip damaged lines and blocks (counted and reported) instead of refusing "
                 "the file")


def register(subparsers: Any) -> None:
    summary = subparsers.add_parser(
        "summary", help="print the summary of a recording (what `run` printed for it)",
        description="Print the summary of a recorded run: identical to what `observatory run` "
                    "printed when it made the recording.")
    summary.add_argument("path", metavar="PATH", help="a recording (.jsonl or .jsonl.zst; - for "
                                                      "stdin)")
    summary.add_argument("--json", action="store_true", help="print the summary as JSON")
    summary.add_argument("--lenient", action="store_true", help=_LENIENT_HELP)
    summary.set_defaults(func=cmd_summary)

    compare = subparsers.add_parser(
        "compare", help="compare recordings side by side, with a CPU KV plot",
        description="Compare recorded runs: peak CPU KV %, peak swapped, abort step, "
                    "throughput and TTFT on each recording's time axis (simulated, or measured "
                    "on a GPU), withheld-prefill steps; then one "
                    "terminal plot of CPU KV-cache usage over steps.")
    compare.add_argument("paths", metavar="PATH", nargs="+", help="two or more recordings")
    compare.add_argument("--json", action="store_true", help="print the metrics as JSON, no plot")
    compare.add_argument("--no-plot", action="store_true", help="print the table only")
    compare.add_argument("--lenient", action="store_true", help=_LENIENT_HELP)
    compare.set_defaults(func=cmd_compare)

    export = subparsers.add_parser(
        "export", help="export a recording as CSV (one row per step) or a Perfetto trace",
        description="Export a recording: CSV with one row per step, or a Chrome-trace JSON "
                    "that opens in ui.perfetto.dev (steps on the recording's time axis: "
                    "simulated, or measured on a GPU).")
    export.add_argument("path", metavar="PATH", help="a recording")
    export.add_argument("--format", choices=("csv", "perfetto"), required=True,
                        help="csv or perfetto")
    export.add_argument("-o", "--output", metavar="OUT",
                        help="output file (- for stdout); default: next to the recording")
    export.add_argument("--lenient", action="store_true", help=_LENIENT_HELP)
    export.set_defaults(func=cmd_export)

    verify = subparsers.add_parser(
        "verify", help="re-run a recording on the sim backend and check every decision",
        description="Re-run the recording's config on the sim backend, with its policy changes "
                    "and bursts at their recorded steps, and check that every step decides "
                    "the same. Exit 0 if all match, 1 naming the first difference.")
    verify.add_argument("path", metavar="PATH", help="a recording made with --backend sim")
    verify.set_defaults(func=cmd_verify)


def _note_cut(recording: Any) -> None:
    """Say on stderr (never stdout, which may be JSON) that the file is cut, damaged (read
    with --lenient) or too old to be fully checked, before any number from it is printed."""
    from engine.stream.integrity import notes

    for note in notes(recording):
        sys.stderr.write(safe(note) + "\n")  # quotes the path and what was wrong in the file


def cmd_summary(args: argparse.Namespace) -> int:
    from engine.stream.reader import load
    from engine.analysis.summary import format_summary, summarize, summary_json

    recording = load(args.path, lenient=args.lenient)
    _note_cut(recording)
    summary = summarize(recording.all_items())
    sys.stdout.write((summary_json(summary) if args.json else format_summary(summary)) + "\n")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from engine.analysis.compare import compare_json, compare_text, run_metrics
    from engine.stream.reader import load

    if len(args.paths) < 2:
        raise ConfigError("compare needs at least two recordings: observatory compare A B [...]")
    recordings = [load(path, lenient=args.lenient) for path in args.paths]
    for recording in recordings:
        _note_cut(recording)
    metrics = [run_metrics(r) for r in recordings]
    if args.json:
        sys.stdout.write(compare_json(metrics) + "\n")
    else:
        sys.stdout.write(compare_text(metrics, recordings, plot=not args.no_plot) + "\n")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from engine.analysis.export import default_output, export
    from engine.stream.reader import load

    recording = load(args.path, lenient=args.lenient)
    _note_cut(recording)
    out = args.output or str(default_output(args.path, args.format))
    written = export(recording, args.format, out)
    if out != "-":
        sys.stderr.write(f"wrote {out} ({args.format}, {len(recording)} steps, "
                         f"{written:,} bytes)\n")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from engine.analysis.verify import verify_file

    try:
        result = verify_file(args.path, progress=sys.stderr)
    except ObservatoryError as exc:  # name the file (a header's run spec does not know its path)
        text = str(exc)
        raise type(exc)(text if text.startswith(args.path) else f"{args.path}: {text}") \
            from None
    if result.ok:
        sys.stdout.write(f"verified: {safe(result.message)}\n")
        return ExitStatus.OK
    sys.stdout.write(f"verify failed: {safe(result.message)}\n")
    return ExitStatus.DIFFERENCE
