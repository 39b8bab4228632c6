"""Every key of the current screen, in one place (`?`).

Built as plain Text, never parsed as markup, so keys like `[` and `]` show as themselves. Besides
the screen's own keys it lists the keys of the widgets on the screen below (the decisions
table's arrows, PgUp/PgDn and Enter), what the plot marks mean, and the full recording path that
the status line shortens to `● REC`.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from engine.kinds import V0, common_kind
from tui.widgets.theme import Roles, component_roles, unstyled

KEY_NAMES = {"up": "↑", "down": "↓", "left": "←", "right": "→", "pageup": "PgUp",
             "pagedown": "PgDn", "enter": "Enter", "tab": "Tab"}
MARKS = [
    ("━ colour", "each plot's first row says which series each colour is"),
    ("name→", "that series is drawn against the right-hand axis"),
    ("┃ policy", "a policy change (the first step the new policy governs)"),
    ("┃ abort", "the step vLLM raised in (shown after the last one that completed)"),
    ("┃ bold", "replay: the cursor"),
]
POLICIES = [
    ("off", "vLLM as released: no guarantee; aborts once the swapped groups fill the CPU"),
    ("strict", "no prefills while a group is swapped: no guarantee; the seed survives on 0.5; "
               "from 0.6.3 the groups already admitted outgrow GPU + CPU, and it delays the "
               "abort (0.6.3) or changes nothing (0.7.3, 0.10.2); costs little (97-100% of "
               "off's tokens per simulated second while off lives; 95% over 1,600 steps on "
               "0.5)"),
    ("watermark", "no prefills while CPU KV ≥ level: no guarantee; survives the seed on 0.5, "
                  "delays the abort on 0.6.3, changes nothing on 0.7.3 and 0.10.2"),
    ("reserve", "admits a group only if every admitted group's worst case (prompt + max_tokens"
                " per sequence) still fits GPU + CPU: cannot abort, on every V0 release; costs"
                " 8% of off's tokens per simulated second on 0.5, 15% on 0.6.3, none from "
                "0.6.4 (committed line and status: how much is promised)"),
]
V1_POLICIES = [
    ("off", "vLLM as configured (v1-thrash: its scheduler_reserve_full_isl off, #25538): a "
            "preempted request is resumed as soon as its next chunk fits, and preempted again"),
    ("full-isl", "vLLM's own scheduler_reserve_full_isl (PR #37307), switched live: admit or "
                 "resume a request only when blocks for its whole context are free (vLLM 0.18 "
                 "has no such option: there the observatory's hook makes vLLM's check, with "
                 "0.18's block arithmetic)"),
    ("whole-context", "the same, beside what the prefills in flight still need: stops the "
                      "thrash with several prefills in flight too"),
    ("least-computed", "the victim is the request that has computed the fewest tokens (PR "
                       "#53723), not the last admitted; combines with an admission rule (+)"),
    ("skip-and-continue", "vLLM's scan passes by a request it refused blocks while they stay "
                          "short, and admits the lighter ones behind it (PR #35852, #31731's "
                          "head-of-line blocking; vLLM 0.33+); combines (+)"),
    ("per-iteration-count", "under async scheduling (--async-scheduling, the sim, vLLM 0.33+) "
                            "vLLM's scan counts against max_num_seqs only the requests this "
                            "step schedules, not those whose last token is in flight (PR "
                            "#45339, #45257); combines (+)"),
]
V1_TABLE = [
    ("7×5", "preempted: request 7, its 5th preemption (3 or more stands out: the thrash)"),
    ("↻7:512", "request 7 resumed after a preemption, 512 tokens scheduled"),
    ("lost / recomp", "computed tokens the preemptions threw away / tokens computed again"),
    ("prefix / pfx", "tokens found in the prefix cache this step (not computed again)"),
    ("tax", "status: recomputed tokens over all tokens computed, so far"),
]
MOUSE = [
    ("click plot", "replay: seek to the step under the mouse"),
    ("click row", "show that step in the detail pane (replay: seek there)"),
]


def key_name(binding: Binding) -> str:
    if binding.key_display:
        return binding.key_display
    return " ".join(KEY_NAMES.get(k.strip(), k.strip()) for k in binding.key.split(",")[:1])


def describe_bindings(bindings: list[Binding]) -> list[tuple[str, str]]:
    return [(key_name(b), b.description or b.action) for b in bindings]


def widget_sections(screen: Screen | None) -> list[tuple[str, list[tuple[str, str]]]]:
    """Keys of the focusable widgets on `screen` that have their own bindings."""
    if screen is None:
        return []
    from tui.widgets.decisions_table import DecisionsTable  # late: only when asked

    tables = list(screen.query(DecisionsTable))
    if not tables:
        return []
    return [("decisions table (click it or press Tab to focus it)",
             describe_bindings(list(DecisionsTable.BINDINGS)))]


POLICY_SECTIONS = {
    "v0": (("policies{keys}: what each guarantees", POLICIES),),
    # V1's policies and words (no swap space)
    "v1": (("policies on vLLM's V1 engine{keys}: what each does", V1_POLICIES),
           ("V1's words in the table and status", V1_TABLE)),
}
"""Each kind's help sections on its policies; `{keys}` is where the policy keys are said."""


