"""From raw log bytes to logical lines a record finder can trust.

Real logs are not one record per line. This module undoes what terminals, containers and
launchers do to vLLM's lines, without knowing what the records are:

- ANSI colour codes go; `\\r` (tqdm redraws) starts a new line.
- Launcher prefixes go: Ray actor tags `(WorkerDict pid=123) ` (nested too:
  `(MapWorker(MapBatches(X)) pid=1) `), V1's process tags `(APIServer pid=1) `,
  `(EngineCore_DP0 pid=2) `, `[rank0]:`, docker-compose `svc  | `, repeated in any order.
- A line that ends with a terminal's `$` cut marker lost its tail: it is kept, marked `cut`, and
  never joined with the next line.
- Hard wraps are joined back: a line of at least MIN_WRAP_WIDTH characters followed by a line
  that does not start a new record is one record split at the terminal width (even mid-word,
  `GPU KV cache u` / `sage: 98.7%`), so the two are concatenated with nothing in between.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]|"
                  r"\[[0-9;]*m(?=\(|\s|$)")  # the last: a colour code whose ESC a paste lost
PREFIX = re.compile(r"^(?:\s*(?:\((?:[\w.\-]|\((?:[\w.\-]|\([\w.\-]*\))*\))+ pid=\d+"
                    r"(?:, ip=[\d.]+)?\)|\[rank\d+\]:|[\w.\-]+\s+\|(?=\s|$)))+ ?")
TIMESTAMP = re.compile(r"(?:(?P<y>\d{4})[-/])?(?P<mo>\d{2})[-/](?P<d>\d{2})[ T]"
                       r"(?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})(?:[.,](?P<f>\d{1,6}))?")
_RECORD_START = re.compile(
    r"^(?:(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)\b|\d{4}-\d{2}-\d{2}|\d{2}-\d{2} \d{2}:|"
    r"\[\d{4}-|Processed prompts|Traceback|File \"|RuntimeError|Exception|\S+Error:|"
    r"Engine \d+:|\s*$)")
MIN_WRAP_WIDTH = 40


@dataclass
class LogicalLine:
    """One record-bearing line: `text` may join several physical lines, starting at `line`."""

    line: int  # 1-based physical line number of the first piece
    text: str
    cut: bool = False  # its end was cut by a terminal `$` marker


def physical_lines(data: bytes | str) -> list[tuple[int, str, bool]]:
    """(line number, text without ANSI and prefixes, cut marker seen) per physical line; a
    `\\r` redraw splits a line but keeps its number."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    text = ANSI.sub("", text).replace("\r\n", "\n")
    out: list[tuple[int, str, bool]] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        for piece in raw.split("\r"):
            piece = PREFIX.sub("", piece.rstrip())
            cut = piece.endswith("$") and not piece.endswith("\\$")
            out.append((number, piece[:-1] if cut else piece, cut))
    return out


def starts_record(text: str) -> bool:
    return bool(_RECORD_START.match(text))


def logical_lines(data: bytes | str) -> list[LogicalLine]:
    """Physical lines with hard wraps joined back (see the module docstring)."""
    lines: list[LogicalLine] = []
    last_width = 0
    for number, text, cut in physical_lines(data):
        prev = lines[-1] if lines else None
        if (prev is not None and not prev.cut and last_width >= MIN_WRAP_WIDTH
                and not starts_record(text)):
            prev.text += text
            prev.cut = cut
        else:
            lines.append(LogicalLine(number, text, cut))
        last_width = len(text)
    return lines
