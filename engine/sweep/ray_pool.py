"""Cells as Ray tasks: a local Ray runtime by default, or an existing cluster with --address.

Each cell is one task (`num_cpus=1`) running `engine.sweep.cell.run_cell`. Ray reuses worker
processes between tasks, so a worker imports vLLM once and every later cell it runs only builds
an engine. At most `capacity` tasks are in flight: the rest wait in the driver, so Ctrl-C has
little to cancel and the ETA is honest.

Worker loss (a crashed or killed worker process, a node that died) is retried here, not by Ray,
so the row can say how many attempts the cell took; after `retries` retries only that cell
fails. An exception inside the task cannot happen for an engine problem (run_cell turns those
into `failed` outcomes) and is not retried: it would fail again.

Ray's own log output goes to a file: its Python loggers through a handler, and what its C++
core prints to stderr while it starts (e.g. that it could not reach 8.8.8.8 to find the node's
address) by pointing fd 2 at that file for the duration of `ray.init`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections import deque
from pathlib import Path
from typing import Iterator

import msgspec

from engine.errors import ConfigError, EngineError, PeerError
from engine.sweep.cell import CellOutcome, decode_outcome, one_line, run_cell
from engine.sweep.grid import Cell

POLL_S = 0.5  # how often the driver wakes up without a result, for the progress bar's ETA


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    saved = os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast on an address nothing listens on: ray.init would retry it for minutes, in C++
    code that even Ctrl-C cannot interrupt."""
    if address == "auto" or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"--address {address!r}: use HOST:PORT (the head node's GCS port, "
                          f"6379 by default) or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise PeerError(f"cannot reach the Ray cluster at {address}: "
                          f"{exc.strerror or exc}; is `ray start --head` running there?") from None


def require_ray(command: str = "sweep", units: str = "cells") -> None:
    """One line, before anything is written, when this environment has no Ray: a plain
    `pip install -e .` beside a user's own vLLM may lack it (most vLLM extras bring it)."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise ConfigError(f"{command} runs its {units} on Ray, which is not installed here: "
                          f"pip install 'ray[default]' (most vLLM extras bring it), or add "
                          f"--serial to run the {units} one by one without Ray")


@contextlib.contextmanager
def ray_runtime(address: str | None, workers: int | None, log_path: Path,
                temp_dir: str | None = None, node_ip: str | None = None) -> Iterator[int]:
    """Start (or join) Ray for the duration of the block; yields how many cells may run at
    once: `workers` locally (default: one per core), the cluster's CPU count (or `workers` if
    smaller) on a cluster."""
    import ray

    handler = logging.FileHandler(log_path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    ray_logger = logging.getLogger("ray")
    ray_logger.addHandler(handler)
    ray_logger.propagate = False
    kwargs: dict = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
    if temp_dir is not None:
        kwargs["_temp_dir"] = str(Path(temp_dir).resolve())
    if node_ip is not None:
        kwargs["_node_ip_address"] = node_ip
    try:
        with _stderr_to(log_path):
            if address is None:  # "local": never attach to a cluster found on this machine
                workers = workers or os.cpu_count() or 1
                ray.init(address="local", num_cpus=workers, **kwargs)
            else:
                ray.init(address=address, **kwargs)
    except Exception as exc:  # ConnectionError, ValueError, RuntimeError: all user-fixable
        ray_logger.removeHandler(handler)
        where = f"join the Ray cluster at {address}" if address else "start a local Ray runtime"
        error = PeerError if address else EngineError
        raise error(f"cannot {where}: {one_line(exc)} (details in {log_path})") from None
    try:
        if address is None:
            capacity = int(workers or 1)
        else:
            cpus = int(ray.cluster_resources().get("CPU", 0))
            if cpus < 1:
                raise PeerError(f"the Ray cluster at {address} has no CPUs to run cells on")
            capacity = min(workers, cpus) if workers else cpus
        yield capacity
    finally:
        with _stderr_to(log_path):
            ray.shutdown()
        ray_logger.removeHandler(handler)
        handler.close()


def run_cell_on_ray(spec_json: bytes, record: bool) -> tuple[str, bytes]:
    """The task: run_cell, plus the id of the node that ran it (for the `node` column)."""
    import ray

    return ray.get_runtime_context().get_node_id()[:12], run_cell(spec_json, record)


def run_on_ray(cells: list[Cell], record: bool, capacity: int,
               retries: int = 1) -> Iterator[tuple[Cell, CellOutcome] | None]:
    """Run `cells` on the connected Ray; yield (cell, outcome) as each finishes, and None every
    POLL_S without one. Closing the generator (or Ctrl-C inside it) cancels what is in flight."""
    import ray
    from ray.exceptions import RayError, RayTaskError, TaskCancelledError

    remote = ray.remote(num_cpus=1, max_retries=0)(run_cell_on_ray)
    waiting = deque(cells)
    in_flight: dict = {}  # ObjectRef -> (cell, attempt)

    def submit(cell: Cell, attempt: int) -> None:
        ref = remote.remote(msgspec.json.encode(cell.spec), record)
        in_flight[ref] = (cell, attempt)

    try:
        while waiting or in_flight:
            while waiting and len(in_flight) < capacity:
                submit(waiting.popleft(), 1)
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=POLL_S)
            if not ready:
                yield None
                continue
            for ref in ready:
                cell, attempt = in_flight.pop(ref)
                try:
                    node, encoded = ray.get(ref)
                except TaskCancelledError:
                    continue
                except RayError as exc:
                    lost = _worker_lost(exc, RayTaskError)
                    if lost and attempt <= retries:
                        submit(cell, attempt + 1)
                        continue
                    cause = getattr(exc, "cause", None) or exc
                    message = (f"worker lost {attempt} time(s): {one_line(exc)}" if lost
                               else one_line(cause))
                    outcome = CellOutcome(status="failed", message=message)
                else:
                    outcome = decode_outcome(encoded)
                    outcome.node = node
                outcome.attempts = attempt
                yield cell, outcome
    finally:
        for ref in in_flight:
            ray.cancel(ref, force=True)


def _worker_lost(exc: Exception, task_error: type) -> bool:
    """True when the process running the cell went away (crash, kill, node death, or a signal
    that interrupted it), as opposed to the task raising, which would only happen again."""
    if isinstance(exc, task_error):
        return isinstance(getattr(exc, "cause", None), (KeyboardInterrupt, SystemExit))
    return True


def run_serially(cells: list[Cell], record: bool) -> Iterator[tuple[Cell, CellOutcome] | None]:
    """The same cells one by one in this process, without Ray (`--serial`)."""
    for cell in cells:
        yield cell, decode_outcome(run_cell(msgspec.json.encode(cell.spec), record))

