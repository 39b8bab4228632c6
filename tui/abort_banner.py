"""The banner that says vLLM gave up: its message, the step, and how full the swap space was.

Hidden until the abort is part of what the screen shows; everything else stays on screen for
inspection.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from engine.stream.records import EngineAborted


class AbortBanner(Static):
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

    def show(self, abort: EngineAborted | None, visible: bool, footer: str = "") -> None:
        on = abort is not None and visible
        key = (id(abort), on, footer)
        if key == getattr(self, "_shown", None):
            return
        self._shown = key
        self.set_class(on, "-visible")
        if not on or abort is None:
            return
        text = Text(f"vLLM ABORTED at step {abort.step:,}: {abort.error}: {abort.message}\n")
        text.append(f"swapped {abort.swapped} groups · running {abort.running} · waiting "
                    f"{abort.waiting} · CPU KV {abort.cpu_used}/{abort.cpu_total} "
                    f"({abort.cpu_pct:.1f}%) · GPU KV {abort.gpu_pct:.1f}%")
        if footer:
            text.append(f"\n{footer}")
        self.update(text)
