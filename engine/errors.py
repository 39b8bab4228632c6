"""The one exception type for bad input, so every entry point can turn it into a one-line
message and exit code 2 instead of a traceback."""


class ConfigError(ValueError):
    """Bad user input: a flag, a config file, a recording. The message is one line that says
    what is wrong and how to fix it."""


def one_line(exc: BaseException) -> str:
    """What went wrong, as one line: a ConfigError's own message (it already names the fix),
    anything else as "Type: the first line of its message"."""
    if isinstance(exc, ConfigError):
        return str(exc)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"
