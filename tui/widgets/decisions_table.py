"""What the scheduler decided, one row per step, newest first.

The table is a view over the RunView, not a copy of it: it draws (with Textual's line API)
only the rows that fit on screen, ending at the step the screen shows (the newest one live, the
cursor in replay), so a 100,000-step replay costs no more than a 100-step one and a live run
adds no per-step UI work. DataTable was tried first: its per-cell rendering cost a large share
of the GIL the engine thread needs.

Columns follow the width (layout_columns): a narrow table drops its least important columns
and shrinks the rest, a wide one (200+ terminal columns) widens the id columns so whole id lists
fit; an id list that does not fit ends in "+N", never in a cut id.

A V1 run (Header.engine "v1") has its own columns (V1_COLUMNS): no swap space, its preemptions
are recomputes, each id with its preemption count so far (`7×5`: request 7, preempted the
fifth time). A request preempted REPEAT_PREEMPTIONS times or more stands out (the `repeat`
role), so a thrash is visible row by row.

Keys: up/down/pageup/pagedown move the highlight (older rows scroll in), enter or a click
chooses a row (StepSelected), escape (on the screen) returns to following.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from engine.safe_text import safe
from engine.stream.records import StepRecord, V1StepRecord
from tui.messages import StepSelected
from tui.run_view import RunView
from tui.widgets.status_bar import short_policy

@dataclass(frozen=True)
class Column:
    key: str
    title: str
    width: int  # cells at the normal size (the 160-column layout), separator included
    least: int  # cells it can shrink to before it is dropped
    drop: int  # narrow tables drop columns in this order (1 first); 0: never dropped
    grow: int = 0  # wide tables give this many extra cells at most (id lists, prefill chunks)
    short: str = ""  # title when narrower than the title


COLUMNS: tuple[Column, ...] = (
    Column("step", "step", 6, 6, 0),
    Column("prefill", "prefill req:tokens", 25, 14, 6, grow=40, short="prefill"),
    Column("decode", "dec g/s", 8, 8, 5),
    Column("out", "swap out", 10, 9, 0, grow=30),
    Column("in", "swap in", 9, 8, 4, grow=30),
    Column("recomp", "recomp", 7, 7, 1, grow=20),
    Column("finished", "finished", 9, 9, 2, grow=30),
    Column("tokens", "tok/budget", 11, 10, 3, short="tokens"),
    Column("policy", "policy", 9, 8, 7, grow=6),
)
V1_COLUMNS: tuple[Column, ...] = (
    Column("step", "step", 6, 6, 0),
    Column("v1prefill", "prefill req:tokens", 15, 11, 6, grow=40, short="prefill"),
    Column("v1decode", "dec", 5, 4, 5),
    Column("preempted", "preempted id×n", 16, 10, 0, grow=30, short="preempted"),
    Column("lost", "lost tok", 9, 6, 3, short="lost"),
    Column("recomp_tok", "recomp", 7, 6, 2, short="rcmp"),
    Column("prefix", "prefix", 7, 5, 1, short="pfx"),
    Column("finished", "finished", 9, 7, 4, grow=30, short="fin"),
    Column("tokens", "tok/budget", 11, 10, 7, short="tokens"),
    # 12: "full-isl" and "whole+least" whole at 80 columns (7 cut them to "full-i", "whole+")
    Column("v1policy", "policy", 12, 12, 8, grow=20),
)
"""A V1 run's columns: prefill chunks (a resumed request marked ↻), decoding requests, the
preempted ids with their counts, the computed tokens they lost, the tokens computed again and
found in the prefix cache this step."""
COLUMNS_BY_ENGINE: dict[str, tuple[Column, ...]] = {"v0": COLUMNS, "v1": V1_COLUMNS}
REPEAT_PREEMPTIONS = 3
"""A preemption count from which a request stands out in the table (#25538's loop: preempted
again as soon as it is resumed)."""
ROLES = ("header", "out", "held", "mark", "odd-row", "cursor", "cursor-blurred", "repeat")
"""What the table styles by role: each a `decisions-table--ROLE` component class."""
CACHE_LIMIT = 4000


def layout_columns(width: int, columns: tuple[Column, ...] = COLUMNS
                   ) -> list[tuple[Column, int]]:
    """The columns that fit in `width` cells, in their order, with their widths.

    Narrow: the least important columns go first (drop order), the rest shrink towards their
    least width. Normal: every column at its width. Wide: id columns grow, so full id lists fit.
    """
    shown = list(columns)
    for column in sorted((c for c in columns if c.drop), key=lambda c: c.drop):
        if sum(c.least for c in shown) <= width:
            break
        shown.remove(column)
    widths = {c.key: c.least for c in shown}
    extra = width - sum(widths.values())
    # back to the normal widths, most important first (never-dropped, then last to drop)
    for column in sorted(shown, key=lambda c: -(c.drop or 99)):
        add = min(extra, column.width - widths[column.key])
        widths[column.key] += add
        extra -= add
    growable = [c for c in shown if c.grow]
    while extra > 0 and growable:
        share = max(1, extra // len(growable))
        for column in list(growable):
            add = min(share, column.grow - (widths[column.key] - column.width), extra)
            widths[column.key] += add
            extra -= add
            if widths[column.key] - column.width >= column.grow:
                growable.remove(column)
            if extra <= 0:
                break
    return [(c, widths[c.key]) for c in shown]


def _ids(ids: list[str], limit: int) -> str:
    """As many ids as fit in `limit` cells, then "+N" for the rest (never a cut id)."""
    if not ids:
        return ""
    text = ",".join(ids)
    if len(text) <= limit:
        return text
    for n in range(len(ids) - 1, 0, -1):
        candidate = ",".join(ids[:n]) + f" +{len(ids) - n}"
        if len(candidate) <= limit:
            return candidate
    count = f"{len(ids)} ids"
    return count if len(count) <= limit else str(len(ids))


def prefill_cell(prefills: list[tuple[str, int]], limit: int = 23) -> str:
    """`request:tokens` chunks, truncated with a count of the rest."""
    parts: list[str] = []
    used = 0
    for i, (rid, tokens) in enumerate(prefills):
        part = f"{rid}:{tokens}"
        if used + len(part) + 1 > limit - 4 and parts:
            parts.append(f"+{len(prefills) - i}")
            break
        parts.append(part)
        used += len(part) + 1
    return " ".join(parts)


Cell = tuple[str, str | None]
"""A cell's text and the role it is styled by (None: plain)."""
Parts = list[tuple[str, str | None]]
"""A cell drawn in parts, each with its own role (the preempted ids, a repeated one marked)."""


