"""The two status lines at the top. They never drop the key numbers.

Line 1 holds what a user must always see: the policy (applied, or pending while the engine has
not applied a key press yet), the state, the step, the running / swapped / waiting queues, GPU
and CPU KV usage and a short recording indicator. Its layout depends on the width and the run's
engine kind only, never on the values: each field has a slot of fixed width (numbers right-
aligned in it), and the verbosity level, from words at 160 columns to abbreviations at 80, is
the most verbose one whose slots all fit. So nothing moves as the numbers grow, a key press that
makes a policy pending, or another run. It is never wrapped or cut.

Line 2 holds the rest in priority order (swap runway, the hint, the restart policy, times,
what is replayed, the engine's identity): each piece is shown if it fits, least important first
to go. The recording's full path is in the help screen (`?`), not here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import Static

from engine.analysis.runway import Runway
from engine.analysis.reasons import reason_text
from engine.analysis.seats import recent_underfill
from engine.analysis.stall import admission_stall, seat_limit, stall_text
from engine.conventions import pct_text, ratio_text
from engine.run_state import RunState
from engine.safe_text import safe
from engine.stream.records import StepRecord
from engine.stream.timeaxis import SIM, axis_of
from tui.run_view import RunView
from tui.widgets.redraw import Redrawn
from tui.widgets.theme import Roles, component_roles, unstyled

POLICY_ROLES = {"off": "policy-off", "strict": "policy-strict", "watermark": "policy-watermark",
                "reserve": "policy-reserve",
                # V1's: its admission rules as V0's guarantees look, the victim choice apart
                "whole-context": "policy-strict", "full-isl": "policy-reserve",
                "least-computed": "policy-watermark", "skip-and-continue": "policy-strict",
                "per-iteration-count": "policy-reserve"}
STATE_ROLES = {"running": "running", "paused": "paused", "stopping": "paused",
               "aborted": "aborted", "failed": "aborted", "disconnected": "aborted", "stuck": "aborted",
               "finished": "over", "stopped": "over", "replay": "over", "starting": "starting"}
"""The role each state word is drawn in (RunState's values, and the screens' own words)."""


def _count(name: str) -> Callable[[StepRecord, int], str]:
    return lambda s, level: f"{getattr(s, name):,}" if level < 3 else str(getattr(s, name))


def _percent(name: str) -> Callable[[StepRecord, int], str]:
    return lambda s, level: f"{pct_text(getattr(s, name), 1 if level < 3 else 0)}%"


@dataclass(frozen=True)
class KeyNumber:
    """One of line 1's numbers: its label at each verbosity level (0 words ... 3
    abbreviations), its value, the slot (cells) the value is right-aligned in at levels 0-2 and
    at level 3, and when it is hot (drawn as a warning)."""

    labels: tuple[str, str, str, str]
    value: Callable[[StepRecord, int], str]
    slots: tuple[int, int]
    hot: Callable[[StepRecord], bool] = lambda s: False
    shown: Callable[[StepRecord], bool] = lambda s: True  # False: the run has no such thing

    def slot(self, level: int) -> int:
        return self.slots[1 if level >= 3 else 0]


KEY_NUMBERS: dict[str, tuple[KeyNumber, ...]] = {
    "v0": (KeyNumber(("running", "running", "run", "run"), _count("running"), (4, 4)),
           KeyNumber(("swapped", "swapped", "swap", "swp"), _count("swapped"), (4, 4),
                     lambda s: s.swapped > 0),
           KeyNumber(("waiting", "waiting", "wait", "wt"), _count("waiting"), (6, 5)),
           KeyNumber(("GPU KV", "GPU", "GPU", "GPU"), _percent("gpu_pct"), (6, 4)),
           KeyNumber(("CPU KV", "CPU", "CPU", "CPU"), _percent("cpu_pct"), (6, 4),
                     lambda s: s.cpu_pct >= 50)),
    # V1 has no swap space; its thrash is recompute: the preemptions so far and the recompute
    # tax (tokens computed again over all computed, so far) take swapped's and CPU's place
    "v1": (KeyNumber(("running", "running", "run", "run"), _count("running"), (5, 4)),
           KeyNumber(("waiting", "waiting", "wait", "wt"), _count("waiting"), (6, 5)),
           KeyNumber(("GPU KV", "GPU", "GPU", "GPU"), _percent("gpu_pct"), (6, 4)),
           # vLLM's CPU offloading tier, when the run has one (a cache: never hot)
           KeyNumber(("CPU tier", "CPU", "CPU", "CPU"), _percent("cpu_pct"), (6, 4),
                     shown=lambda s: bool(s.cpu_chunks_total)),
           KeyNumber(("preempted", "preempted", "pre", "pre"), _count("preemptions_total"),
                     (6, 4), lambda s: bool(s.preempted)),
           KeyNumber(("recompute tax", "tax", "tax", "tax"),
                     lambda s, level: f"{s.recompute_tax:.2f}", (4, 4),
                     lambda s: s.recompute_tax >= 0.5)),
}
"""Line 1's numbers by engine kind (the recording header's `engine`): another kind's queues
are one more entry here. A kind without an entry is shown as V0. A value wider than its slot
(more than 99,999 waiting) widens it rather than being cut."""

STEP_SLOTS = (7, 6)  # "999,999" at levels 0-2, "#999999" (its digits) at level 3
BADGE_SLOTS = (13, 9, 11, 9)  # the policy badge's text, per level: "watermark:0.5", "whole"
STATE_SLOT = 8  # "starting", "stopping", "finished": the longest state words but one
REC_SLOTS = (15, 13, 10, 9)  # "○ not recording", "✔ saved 23 kB", "●REC 99kB": the last field
"""The recording field is the last of line 1, so a longer form ("✔ saved 123 kB") moves nothing
but its own end; a slot is only what decides the level."""
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
    hint: str = ""  # e.g. "f switches reserve on"
    hint_short: tuple[str, ...] = ()  # shorter forms of the hint, for short lines
    hint_first: bool = False  # the hint goes before the warnings (the engine holds for it)
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


class StatusBar(Redrawn, Static):
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
    _key: tuple | None = None  # what the text was last composed from (width included)
    _last_plain: str | None = None  # the text last put on screen, unstyled

    def show(self, view: RunView, status: Status, runway: Runway | None = None) -> None:
        self.status = status
        self.shown = (view, status, runway)  # drawn by Redrawn, and again on a resize or theme

    def draw(self, view: RunView, status: Status, runway: Runway | None) -> None:
        width = self.content_size.width or 158
        key = (id(view), view.version, view.cursor, status, runway, width)
        if key == self._key:
            return  # the screens call this on every tick; most ticks change nothing here
        self._key = key
        text = self.compose_text(view, status, runway, width,
                                 component_roles(self, "status-bar"))
        if text.plain != self._last_plain:
            self._last_plain = text.plain
            self.update(text, layout=False)  # fixed height: no layout pass, which is costly

    def forget(self) -> None:
        self._key = self._last_plain = None

    @staticmethod
    def compose_text(view: RunView, status: Status, runway: Runway | None = None,
                     width: int = 158, roles: Roles = unstyled) -> Text:
        """Both lines for `width` cells: line 1 at the most verbose level whose slots fit."""
        line1 = key_numbers(view, status, line1_level(view, width), roles)
        line1.no_wrap = True
        line1.overflow = "crop"
        text = Text(no_wrap=True, overflow="crop")
        text.append_text(line1)
        text.append("\n")
        text.append_text(second_line(view, status, runway, width, roles))
        return text


def _keys_shown(view: RunView) -> tuple[KeyNumber, ...]:
    """Line 1's numbers for this run: its engine kind's, less those it has no such thing for
    (a V1 run without a CPU tier). Decided by the run, not by the step shown."""
    kind = view.header.engine if view.header is not None else view.engine
    keys = KEY_NUMBERS.get(kind, KEY_NUMBERS["v0"])
    first = view.steps[0] if view.steps else None
    return tuple(k for k in keys if first is None or k.shown(first))


def _sep(level: int) -> str:
    return "  " if level < 2 else " "


def _step_label(level: int) -> str:
    return "step " if level < 3 else "#"


def slots_width(view: RunView, level: int) -> int:
    """Line 1's width at `level` with every slot full: what decides the level, whatever the
    values are."""
    bare, level = level >= 4, min(level, 3)
    sep = len(_sep(level))
    width = (len("policy ") if level == 0 else 0) + BADGE_SLOTS[level] + 2
    width += sep + STATE_SLOT + sep + len(_step_label(level)) + STEP_SLOTS[level >= 3]
    for key in _keys_shown(view):
        width += sep + len(key.labels[level]) + 1 + key.slot(level)
    rec = len("●REC") if bare else REC_SLOTS[level]
    return width + sep + rec


def line1_level(view: RunView, width: int) -> int:
    """The most verbose level (0 words ... LEVELS - 1) whose slots fit `width` cells."""
    return next((level for level in range(LEVELS) if slots_width(view, level) <= width),
                LEVELS - 1)


def _badge_text(policy: str, pending: str | None, slot: int) -> str:
    """The badge's text in `slot` cells: the policy (or `→ pending…`) in its long form where it
    fits, else its short one (engine.policy names; short_policy)."""
    if pending is not None:
        candidates = [f"→ {pending}…", f"→ {short_policy(pending)}…",
                      f"→{short_policy(pending)}…"]
    else:
        candidates = [policy, short_policy(policy)]
    text = next((c for c in candidates if cell_len(c) <= slot), candidates[-1])
    return text if cell_len(text) <= slot else text[:slot - 1] + "…"


def _policy_badge(text: Text, view: RunView, status: Status, level: int, roles: Roles) -> None:
    """The policy in force, or the one a key asked for while the engine has not applied it,
    in a slot of fixed width (BADGE_SLOTS)."""
    policy = safe(view.policy)  # from a file when replaying
    pending = status.pending_policy if status.pending_policy != policy else None
    slot = BADGE_SLOTS[level]
    if level == 0:
        text.append("policy ")
    badge = _badge_text(policy, pending, slot)
    role = "pending" if pending is not None else policy_role(policy)
    text.append(f" {badge} ", roles(role))
    text.append(" " * (slot - cell_len(badge)))


def key_numbers(view: RunView, status: Status, level: int, roles: Roles = unstyled) -> Text:
    """Line 1 at verbosity `level` (0: words ... 3: abbreviations, 4: the recording indicator
    without its size), every field in its slot."""
    level, bare_rec = min(level, 3), level >= 4
    text = Text()
    _policy_badge(text, view, status, level, roles)
    sep = _sep(level)
    state = status.state
    text.append(sep)
    text.append(state, roles(STATE_ROLES.get(state.split()[0] if state else "", "bold")))
    text.append(" " * (STATE_SLOT - cell_len(state)))
    s: StepRecord | None = view.current
    keys = _keys_shown(view)
    if s is None:
        stage = status.stage or ("starting the engine" if view.header is None else "first step")
        room = len(_step_label(level)) + STEP_SLOTS[level >= 3] + sum(
            len(sep) + len(k.labels[level]) + 1 + k.slot(level) for k in keys)
        text.append(sep)
        text.append(_fit(f"{stage}…", room).ljust(room), roles("starting"))
    else:
        number = f"{s.step:,}" if level < 3 else str(s.step)
        text.append(f"{sep}{_step_label(level)}{number}".ljust(
            len(sep) + len(_step_label(level)) + STEP_SLOTS[level >= 3]))
        for key in keys:
            text.append(f"{sep}{key.labels[level]} ")
            value = key.value(s, level)
            text.append(value, roles("hot") if key.hot(s) else "")
            text.append(" " * (key.slot(level) - cell_len(value)))
    if status.source is None:
        text.append(sep)
        _recording(text, status, level, bare_rec, roles)
    return text


def _recording(text: Text, status: Status, level: int, bare: bool, roles: Roles) -> None:
    """Line 1's last field: recording (and how much), saved whole, or not recording; the
    same words from the first frame (the engine says where it records before it is built)."""
    compact = level > 0
    if status.recording:
        size = human_bytes(status.recording_bytes, compact=compact)
        text.append("● REC " if level < 2 else "●REC", roles("rec"))
        if not bare:
            text.append(size if level < 2 else " " + size.replace(" ", "")
                        if level == 3 else " " + size)
    elif status.saved_bytes is not None:  # over: say the file is there, not "no rec"
        size = human_bytes(status.saved_bytes, compact=compact)
        text.append("✔REC" if bare else ("✔ saved " + size) if level < 2
                    else "✔" + size.replace(" ", ""), roles("good"))
    else:  # the bare forms are as wide as "●REC" (the narrowest line's slot)
        text.append("○off" if bare else "○ not recording" if level == 0 else "○ no rec",
                    roles("muted"))


def _fit(text: str, room: int) -> str:
    """`text` in `room` cells: cut at a word's end where it is too long ("… 7,281 CPU blocks…",
    not "… CPU blocks o…")."""
    if cell_len(text) <= room:
        return text
    cut = text[:max(1, room - 1)]
    if " " in cut:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" (,") + "…"


def committed_text(s: StepRecord, policy: str) -> list[tuple[str, str]]:
    """The committed demand against GPU + CPU blocks (verbose and short variants); under
    `reserve`, that it came too late when what was admitted before no longer fits."""
    if s.committed_blocks is None or not s.capacity_blocks:
        return []
    ratio = ratio_text(s.committed_blocks, s.capacity_blocks)  # a ratio: it passes 1×
    over = s.overcommitted
    style = "hot" if over else ""
    if over and policy.startswith("reserve"):
        # switched on after the demand outgrew GPU + CPU: reserve cannot take back what was
        # admitted, so the abort is possible again (whether it comes is the run's: the seed
        # survives reserve at step 600 on 0.5.0.post1, not after step 2 on 0.6.3.post1)
        return [(f"⚠ reserve cannot guarantee it: committed {s.committed_blocks:,} blocks > "
                 f"GPU+CPU {s.capacity_blocks:,} with a swap-out's slack", "warn"),
                (f"⚠ no guarantee ({ratio})", "warn")]
    mark = "⚠ " if over else ""  # a swap-out can overflow the CPU from here (signs.py)
    return [(f"{mark}committed {s.committed_blocks:,}/{s.capacity_blocks:,} blocks ({ratio})",
             style), (f"{mark}commit {ratio}", style)]


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
        if view.kind.watches_stalls:
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
        rank = -1 if status.hint_first else 1
        pieces.append((rank, rank, [(hint, "hint") for hint in (status.hint,
                                                                 *status.hint_short)]))
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
