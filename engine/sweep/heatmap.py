"""Where the engine aborts, as a grid of coloured cells: the picture issue #10 asks for
("swap space on x, n on y, red where `off` aborts; same for `strict`").

A heatmap needs two varying grid keys besides `policy` and `seed`. With exactly one other key,
`policy` itself becomes the y axis (one map: which policy aborts at which swap size). With two
other keys and `policy`, there is one map per policy. Seeds fold into one cell: red if every seed
aborted, yellow "k/N" if some did.

Rows are placed by their `cell` index (grid order, first axis slowest), so matching never
depends on how a value was spelled or rounded.
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

import msgspec

from engine.sweep.grid import Axis

ABORTED, SURVIVED, PARTIAL, FAILED, MISSING = "aborted", "survived", "partial", "failed", "missing"
STYLES = {ABORTED: "bold white on red", SURVIVED: "black on green", PARTIAL: "black on yellow",
          FAILED: "white on grey37", MISSING: "dim"}
LEGEND = "✗ N = vLLM aborted at step N, ✓ = survived, k/N = aborted in k of N seeds"


class HeatCell(msgspec.Struct, frozen=True):
    text: str
    state: str  # ABORTED, SURVIVED, PARTIAL, FAILED or MISSING


class Heatmap(msgspec.Struct, kw_only=True):
    title: str
    x_key: str
    x_values: list[str]
    y_key: str
    y_values: list[str]
    cells: list[list[HeatCell]]  # [y][x]


def _coordinates(index: int, sizes: Sequence[int]) -> list[int]:
    coords = []
    for size in reversed(sizes):
        index, position = divmod(index, size)
        coords.append(position)
    return coords[::-1]


def _fold(rows: list[dict[str, Any]]) -> HeatCell:
    finished = [r for r in rows if r.get("status") == "ok"]
    if not rows:
        return HeatCell("·", MISSING)
    if not finished:
        return HeatCell("failed", FAILED)
    aborted = [r for r in finished if r.get("aborted")]
    if not aborted:
        return HeatCell("✓", SURVIVED)
    if len(aborted) == len(finished):
        step = int(statistics.median_low(int(r["abort_step"]) for r in aborted))
        return HeatCell(f"✗ {step}", ABORTED)
    return HeatCell(f"{len(aborted)}/{len(finished)}", PARTIAL)


def heatmaps(axes: Sequence[Axis], rows: Sequence[dict[str, Any]]) -> list[Heatmap]:
    """The heatmaps this grid supports (none if it does not have two varying keys)."""
    varying = [i for i, a in enumerate(axes) if len(a.values) > 1 and a.key != "seed"]
    others = [i for i in varying if axes[i].key != "policy"]
    policy = next((i for i in varying if axes[i].key == "policy"), None)
    if len(others) == 2 and len(varying) == 3 and policy is not None:
        x, y, per = others[0], others[1], policy
    elif len(varying) == 2 and len(others) == 1 and policy is not None:
        x, y, per = others[0], policy, None
    elif len(varying) == 2 and policy is None:
        x, y, per = varying[0], varying[1], None
    else:
        return []
    sizes = [len(a.values) for a in axes]
    groups: dict[tuple[int, int, int], list[dict[str, Any]]] = {}
    for row in rows:
        coords = _coordinates(int(row["cell"]), sizes)
        group = (coords[per] if per is not None else 0, coords[y], coords[x])
        groups.setdefault(group, []).append(row)
    maps = []
    for p in range(len(axes[per].values) if per is not None else 1):
        title = "abort step"
        if per is not None:
            title += f" under policy {axes[per].texts[p]}"
        cells = [[_fold(groups.get((p, yi, xi), [])) for xi in range(len(axes[x].values))]
                 for yi in range(len(axes[y].values))]
        maps.append(Heatmap(title=title, x_key=axes[x].key, x_values=list(axes[x].texts),
                            y_key=axes[y].key, y_values=list(axes[y].texts), cells=cells))
    return maps


def why_no_heatmap(axes: Sequence[Axis]) -> str:
    varying = [a.key for a in axes if len(a.values) > 1 and a.key != "seed"]
    return (f"no heatmap: it needs two varying grid keys besides policy and seed (this grid "
            f"varies {', '.join(varying) or 'nothing'})")


def rich_tables(heatmap: Heatmap, width: int | None, console: Any) -> list[tuple[str, Any]]:
    """The heatmap as rich Tables: y values down the left, x values across the top, in blocks
    of x values that fit `width` (engine.widths), each with the y labels."""
    from rich.text import Text

    from engine.widths import rich_blocks

    headers = [f"{heatmap.y_key} \\ x", *heatmap.x_values]  # the title names x
    rows = [[Text(label, style="bold"),  # "✗161": ten columns of them fit in 80
             *(Text(c.text.replace("✗ ", "✗"), style=STYLES[c.state]) for c in cells)]
            for label, cells in zip(heatmap.y_values, heatmap.cells)]
    justify = ["right", *("center" for _ in heatmap.x_values)]
    return rich_blocks(f"{heatmap.title} (x: {heatmap.x_key}, y: {heatmap.y_key})", headers,
                       rows, 1, width, justify, console)


def markdown(heatmap: Heatmap) -> str:
    lines = [f"**{heatmap.title}** (x: `{heatmap.x_key}`, y: `{heatmap.y_key}`)", "",
             "| " + " | ".join([f"{heatmap.y_key} \\ {heatmap.x_key}", *heatmap.x_values]) + " |",
             "|" + "---|" * (len(heatmap.x_values) + 1)]
    for label, cells in zip(heatmap.y_values, heatmap.cells):
        lines.append("| " + " | ".join([label, *(c.text for c in cells)]) + " |")
    return "\n".join(lines)
