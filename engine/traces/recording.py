"""A recording read as a trace: every request it saw arrive, with what a re-run needs
(`--trace REC --trace-format recording`, `export --format trace`, `verify`, `fork`).

A recording holds, since the observatory recorded them (the Arrivals and step records'
re-run fields: engine.stream.records), each request's id, the step it arrived before, its arrival
time, its prompt tokens, samples (`n`), output limit (`max_tokens`) and prompt fingerprint
(engine.fingerprint), and the output length of each sample it saw end. Read in arrival order,
they are the recorded engine's workload: a re-run adds each request before the step it arrived
before, so its decisions can be checked step by step against the recording's.

What a recording cannot give, said in one line each (RecordingTraceError): an imported log (it
has no requests), a recording switched on mid-run (the requests before it are not in it, and
its fingerprints name blocks it never numbered), one made before the re-run fields existed.
A sample the recording did not see end (the run stopped or aborted first) runs to its
max_tokens in a re-run, which changes nothing before the recording's end.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterator

from engine.errors import ObservatoryError
from engine.fingerprint import BlockChains
from engine.traces.rows import Recorded, TraceError, TraceRow


class RecordingTraceError(TraceError):
    """A recording that cannot be read as a workload, and why (one line)."""


@dataclass(frozen=True)
class RecordedRequest:
    """One request a recording saw arrive, with what a re-run of it needs."""

    line: int  # its place in arrival order, from 1
    request_id: str
    step: int  # the step it arrived before
    arrival_s: float  # on the recording's time axis
    prompt_tokens: int
    n: int
    max_tokens: int
    output_lens: tuple[int, ...]  # each sample the recording saw end (fewer than n: the rest
    # had not ended when it stopped)
    block_ids: tuple[int, ...]  # its prompt's blocks, the last one partial (engine.fingerprint)
    source: str  # "workload" or "burst"

    @property
    def ended(self) -> bool:
        """Every sample was seen to end."""
        return len(self.output_lens) >= self.n

    @property
    def output_len(self) -> int:
        """Mooncake's output length: the longest sample's, or max_tokens if one had not
        ended."""
        return max(self.output_lens) if self.ended and self.output_lens else self.max_tokens


def block_size_of(header: Any) -> int:
    """The engine block size a recording's fingerprints count in: vLLM's own, as the header's
    engine_config reports it, or the spec's."""
    cache = header.engine_config.get("cache") if isinstance(header.engine_config, dict) else None
    size = cache.get("block_size") if isinstance(cache, dict) else None
    if isinstance(size, int) and size > 0:
        return size
    return int(header.spec.get("block_size") or 16)


def output_lengths(recording: Any) -> dict[str, list[int]]:
    """Each request's samples that ended, in the order they ended, from the step records."""
    lens: dict[str, list[int]] = {}
    for step in recording.steps:
        pairs = getattr(step, "seq_finished", None)
        if pairs is None:
            finished_lens = getattr(step, "finished_lens", None)
            if finished_lens is None:
                continue
            pairs = zip(step.finished, finished_lens)
        for rid, length in pairs:
            lens.setdefault(rid, []).append(length)
    return lens


def is_own_sim_run(header: Any) -> bool:
    """A run the observatory drove on the sim: its spec is the whole story."""
    return (header.backend == "sim" and "attached" not in (header.engine_config or {})
            and header.backend != "log")


def lacks(recording: Any) -> str | None:
    """Why `recording` cannot be read as a workload, or None."""
    header = recording.header
    name = recording.path
    if header is None:
        return f"{name}: no header: not a recording"
    if header.backend == "log":
        return (f"{name}: an imported log holds vLLM's stats lines, not its requests: it "
                f"cannot be re-run (record the program with `observatory exec` instead)")
    if header.starts_at_step > 0:
        return (f"{name}: recording was switched on at step {header.starts_at_step}: the "
                f"requests that arrived before are not in it; record from the start to re-run it")
    arrivals = recording.arrivals
    if not arrivals:
        return f"{name}: no request arrived in it: nothing to re-run"
    if any(a.n is None or a.max_tokens is None or a.prefix is None for a in arrivals):
        if is_own_sim_run(header):  # its settings make its requests: verify and fork use them
            preset = (header.spec or {}).get("preset", "its preset")
            return (f"{name}: made before recordings kept each request's samples, output "
                    f"limit and prompt fingerprint, which a trace is made of (verify and fork "
                    f"re-run it from its settings): run it again with this observatory "
                    f"(`observatory run --preset {preset} --record FILE`, plus any setting it "
                    f"changed) and export that")
        return (f"{name}: made before recordings kept each request's samples, output limit and "
                f"prompt fingerprint: re-record it with this observatory to re-run it")
    return None


def requests_of(recording: Any) -> list[RecordedRequest]:
    """Every request `recording` saw arrive, in arrival order (RecordingTraceError if it
    cannot be read as a workload)."""
    why = lacks(recording)
    if why is not None:
        raise RecordingTraceError(why)
    lens = output_lengths(recording)
    chains = BlockChains()
    requests: list[RecordedRequest] = []
    for arrivals in recording.arrivals:
        for i, rid in enumerate(arrivals.request_ids):
            shared, own = arrivals.prefix[i]
            try:
                blocks = chains.expand(shared, own)
            except ValueError as exc:
                raise RecordingTraceError(f"{os.path.basename(recording.path)}: request {rid}'s "
                                          f"fingerprint: {exc} (a damaged recording?)") from None
            requests.append(RecordedRequest(
                line=len(requests) + 1, request_id=rid, step=arrivals.step,
                arrival_s=arrivals.arrival_s[i], prompt_tokens=arrivals.prompt_tokens[i],
                n=arrivals.n[i], max_tokens=arrivals.max_tokens[i],
                output_lens=tuple(lens.get(rid, ())), block_ids=tuple(blocks),
                source=arrivals.source))
    return requests


def load_recording(path: str) -> Any:
    """The recording at `path`, or a TraceError naming what is wrong with it."""
    from engine.stream.reader import load

    try:
        return load(path)
    except ObservatoryError as exc:
        text = str(exc)
        raise RecordingTraceError(text if text.startswith(path) else f"{path}: {text}") \
            from None


def rows(path: str) -> Iterator[TraceRow]:
    """The recording at `path` as trace rows (the whole file is read first: a request's output
    lengths come from steps long after its arrival)."""
    recording = load_recording(path)
    block_size = block_size_of(recording.header)
    for request in requests_of(recording):
        yield TraceRow(request.line, request.arrival_s, request.prompt_tokens,
                       request.output_len, None,
                       Recorded(request_id=request.request_id, step=request.step, n=request.n,
                                max_tokens=request.max_tokens,
                                output_lens=list(request.output_lens),
                                block_ids=list(request.block_ids), block_size=block_size))
