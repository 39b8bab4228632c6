"""What a new user saw go wrong on screen, at 80 columns and at 200: each fault, held fixed.

No engine runs here: the widgets are fed shipped recordings or a bare RunView, and drawn by
the same calls the screens make (StatusBar.compose_text, the table's cells, the picker).
"""

from __future__ import annotations

from rich.cells import cell_len

from tui.run_view import RunView
from tui.widgets.status_bar import Status, StatusBar

LONG_STAGE = "building the engine (8,192 GPU blocks, 7,281 CPU blocks of 16 tokens)"


def test_a_long_start_up_stage_is_shortened_not_wrapped_over_the_hint():
    """At 80 columns (78 inside the padding) the V0 demo's start-up stage pushed line 1 past
    the edge: Textual wrapped it, and `tokens)… ●REC` covered the hint on line 2."""
    status = Status(state="starting", stage=LONG_STAGE, recording="recordings/r.jsonl.zst",
                    hint="press f to switch the fix on")
    line1, line2 = StatusBar.compose_text(RunView(), status, width=78).plain.split("\n")
    assert cell_len(line1) <= 78
    assert line1.rstrip().endswith("●REC")  # the recording indicator stays on line 1
    assert "building the engine (8,192 GPU blocks" in line1  # shortened, not dropped
    assert "press f to switch the fix on" in line2
    wide = StatusBar.compose_text(RunView(), status, width=198).plain.split("\n")[0]
    assert LONG_STAGE in wide  # where it fits, all of it
