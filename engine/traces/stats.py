"""What a run reports about the trace it read: counted as the rows stream by, and recorded as
one LogLine (logger `observatory.trace`) just before the run's end record, so the summary of a
live run and of a recording read the same numbers. The message is "trace: " and the stats as
JSON: readable in the log panel, and parsed back here and only here."""

from __future__ import annotations

import os

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
    # (a preempted request that hits its own blocks again when it resumes is a hit the bound
    # does not count: with preemptions, hits can exceed it)
    prefix_tokens_allowed: int = 0

    def message(self) -> str:
        return _PREFIX + msgspec.json.encode(self).decode()


def label(spec: dict) -> str | None:
    """A recording's trace in a few words, from its header's spec: the file name, the first 12
    hex digits of its sha256, the slice and the speed ("mooncake.jsonl 3f2a9c01b4de
    from 60s first 500 x2"); None for a run without a trace. Two runs of different traces (or
    slices of one) never share a label."""
    path = spec.get("trace")
    if not path:
        return None
    words = [os.path.basename(path), str(spec.get("trace_sha256") or "?")[:12]]
    if spec.get("trace_start"):
        words.append(f"from {spec['trace_start']:g}s")
    if spec.get("trace_limit") is not None:
        words.append(f"first {spec['trace_limit']}")
    if spec.get("trace_speed", 1.0) != 1.0:
        words.append(f"x{spec['trace_speed']:g}")
    if spec.get("trace_n", 1) != 1:
        words.append(f"n={spec['trace_n']}")
    if spec.get("trace_skip_bad"):
        words.append("skip-bad")
    return " ".join(words)


def parse(message: str) -> TraceStats | None:
    """The stats a LogLine's message carries, or None if it is not one."""
    if not message.startswith(_PREFIX):
        return None
    try:
        return msgspec.json.decode(message[len(_PREFIX):].encode(), type=TraceStats)
    except msgspec.DecodeError:
        return None
