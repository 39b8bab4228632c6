"""The observatory's exceptions: one tree, so every entry point turns bad input into one line
and an exit status (engine.exit_status) instead of a traceback.

    ObservatoryError          anything the observatory reports as one line
    ├── ConfigError           a flag, a config file, a preset, a setting: the user's choice
    ├── RecordingError        a recording or log that is damaged or cannot be read
    ├── PeerError             the network and the service protocol: a peer that is unreachable,
    │                         refuses, or speaks something else
    └── EngineError           vLLM, or the engine built on it, could not be built or run

Why a tree and not one type: a caller can tell "the flag is wrong" from "the file is damaged"
from "the server went away" (the replay screen, the live screen's reconnect and `verify` each
react differently), while the CLI still catches ObservatoryError once. Every message is one line
that says what is wrong and how to fix it.

The root is a ValueError because ConfigError always was one: code that caught ValueError around
a parser keeps working.
"""


class ObservatoryError(ValueError):
    """A failure the observatory reports as one line (its message): never a traceback."""


class ConfigError(ObservatoryError):
    """Bad user input: a flag, a config file, a preset, a setting that cannot work."""


class RecordingError(ObservatoryError):
    """A recording (or an imported log, a sweep's results) that is damaged or unreadable: the
    message names the file, the line when there is one, and what is wrong."""


class PeerError(ObservatoryError):
    """A network peer failed us: unreachable, refused the handshake, answered in something that
    is not the observatory's protocol."""


class EngineError(ObservatoryError):
    """vLLM, or the engine the observatory builds on it, could not be built or run (not the
    swap-space abort, which is a result the stream records, not an error)."""


def first_line(exc: BaseException) -> str:
    """The first line of `exc`'s message, or its type's name if it has none: the `message` of
    an ObserverError (its `error` field names the type)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def one_line(exc: BaseException) -> str:
    """What went wrong, as one line: an ObservatoryError's own message (it already names the
    fix), anything else as "Type: the first line of its message"."""
    if isinstance(exc, ObservatoryError):
        return str(exc)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"
