"""The two status lines at the top: what runs, under which policy, where it is, and whether it
is being recorded; plus the "press f" hint while the fix is off.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widgets import Static

from tui.run_view import RunView

POLICY_STYLES = {"off": "bold white on red", "strict": "bold black on green",
                 "watermark": "bold black on yellow"}
STATE_STYLES = {"running": "green", "paused": "yellow", "aborted": "bold red",
                "finished": "cyan", "stopped": "cyan", "starting": "dim", "replay": "cyan"}


def policy_style(policy: str) -> str:
    return POLICY_STYLES.get(policy.partition(":")[0], "bold")


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"


@dataclass
class Status:
    """What the screen knows beyond the records (engine state, timing, recording)."""

    state: str = "starting"
    steps_per_s: float | None = None  # None: not shown (replay, so snapshots stay stable)
    show_wall: bool = True  # replay hides wall-clock values
    recording: str | None = None  # path, or None when not recording
    recording_bytes: int = 0
    hint: str = ""  # e.g. "press f to switch the fix on"
    source: str | None = None  # replay: what is being replayed, shown instead of recording


class StatusBar(Static):
    """Two lines rendered from a RunView and a Status."""

    DEFAULT_CSS = """
    StatusBar {
        height: 2;
        background: $boost;
        padding: 0 1;
    }
    """

    def show(self, view: RunView, status: Status) -> None:
        text = self.compose_text(view, status)
        if text.plain != getattr(self, "_last_plain", None):
            self._last_plain = text.plain
            self.update(text, layout=False)  # fixed height: no layout pass, which is costly

    @staticmethod
    def compose_text(view: RunView, status: Status) -> Text:
        h = view.header
        text = Text(no_wrap=True, overflow="ellipsis")
        if h is not None:
            text.append(f"{h.backend} · {h.model} · vLLM {h.vllm_version}", "bold")
        else:
            text.append("starting the engine…", "dim")
        policy = view.policy
        text.append("  policy ")
        text.append(f" {policy} ", policy_style(policy))
        text.append("  ")
        text.append(status.state, STATE_STYLES.get(status.state.split()[0], ""))
        s = view.current
        if s is not None:
            text.append(f"  step {s.step:,}  sim {s.sim_s:,.1f} s")
            if status.show_wall:
                text.append(f"  wall {s.wall_s:,.1f} s")
        if status.steps_per_s is not None:
            text.append(f"  {status.steps_per_s:,.0f} steps/s")
        text.append("  ")
        if status.source:
            text.append(status.source, "cyan")
        elif status.recording:
            text.append("● REC ", "bold red")
            text.append(f"{status.recording} ({human_bytes(status.recording_bytes)})")
        else:
            text.append("not recording", "dim")
        text.append("\n")
        if s is not None:
            text.append(f"running {s.running}  swapped ")
            text.append(f"{s.swapped}", "bold red" if s.swapped else "")
            text.append(f"  waiting {s.waiting}  GPU KV {s.gpu_pct:.1f}%  CPU KV ")
            text.append(f"{s.cpu_pct:.1f}%", "bold red" if s.cpu_pct >= 50 else "")
        if status.hint:
            text.append("   ")
            text.append(status.hint, "bold reverse")
        return text
