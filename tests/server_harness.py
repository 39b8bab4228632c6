"""A real vLLM server as a test's subprocess: bound to 127.0.0.1 on a free port, ready when its
own log says so (an event, never a sleep), stopped by PID with every process it spawned (V1's
engine-core process, V0's frontend's engine process).

Only tests use it; the servers, their engines and the clients that drive them are vLLM's own.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[1]
READY_LINE = "Application startup complete"  # uvicorn's, in every vLLM's OpenAI server
STOP_WAIT_S = 60.0


def free_port() -> int:
    """A port nothing listens on now (the OS picks it), on the loopback address only."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def venv_bin(name: str) -> str:
    """A console script of the venv running the tests (`vllm`), which may not be on PATH."""
    return str(Path(sys.executable).parent / name)


def server_env(**extra: str) -> dict[str, str]:
    """The environment for a server and its clients, as a user's shell would give it: the
    observatory importable (the dotted executor path), offline, no usage stats, and vLLM's
    logging its own (not the test process's, whose `import engine` switched it off)."""
    given = extra.pop("PYTHONPATH", None)  # a sim platform's plugin path: kept, with ours
    path = os.pathsep.join(p for p in (given, str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ)
    env.pop("VLLM_CONFIGURE_LOGGING", None)  # importing engine set it in the test process
    return {**env, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
            **extra}


class Server:
    """One server process. `start()` returns once its log says it is ready (or raises with the
    log's tail if it exits first or never gets there); `stop()` ends it and its children."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], log_path: Path,
                 ready_line: str = READY_LINE, own_group: bool = False) -> None:
        self.argv = list(argv)
        self.own_group = own_group  # a process group of its own: what a terminal's Ctrl-C hits
        self.env = env
        self.log_path = log_path
        self.ready_line = ready_line
        self.lines: list[str] = []
        self._ready = threading.Event()
        self._ended = threading.Event()
        self._settled = threading.Event()  # ready, or ended
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 600.0) -> "Server":
        return self.launch().wait_ready(timeout)

    def launch(self) -> "Server":
        """Start the process (several may start at once, then each waits)."""
        self.proc = subprocess.Popen(self.argv, env=self.env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     text=True, errors="replace", cwd=self.log_path.parent,
                                     start_new_session=self.own_group)
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def interrupt(self, timeout: float = 120.0) -> int | None:
        """Ctrl-C as a terminal sends it: SIGINT to the server's whole process group (it was
        launched with `own_group`); then `stop()` for anything left. The exit status."""
        assert self.proc is not None and self.own_group
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        return self.stop()

    def wait_ready(self, timeout: float = 600.0) -> "Server":
        """Until the ready line, or the end of its output (it exited), whichever is first."""
        if not self._settled.wait(timeout=timeout):
            self.stop()
            raise AssertionError(f"server not ready in {timeout:.0f} s:\n{self.tail()}")
        if not self._ready.is_set():
            self.stop()
            raise AssertionError(f"server exited before it was ready:\n{self.tail()}")
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        with open(self.log_path, "w", encoding="utf-8") as log:
            for line in self.proc.stdout:
                self.lines.append(line)
                log.write(line)
                log.flush()
                if self.ready_line in line:
                    self._ready.set()
                    self._settled.set()
        self._ended.set()
        self._settled.set()

    def tail(self, n: int = 30) -> str:
        return "".join(self.lines[-n:])

    def log_text(self) -> str:
        return "".join(self.lines)

    def stop(self) -> int | None:
        """SIGTERM to the server (vLLM then shuts its engine process down itself), SIGKILL to
        whatever of it and its children is left after STOP_WAIT_S; returns the exit status."""
        import psutil

        if self.proc is None:
            return None
        try:
            children = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            children = []
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        _, alive = psutil.wait_procs(children, timeout=STOP_WAIT_S)
        for child in alive:
            child.kill()
        psutil.wait_procs(alive, timeout=STOP_WAIT_S)
        self._ended.wait(timeout=STOP_WAIT_S)
        return self.proc.returncode
