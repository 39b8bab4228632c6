"""Mooncake traces (FAST'25 release): JSONL, one request a line.

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}

`timestamp` is milliseconds from the trace's start; `hash_ids` has one id per 512-token block
of the prompt, and requests whose ids agree from the first one on share that prefix
(engine.traces.prompts turns them into shared tokens). Lines are decoded by msgspec into a
typed Struct, so a wrong type is caught in the decoder and a million lines read in about a
second.
"""

from __future__ import annotations

from typing import BinaryIO, Iterator

import msgspec

from engine.traces.rows import BadRow, TraceRow


class _Line(msgspec.Struct):
    timestamp: float
    input_length: int
    output_length: int
    hash_ids: list[int] = []


_DECODER = msgspec.json.Decoder(_Line)


def rows(stream: BinaryIO) -> Iterator[TraceRow | BadRow]:
    """Each non-blank line as a TraceRow, or a BadRow saying what is wrong with it."""
    decode = _DECODER.decode
    for number, raw in enumerate(stream, 1):
        if not raw.strip():
            continue
        try:
            line = decode(raw)
        except msgspec.ValidationError as exc:
            yield BadRow(number, _why(str(exc)))
            continue
        except msgspec.DecodeError:
            yield BadRow(number, "not a JSON object (a cut or damaged line?)")
            continue
        yield TraceRow(number, line.timestamp / 1000.0, line.input_length, line.output_length,
                       line.hash_ids or None)


def _why(message: str) -> str:
    """msgspec's "Expected `int`, got `str` - at `$.input_length`" as words."""
    text = message.replace("`", "")
    detail, _, where = text.partition(" - at ")
    field = where.removeprefix("$.").strip()
    if detail.startswith("Object missing required field"):
        return f"no {detail.split()[-1]} field (Mooncake lines have timestamp, input_length, " \
               f"output_length, hash_ids)"
    return f"{field or 'the line'}: {detail[:1].lower()}{detail[1:]}"
