"""The one App class: it only hosts a screen (live, replay or compare) made by tui.launch."""

from __future__ import annotations

from typing import Callable

from textual.app import App
from textual.screen import Screen


class ObservatoryApp(App[int]):
    """Hosts one observatory screen. `make_screen` is called once, when the app starts."""

    TITLE = "vLLM scheduler observatory"
    ENABLE_COMMAND_PALETTE = False

    def __init__(self, make_screen: Callable[[], Screen]) -> None:
        super().__init__()
        self._make_screen = make_screen
        self.main_screen: Screen | None = None

    def get_default_screen(self) -> Screen:
        self.main_screen = self._make_screen()
        return self.main_screen

    async def action_quit(self) -> None:
        """ctrl+q lets go of the run's source as cleanly as the screen's own `q`."""
        source = getattr(self.main_screen, "source", None)
        if source is not None:
            source.close()
        self.exit(0)
