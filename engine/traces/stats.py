"""What a run reports about the trace it read: counted as the rows stream by, and recorded as
one LogLine (logger `observatory.trace`) just before the run's end record, so the summary of a
live run and of a recording read the same numbers. The message is "trace: " and the stats as
JSON: readable in the log panel, and parsed back here and only here."""

from __future__ import annotations

import msgspec

LOGGER = "observatory.trace"
_PREFIX = "trace: "


class TraceStats(msgspec.Struct, kw_only=True):
    file: str  # the trace's file name
    format: str
    requests: int = 0  # trace rows replayed (each becomes --trace-n samples)
    prompt_tokens: int = 0  # the rows' input lengths, summed
    output_tokens: int = 0  # the rows' output lengths, summed (per sample)
    skipped: int = 0  # bad lines skipped (--trace-skip-bad)
    first_skipped_line: int | None = None
    zero_outputs: int = 0  # rows with an output length of 0, run with 1 token (vLLM's least)
    capped: int = 0  # rows whose prompt + output exceed the model's context (vLLM caps them)
    # prompt tokens vLLM's prefix cache could serve if it kept everything: for each sample,
    # the leading trace blocks (hash_ids) an earlier sample had, or the whole prompt of a
    # repeated sample, in full engine blocks and leaving the last prompt token to compute
    prefix_tokens_allowed: int = 0

    def message(self) -> str:
        return _PREFIX + msgspec.json.encode(self).decode()


def parse(message: str) -> TraceStats | None:
    """The stats a LogLine's message carries, or None if it is not one."""
    if not message.startswith(_PREFIX):
        return None
    try:
        return msgspec.json.decode(message[len(_PREFIX):].encode(), type=TraceStats)
    except msgspec.DecodeError:
        return None
