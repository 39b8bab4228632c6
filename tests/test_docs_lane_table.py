"""The docs lane's table (tests/docs_lane.py's HOW) stays true to the docs: every entry names a
command some page still shows, every command the lane does not run as written says why, and
every command is parsed whole. It runs nothing: the lane itself is .ci/run's docs_lane.
"""

from __future__ import annotations

import docs_lane


def test_every_entry_names_a_documented_command():
    documented = {cmd.text for _, cmds in docs_lane.blocks() for cmd in cmds}
    stale = sorted(set(docs_lane.HOW) - documented)
    assert not stale, f"HOW names commands no page shows any more: {stale}"


def test_every_command_not_run_as_written_says_why():
    for text, how in docs_lane.HOW.items():
        if how.skip or how.run:
            assert len(how.why) > 10, f"{text!r}: say why it does not run as written"
        assert not (how.skip and (how.run or how.screen)), text


def test_the_blocks_parse_into_whole_commands():
    plan = docs_lane.lane_plan()
    commands = [cmd for _, cmds in plan for cmd in cmds]
    assert len(commands) >= 40
    for cmd in commands:
        assert not cmd.text.endswith("\\") and "  " not in cmd.text
    # the README's headless run of the seed says its exit status, and the lane holds it to it
    (off,) = [c for c in commands if c.text == "observatory run --preset seed-5578 --policy off"]
    assert off.expected == 3 and off.where.startswith("README.md")
    # each command runs once in the lane, where it first appears
    assert len({c.text for c in commands}) == len(commands)


def test_a_command_two_pages_show_exits_the_same_on_both():
    """The lane runs a command where it first appears; a page that shows it again must not say
    another exit status (the seed guide's `run --policy off` now says exit 3 too)."""
    said: dict[str, set[int]] = {}
    for _, cmds in docs_lane.blocks():
        for cmd in cmds:
            said.setdefault(cmd.text, set()).add(cmd.expected)
    assert {text: codes for text, codes in said.items() if len(codes) > 1} == {}
