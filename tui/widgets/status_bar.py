"""The two status lines at the top. They never drop the key numbers.

Line 1 holds what a user must always see: the policy (applied, or pending while the engine has
not applied a key press yet), the state, the step, the running / swapped / waiting queues, GPU
and CPU KV usage and a short recording indicator. It is written at the most verbose level that
fits the width, down to abbreviations at 80 columns; it is never wrapped or cut.

Line 2 holds the rest in priority order (swap runway, the hint, the restart policy, times,
what is replayed, the engine's identity): each piece is shown if it fits, least important first
to go. The recording's full path is in the help screen (`?`), not here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import Static

from engine.analysis.runway import Runway
from engine.analysis.reasons import reason_text
from engine.analysis.seats import recent_underfill
from engine.analysis.stall import Stall, admission_stall, seat_limit, stall_text
from engine.conventions import pct_text, ratio_text
from engine.run_state import RunState
from engine.safe_text import safe
from engine.stream.records import StepRecord
from engine.timeaxis import SIM, axis_of
from tui.run_view import RunView
from tui.widgets.theme import Roles, component_roles, unstyled

POLICY_ROLES = {"off": "policy-off", "strict": "policy-strict", "watermark": "policy-watermark",
                "reserve": "policy-reserve",
                # V1's: its admission rules as V0's guarantees look, the victim choice apart
                "whole-context": "policy-strict", "full-isl": "policy-reserve",
                "least-computed": "policy-watermark", "skip-and-continue": "policy-strict",
                "per-iteration-count": "policy-reserve"}
STATE_ROLES = {"running": "running", "paused": "paused", "stopping": "paused",
               "aborted": "aborted", "failed": "aborted", "disconnected": "aborted",
               "finished": "over", "stopped": "over", "replay": "over", "starting": "starting"}
"""The role each state word is drawn in (RunState's values, and the screens' own words)."""


def _count(name: str) -> Callable[[StepRecord, int], str]:
    return lambda s, level: f"{getattr(s, name):,}" if level < 3 else str(getattr(s, name))


def _percent(name: str) -> Callable[[StepRecord, int], str]:
    return lambda s, level: f"{pct_text(getattr(s, name), 1 if level < 3 else 0)}%"


@dataclass(frozen=True)
class KeyNumber:
    """One of line 1's numbers: its label at each verbosity level (0 words ... 3
    abbreviations), its value, and when it is hot (drawn as a warning)."""

    labels: tuple[str, str, str, str]
    value: Callable[[StepRecord, int], str]
    hot: Callable[[StepRecord], bool] = lambda s: False
    shown: Callable[[StepRecord], bool] = lambda s: True  # False: the run has no such thing


KEY_NUMBERS: dict[str, tuple[KeyNumber, ...]] = {
    "v0": (KeyNumber(("running", "running", "run", "run"), _count("running")),
           KeyNumber(("swapped", "swapped", "swap", "swp"), _count("swapped"),
                     lambda s: s.swapped > 0),
           KeyNumber(("waiting", "waiting", "wait", "wt"), _count("waiting")),
           KeyNumber(("GPU KV", "GPU", "GPU", "GPU"), _percent("gpu_pct")),
           KeyNumber(("CPU KV", "CPU", "CPU", "CPU"), _percent("cpu_pct"),
                     lambda s: s.cpu_pct >= 50)),
    # V1 has no swap space; its thrash is recompute: the preemptions so far and the recompute
    # tax (tokens computed again over all computed, so far) take swapped's and CPU's place
    "v1": (KeyNumber(("running", "running", "run", "run"), _count("running")),
           KeyNumber(("waiting", "waiting", "wait", "wt"), _count("waiting")),
           KeyNumber(("GPU KV", "GPU", "GPU", "GPU"), _percent("gpu_pct")),
           # vLLM's CPU offloading tier, when the run has one (a cache: never hot)
           KeyNumber(("CPU tier", "CPU", "CPU", "CPU"), _percent("cpu_pct"),
                     shown=lambda s: bool(s.cpu_chunks_total)),
           KeyNumber(("preempted", "preempted", "pre", "pre"), _count("preemptions_total"),
                     lambda s: bool(s.preempted)),
           KeyNumber(("recompute tax", "tax", "tax", "tax"),
                     lambda s, level: f"{s.recompute_tax:.2f}",
                     lambda s: s.recompute_tax >= 0.5)),
}
"""Line 1's numbers by engine kind (the recording header's `engine`): another kind's queues
are one more entry here. A kind without an entry is shown as V0."""

LEVELS = 5  # line 1's verbosity levels, 0 (words) to 4 (abbreviations, no recording size)


def policy_role(policy: str) -> str:
    return POLICY_ROLES.get(policy.partition(":")[0].partition("+")[0], "policy")


def short_policy(policy: str) -> str:
    """"watermark:0.5" is "wm:0.5" where every column counts (V1's: "whole-context+least-computed"
    is "whole+least", "full-isl+least-computed" "isl+least": each fits the decisions table's
    policy column at 80 columns; "skip-and-continue" is "skip", "per-iteration-count" "per-iter")."""
    return (policy.replace("watermark", "wm").replace("full-isl+", "isl+")
            .replace("whole-context", "whole").replace("least-computed", "least")
            .replace("skip-and-continue", "skip").replace("per-iteration-count", "per-iter"))


def human_bytes(n: int, compact: bool = False) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            if unit == "B" or compact or size >= 100:
                return f"{size:.0f} {unit}"
            return f"{size:.1f} {unit}"
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
    saved_bytes: int | None = None  # the run is over and its recording was closed whole
    hint: str = ""  # e.g. "press f to switch the fix on"
    source: str | None = None  # replay: what is being replayed, shown instead of recording
    pending_policy: str | None = None  # asked for (key pressed), not applied by the engine yet
    stage: str = ""  # start-up stage while no step has run ("importing vLLM", ...)
    restart_policy: str | None = None  # the policy R restarts with, once the run is over
    source_role: str = "source"  # A/B replay: "run-0" / "run-1", the run's colour on the plots


def runway_text(runway: Runway | None, policy: str, compact: bool) -> tuple[str, str] | None:
    """(text, role) saying how many steps the swap space has left; None if nothing to say."""
    if runway is None or runway.total_blocks <= 0:
        return None
    steps = runway.steps
    under = short_policy(policy)
    if steps is None:
        if runway.guaranteed and runway.free_blocks < runway.total_blocks:
            return ("swap cannot run out" if compact
                    else "swap space cannot run out: the committed demand fits", "good")
        if runway.free_blocks >= runway.total_blocks:  # nothing swapped out
            if not runway.since_change:
                return None
            return (f"swap empty ({under})" if compact
                    else f"swap space empty under {policy}", "good")
        if runway.since_change:
            return (f"swap stable ({under})" if compact
                    else f"swap space no longer filling under {policy}", "good")
        return ("swap stable" if compact else "swap space not filling", "")
    style = "warn" if runway.short else "caution"
    mark = "⚠ " if runway.short else ""
    if compact:
        return f"{mark}runway ~{steps:,.0f}", style
    text = f"{mark}swap runway ~{steps:,.0f} steps"
    if runway.since_change:
        text += f": still reaches zero under {policy}"
    elif runway.measuring:
        text += f" (measuring {policy})"
    return text, style


STATUS_ROLES = ("policy-off", "policy-strict", "policy-watermark", "policy-reserve", "policy",
                "pending",
                "running", "paused", "aborted", "over", "starting", "hot", "warn", "caution",
                "good", "rec", "muted", "hint", "bold", "source", "run-0", "run-1")
"""Every role the status lines style text by; each is a `status-bar--ROLE` component class."""


class StatusBar(Static):
    """Two lines rendered from a RunView, a Status and the runway forecast."""

    COMPONENT_CLASSES = {f"status-bar--{role}" for role in STATUS_ROLES}
    # Global on purpose: toasts go to the top right, under these two lines, where they cover a
    # corner of the plots rather than the event log (bottom right) or the footer.
    SCOPED_CSS = False
    DEFAULT_CSS = """
    StatusBar {
        height: 2;
        background: $boost;
        padding: 0 1;
        text-wrap: nowrap;
        text-overflow: clip;
    }
    StatusBar > .status-bar--policy-off {
        background: $error;
        color: $foreground;
        text-style: bold;
    }
    StatusBar > .status-bar--policy-strict {
        background: $success;
        color: $background;
        text-style: bold;
    }
    StatusBar > .status-bar--policy-watermark {
        background: $warning;
        color: $background;
        text-style: bold;
    }
    StatusBar > .status-bar--policy-reserve {
        background: $primary;
        color: $background;
        text-style: bold;
    }
    StatusBar > .status-bar--policy {
        text-style: bold reverse;
    }
    StatusBar > .status-bar--pending {
        background: $accent;
        color: $background;
        text-style: bold;
    }
    StatusBar > .status-bar--running {
        color: $success;
        text-style: bold;
    }
    StatusBar > .status-bar--paused {
        color: $warning;
        text-style: bold;
    }
    StatusBar > .status-bar--aborted {
        color: $error;
        text-style: bold;
    }
    StatusBar > .status-bar--over {
        color: $text-primary;
        text-style: bold;
    }
    StatusBar > .status-bar--starting {
        text-style: italic;
    }
    StatusBar > .status-bar--hot {
        color: $text-error;
        text-style: bold;
    }
    StatusBar > .status-bar--warn {
        background: $error;
        color: $foreground;
        text-style: bold;
    }
    StatusBar > .status-bar--caution {
        color: $warning;
        text-style: bold;
    }
    StatusBar > .status-bar--good {
        color: $success;
        text-style: bold;
    }
    StatusBar > .status-bar--rec {
        color: $text-error;
        text-style: bold;
    }
    StatusBar > .status-bar--muted {
        text-style: dim;
    }
    StatusBar > .status-bar--hint {
        text-style: bold reverse;
    }
    StatusBar > .status-bar--bold {
        text-style: bold;
    }
    StatusBar > .status-bar--source {
        color: $text-primary;
    }
    StatusBar > .status-bar--run-0 {
        color: $primary;
        text-style: bold;
    }
    StatusBar > .status-bar--run-1 {
        color: $success;
        text-style: bold;
    }
    #textual-toastrack {
        dock: top;
        align: right top;
        margin-top: 3;
        margin-bottom: 0;
    }
    """

    status: Status | None = None  # the last Status shown (the help screen reads the path)

    def show(self, view: RunView, status: Status, runway: Runway | None = None) -> None:
        self.status = status
        self._args = (view, status, runway)
        width = self.content_size.width or 158
        key = (id(view), view.version, view.cursor, status, runway, width)
        if key == getattr(self, "_key", None):
            return  # the screens call this on every tick; most ticks change nothing here
        self._key = key
        text = self.compose_text(view, status, runway, width,
                                 component_roles(self, "status-bar"))
        if text.plain != getattr(self, "_last_plain", None):
            self._last_plain = text.plain
            self.update(text, layout=False)  # fixed height: no layout pass, which is costly

    def redraw(self) -> None:
        self._key = self._last_plain = None
        args = getattr(self, "_args", None)
        if args is not None:
            self.show(*args)

    def on_resize(self) -> None:
        args = getattr(self, "_args", None)
        if args is not None:
            self.show(*args)

    def notify_style_update(self) -> None:
        """A new theme: the text was styled with the old one's colours."""
        super().notify_style_update()
        if self.is_mounted:
            self.call_later(self.redraw)

    @staticmethod
    def compose_text(view: RunView, status: Status, runway: Runway | None = None,
                     width: int = 158, roles: Roles = unstyled) -> Text:
        """Both lines for `width` cells: line 1 at the most verbose level that fits."""
        line1 = key_numbers(view, status, LEVELS - 1, roles)
        for level in range(LEVELS):
            candidate = key_numbers(view, status, level, roles)
            if candidate.cell_len <= width:
                line1 = candidate
                break
        else:
            line1 = _fit_stage(view, status, line1, width, roles)
        line1.no_wrap = True
        line1.overflow = "crop"
        text = Text(no_wrap=True, overflow="crop")
        text.append_text(line1)
        text.append("\n")
        text.append_text(second_line(view, status, runway, width, roles))
        return text


