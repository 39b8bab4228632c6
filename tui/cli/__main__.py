"""`python -m tui.cli`: the `observatory` console script."""

from tui.cli.registry import entry

entry()
