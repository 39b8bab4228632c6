"""Find stats records, V0's and V1's, and read their fields by key.

A record is found by its anchor (`Avg prompt throughput`), not by its line: several records may
share a line (lost newlines), and a record may sit after a tqdm bar or a fork's extra fields.
Its text runs to the next anchor (or the end of its logical line). Each field is read by key,
and only counts if its value is followed by its unit (`tokens/s`, `reqs`, `%`): a record cut
at `GPU KV cache usage: 9` gives None for that field and is partial, never 9%. The V0 layouts
of every version (llm_engine.py before 0.3.1, metrics.py after, `[metrics.py:N]` from 0.8) share
these keys, so the file:line part is never read.

V1 (`vllm/v1/metrics/loggers.py`, 0.8 to 0.33) logs the same anchor with `Waiting:` in place of
V0's swap and pending queues, and fields that come and go between releases and runs: `Deferred`,
`Preemptions` (only when > 0), `Prefix cache hit rate` (only once queried), `External prefix
cache hit rate` and `MM cache hit rate`, `KV fetch`, `Corrupted`, the KV device's name (`GPU`,
or `CPU`/`XPU` on those platforms). So every field is read by key and only the five V1 always
logs are required. Its prefix names the engine: none before 0.8 (one engine), `Engine 000: ` for
each data-parallel engine, and `2 Engines Aggregated: ` for the sum over them (engine -1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from engine.analysis.logs.clean import TIMESTAMP, LogicalLine

ANCHOR = re.compile(r"Avg\s*prompt\s*throughput\s*:")
_NUM = r"(\d+(?:\.\d+)?)"
FIELDS: dict[str, re.Pattern[str]] = {
    "prompt_tps": re.compile(r"Avg\s*prompt\s*throughput\s*:\s*" + _NUM + r"\s*tokens/s"),
    "gen_tps": re.compile(r"Avg\s*generation\s*throughput\s*:\s*" + _NUM + r"\s*tokens/s"),
    "running": re.compile(r"Running\s*:\s*(\d+)\s*reqs"),
    "swapped": re.compile(r"Swapped\s*:\s*(\d+)\s*reqs"),
    "pending": re.compile(r"Pending\s*:\s*(\d+)\s*reqs"),
    "gpu_pct": re.compile(r"GPU\s*KV\s*cache\s*usage\s*:\s*" + _NUM + r"\s*%"),
    "cpu_pct": re.compile(r"CPU\s*KV\s*cache\s*usage\s*:\s*" + _NUM + r"\s*%"),
}
INT_FIELDS = ("running", "swapped", "pending", "waiting", "preemptions", "deferred")
V1_MARK = re.compile(r"Engine\s*\d+\s*:|Waiting\s*:\s*\d+\s*reqs")
V1_KEYS: dict[str, re.Pattern[str]] = {
    # key -> value+unit; a key whose value is cut (no unit) makes the record partial
    "prompt_tps": FIELDS["prompt_tps"],
    "gen_tps": FIELDS["gen_tps"],
    "running": FIELDS["running"],
    "waiting": re.compile(r"Waiting\s*:\s*(\d+)\s*reqs"),
    "gpu_pct": re.compile(r"(?<![A-Za-z])(?:[A-Z]{3})\s*KV\s*cache\s*usage\s*:\s*" + _NUM
                          + r"\s*%"),
    "prefix_hit_pct": re.compile(r"(?<![a-z] )(?<![a-z])Prefix\s*cache\s*hit\s*rate\s*:\s*"
                                 + _NUM + r"\s*%"),
    "external_prefix_hit_pct": re.compile(r"External\s*prefix\s*cache\s*hit\s*rate\s*:\s*"
                                          + _NUM + r"\s*%"),
    "mm_hit_pct": re.compile(r"MM\s*cache\s*hit\s*rate\s*:\s*" + _NUM + r"\s*%"),
    "preemptions": re.compile(r"Preemptions\s*:\s*(\d+)(?!\d)(?!\.)"),
    "deferred": re.compile(r"Deferred\s*:\s*(\d+)\s*reqs"),
}
V1_KEY_TEXT: dict[str, re.Pattern[str]] = {
    "prompt_tps": re.compile(r"Avg\s*prompt\s*throughput\s*:"),
    "gen_tps": re.compile(r"Avg\s*generation\s*throughput\s*:"),
    "running": re.compile(r"Running\s*:"),
    "waiting": re.compile(r"Waiting\s*:"),
    "gpu_pct": re.compile(r"(?<![A-Za-z])[A-Z]{3}\s*KV\s*cache\s*usage\s*:"),
    "prefix_hit_pct": re.compile(r"(?<![a-z] )(?<![a-z])Prefix\s*cache\s*hit\s*rate\s*:"),
    "external_prefix_hit_pct": re.compile(r"External\s*prefix\s*cache\s*hit\s*rate\s*:"),
    "mm_hit_pct": re.compile(r"MM\s*cache\s*hit\s*rate\s*:"),
    "preemptions": re.compile(r"Preemptions\s*:"),
    "deferred": re.compile(r"Deferred\s*:"),
}
V1_REQUIRED = ("prompt_tps", "gen_tps", "running", "waiting", "gpu_pct")
"""What every V1 release logs; the other keys are optional (see the module docstring)."""
KV_DEVICE = re.compile(r"(?<![A-Za-z])([A-Z]{3})\s*KV\s*cache\s*usage\s*:")
ENGINE = re.compile(r"(?:Engine\s*(\d+)|(\d+)\s*Engines\s*Aggregated)\s*:\s*$")
HEADER_LOOKBACK = 200  # characters before an anchor searched for the record's timestamp


@dataclass
class StatsRecord:
    line: int
    clock: str | None  # the timestamp text, if the record has one
    stamp: tuple[int | None, int, int, int, int, int, float] | None  # y, mo, d, h, mi, s, frac
    values: dict[str, float | int | None] = field(default_factory=dict)
    v1: bool = False  # a V1 engine's line (`Waiting:`, no swap)
    pos: int = 0  # offset of the anchor in its logical line (several records share one)
    engine: int | None = None  # V1: `Engine NNN:`'s index, -1 for `N Engines Aggregated:`
    kv_device: str | None = None  # V1: the KV cache's device as logged (`GPU`, `CPU`, `XPU`)
    cut: list[str] = field(default_factory=list)  # V1: optional keys whose value was cut

    @property
    def missing(self) -> list[str]:
        if self.v1:
            return [name for name in V1_REQUIRED if self.values.get(name) is None] + self.cut
        return [name for name in FIELDS if self.values.get(name) is None]

    @property
    def partial(self) -> bool:
        return bool(self.missing)


def parse_stamp(match: re.Match[str]) -> tuple[int | None, int, int, int, int, int, float]:
    g = match.groupdict()
    frac = float("0." + g["f"]) if g["f"] else 0.0
    return (int(g["y"]) if g["y"] else None, int(g["mo"]), int(g["d"]), int(g["h"]),
            int(g["mi"]), int(g["s"]), frac)


def _last_stamp(text: str) -> re.Match[str] | None:
    last = None
    for last in TIMESTAMP.finditer(text):
        pass
    return last


def find_stats(lines: list[LogicalLine]) -> list[StatsRecord]:
    """Every stats record in the log, in order (V1 ones flagged, partial ones included)."""
    records: list[StatsRecord] = []
    for logical in lines:
        text = logical.text
        anchors = [m.start() for m in ANCHOR.finditer(text)]
        for k, start in enumerate(anchors):
            end = anchors[k + 1] if k + 1 < len(anchors) else len(text)
            body = text[start:end]
            head_from = max(anchors[k - 1] if k else 0, start - HEADER_LOOKBACK)
            stamp = _last_stamp(text[head_from:start])
            values: dict[str, float | int | None] = {}
            for name, pattern in FIELDS.items():
                match = pattern.search(body)
                if match is None:
                    values[name] = None
                else:
                    values[name] = int(match.group(1)) if name in INT_FIELDS \
                        else float(match.group(1))
            head = text[head_from:start]
            v1 = bool(V1_MARK.search(head) or V1_MARK.search(body)) and \
                values["swapped"] is None and values["pending"] is None
            record = StatsRecord(logical.line, stamp.group(0) if stamp else None,
                                 parse_stamp(stamp) if stamp else None, values, v1, start)
            if v1:
                _read_v1(record, head, body)
            records.append(record)
    return records


def _read_v1(record: StatsRecord, head: str, body: str) -> None:
    """A V1 record's fields by key; its engine from the prefix right before the anchor."""
    values: dict[str, float | int | None] = {}
    cut: list[str] = []
    for name, pattern in V1_KEYS.items():
        match = pattern.search(body)
        if match is not None:
            values[name] = int(match.group(1)) if name in INT_FIELDS else float(match.group(1))
        else:
            values[name] = None
            if name not in V1_REQUIRED and V1_KEY_TEXT[name].search(body):
                cut.append(name)  # the key is there, its value was cut: never a guess
    values["swapped"] = values["cpu_pct"] = None
    record.values = values
    record.cut = cut
    device = KV_DEVICE.search(body)
    record.kv_device = device.group(1) if device else None
    engine = ENGINE.search(head.rstrip())
    if engine is not None:
        record.engine = int(engine.group(1)) if engine.group(1) is not None else -1