def _fit_stage(view: RunView, status: Status, line1: Text, width: int, roles: Roles) -> Text:
    """Line 1 at its tersest, with the start-up stage shortened so that the whole line fits:
    "building the engine (8,192 GPU blocks, 7,281 CPU blocks of 16 tokens)" is 70 cells, and
    at 80 columns it pushed the recording indicator onto line 2, over the hint."""
    over = line1.cell_len - width
    if over <= 0 or view.current is not None or not status.stage:
        return line1
    stage = status.stage[:max(1, len(status.stage) - over)]
    if " " in stage:  # at a word's end: "… 7,281 CPU blocks…", not "… CPU blocks o…"
        stage = stage.rsplit(" ", 1)[0]
    stage = stage.rstrip(" (,")
    return key_numbers(view, replace(status, stage=stage), LEVELS - 1, roles)


def _policy_badge(text: Text, view: RunView, status: Status, level: int, roles: Roles) -> None:
    policy = safe(view.policy)  # from a file when replaying
    pending = status.pending_policy if status.pending_policy != policy else None
    shown = policy if level < 3 else short_policy(policy)
    if level == 0:
        text.append("policy ")
    if pending is None or level < 2:
        text.append(f" {shown} ", roles(policy_role(policy)))
    if pending is not None:
        target = pending if level < 3 else short_policy(pending)
        text.append(f" → {target}… " if level < 2 else f" →{target}… ", roles("pending"))


