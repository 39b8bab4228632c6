"""The local transport: the live TUI runs the engine in a child process, over a socketpair.

Why a child process: the engine loop and the UI no longer share one GIL, so the engine runs at
full speed and the UI redraws at its own pace; and the engine process owns the recording, so the
recording is complete whatever happens to the UI.

`spawn_local(spec, record)` starts `python -m engine.child` with one end of a socketpair and
returns an EngineLink at once (vLLM's import takes seconds; Progress messages report it). The
child speaks the same protocol as `observatory serve` (engine.stream.protocol); its one client is
its owner, whose commands are labelled "tui".

The child must never outlive its owner, and never write on the owner's terminal:
- its own fds 1 and 2 are pipes read by a thread that turns lines into LogLine records
  (engine.logs.capture_fds), so C-level writes from torch or NCCL end up in the stream;
- EOF on the socket (the owner closed it, or died: the kernel closes a dead process's sockets)
  stops the run at the next step boundary, writes the end record, closes the recording and
  exits; before the engine is built it exits at once (no recording exists yet);
- PR_SET_PDEATHSIG (via ctypes) is a second line of defence. The kernel sends it when the
  *thread* that forked the child exits, which in a TUI is a short-lived worker; so the handler
  acts only if the parent process is really gone (getppid changed).
- SIGINT, SIGTERM and SIGHUP stop it cleanly too (EngineHost's handlers).

Before fds 1 and 2 are captured, and for a last fatal message, the child writes to a separate
diagnostics pipe (its original stderr) that the owner keeps the tail of, so a child that cannot
start explains why in Disconnected.reason.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Sequence

from engine.errors import ConfigError, EngineError
from engine.spec import RunSpec
from engine.stream.client import EngineLink
from engine.stream.protocol import PROTOCOL_VERSION, Closing, Hello, encode_line

_PR_SET_PDEATHSIG = 1
_DEATH_SIGNAL = signal.SIGUSR2
_PROJECT_ROOT = str(Path(__file__).resolve().parents[1])
FLUSH_TIMEOUT_S = 1.0


def spawn_local(spec: RunSpec, record: str | None, *, client: str = "tui",
                child_args: Sequence[str] = (), pace: float | None = None,
                hold_s: float | None = None) -> EngineLink:
    """Start the engine for `spec` in a child process recording to `record` (a path, or None
    for no recording). Returns at once; raises ConfigError for a bad spec or `record == "-"`,
    EngineError if the process cannot be started.
    `child_args`: extra arguments for `python -m engine.child` (diagnostics and tests).
    `pace`: steps per second (the Session's pace; wall clock only), or None; `hold_s`: hold
    this long at the first sign of trouble (engine.host.attention), or None."""
    spec = spec.validated()
    if record == "-":
        raise ConfigError("the local engine records to a file: give a path or no recording")
    args = ["--spec", spec_json(spec)]
    args += ["--record", record] if record is not None else ["--no-record"]
    args += ["--pace", repr(float(pace))] if pace else []
    args += ["--hold", repr(float(hold_s))] if hold_s else []
    parent_end, process, diagnostics = start_child("engine.child", [*args, *child_args],
                                                   hash_seed=spec.backend == "sim",
                                                   what="the engine process")
    parent_end.sendall(encode_line(Hello(protocol=PROTOCOL_VERSION, token="", client=client)))
    return EngineLink(parent_end, address=f"engine process {process.pid}", process=process,
                      diagnostics=diagnostics)


def start_child(module: str, args: Sequence[str], *, hash_seed: bool,
                what: str) -> tuple[socket.socket, subprocess.Popen, collections.deque[str]]:
    """`python -m MODULE --fd FD --parent-pid PID ARGS` over a socketpair, its stdout to
    /dev/null and the tail of its stderr kept (its last words if it cannot start): the owner's
    end, the process, the tail. `hash_seed`: PYTHONHASHSEED=0 from its start (a V1 sim engine
    needs it). EngineError naming `what` if it cannot be started."""
    parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    argv = [sys.executable, "-m", module, "--fd", str(child_end.fileno()),
            "--parent-pid", str(os.getpid()), *args]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PROJECT_ROOT, env.get("PYTHONPATH")) if p)
    if hash_seed:
        from engine.adapters.v1.platform import HASH_SEED

        env["PYTHONHASHSEED"] = HASH_SEED
    try:
        process = subprocess.Popen(argv, pass_fds=(child_end.fileno(),), env=env,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, close_fds=True)
    except OSError as exc:
        parent_end.close()
        raise EngineError(f"cannot start {what}: {exc.strerror or exc}") from None
    finally:
        child_end.close()
    diagnostics: collections.deque[str] = collections.deque(maxlen=20)
    threading.Thread(target=_keep_tail, args=(process.stderr, diagnostics), daemon=True,
                     name="observatory-child-diag").start()
    return parent_end, process, diagnostics


def spec_json(spec: RunSpec) -> str:
    import msgspec

    return msgspec.json.encode(spec.to_dict()).decode()


def _keep_tail(pipe, tail: collections.deque) -> None:
    for raw in pipe:
        text = raw.decode("utf-8", "replace").strip()
        if text:
            tail.append(text)
    pipe.close()


# ---- the child's side ---------------------------------------------------------------------
def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m engine.child",
                                     description="The observatory engine as a local child "
                                                 "process (started by the live TUI).")
    parser.add_argument("--fd", type=int, required=True, help="the socketpair end to serve")
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--spec", required=True, help="RunSpec as JSON")
    parser.add_argument("--record", help="recording path")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--pace", type=float, help="steps per second (Session's pace)")
    parser.add_argument("--hold", type=float, help="seconds to hold at the first sign of "
                                                   "trouble (engine.host.attention)")
    parser.add_argument("--probe-fd2", metavar="TEXT",
                        help="write TEXT to fd 2 once it is captured (checks the capture)")
    return parser.parse_args(argv)


def die_with_parent(parent_pid: int, on_orphaned) -> None:
    """Ask the kernel for _DEATH_SIGNAL when our parent goes; act only if it really went."""
    def handler(signum, frame) -> None:  # noqa: ANN001
        if os.getppid() != parent_pid:
            on_orphaned()

    signal.signal(_DEATH_SIGNAL, handler)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(_DEATH_SIGNAL), 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: EOF on the socket still stops the child
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        on_orphaned()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    diag = os.dup(2)  # the owner reads this pipe; fds 1 and 2 are captured below

    def fatal(message: str, code: int = 1) -> None:
        try:
            os.write(diag, f"observatory engine: {message}\n".encode())
        except OSError:
            pass
        os._exit(code)

    sock = socket.socket(fileno=args.fd)
    from engine import logs

    logs.capture_fds()
    if args.probe_fd2:
        os.write(2, args.probe_fd2.encode() + b"\n")
    try:
        spec = RunSpec.from_dict(__import__("json").loads(args.spec)).validated()
    except (ValueError, ConfigError) as exc:
        fatal(f"bad --spec: {exc}", 2)
    from engine.host import EngineHost
    from engine.stream.fanout import Fanout
    from engine.stream.server import serve_connection

    host = EngineHost(spec, None if args.no_record else args.record, pace=args.pace,
                      hold_s=args.hold)
    try:
        host.open_recording()
    except ConfigError as exc:
        fatal(str(exc), 2)
    fanout = Fanout(host, keep_history=False)  # one client, attached before the Header

    def owner_gone() -> None:
        if not host.stop("the owner went away"):
            host.cancel_start()  # vLLM is still loading: nothing ran, nothing to record
            os._exit(0)

    die_with_parent(args.parent_pid, owner_gone)

    def serve() -> None:
        serve_connection(sock, fanout, token=None, source=lambda name: "tui",
                         peer="owner", local=True)
        owner_gone()

    threading.Thread(target=serve, name="observatory-owner", daemon=True).start()
    host.install_signal_handlers()
    host.start()
    host.wait()
    if host.start_error is not None and host.finished is None:
        reason = host.start_error
        fanout.close_all(encode_line(Closing(reason=reason)), FLUSH_TIMEOUT_S)
        fatal(reason, 1)
    fanout.close_all(None, FLUSH_TIMEOUT_S)
    os._exit(0)  # skip torch's and vLLM's interpreter teardown: the recording is closed


if __name__ == "__main__":
    main()
