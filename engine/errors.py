"""The one exception type for bad input, so every entry point can turn it into a one-line
message and exit code 2 instead of a traceback."""


class ConfigError(ValueError):
    """Bad user input: a flag, a config file, a recording. The message is one line that says
    what is wrong and how to fix it."""