def key_numbers(view: RunView, status: Status, level: int, roles: Roles = unstyled) -> Text:
    """Line 1 at verbosity `level` (0: words ... 3: abbreviations, 4: the recording indicator
    without its size)."""
    level, bare_rec = min(level, 3), level >= 4
    text = Text()
    _policy_badge(text, view, status, level, roles)
    sep = "  " if level < 2 else " "
    state = status.state
    text.append(sep)
    text.append(state, roles(STATE_ROLES.get(state.split()[0] if state else "", "bold")))
    s: StepRecord | None = view.current
    if s is None:
        stage = status.stage or ("starting the engine" if view.header is None else "first step")
        text.append(f"{sep}{stage}…", roles("starting"))
    else:
        number = f"{s.step:,}" if level < 3 else str(s.step)
        text.append(f"{sep}step {number}" if level < 3 else f" #{number}")
        kind = view.header.engine if view.header is not None else "v0"
        for key in KEY_NUMBERS.get(kind, KEY_NUMBERS["v0"]):
            if not key.shown(s):
                continue
            text.append(f"{sep}{key.labels[level]} ")
            text.append(key.value(s, level), roles("hot") if key.hot(s) else "")
    if status.source is None:
        text.append(sep + (" " if level < 2 else ""))
        if status.recording:
            size = human_bytes(status.recording_bytes, compact=level > 0)
            text.append("● REC " if level < 2 else "●REC", roles("rec"))
            if not bare_rec:
                text.append(size if level < 2 else " " + size.replace(" ", "")
                            if level == 3 else " " + size)
        elif status.saved_bytes is not None:  # over: say the file is there, not "no rec"
            size = human_bytes(status.saved_bytes, compact=level > 0)
            text.append(("✔ saved " + size) if level < 2 else "✔" + size.replace(" ", ""),
                        roles("good"))
        else:
            text.append("○ not recording" if level < 2 else "○ no rec", roles("muted"))
    return text


