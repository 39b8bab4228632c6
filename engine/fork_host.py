"""The fork host: one recording re-run in the background, so that a fork at any step starts in
about a second (`f` in replay, and in live after an abort).

A fork must re-run the recording from its first step (vLLM's state at step N exists only by
running steps 0..N-1), and on the seed workload that is ~7 ms a step of vLLM's own scheduler:
600 steps are seconds. So the replay screen starts this process when it opens
(engine.fork_link), and it re-runs the recording at once (engine.analysis.rerun: its spec, or
its requests), with the recording's own policy changes and bursts before their steps, up to the
last step a fork can switch before; there it waits. On its way it leaves **snapshots**: every
`spacing` steps it `os.fork()`s a copy of itself that waits at that step boundary (the kernel
shares the pages both still have: a copy costs what the run dirtied since, ~45 MB on the
seed). A fork at step N is then run by a new process forked from the snapshot nearest before N
(or from the re-run itself, once it gets there): it re-runs the few steps up to N as the
recording did, switches to the fork's policy before N, and records to its own file: the header
of the fork's spec (engine.analysis.fork.plan_fork: `verify` re-runs it from scratch), every
item the re-run made before the snapshot, then its own. The owner follows that file.

Processes: the owner (a TUI) → this host (the re-run) → snapshots → fork runs. Each asks the
kernel for a signal when its parent dies: a snapshot then exits, a fork run stops at its next
step and seals its recording. The host exits when the owner closes the socket.

Only the engine's own thread runs here (no log-capture threads, no background flushes before a
fork: a fork copies the calling thread only), and everything happens at a step boundary
(Session.at_boundary), where vLLM's state is whole.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import msgspec

from engine.errors import ObservatoryError
from engine.fork_link import At, Failed, ForkAt, Forked, LineReader, Message, Ready, decode, encode
from engine.stream.records import STEP_TYPES, Header, RunFinished, decode_record
from engine.stream.records import encode as encode_record

MAX_SNAPSHOTS = 8
MIN_SPACING = 25  # steps between snapshots at least
PROGRESS_EVERY_S = 0.2


def die_with_parent(on_orphaned: Callable[[], None]) -> None:
    """Call `on_orphaned` when this process's parent dies (engine.child's, for the parent of
    this very process: the kernel forgets the wish at every fork)."""
    from engine.child import die_with_parent as arrange

    arrange(os.getppid(), on_orphaned)


@dataclass
class Snapshot:
    """A copy of the re-run waiting at the boundary before `step`."""

    step: int
    pid: int
    sock: socket.socket
    reader: LineReader


class ForkRun:
    """The part of a forked process that runs a fork: its recording, the policy switch, and
    the recording's own changes and bursts before the switch."""

    def __init__(self, host: "ForkHost", order: ForkAt) -> None:
        from engine.analysis.fork import plan_fork
        from engine.analysis.summary import SummaryBuilder
        from engine.stream.recorder import Recorder

        self.host = host
        self.order = order
        plan = plan_fork(host.recording, order.step, order.policy)
        self.max_steps = plan.spec.max_steps
        header = msgspec.structs.replace(
            host.header, spec=plan.spec.to_dict(),
            started_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
        self.recorder = Recorder(order.out, header, background_flush=False,
                                 fold=SummaryBuilder)
        for line in host.lines:  # what the re-run made so far: the recording's own steps
            self.recorder.write(decode_record(line))
        self.orphaned = False  # set by the parent-death signal; acted on at a step boundary

    def take(self, item: Any) -> None:
        self.recorder.write(item)
        if type(item) in STEP_TYPES and self.max_steps is not None \
                and item.step + 1 >= self.max_steps:
            self.host.session.stop()

    def boundary(self, step: int) -> None:
        if self.orphaned:  # the owner went: stop here, the recording sealed
            self.host.session.stop()
        if step < self.order.step:
            self.host.recorded_changes(step)
        elif step == self.order.step:
            self.host.session.set_policy(self.order.policy, source="fork")
        self.host.recorded_bursts(step)

    def close(self) -> None:
        self.recorder.close()


class ForkHost:
    """The re-run of one recording, its snapshots, and the forks they start."""

    def __init__(self, recording: Any, plan: Any, sock: socket.socket) -> None:
        from engine.analysis.fork import last_forkable_step
        from engine.session import Session

        self.recording = recording
        self.sock, self.reader = sock, LineReader(sock)
        self.last = last_forkable_step(recording)
        self.spacing = max(MIN_SPACING, -(-self.last // MAX_SNAPSHOTS))
        self.changes: dict[int, list[str]] = {}
        for step, policy in plan.spec.toggles:
            self.changes.setdefault(step, []).append(policy)
        self.bursts: dict[int, list[int]] = plan.bursts
        spec = msgspec.structs.replace(plan.spec, toggles=[], max_steps=None)
        self.session = Session(spec)
        self.session.subscribe(self._take)
        self.header: Header | None = None
        self.lines: list[bytes] = []
        self.pending: list[ForkAt] = []
        self.snapshots: list[Snapshot] = []
        self.fork_run: ForkRun | None = None
        self.role = "re-run"
        self.step = 0  # the last step the re-run made
        self.end: str | None = None  # how the re-run ended (RunFinished.reason)
        self._said = 0.0

    # ---- the stream and the step boundaries --------------------------------------------------
    def run(self) -> None:
        self.session.prepare()
        self.send(Ready(last=self.last))
        self.session.at_boundary(self._boundary)
        self.session.run()

    def _take(self, item: Any) -> None:
        if self.fork_run is not None:
            self.fork_run.take(item)
        elif type(item) is Header:
            self.header = item
        else:
            self.lines.append(encode_record(item))
            if type(item) is RunFinished:
                self.end = item.reason
        if type(item) in STEP_TYPES:
            self.step = item.step
            self.session.at_boundary(self._boundary)

    def _boundary(self, step: int) -> tuple[bool, str]:
        if self.fork_run is None:
            self._serve(step)
        if self.fork_run is not None:
            self.fork_run.boundary(step)
        else:
            self.recorded_changes(step)
            self.recorded_bursts(step)
        return True, ""

    def recorded_changes(self, step: int) -> None:
        for policy in self.changes.get(step, ()):
            self.session.set_policy(policy, source="toggle-at")

    def recorded_bursts(self, step: int) -> None:
        for size in self.bursts.get(step, ()):
            self.session.add_burst(size, source="burst")

    def _serve(self, step: int) -> None:
        """The re-run at the boundary before `step`: take the owner's orders, leave a
        snapshot, start the forks due here, wait at the last step. Returns in a fork run too
        (`fork_run` set) once this process has become one."""
        _reap()
        if self._read(block=False) is None:
            return
        if step % self.spacing == 0 and step < self.last and self._snapshot(step):
            return
        while True:
            for order in [o for o in self.pending if o.step <= step]:
                self.pending.remove(order)
                if order.step == step:
                    if self._fork(order, step):
                        return
                else:
                    self._route(order)
            if step < self.last:
                break
            if self._read(block=True) is None:
                return
        now = time.monotonic()
        if now - self._said >= PROGRESS_EVERY_S:
            self._said = now
            self.send(At(step=step))

    def _read(self, block: bool) -> bool | None:
        """Take the owner's orders (`block`: wait for one). None: the owner is gone, and the
        re-run stops."""
        while True:
            line = self.reader.line(block=block)
            if line is None:
                return True
            if line == b"":
                self.session.stop()
                return None
            try:
                message = decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            if type(message) is ForkAt:
                self._accept(message)
            if block:
                return True

    def _accept(self, order: ForkAt) -> None:
        from engine.analysis.fork import plan_fork

        try:
            plan_fork(self.recording, order.step, order.policy)
            with open(order.out, "ab"):
                pass  # a path the fork cannot write is said here, to the owner
        except ObservatoryError as exc:
            self.send(Failed(message=str(exc), step=order.step))
            return
        except OSError as exc:
            self.send(Failed(message=f"cannot write {order.out}: {exc.strerror or exc}",
                             step=order.step))
            return
        self.pending.append(order)

    # ---- processes ----------------------------------------------------------------------
    def _fork(self, order: ForkAt, step: int) -> bool:
        """Start a process that runs `order` from here; True in that process."""
        pid = os.fork()
        if pid == 0:
            self._become_fork_run(order)
            return True
        self.send(Forked(step=order.step, policy=order.policy, out=order.out, pid=pid))
        return False

    def _become_fork_run(self, order: ForkAt) -> None:
        self._close_links()
        self.role = "fork"
        try:
            self.fork_run = run = ForkRun(self, order)
        except (ObservatoryError, OSError):
            os._exit(1)
        die_with_parent(lambda: setattr(run, "orphaned", True))

    def _snapshot(self, step: int) -> bool:
        """Leave a copy of the re-run waiting here; True in that copy once it has become a
        fork run (it returns only then)."""
        if any(s.step == step for s in self.snapshots):
            return False
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            mine.close()
            self._close_links()
            self.sock, self.reader, self.role = theirs, LineReader(theirs), "snapshot"
            die_with_parent(lambda: os._exit(0))
            while True:  # a copy serves forks at or after its step, each in a new process
                _reap()
                line = self.reader.line()
                if not line:
                    os._exit(0)
                try:
                    order = decode(line)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    continue
                if type(order) is ForkAt and self._fork(order, step):
                    return True
        theirs.close()
        self.snapshots.append(Snapshot(step, pid, mine, LineReader(mine)))
        if len(self.snapshots) > MAX_SNAPSHOTS:
            self._drop_one()
        return False

    def _drop_one(self) -> None:
        """Let go of the snapshot whose loss leaves the smallest gap (never the first)."""
        snaps = self.snapshots
        i = min(range(1, len(snaps) - 1), key=lambda k: snaps[k + 1].step - snaps[k - 1].step)
        gone = snaps.pop(i)
        gone.sock.close()  # it exits on EOF

    def _route(self, order: ForkAt) -> None:
        """A fork before the re-run's step: run by the nearest snapshot before it."""
        before = [s for s in self.snapshots if s.step <= order.step]
        if not before:
            self.send(Failed(message=f"no copy of the re-run waits before step {order.step}",
                             step=order.step))
            return
        snap = max(before, key=lambda s: s.step)
        try:
            snap.sock.sendall(encode(order))
            line = snap.reader.line()
        except OSError:
            line = b""
        if not line:
            self.snapshots.remove(snap)
            self.send(Failed(message=f"the copy at step {snap.step} is gone", step=order.step))
            return
        self.send(decode(line))

    def _close_links(self) -> None:
        """A new process keeps none of its parent's sockets."""
        for link in [self.sock, *(s.sock for s in self.snapshots)]:
            try:
                link.close()
            except OSError:
                pass
        self.snapshots = []

    def send(self, message: Message) -> None:
        try:
            self.sock.sendall(encode(message))
        except OSError:
            pass

    def ended(self) -> None:
        """The re-run itself ended before the last step (it differed from the recording and
        vLLM aborted, say): forks before that still run from the snapshots, until the owner
        goes."""
        if self.pending:
            for order in self.pending:
                self._route(order)
            self.pending = []
        while True:
            _reap()
            line = self.reader.line()
            if not line:
                return
            try:
                message = decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            if type(message) is ForkAt:
                self._route(message)


def _reap() -> None:
    """Collect the exit status of finished children (fork runs, dropped snapshots)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m engine.fork_host",
                                     description="Re-run a recording in the background and "
                                                 "fork it on request (started by the TUI).")
    parser.add_argument("--fd", type=int, required=True, help="the socketpair end to serve")
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--recording", required=True)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    sock = socket.socket(fileno=args.fd)
    if os.getppid() != args.parent_pid:
        os._exit(0)
    die_with_parent(lambda: os._exit(0))

    def fail(message: str) -> None:
        try:
            sock.sendall(encode(Failed(message=message)))
        except OSError:
            pass
        os._exit(2)

    try:
        from engine.analysis.rerun import rerun_plan
        from engine.analysis.verify import refuse_other_vllm
        from engine.stream.reader import load

        recording = load(args.recording)
        refuse_other_vllm(os.path.basename(args.recording), recording.header.vllm_version)
        host = ForkHost(recording, rerun_plan(recording), sock)
        host.run()
    except ObservatoryError as exc:
        fail(str(exc))
    if host.fork_run is not None:  # a fork run: its recording is whole once closed
        host.fork_run.close()
        os._exit(0)
    if host.role == "re-run" and host.end != "stopped":  # not stopped by the owner going
        host.send(Failed(message=f"the re-run ended ({host.end}) at step {host.step} before "
                                 f"step {host.last}: forks before that still run"))
        host.ended()
    os._exit(0)


if __name__ == "__main__":
    main()
