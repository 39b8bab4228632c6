"""The banner that says vLLM gave up: its message, the step, how full the swap space was (V1,
which has none: its queues and GPU KV), and,
when a fix had been switched on before the abort, that it came too late (how many steps before
the abort, and what the swap runway was at that moment).

Hidden until the abort is part of what the screen shows; everything else stays on screen for
inspection. It names the step vLLM raised in, the step the status line shows at the abort and
the one `summary` calls `abort_step` (engine.conventions), so none of them disagree. In
`compact` mode (small terminals) it keeps to two unwrapped lines.
"""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from engine.analysis.runway import LateFix
from engine.conventions import pct_text
from engine.kinds import kind_of
from engine.safe_text import safe
from engine.stream.records import EngineAborted
from tui.widgets.redraw import Redrawn


def late_text(late: LateFix, compact: bool) -> str:
    """"The fix came too late: ..." from the late-fix analysis."""
    runway = late.runway
    steps = runway.steps if runway is not None else None
    if compact:
        then = f"; runway then ~{steps:,.0f}" if steps is not None else ""
        return (f"fix too late: {late.change.new} from step {late.change.step:,}, "
                f"{late.steps_before_abort:,} steps before the abort{then}")
    if steps is None:
        then = "while the swap space was not filling yet"
    else:
        then = f"when the swap runway was ~{steps:,.0f} steps"
    return (f"The fix came too late: {late.change.new} took over at step {late.change.step:,}, "
            f"{late.steps_before_abort:,} steps before the abort, {then}. The groups already "
            f"running kept growing and kept swapping out.")


class AbortBanner(Redrawn, Static):
    """Drawn from what the screen last showed it (tui.widgets.redraw), and again in the other
    layout when `compact` changes."""

    DEFAULT_CSS = """
    AbortBanner {
        display: none;
        height: auto;
        background: $error;
        color: $text;
        padding: 0 1;
        text-style: bold;
    }
    AbortBanner.-visible {
        display: block;
    }
    """

    compact: reactive[bool] = reactive(False)
    _drawn: tuple | None = None  # the key of what is on screen

    def show(self, abort: EngineAborted | None, visible: bool, footer: str = "",
             late: LateFix | None = None, engine: str = "v0") -> None:
        self.shown = (abort, visible, footer, late, engine)

    def draw(self, abort: EngineAborted | None, visible: bool, footer: str,
             late: LateFix | None, engine: str) -> None:
        on = abort is not None and visible
        key = (id(abort), on, footer, late, self.compact, engine)
        if key == self._drawn:
            return
        self._drawn = key
        self.set_class(on, "-visible")
        if not on or abort is None:
            return
        self.update(self.describe(abort, footer, late, self.compact, engine))

    def watch_compact(self) -> None:
        if self.shown is not None:
            self.draw(*self.shown)

    @property
    def late_shown(self) -> bool:
        drawn = self._drawn
        return bool(drawn and drawn[1] and drawn[3] is not None)

    @staticmethod
    def describe(abort: EngineAborted, footer: str, late: LateFix | None,
                 compact: bool, engine: str = "v0") -> Text:
        """The banner's text, in the vocabulary of the `engine` kind that aborted (V1 has no
        swap space and no groups: its state is running, waiting and GPU KV)."""
        message = safe(abort.message.split(". Please")[0].rstrip("."))  # from a file
        no_swap = not kind_of(engine).swaps
        if no_swap:
            late = None  # the late fix is measured on V0's swap runway
        if compact:
            text = Text(no_wrap=True, overflow="ellipsis")
            text.append(f"✗ vLLM ABORTED at step {abort.step:,}: {message}\n")
            if late is not None:
                text.append(late_text(late, compact=True))
            elif no_swap:
                text.append(f"running {abort.running} · waiting {abort.waiting:,} · "
                            f"GPU KV {pct_text(abort.gpu_pct)}%", "")
            else:
                text.append(f"swapped {abort.swapped} · CPU KV {pct_text(abort.cpu_pct)}% · "
                            f"GPU KV {pct_text(abort.gpu_pct)}%", "")
            return text
        text = Text()
        text.append(f"✗ vLLM ABORTED at step {abort.step:,}: {safe(abort.error)}: "
                    f"{safe(abort.message)}\n")
        if no_swap:
            text.append(f"when it raised: running {abort.running} · waiting "
                        f"{abort.waiting:,} · GPU KV {abort.gpu_used:,}/{abort.gpu_total:,} "
                        f"({pct_text(abort.gpu_pct)}%)", "not bold")
        else:
            text.append(f"when it raised: swapped {abort.swapped} groups · running "
                        f"{abort.running} · waiting {abort.waiting:,} · CPU KV "
                        f"{abort.cpu_used:,}/{abort.cpu_total:,} ({pct_text(abort.cpu_pct)}%) · "
                        f"GPU KV {pct_text(abort.gpu_pct)}%", "not bold")
        if late is not None:
            text.append("\n" + late_text(late, compact=False))
        if footer:
            text.append(f"\n{footer}", "not bold")
        return text
