"""Colours follow the app's theme: switching Textual's theme recolours the status, the table and
the plots at once (they style by COMPONENT_CLASSES and theme variables, nothing else)."""

from __future__ import annotations

from screens_harness import LATE, live_status, panel_app, view_until
from tui.widgets import theme
from tui.widgets.run_plot import RunPlot
from tui.widgets.status_bar import StatusBar


def badge_background(app) -> tuple[int, int, int]:
    """The background of the policy badge (" strict ": the fix is on at step 700), as drawn."""
    bar = app.screen.query_one(StatusBar)
    segment = next(s for s in bar.render_line(0) if s.text.strip() == "strict")
    return segment.style.bgcolor.triplet


async def test_a_new_theme_recolours_the_status_and_the_plots():
    view = view_until(LATE, 700)
    app = panel_app(view, live_status(view))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        plot = app.screen.query_one("#plot-kv", RunPlot)
        before = (badge_background(app), plot.color_of(theme.GPU_KV))
        assert before == (theme.rgb(app.theme_variables, "success"),
                          theme.rgb(app.theme_variables, "primary"))
        app.theme = "nord"
        await pilot.pause()
        await pilot.pause()
        after = (badge_background(app), plot.color_of(theme.GPU_KV))
        assert after == (theme.rgb(app.theme_variables, "success"),
                         theme.rgb(app.theme_variables, "primary"))
        assert after != before
        legend = {seg.text.strip("━ "): seg.style.color.triplet
                  for seg in plot.render_line(0) if seg.style and seg.style.color
                  and seg.text.strip("━ ")}
        assert legend["GPU"] == after[1]  # the plot was rebuilt with the new theme's colour