def committed_text(s: StepRecord, policy: str) -> list[tuple[str, str]]:
    """The committed demand against GPU + CPU blocks (verbose and short variants); under
    `reserve`, that it came too late when what was admitted before no longer fits."""
    if s.committed_blocks is None or not s.capacity_blocks:
        return []
    ratio = ratio_text(s.committed_blocks, s.capacity_blocks)  # a ratio: it passes 1×
    over = s.overcommitted
    style = "hot" if over else ""
    if over and policy.startswith("reserve"):
        return [(f"⚠ reserve too late: committed {s.committed_blocks:,} blocks > GPU+CPU "
                 f"{s.capacity_blocks:,} with a swap-out's slack", "warn"),
                (f"⚠ reserve too late ({ratio})", "warn")]
    return [(f"committed {s.committed_blocks:,}/{s.capacity_blocks:,} blocks ({ratio})",
             style), (f"commit {ratio}", style)]


def v1_totals_text(s) -> list[tuple[str, str]]:
    """A V1 run's recompute so far, the numbers behind the tax (verbose and short)."""
    style = "hot" if s.recompute_tax >= 0.5 else ""
    return [(f"recomputed {s.recomputed_total:,} of {s.computed_total:,} tokens computed",
             style), (f"recomp {human_count(s.recomputed_total)}/"
                      f"{human_count(s.computed_total)} tok", style)]


