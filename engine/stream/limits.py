"""Bounds on what a reader takes from a file, so a damaged or hostile recording is reported
instead of eating the machine's memory, time or stack.

A real recording is far inside every bound: a 100,000-step run is about 60 MB of JSON, its
longest line (the seed workload's first `arrivals`, or a 100,000-request burst) a few MB, its
nesting depth 4, and zstd shrinks it about 17 times. Each limit names what it protects.
"""

from __future__ import annotations

from typing import Any

MAX_RECORDING_BYTES = 4 << 30
"""Decompressed bytes a whole-file load reads (memory: the text and its records)."""

MAX_ZSTD_RATIO = 1000
"""Decompressed / compressed bytes beyond ZSTD_RATIO_FREE_BYTES. A recording compresses about
17:1; a zstd bomb (7 KB that expands to 200 MB of newlines) is 30,000:1."""

ZSTD_RATIO_FREE_BYTES = 16 << 20
"""Output allowed before the ratio limit applies (a tiny header-only frame is fine)."""

ZSTD_FEED_BYTES = 1024
"""Compressed bytes handed to the decompressor at a time: zstd's best case (RLE blocks) is
about 32,000:1, so one call never yields more than ~32 MB before the limits are checked."""

MAX_LINE_BYTES = 64 << 20
"""One JSON line (the largest legitimate one is an Arrivals record of a big burst)."""

MAX_HEADER_BYTES = 4 << 20
"""The header line: a RunSpec and vLLM's config, a few KB."""

MAX_GAP_STEPS = 10_000
"""A lenient read keeps a step that jumps ahead (steps lost in a damaged block) and the run
shows the gap; a jump further than this is a damaged step number, not lost steps, and is
skipped (bridging it would allocate a repeat per missing step)."""

MAX_DEPTH = 32
"""Nesting of JSON containers in a header (whose `spec` and `engine_config` are free-form).
Record lines are typed, so msgspec refuses deep nesting there by type; a RecursionError from
an unknown field nested thousands deep is caught and reported as a corrupt line."""


def depth_exceeds(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True if `value` (decoded JSON) nests containers deeper than `limit`. Iterative, so it
    cannot itself hit Python's recursion limit."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
