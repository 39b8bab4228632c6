"""`observatory fit` (filled in by the fit step)."""

from typing import Any


def register(subparsers: Any) -> None:
    return None
