"""The log's other records, each found by its own key text wherever it sits in a logical line:
preemption warnings, the engine config line (V0's and V1's), block counts, V1's KV cache size
in tokens, tqdm progress and the abort."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from engine.analysis.logs.clean import TIMESTAMP, LogicalLine
from engine.analysis.logs.stats import parse_stamp

PREEMPT = re.compile(r"Sequence\s*group\s*(?P<group>\S+)\s*is\s*preempted\s*by\s*"
                     r"PreemptionMode\.(?P<mode>[A-Z]+)\b")
CUMULATIVE = re.compile(r"total_num_cumulative_preemption\s*=\s*(\d+)(?!\d)(?=\s|$|[^\w.])")
CONFIG = re.compile(r"Initializing an? (?:V1 )?LLM engine \((?P<version>v?[^)]*)\) with config:")
KV_SIZE = re.compile(r"(?<![A-Za-z])(?P<device>[A-Z]{3})(?:\s*\+\s*host)?\s*KV\s*cache\s*size"
                     r"\s*:\s*(?P<tokens>\d[\d,]*)\s*tokens")
"""vLLM V1's `GPU KV cache size: 19,200 tokens, Maximum concurrency ...` (kv_cache_utils.py,
logged once as the engine sizes its cache)."""
CONFIG_KEYS = re.compile(r"(\w+)=('[^']*'|[^,]+)")
BLOCKS = re.compile(r"#\s*GPU\s*blocks\s*:\s*(\d+)\s*,\s*#\s*CPU\s*blocks\s*:\s*(\d+)(?!\d)")
OVERRIDE = re.compile(r"Overriding\s*num_gpu_blocks=(\d+)\s*with\s*num_gpu_blocks_override=(\d+)"
                      r"(?!\d)")
CHUNKED = re.compile(r"Chunked prefill is enabled")
TQDM = re.compile(r"Processed prompts\s*:\s*\d+%\|[^|]*\|\s*(?P<done>\d+)/(?P<total>\d+)\s*"
                  r"\[(?P<elapsed>(?:\d+:)?\d+:\d+)")
ABORT = re.compile(r"lack\s*of\s*CPU\s*swap\s*space")


@dataclass
class Event:
    line: int
    event: str  # "preemption" | "progress" | "config" | "blocks" | "kv_size" | "chunked" | "abort"
    text: str
    stamp: tuple | None = None  # the record's own timestamp, if it has one
    clock: str | None = None
    elapsed_s: float | None = None  # tqdm's elapsed time
    values: dict[str, Any] = field(default_factory=dict)
    pos: int = 0  # offset in its logical line


def _elapsed(text: str) -> float:
    parts = [int(p) for p in text.split(":")]
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + part
    return float(seconds)


def _stamp_before(text: str, pos: int) -> re.Match[str] | None:
    last = None
    for last in TIMESTAMP.finditer(text, max(0, pos - 200), pos):
        pass
    return last


def _event(logical: LogicalLine, kind: str, match: re.Match[str], **values: Any) -> Event:
    found = _stamp_before(logical.text, match.start())
    stamp, clock = (parse_stamp(found), found.group(0)) if found else (None, None)
    snippet = logical.text[found.start() if found else match.start():match.end() + 200][:300]
    return Event(logical.line, kind, snippet, stamp, clock, values=values, pos=match.start())


def find_events(lines: list[LogicalLine]) -> list[Event]:
    """Every non-stats record, in log order (within a line: by position)."""
    events: list[tuple[int, int, Event]] = []
    for index, logical in enumerate(lines):
        text = logical.text
        found: list[tuple[int, Event]] = []
        for m in PREEMPT.finditer(text):
            rest = text[m.end():m.end() + 400]
            nxt = PREEMPT.search(rest)
            cum = CUMULATIVE.search(rest[:nxt.start()] if nxt else rest)
            found.append((m.start(), _event(logical, "preemption", m, mode=m.group("mode"),
                                            group=m.group("group"),
                                            cumulative=int(cum.group(1)) if cum else None)))
        for m in CONFIG.finditer(text):
            fields = {k: v.strip("'") for k, v in CONFIG_KEYS.findall(text[m.end():])}
            found.append((m.start(), _event(logical, "config", m, version=m.group("version"),
                                            **fields)))
        for m in BLOCKS.finditer(text):
            found.append((m.start(), _event(logical, "blocks", m, gpu_blocks=int(m.group(1)),
                                            cpu_blocks=int(m.group(2)))))
        for m in OVERRIDE.finditer(text):
            found.append((m.start(), _event(logical, "blocks", m,
                                            profiled_gpu_blocks=int(m.group(1)),
                                            gpu_blocks_override=int(m.group(2)))))
        for m in KV_SIZE.finditer(text):
            tokens = int(m.group("tokens").replace(",", ""))
            found.append((m.start(), _event(logical, "kv_size", m, kv_cache_tokens=tokens,
                                            kv_cache_device=m.group("device"))))
        for m in CHUNKED.finditer(text):
            found.append((m.start(), _event(logical, "chunked", m)))
        for m in TQDM.finditer(text):
            event = _event(logical, "progress", m, finished=int(m.group("done")),
                           total=int(m.group("total")))
            event.stamp, event.clock = None, None  # tqdm has no clock of its own
            event.elapsed_s = _elapsed(m.group("elapsed"))
            found.append((m.start(), event))
        for m in ABORT.finditer(text):
            found.append((m.start(), _event(logical, "abort", m)))
        events.extend((index, pos, event) for pos, event in found)
    events.sort(key=lambda item: (item[0], item[1]))
    return [event for _, _, event in events]
