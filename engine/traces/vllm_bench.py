"""`vllm bench serve --save-result --save-detailed` JSON: one object whose per-request lists
hold each request's prompt length (`input_lens`), generated length (`output_lens`) and send
time (`start_times`, time.perf_counter() seconds). Without --save-detailed vLLM deletes those
lists before saving, and such a file is refused in one line naming the flag.

The file is one JSON object, so it is read whole (msgspec skips the fields not needed, such
as generated_texts); the "line" of a request, its id in the run, is its 1-based position in
the lists. A file without start_times (older releases) replays every request at t=0.
"""

from __future__ import annotations

from typing import Iterator

import msgspec

from engine.traces.rows import BadRow, TraceError, TraceRow


class _Result(msgspec.Struct):
    input_lens: list[int] | None = None
    output_lens: list[int] | None = None
    start_times: list[float] | None = None


def rows(data: bytes, where: str) -> Iterator[TraceRow | BadRow]:
    try:
        result = msgspec.json.decode(data, type=_Result)
    except msgspec.ValidationError as exc:
        detail = str(exc).replace("`", "")
        raise TraceError(f"{where}: not a vllm bench serve result ({detail})") from None
    except msgspec.DecodeError:
        raise TraceError(f"{where}: not one JSON object (a vllm bench serve --save-result file "
                         f"is; a cut file?)") from None
    if result.input_lens is None or result.output_lens is None:
        raise TraceError(f"{where}: no per-request input_lens/output_lens: save the benchmark "
                         f"with --save-result --save-detailed")
    if len(result.input_lens) != len(result.output_lens):
        raise TraceError(f"{where}: {len(result.input_lens)} input_lens but "
                         f"{len(result.output_lens)} output_lens: a damaged result file")
    starts = result.start_times
    if starts is not None and len(starts) != len(result.input_lens):
        raise TraceError(f"{where}: {len(starts)} start_times for {len(result.input_lens)} "
                         f"requests: a damaged result file")
    for i, (prompt, output) in enumerate(zip(result.input_lens, result.output_lens)):
        yield TraceRow(i + 1, starts[i] if starts is not None else 0.0, prompt, output)
