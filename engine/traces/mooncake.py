"""Mooncake traces (FAST'25 release): JSONL, one request a line.

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}

`timestamp` is milliseconds from the trace's start; `hash_ids` has one id per 512-token block
of the prompt, and requests whose ids agree from the first one on share that prefix
(engine.traces.prompts turns them into shared tokens).

A trace the observatory exported from a recording (`export --format trace`) adds fields of its
own, which other readers ignore: `id`, `step` (the step it arrived before: a re-run adds it
there, whatever the clock says), `n`, `max_tokens`, `output_lengths` (each sample that ended),
and `block_size` with `block_ids` (the prompt's blocks at the engine's block size: exact
sharing, where `hash_ids` has it per 512 tokens). Lines are decoded by msgspec into a
typed Struct, so a wrong type is caught in the decoder and a million lines read in about a
second.
"""

from __future__ import annotations

from typing import Any, BinaryIO, Iterable, Iterator

import msgspec

from engine.traces.rows import BLOCK_TOKENS, BadRow, Recorded, TraceRow


class _Line(msgspec.Struct):
    timestamp: float
    input_length: int
    output_length: int
    hash_ids: list[int] = []
    # the observatory's own fields, written by `export --format trace` (engine.traces.write):
    # what makes a re-run of a recording exact (rows.Recorded). Mooncake's readers ignore them.
    n: int | None = None
    id: str | None = None
    step: int | None = None
    max_tokens: int | None = None
    output_lengths: list[int] | None = None
    block_size: int | None = None
    block_ids: list[int] | None = None

    def recorded(self) -> Recorded | None:
        if (self.id is None and self.step is None and self.n is None
                and self.block_ids is None and self.output_lengths is None
                and self.max_tokens is None):
            return None
        return Recorded(request_id=self.id, step=self.step, n=self.n,
                        max_tokens=self.max_tokens, output_lens=self.output_lengths,
                        block_ids=self.block_ids,
                        block_size=self.block_size if self.block_ids is not None else None)


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
        recorded = line.recorded()
        if recorded is not None:
            what = _bad_extension(line)
            if what is not None:
                yield BadRow(number, what)
                continue
        yield TraceRow(number, line.timestamp / 1000.0, line.input_length, line.output_length,
                       line.hash_ids or None, recorded)


def _bad_extension(line: _Line) -> str | None:
    """What is wrong with the observatory's own fields of a line, or None."""
    if line.n is not None and not 1 <= line.n <= 4096:
        return f"n is {line.n}: samples per request are 1 to 4096"
    if line.step is not None and line.step < 0:
        return f"step is {line.step}: a step is 0 or more"
    if line.max_tokens is not None and line.max_tokens < 1:
        return f"max_tokens is {line.max_tokens}: at least 1"
    if line.output_lengths is not None and any(n < 0 for n in line.output_lengths):
        return "output_lengths has a negative length"
    if line.block_ids is not None:
        if line.block_size is None or not 1 <= line.block_size <= 4096:
            return "block_ids needs block_size (tokens per block, 1 to 4096)"
        if any(i < 0 for i in line.block_ids):
            return "block_ids has a negative id"
    return None


def _why(message: str) -> str:
    """msgspec's "Expected `int`, got `str` - at `$.input_length`" as words."""
    text = message.replace("`", "")
    detail, _, where = text.partition(" - at ")
    field = where.removeprefix("$.").strip()
    if detail.startswith("Object missing required field"):
        return f"no {detail.split()[-1]} field (Mooncake lines have timestamp, input_length, " \
               f"output_length, hash_ids)"
    return f"{field or 'the line'}: {detail[:1].lower()}{detail[1:]}"


def lines(requests: Iterable[Any], block_size: int) -> Iterator[bytes]:
    """A recording's requests (engine.traces.recording.RecordedRequest) as Mooncake lines, in
    arrival order: `timestamp` (ms), `input_length`, `output_length` (the longest sample's, or
    max_tokens where a sample had not ended), `hash_ids` (one per 512 prompt tokens, numbered
    from 0 in this file: two requests agree on an id exactly when their prompts agree up to the
    end of that block), plus the observatory's own fields that make `--trace` re-run it exactly
    (see the module's docstring)."""
    per = max(1, BLOCK_TOKENS // block_size)  # engine blocks per trace block
    trace_ids: dict[int, int] = {}
    for request in requests:
        blocks = request.block_ids
        spans = -(-request.prompt_tokens // BLOCK_TOKENS)
        hash_ids = []
        for j in range(spans):
            end = min((j + 1) * per, len(blocks)) - 1
            if end < 0:
                break
            hash_ids.append(trace_ids.setdefault(blocks[end], len(trace_ids)))
        line = {"timestamp": request.arrival_s * 1000.0, "input_length": request.prompt_tokens,
                "output_length": request.output_len, "hash_ids": hash_ids, "n": request.n,
                "id": request.request_id, "step": request.step,
                "max_tokens": request.max_tokens, "output_lengths": list(request.output_lens),
                "block_size": block_size, "block_ids": list(blocks)}
        yield _ENCODER.encode(line)


_ENCODER = msgspec.json.Encoder()
