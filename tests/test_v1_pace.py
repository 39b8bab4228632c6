"""`live --pace` on vLLM's V1 engine (0.33.0): its sim runs are over in a second or two, so
`live` holds them to a pace by default, and the pace changes none of its decisions."""

from __future__ import annotations

import msgspec

from v1_required import needs_v1, require_hash_seed

pytestmark = needs_v1
require_hash_seed()

from engine.session import Session  # noqa: E402
from engine.spec import preset_spec  # noqa: E402
from engine.stream.records import Header, LogLine  # noqa: E402
from tui.cli.live import V1_SIM_PACE, default_pace  # noqa: E402


def _run(pace: float | None) -> list[dict]:
    spec = preset_spec("v1-thrash", max_steps=300, toggles=[(150, "whole-context")]).validated()
    items: list = []
    session = Session(spec, pace=pace)
    session.subscribe(items.append)
    session.run()
    out = []
    for item in items:
        if isinstance(item, (Header, LogLine)):  # LogLines: vLLM's chatter, first run only
            continue
        data = msgspec.structs.asdict(item)
        data.pop("wall_s", None), data.pop("exec_s", None)  # measured, differ run to run
        out.append({"type": type(item).__name__, **data})
    return out


def test_live_paces_the_v1_sim_by_default() -> None:
    assert default_pace(preset_spec("v1-thrash")) == V1_SIM_PACE


def test_a_paced_v1_run_makes_the_same_records_as_an_unpaced_one() -> None:
    unpaced, paced = _run(None), _run(3000.0)
    assert paced[-1]["type"] == "RunFinished" and paced[-1]["steps"] == 300
    assert paced == unpaced