def preempted_parts(preempted: list[tuple[str, int, int]], limit: int) -> Parts:
    """`id×n` for each preempted request, as many as fit in `limit` cells then "+N"; an id
    preempted REPEAT_PREEMPTIONS times or more in the `repeat` role, the others in `out`."""
    parts: Parts = []
    used, n = 0, len(preempted)
    for i, (rid, _, count) in enumerate(preempted):
        part = f"{safe(rid)}×{count}"
        sep = 1 if parts else 0
        rest = n - i - 1
        tail = len(f" +{rest}") if rest else 0  # room to say how many did not fit after it
        if used + sep + len(part) + tail > limit:
            more = f" +{n - i}" if parts else f"+{n - i}"
            parts.append((more if used + len(more) <= limit else "", None))
            break
        if sep:
            parts.append((",", None))
            used += 1
        parts.append((part, "repeat" if count >= REPEAT_PREEMPTIONS else "out"))
        used += len(part)
    return parts


def v1_prefill_cell(s: V1StepRecord, limit: int) -> str:
    """New and running chunks as `id:tokens`, a resumed request as `↻id:tokens`."""
    resumed = {rid for rid, _ in s.resumed}
    chunks = [(("↻" if rid in resumed else "") + rid, n) for rid, n in s.prefills]
    return prefill_cell(chunks, limit)


