"""Text from a file, made safe to print on a terminal or draw in the TUI.

A recording is data anyone can hand you, and its strings (an abort message, a vLLM log line, a
policy name, a request id) reach the terminal. Raw, an ESC in them could set the window title,
clear the screen or rewrite what was printed before. `safe()` escapes every C0 and C1 control
character and DEL as `\\xNN` (`\\n`, `\\t` and `\\r` as themselves, backslash-escaped), so the text
stays readable, one line, and inert. Call it on every string that came from a file, right where
it is printed or drawn.
"""

from __future__ import annotations

from typing import Any

_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
# C0 controls, DEL and C1 controls (U+0080-U+009F: some terminals take U+009B as CSI).
_TABLE = {code: _NAMED.get(chr(code), f"\\x{code:02x}")
          for code in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))}


def safe(text: Any) -> str:
    """`text` (str() of it) with every control character escaped; a no-op on clean text."""
    string = text if isinstance(text, str) else str(text)
    return string.translate(_TABLE)


def has_control(text: str) -> bool:
    return any(ord(c) in _TABLE for c in text)
