"""Find V0 stats records and read their fields by key.

A record is found by its anchor (`Avg prompt throughput`), not by its line: several records may
share a line (lost newlines), and a record may sit after a tqdm bar or a fork's extra fields.
Its text runs to the next anchor (or the end of its logical line). Each field is read by key,
and only counts if its value is followed by its unit (`tokens/s`, `reqs`, `%`): a record cut
at `GPU KV cache usage: 9` gives None for that field and is partial, never 9%. The V0 layouts
of every version (llm_engine.py before 0.3.1, metrics.py after, `[metrics.py:N]` from 0.8) share
these keys, so the file:line part is never read.
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
INT_FIELDS = ("running", "swapped", "pending")
V1_MARK = re.compile(r"Engine\s*\d+\s*:|Waiting\s*:\s*\d+\s*reqs")
HEADER_LOOKBACK = 200  # characters before an anchor searched for the record's timestamp


@dataclass
class StatsRecord:
    line: int
    clock: str | None  # the timestamp text, if the record has one
    stamp: tuple[int | None, int, int, int, int, int, float] | None  # y, mo, d, h, mi, s, frac
    values: dict[str, float | int | None] = field(default_factory=dict)
    v1: bool = False  # a V1 engine's line (`Waiting:`, no swap)
    pos: int = 0  # offset of the anchor in its logical line (several records share one)

    @property
    def missing(self) -> list[str]:
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
            records.append(StatsRecord(logical.line, stamp.group(0) if stamp else None,
                                       parse_stamp(stamp) if stamp else None, values, v1, start))
    return records
