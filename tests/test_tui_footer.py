"""The footer shows whole keys, in the screen's priority order, with `? help` and `q quit`
pinned right: at 80 columns nothing is cut or drawn under another key."""

from __future__ import annotations

import pytest
from textual.widgets._footer import FooterKey

from screens_harness import OFF, TOGGLED
from tui.launch import replay_app
from tui.widgets.key_footer import KeyFooter, key_width


async def footer_keys(pilot) -> list[FooterKey]:
    footer = pilot.app.screen.query_one(KeyFooter)
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
    return list(footer.query(FooterKey))


@pytest.mark.parametrize("paths", [[OFF], [OFF, TOGGLED]], ids=["replay", "a/b replay"])
@pytest.mark.parametrize("width", [80, 220])
async def test_whole_keys_in_priority_order(paths, width):
    app = replay_app([str(p) for p in paths], autoplay=False)
    async with app.run_test(size=(width, 40)) as pilot:
        await pilot.pause()
        keys = await footer_keys(pilot)
        for _ in range(100):  # the footer recomposes once the bindings are known
            if any(k.action == "help" for k in keys):
                break
            keys = await footer_keys(pilot)
        screen = app.main_screen
        shown = [k for k in keys if k.action not in ("help", "quit")]
        bound = [b.action for b in screen.BINDINGS if b.show and b.action not in ("help", "quit")
                 and screen.check_action(b.action, ()) is not False]  # e.g. no fork keys here
        assert [k.action for k in shown] == bound[:len(shown)]  # a prefix: priority order
        assert shown, "no key fits at all"
        pinned = [k for k in keys if k.action in ("help", "quit")]
        assert [k.action for k in pinned] == ["help", "quit"]
        footer = screen.query_one(KeyFooter)
        for key in keys:  # each whole, on screen, and clear of every other key
            region = key.region
            assert region.width == key_width(key, footer.compact) - (1 if footer.compact
                                                                     else 0)
            assert 0 <= region.x and region.right <= width
            for other in keys:
                if other is not key:
                    assert not region.overlaps(other.region), (key.key_display,
                                                               other.key_display)
        if width >= 200:
            assert len(shown) == len(bound)  # room for every key
        else:
            assert len(shown) < len(bound)  # the rest are in `?`


async def test_the_footer_builds_its_keys_once_and_not_again_on_a_jump_or_the_prompt():
    """A screen's start brings three reasons to rebuild (the bindings become ready, the first
    resize, the bindings again): one rebuild, before the user's first key, and none after a
    jump or after the `g` prompt closes (the same keys)."""
    rebuilds = []
    original = KeyFooter.recompose

    async def counted(self):
        rebuilds.append(self)
        return await original(self)

    app = replay_app([str(OFF)], autoplay=False)
    KeyFooter.recompose = counted
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            keys = await footer_keys(pilot)
            for _ in range(100):
                if any(k.action == "help" for k in keys):
                    break
                keys = await footer_keys(pilot)
            assert len(rebuilds) == 1
            await pilot.press("end")
            await pilot.press("g", "5", "enter")
            await footer_keys(pilot)
            assert app.main_screen.view.current_step == 5
            assert len(rebuilds) == 1
            assert any(k.action == "help" for k in await footer_keys(pilot))
    finally:
        KeyFooter.recompose = original