def human_count(n: int) -> str:
    """12,345 as "12k", 1,234,567 as "1.2M": a count where columns are short."""
    for limit, suffix in ((1e6, "M"), (1e3, "k")):
        if n >= limit:
            scaled = n / limit
            return f"{scaled:.1f}{suffix}" if scaled < 10 else f"{scaled:.0f}{suffix}"
    return str(n)


def underfill_text(view: RunView) -> list[tuple[str, str]] | None:
    """#45257 as it happens (engine.analysis.seats): steps of the last few that scheduled
    fewer than max_num_seqs while vLLM counted every seat taken, with the reason's words."""
    recent = recent_underfill(view.steps, view.current_step - view.first_step,
                              seat_limit(view.header))
    if recent is None:
        return None
    count, window, latest = recent
    return [(f"⚠ under-filled {count} of the last {window} steps: waits for "
             f"{reason_text(latest)}", "warn"),
            (f"⚠ under-filled {count}/{window} steps", "warn")]


def second_line(view: RunView, status: Status, runway: Runway | None, width: int,
                roles: Roles = unstyled) -> Text:
    """Everything else, most important first to be kept: pieces that do not fit are left out."""
    s = view.current
    # (priority, display order, variants: most verbose first, each (text, role))
    pieces: list[tuple[int, int, list[tuple[str, str]]]] = []
    if not view.abort_visible and s is not None:
        full = runway_text(runway, view.policy, compact=False)
        if full is not None:
            short = runway_text(runway, view.policy, compact=True)
            pieces.append((0, 0, [full] + ([short] if short else [])))
        committed = committed_text(s, view.policy)
        if committed:
            pieces.append((0, 0.5, committed))
        if view.engine == "v1":
            stall = admission_stall(view.steps, view.current_step - view.first_step,
                                    max_seqs=seat_limit(view.header))
            if stall is not None:
                pieces.append((0, 0.25, [(stall_text(stall, compact=False), "warn"),
                                         (stall_text(stall, compact=True), "warn"),
                                         (stall_text(stall, compact=True, reason=False),
                                          "warn")]))
            underfill = underfill_text(view)
            if underfill is not None:
                pieces.append((0, 0.3, underfill))
            pieces.append((2.5, 2.5, v1_totals_text(s)))
    if status.hint:
        pieces.append((1, 1, [(status.hint, "hint")]))
    if status.restart_policy is not None and status.state in (RunState.ABORTED,
                                                              RunState.FINISHED,
                                                              RunState.STOPPED):
        pieces.append((2, 2, [(f"R restarts with {status.restart_policy}", "bold"),
                              (f"R: {short_policy(status.restart_policy)}", "bold")]))
    if s is not None:
        axis = axis_of(view.header)  # "sim 12.3 s" or, measured on a GPU, "GPU 12.3 s"
        clock = f"{axis.short} {axis.clock(s):,.1f} s"
        times = clock
        if status.show_wall and axis is SIM:
            times += f"  wall {s.wall_s:,.1f} s"
        if status.steps_per_s is not None and status.state == RunState.RUNNING:
            times += f"  {status.steps_per_s:,.0f} steps/s"
        pieces.append((3, 3, [(times, ""), (clock, "")]))
    if status.source:
        pieces.append((4, 4, [(status.source, status.source_role)]))
    h = view.header
    if h is not None:
        pieces.append((5, 5, [(f"{h.backend} · {h.model} · vLLM {h.vllm_version}", "muted"),
                              (f"vLLM {h.vllm_version}", "muted")]))
    chosen: list[tuple[int, tuple[str, str]]] = []
    used = 0
    for _, order, variants in sorted(pieces):
        for variant in variants:
            cost = cell_len(variant[0]) + (2 if chosen else 0)
            if used + cost <= width:
                chosen.append((order, variant))
                used += cost
                break
    text = Text()
    for i, (_, (piece, role)) in enumerate(sorted(chosen)):
        if i:
            text.append("  ")
        text.append(piece, roles(role) if role else "")
    return text
