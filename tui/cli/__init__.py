"""The `observatory` console script: tui/cli/registry.py registers every subcommand once (the
headless ones from engine/cli/, and live.py, replay.py, sweep_browse.py here, which open the
Textual app). pyproject's `tui.cli:entry` and `python -m tui.cli` both land in `entry`."""

from tui.cli.registry import entry, main

__all__ = ["entry", "main"]