def cell(key: str, s: StepRecord, width: int) -> Cell | tuple[Parts, None]:
    """One cell of one row, fitted to `width` (separator included), with its role."""
    room = width - 1
    if key in V1_KEYS:
        return v1_cell(key, s, room)  # type: ignore[arg-type]
    if key == "step":
        return str(s.step), None
    if key == "prefill":
        return prefill_cell(s.prefills, room), None
    if key == "decode":
        return f"{s.decode_groups}/{s.decode_seqs}", None
    if key == "out":
        return _ids(s.swapped_out, room), "out" if s.swapped_out else None
    if key == "in":
        return _ids(s.swapped_in, room), None
    if key == "recomp":
        return _ids(s.recomputed, room), None
    if key == "finished":
        return _ids(s.finished, room), None
    if key == "tokens":
        return f"{s.batched_tokens}/{s.token_budget}", None
    if key == "policy":  # "watermark:0.5" as "wm:0.5" where it is short (was "watermar")
        policy = s.policy if len(s.policy) <= room else short_policy(s.policy)
        return ("⊘ held" if s.withheld else policy[:room], "held" if s.withheld else None)
    raise KeyError(key)


V1_KEYS = {"v1prefill", "v1decode", "preempted", "lost", "recomp_tok", "prefix", "v1policy"}


def v1_cell(key: str, s: V1StepRecord, room: int) -> Cell | tuple[Parts, None]:
    if key == "v1prefill":
        return v1_prefill_cell(s, room), None
    if key == "v1decode":
        return str(s.decode_reqs), None
    if key == "preempted":
        return preempted_parts(s.preempted, room), None
    if key == "lost":
        lost = s.lost_tokens
        return (f"{lost:,}" if len(f"{lost:,}") <= room else str(lost)) if lost else "", None
    if key == "recomp_tok":
        return (str(s.recomputed_tokens) if s.recomputed_tokens else ""), None
    if key == "prefix":
        return (str(s.prefix_hit_tokens) if s.prefix_hit_tokens else ""), None
    if key == "v1policy":  # "whole-context+least-computed" as "whole+least" where it is short
        policy = s.policy if len(s.policy) <= room else short_policy(s.policy)
        return ("⊘ held" if s.withheld else policy[:room], "held" if s.withheld else None)
    raise KeyError(key)


def row_cells(s: StepRecord, columns: list[tuple[Column, int]] | None = None
              ) -> list[Cell]:
    """The cells of one row, fitted to the columns, with an optional role each."""
    columns = columns if columns is not None else [(c, c.width) for c in COLUMNS]
    return [cell(c.key, s, w) for c, w in columns]


def aborting_segments(s: StepRecord, widths: list[int],
                      styles: dict[str, Style]) -> list[Segment]:
    """The row of the step vLLM raised in (engine.conventions): its number, then the abort
    across the decision columns, since vLLM never returned its decisions."""
    style = styles.get("out")
    rest = sum(widths[1:])
    text = "✗ vLLM aborted in this step: no decisions"[:max(0, rest - 1)]
    return [Segment(str(s.step)[:widths[0] - 1].ljust(widths[0]), style),
            Segment(text.ljust(rest), style)]


def _segments(cells: list[Cell], widths: list[int],
              styles: dict[str, Style]) -> list[Segment]:
    segments = []
    for (text, role), width in zip(cells, widths):
        if isinstance(text, list):  # parts, each in its role (already safe and fitted)
            used = 0
            for part, part_role in text:
                part = part[:max(0, width - 1 - used)]
                if part:
                    segments.append(Segment(part, styles.get(part_role) if part_role
                                            else None))
                    used += len(part)
            segments.append(Segment(" " * (width - used)))
            continue
        segments.append(Segment(safe(text)[:width - 1].ljust(width),  # ids from a file
                                styles.get(role) if role else None))
    return segments


