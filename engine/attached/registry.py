"""The engines attached in this process: their names, their files, their servers, the one
warning, and the end of every stream at exit.

A stream is named host/pid/index, the index counting the engines this process attached
(0, 1, ...): a verl worker's `LLM`, each of V1's data-parallel schedulers, one `LLM` per GPU.
Recordings follow the name: with a directory, `<host>-<pid>-<index>.jsonl.zst` in it; with a
file path, that file for the first engine of the process that asks for it and
`<stem>-<index><suffix>` for the others (several processes: give a directory).

"At most one warning": whatever fails (a hook, a full disk, an engine that cannot be
attached), the process says so once, in vLLM's log ("vllm.observatory" logs through vLLM's
own handler), and never again.
"""

from __future__ import annotations

import atexit
import json
import logging
import multiprocessing.util
import os
import socket
import threading
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_next = 0
_live: list[Any] = []  # engine.attached.observer.Observer
_warned = False
_claimed: dict[str, int] = {}  # a file --record: how many engines of this process asked for it
_RECORDING_SUFFIXES = (".jsonl.zst", ".jsonl")


def next_index() -> int:
    global _next
    with _lock:
        index, _next = _next, _next + 1
    return index


def engine_name(index: int) -> str:
    return f"{socket.gethostname()}/{os.getpid()}/{index}"


def record_path(base: str, index: int) -> str:
    """Where engine `index` of this process records, given --record `base`."""
    path = Path(base)
    if path.is_dir() or base.endswith(os.sep) or not (
            path.exists() or base.endswith(_RECORDING_SUFFIXES)):
        path.mkdir(parents=True, exist_ok=True)
        return str(path / f"{socket.gethostname()}-{os.getpid()}-{index}.jsonl.zst")
    with _lock:
        taken = _claimed.get(base, 0)
        _claimed[base] = taken + 1
    if taken == 0:
        return base
    for suffix in _RECORDING_SUFFIXES:
        if base.endswith(suffix):
            return f"{base[:-len(suffix)]}-{index}{suffix}"
    return f"{base}-{index}"


def warn_once(message: str) -> None:
    """One warning per process, in vLLM's log."""
    global _warned
    with _lock:
        if _warned:
            return
        _warned = True
    logger = logging.getLogger("vllm.observatory")
    if logger.hasHandlers():
        logger.warning("observatory: %s", message)
    else:  # vLLM's logging is off: the user still hears it, once
        import sys

        try:
            sys.stderr.write(f"WARNING observatory: {message}\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass


def remember(observer: Any) -> None:
    with _lock:
        _live.append(observer)


def forget(observer: Any) -> None:
    with _lock:
        if observer in _live:
            _live.remove(observer)


def serve(observer: Any, address: tuple[str, int], token: str | None) -> None:
    """Serve `observer`'s stream at `address`; under exec's hub, say where in its
    directory. A failure is the one warning; the engine runs on."""
    from engine.stream.server import Server

    try:
        server = Server(observer, address, token)  # token None: loopback only (env checks)
    except OSError as exc:
        warn_once(f"cannot serve engine {observer.name} on {address[0]}:{address[1]}: "
                  f"{exc.strerror or exc}; vLLM runs on unwatched")
        return
    observer.server = server
    server.start()
    engines_dir = os.environ.get("OBSERVATORY_ENGINES_DIR")
    if engines_dir:
        entry = {"name": observer.name, "address": server.address, "pid": os.getpid(),
                 "engine": observer.tap.kind}
        target = Path(engines_dir) / (observer.name.replace("/", "-") + ".json")
        tmp = target.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(entry))
            tmp.replace(target)
        except OSError as exc:
            warn_once(f"cannot announce engine {observer.name} in {engines_dir}: "
                      f"{exc.strerror or exc}")


def close_all() -> None:
    """End every stream still open (at exit): each recording gets its end record."""
    with _lock:
        live = list(_live)
        _live.clear()
    for observer in live:
        try:
            observer.close()
        except Exception:  # noqa: BLE001
            pass


atexit.register(close_all)
# A multiprocessing child (vLLM V1's EngineCore process, spawned) ends in os._exit, which runs
# no atexit handler: its recording would lose everything still in the compressor. Its
# finalizers do run (multiprocessing.util._exit_function, on the way out of the process's
# target, SIGTERM's SystemExit included). close_all is idempotent, so both may call it.
multiprocessing.util.Finalize(None, close_all, exitpriority=0)