def engine_of(screen: Screen | None) -> str:
    """The engine kind of the run the screen shows ("v0" when it shows none, or several)."""
    view = getattr(screen, "view", None)
    views = getattr(screen, "views", None) or ([view] if view is not None else [])
    return (common_kind(getattr(v, "engine", "v0") for v in views) or V0).name


def has_policy_keys(screen: Screen | None) -> bool:
    """Whether the screen binds `f` and `F` (the live monitor does; replay does not)."""
    actions = {getattr(b, "action", None) for b in getattr(screen, "BINDINGS", [])}
    return {"toggle_fix", "pick_policy"} <= actions


def recording_lines(screen: Screen | None) -> list[str]:
    """The full recording path (or what is replayed) from the screen's status line(s)."""
    if screen is None:
        return []
    from tui.widgets.status_bar import StatusBar, human_bytes

    lines = []
    for bar in screen.query(StatusBar):
        status = bar.status
        if status is None:
            continue
        if status.recording:
            lines.append(f"recording to {status.recording} "
                         f"({human_bytes(status.recording_bytes)} so far)")
        elif status.source:
            lines.append(status.source)
        else:
            lines.append("not recording")
    return lines


class HelpScreen(ModalScreen[None]):
    """A modal list of keys; any key closes it."""

    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    HelpScreen > VerticalScroll {
        width: 84;
        max-width: 100%;
        height: auto;
        max-height: 100%;
        border: thick $primary;
        background: $surface;
        padding: 0 1;
    }
    HelpScreen > .help-screen--key { color: $text-primary; text-style: bold; }
    HelpScreen > .help-screen--recording { color: $text-primary; }
    """
    COMPONENT_CLASSES = {"help-screen--key", "help-screen--recording"}

    def __init__(self, title: str, rows: list[tuple[str, str]], notes: str = "") -> None:
        super().__init__()
        self._title = title
        self._rows = rows
        self._notes = notes

    def compose(self) -> ComposeResult:
        stack = self.app.screen_stack
        below = stack[-2] if len(stack) >= 2 and stack[-1] is self else (
            stack[-1] if stack and stack[-1] is not self else None)
        self._below = below
        with VerticalScroll() as scroll:
            scroll.border_title = "help"
            scroll.border_subtitle = "↑↓ PgUp PgDn scroll · any other key closes"
            yield Static(self.help_text(below), id="help-text")

    def on_mount(self) -> None:
        # the theme's styles exist once the screen is styled: colour the keys now
        self.query_one("#help-text", Static).update(
            self.help_text(self._below, component_roles(self, "help-screen")))

    def help_text(self, below: Screen | None, roles: Roles = unstyled) -> Text:
        # replay has no f or F: its help named keys that did nothing there
        fix = getattr(below, "fix", None)
        keys = f" (f: off ↔ {fix}, this run's fix; F picks any)" if has_policy_keys(below) \
            else ""
        policies = [(title.format(keys=keys), rows)
                    for title, rows in POLICY_SECTIONS[engine_of(below)]]
        sections = [(self._title, self._rows), *widget_sections(below), *policies,
                    ("mouse", MOUSE), ("plot marks", MARKS)]
        width = max((len(k) for _, rows in sections for k, _ in rows), default=4) + 2
        text = Text()
        for i, (title, rows) in enumerate(sections):
            if i:
                text.append("\n")
            text.append(title + "\n", "bold underline" if i else "bold")
            for key, description in rows:
                text.append(key.ljust(width), roles("key"))
                text.append(description + "\n")
        recording = recording_lines(below)
        if recording:
            text.append("\n")
            for line in recording:
                text.append(line + "\n", roles("recording"))
        if self._notes:
            text.append("\n" + self._notes + "\n")
        text.append("\nany key but the arrows and PgUp/PgDn closes this", "dim")
        return text

    def on_key(self, event) -> None:
        event.stop()
        scroll = self.query_one(VerticalScroll)
        moves = {"up": lambda: scroll.scroll_relative(y=-1, animate=False),
                 "down": lambda: scroll.scroll_relative(y=1, animate=False),
                 "pageup": lambda: scroll.scroll_page_up(animate=False),
                 "pagedown": lambda: scroll.scroll_page_down(animate=False)}
        move = moves.get(event.key)
        if move is not None:
            move()
        else:
            self.dismiss(None)

    def on_click(self) -> None:
        self.dismiss(None)