class DecisionsTable(Widget, can_focus=True):
    """Rows of the RunView's steps, newest first, ending at the step the screen shows."""

    DEFAULT_CSS = """
    DecisionsTable {
        height: 1fr;
        width: 1fr;
        border: round $primary;
        border-title-color: $text;
    }
    DecisionsTable:focus {
        border: round $accent;
    }
    DecisionsTable > .decisions-table--header { text-style: bold underline; }
    DecisionsTable > .decisions-table--out { color: $text-error; text-style: bold; }
    DecisionsTable > .decisions-table--held { color: $text-warning; text-style: bold; }
    DecisionsTable > .decisions-table--mark { color: $accent; text-style: bold; }
    DecisionsTable > .decisions-table--odd-row { background: $foreground 4%; }
    DecisionsTable > .decisions-table--cursor { text-style: reverse; }
    DecisionsTable > .decisions-table--cursor-blurred { background: $foreground 25%; }
    DecisionsTable > .decisions-table--repeat { background: $error; color: $foreground;
                                                text-style: bold; }
    """
    COMPONENT_CLASSES = {f"decisions-table--{role}" for role in ROLES}
    BINDINGS = [
        Binding("up", "move(1)", "newer", show=False),
        Binding("down", "move(-1)", "older", show=False),
        Binding("pageup", "page(1)", "page newer", show=False),
        Binding("pagedown", "page(-1)", "page older", show=False),
        Binding("enter", "choose", "show step", show=False),
    ]

    marked: reactive[int | None] = reactive(None)
    """A step drawn with a mark in its step cell (the A/B replay's first difference)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._view: RunView | None = None
        self._top = 0  # the step the screen shows: the newest row we may draw
        self._widths: list[int] = []
        self.anchor: int | None = None  # step on the first row; None: follow _top
        self.cursor_step: int | None = None  # highlighted step; None: the first row
        self._cache: dict[int, list[Segment]] = {}
        self.columns: list[tuple[Column, int]] = []
        self._header = Strip([])
        self._styles: dict[str, Style] = {}  # role -> style under the app's theme (_restyle)
        self.engine = "v0"  # the engine kind of the run shown: whose columns (V1_COLUMNS)
        self._layout(94)

    def on_mount(self) -> None:
        self.border_title = "decisions (newest first)"
        self._restyle()

    def notify_style_update(self) -> None:
        """A new theme: rows were styled with the old one's colours."""
        super().notify_style_update()
        if self.is_mounted:
            self._restyle()

    def _restyle(self) -> None:
        """The roles' styles from the theme. Backgrounds (rows, the blurred cursor) are taken
        whole, blended over the table's own, and without a colour, so a red `out` cell stays
        red on a striped row."""
        styles = {role: self.get_component_rich_style(f"decisions-table--{role}", partial=True)
                  for role in ROLES}
        for role in ("odd-row", "cursor-blurred"):
            styles[role] = Style(bgcolor=self.get_component_rich_style(
                f"decisions-table--{role}").bgcolor)
        if styles != self._styles:
            self._styles = styles
            self.columns = []  # rebuild the header and every cached row
            self._layout(self.content_size.width or 94)

    def on_resize(self) -> None:
        self._layout(self.content_size.width)

    def _layout(self, width: int) -> None:
        """Choose the columns for `width` cells; rows are re-rendered when they change."""
        columns = layout_columns(max(1, width), COLUMNS_BY_ENGINE.get(self.engine, COLUMNS))
        if columns == self.columns:
            return
        self.columns, self._cache = columns, {}
        self._widths = [w for _, w in columns]
        titles: list[Cell] = [(c.title if len(c.title) < w else c.short or c.title, "header")
                              for c, w in columns]
        self._header = Strip(_segments(titles, self._widths, self._styles))
        self.refresh()

    def watch_marked(self) -> None:
        self._cache = {}  # the marked row is drawn anew (reactive refreshes the widget)

    # -- data -----------------------------------------------------------------------------

    def show_until(self, view: RunView, step: int) -> None:
        """Draw the rows ending at `step`. Cheap when nothing changed."""
        if view is not self._view:
            self._view, self._cache = view, {}
            self.anchor = self.cursor_step = None
        if view.engine != self.engine:  # a new run, or its header has just arrived
            self.engine = view.engine
            self.columns = []
            self._layout(self.content_size.width or 94)
        if not view.steps:
            step = -1
        if step != self._top or view is not self._view:
            self._top = step
            self.refresh()

    def follow(self) -> None:
        """Go back to showing the newest rows with the first one highlighted."""
        self.anchor = self.cursor_step = None
        self.refresh()

    @property
    def first_row_step(self) -> int:
        return self._top if self.anchor is None else min(self.anchor, self._top)

    @property
    def highlighted(self) -> int:
        return self.first_row_step if self.cursor_step is None else self.cursor_step

    @property
    def page_rows(self) -> int:
        return max(1, self.size.height - 1)

    def visible_steps(self) -> list[int]:
        """Step numbers of the rows on screen, top to bottom (for tests and clicks)."""
        view = self._view
        if view is None or not view.steps or self._top < view.first_step:
            return []
        start = self.first_row_step
        stop = max(view.first_step, start - self.page_rows + 1)
        return list(range(start, stop - 1, -1))

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return container.height

    # -- drawing --------------------------------------------------------------------------

    def _row(self, number: int) -> list[Segment]:
        segments = self._cache.get(number)
        if segments is None:
            assert self._view is not None
            record = self._view.get(number)
            segments = []
            if record is not None:
                if record is self._view.aborting:
                    segments = aborting_segments(record, self._widths, self._styles)
                else:
                    cells = row_cells(record, self.columns)
                    if number == self.marked:
                        cells[0] = (f"◆{cells[0][0]}", "mark")
                    segments = _segments(cells, self._widths, self._styles)
            if number % 2:  # zebra stripes, styled once here rather than on every render;
                # under the cells' own styles, so a highlighted cell keeps its background
                segments = list(Segment.apply_style(segments,
                                                    style=self._styles.get("odd-row")))
            if len(self._cache) > CACHE_LIMIT:
                self._cache.clear()
            self._cache[number] = segments
        return segments

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0:
            return self._header.crop(0, width).extend_cell_length(width)
        view = self._view
        if view is None or not view.steps:
            return Strip.blank(width)
        number = self.first_row_step - (y - 1)
        if number < view.first_step or number > view.last_step:
            return Strip.blank(width)
        segments = self._row(number)
        style: Style | None = self._styles.get("odd-row") if number % 2 else None
        if number == self.highlighted:
            style = self._styles.get("cursor" if self.has_focus else "cursor-blurred")
            segments = list(Segment.apply_style(segments, post_style=style))
        return Strip(segments).crop(0, width).extend_cell_length(width, style)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    # -- moving ---------------------------------------------------------------------------

    def _move_to(self, step: int) -> None:
        view = self._view
        if view is None or not view.steps:
            return
        step = max(view.first_step, min(self._top, step))
        self.cursor_step = step
        first = self.first_row_step
        if step > first:
            self.anchor = step
        elif step < first - self.page_rows + 1:
            self.anchor = step + self.page_rows - 1
        if self.anchor is not None and self.anchor >= self._top:
            self.anchor = None
        self.refresh()

    def action_move(self, delta: int) -> None:
        self._move_to(self.highlighted + delta)

    def action_page(self, direction: int) -> None:
        self._move_to(self.highlighted + direction * self.page_rows)

    def action_choose(self) -> None:
        if self._view is not None and self._view.steps:
            self.post_message(StepSelected(self.highlighted))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)  # inside the border
        if offset is None or offset.y < 1:
            return
        rows = self.visible_steps()
        index = offset.y - 1
        if 0 <= index < len(rows):
            event.stop()
            self._move_to(rows[index])
            self.post_message(StepSelected(rows[index]))
