"""The OBSERVATORY_* environment: how `observatory exec` (and a user of
`--scheduler-cls engine.ObservedScheduler`, whose flag takes no arguments) configures every
engine a program builds, in every process it spawns (children inherit the environment).

    OBSERVATORY_EMBEDDED=1         set by exec: `import engine` leaves vLLM's logging alone
    OBSERVATORY_POLICY=P           the policy every engine starts with (default off)
    OBSERVATORY_RECORD=PATH        a directory (one file per engine) or a file
    OBSERVATORY_SERVE=HOST:PORT    serve each engine's stream (one engine per process)
    OBSERVATORY_TOKEN_FILE=F       the token clients present (required off 127.0.0.1)
    OBSERVATORY_ENGINES_DIR=DIR    set by `exec --serve`: each engine serves on 127.0.0.1:0
                                   and says where in DIR; exec's hub at HOST:PORT reaches them
    OBSERVATORY_SIM=1              every engine runs the observatory's sim executor
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from engine.errors import ConfigError

LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True)
class AttachConfig:
    policy: str = "off"
    record: str | None = None
    serve: tuple[str, int] | None = None
    token: str | None = None
    engines_dir: str | None = None
    sim: bool = False


def parse_serve(text: str, token: str | None) -> tuple[str, int]:
    """HOST:PORT (port 0: any free one); a token is required off this host."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"serve address {text!r} is not HOST:PORT: e.g. 127.0.0.1:8765")
    host = host.strip("[]") or "127.0.0.1"
    if host not in LOOPBACK and not token:
        raise ConfigError(f"serving on {host} needs a token (--token-file FILE): only "
                          f"127.0.0.1 may go without one")
    return host, int(port)


def read_token(path: str | None) -> str | None:
    if not path:
        return None
    try:
        token = Path(path).read_text().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read the token file {path}: {exc.strerror}") from None
    if not token:
        raise ConfigError(f"the token file {path} is empty: put a secret in it")
    return token


def from_env(environ: dict[str, str] | None = None) -> AttachConfig:
    env = os.environ if environ is None else environ
    token = read_token(env.get("OBSERVATORY_TOKEN_FILE"))
    engines_dir = env.get("OBSERVATORY_ENGINES_DIR") or None
    serve_text = env.get("OBSERVATORY_SERVE")
    serve = None
    if engines_dir:
        serve = ("127.0.0.1", 0)
    elif serve_text:
        serve = parse_serve(serve_text, token)
    return AttachConfig(policy=env.get("OBSERVATORY_POLICY") or "off",
                        record=env.get("OBSERVATORY_RECORD") or None, serve=serve, token=token,
                        engines_dir=engines_dir, sim=env.get("OBSERVATORY_SIM") == "1")
