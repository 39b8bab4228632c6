"""`observatory summary PATH`: what `run` printed for the run that made the recording."""

from __future__ import annotations

import argparse
import sys

from engine.cli.base import CLISubcommand, add_json_flag, add_lenient_flag
from engine.cli.reading import note_cut
from engine.exit_status import ExitStatus
from engine.safe_text import safe


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
        from engine.analysis.summary import format_summary, summary_json

        summary, doubt = _from_index(args.path)
        if summary is None:
            summary = _from_records(args.path, args.lenient, doubt)
        sys.stdout.write((summary_json(summary) if args.json else format_summary(summary))
                         + "\n")
        return ExitStatus.OK


def _from_index(path: str):
    """The summary the recorder folded into the file's index, if the file has one (a
    recording closed by its recorder) and its last data frame vouches for it (the reader's
    `vouch`, and the frame's records against the summary: engine.analysis.index_summary):
    read from the file's last two frames, not the whole file. None: read the records
    (`verify` always does; it also holds the index to them)."""
    from engine.analysis.index_summary import last_frame_disagrees, summary_of
    from engine.stream.reader import open_indexed, vouch

    indexed = open_indexed(path)
    if indexed is None:
        return None, None
    index, summary = indexed.index, summary_of(indexed)
    if summary is None or set(summary.__struct_fields__) - set(index.summary or {}):
        return None, None  # sealed by an older observatory: its fields, or their meanings,
        # are not all today's (engine.analysis.summary.current_names); the records say them
    wrong = vouch(indexed) or last_frame_disagrees(indexed)
    if wrong is not None:  # "no tally": closed before tallies existed, the records quietly
        return None, None if wrong == "no tally" else wrong
    if not index.finished:
        if index.last_step is None:
            return None, None  # what the note would say needs the header: read the file
        sys.stderr.write(safe(f"note: {path}: the recording was switched off after step "
                              f"{index.last_step}; the run went on without it") + "\n")
    return summary, None


def _from_records(path: str, lenient: bool, doubt: str | None = None):
    """The records' summary. An index that disagrees with them (its summary, or `doubt`: what
    its last frame said against it) is said in one line: the records' numbers are printed,
    never the index's. A file whose index the reader refuses is one error line (exit 2)."""
    from engine.analysis.summary import summarize
    from engine.analysis.verify import index_summary_disagrees
    from engine.stream.reader import load

    recording = load(path, lenient=lenient)
    note_cut(recording)
    wrong = index_summary_disagrees(recording) or doubt
    if wrong is not None:
        sys.stderr.write(safe(f"warning: {recording.path}: {wrong}: the index is damaged or "
                              f"forged; the numbers below are the records'") + "\n")
    return summarize(recording.all_items())
