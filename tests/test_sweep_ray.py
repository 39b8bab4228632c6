"""`observatory sweep` on real Ray: a local runtime, a 2-node cluster, Ctrl-C, kill -9 and
--resume, a failing cell, and one cell against `observatory run`.

Ray probes a public address to find its node IP even when told 127.0.0.1, so everything that
starts Ray runs in fresh network *and* PID namespaces (`unshare -n -p -f --mount-proc`; root
needed, as in CI): loopback is the only interface, nothing started inside can outlive the
namespace's first process, and `/proc/*/ns/pid` tells us exactly what is still alive in it. Each
test asserts that nothing is. Ray gets a short temp dir (unix socket paths are limited to 107
bytes) and a token of its own, so nothing is written to ~/.ray.

Run as a script (`python tests/test_sweep_ray.py cluster DIR`), this file is the 2-node
scenario that runs inside one namespace: see `cluster_scenario`.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from engine.sweep.rows import SUMMARY_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
START_TIMEOUT_S = 300


def _can_unshare() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-n", "-p", "-f", "--mount-proc", "true"],
                           capture_output=True)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not _can_unshare(),
                                reason="needs root and unshare (network + PID namespaces)")


# ---------------------------------------------------------------------- namespaces
def default_signals() -> None:
    """In the child, before exec: SIGINT and SIGTERM at their defaults. A suite run as a
    background job (`pytest &`, CI runners) starts with SIGINT ignored, an ignored signal stays
    ignored across exec, and Python then installs no KeyboardInterrupt handler, so the sweep
    would never see the test's Ctrl-C. The test sets what it relies on instead of inheriting it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def ray_env() -> dict[str, str]:
    return dict(os.environ, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32),
                RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=str(ROOT))


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


class Namespace:
    """`argv` in fresh network and PID namespaces, as a child of a `sh` that is PID 1 there."""

    def __init__(self, argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        self._out = open(log, "w")  # noqa: SIM115 (closed in wait())
        self.proc = subprocess.Popen(
            ["unshare", "-n", "-p", "-f", "--mount-proc", "sh", "-c",
             'ip link set lo up && "$@"', "sh", *argv],
            cwd=ROOT, env=env or ray_env(), stdout=self._out, stderr=subprocess.STDOUT,
            preexec_fn=default_signals)
        self.init_pid = self._wait_child(self.proc.pid)  # sh, PID 1 inside
        self.ns = os.readlink(f"/proc/{self.init_pid}/ns/pid")

    @staticmethod
    def _wait_child(pid: int) -> int:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            children = _children(pid)
            if children:
                return children[0]
            time.sleep(0.05)
        raise AssertionError(f"no child of {pid} appeared")

    def main_pid(self) -> int:
        """The host PID of `argv`'s process (the child of the namespace's sh)."""
        return self._wait_child(self.init_pid)

    def alive(self) -> list[int]:
        """Host PIDs of every process still in the namespace."""
        pids = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if os.readlink(f"/proc/{entry}/ns/pid") == self.ns:
                        pids.append(int(entry))
                except OSError:
                    continue
        return pids

    def wait(self, timeout: float = START_TIMEOUT_S) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                os.kill(self.init_pid, signal.SIGKILL)  # takes the whole namespace with it
                self.proc.wait(30)
            self._out.close()
            deadline = time.monotonic() + 10
            while self.alive() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert self.alive() == [], "processes outlived the namespace"

    def output(self) -> str:
        return self.log.read_text()


@pytest.fixture
def ray_tmp():
    """A short temp dir for Ray's sessions and sockets, removed afterwards."""
    path = tempfile.mkdtemp(prefix="obs-ray-", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def sweep_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "tui.cli", "sweep", "--node-ip-address", "127.0.0.1", *args]


def read_rows(directory: Path) -> list[dict]:
    rows = {}
    for line in (directory / "results.jsonl").read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        rows[row["key"]] = row
    return sorted(rows.values(), key=lambda r: r["cell"])


def stable(rows: list[dict]) -> list[dict]:
    from engine.sweep.rows import deterministic_part

    return [deterministic_part(r) for r in rows]


def wait_for_rows(directory: Path, count: int, ns: Namespace, timeout: float = START_TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        path = directory / "results.jsonl"
        if path.exists() and len(path.read_text().splitlines()) >= count:
            return
        if ns.proc.poll() is not None:
            raise AssertionError(f"sweep ended early ({ns.proc.returncode}):\n{ns.output()}")
        time.sleep(0.2)
    raise AssertionError(f"no {count} rows within {timeout} s:\n{ns.output()}")


# ---------------------------------------------------------------------- a failing cell, one cell
FAILING = ["--preset", "demo", "--max-steps", "250", "--grid", "prompt_len=64,5000", "--grid",
           "policy=off,strict"]


@pytest.fixture(scope="module")
def failing_sweep(tmp_path_factory):
    """Four cells on a local Ray runtime with 2 workers; prompt_len=5000 is longer than OPT's
    context, which vLLM's config check (not ours) rejects: those two cells fail."""
    tmp = tmp_path_factory.mktemp("ray-sweep")
    ray_dir = tempfile.mkdtemp(prefix="obs-ray-", dir="/tmp")
    try:
        ns = Namespace(sweep_argv(*FAILING, "--workers", "2", "--record-cells", "--ray-temp-dir",
                                  ray_dir, "-o", str(tmp / "out")), tmp / "log.txt")
        code = ns.wait()
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
    return tmp / "out", code, ns.output()


def test_failing_cells_become_rows_and_the_sweep_goes_on(failing_sweep):
    out, code, log = failing_sweep
    assert code == 1, log  # some cells failed
    assert "Traceback" not in log
    rows = read_rows(out)
    assert len(rows) == 4
    failed = [r for r in rows if r["status"] == "failed"]
    assert [r["prompt_len"] for r in failed] == [5000, 5000]
    for row in failed:
        assert "--prompt-len 5000" in row["message"] and "\n" not in row["message"]
        assert row["steps"] is None and row["recording"] is None
    for row in rows:
        if row["prompt_len"] == 64:
            assert row["status"] == "ok" and row["steps"] > 0 and row["node"]
            assert (out / row["recording"]).is_file()
    assert "sweep: 4 cells (2 ok, 2 failed)" in log.splitlines()[-1]
    assert "failed" in log and "--prompt-len 5000" in (out / "results.csv").read_text()


def test_a_cell_equals_observatory_run_with_its_flags(failing_sweep):
    out, _, _ = failing_sweep
    row = next(r for r in read_rows(out) if r["prompt_len"] == 64 and r["policy"] == "strict")
    run = subprocess.run([sys.executable, "-m", "tui.cli", "run", "--preset", "demo",
                          "--max-steps", "250", "--prompt-len", "64", "--policy", "strict",
                          "--no-record", "--json"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["steps"] == 250  # the bound applied to the cell and the run alike
    for name, value in summary.items():
        if name in SUMMARY_COLUMNS and name != "wall_seconds":
            assert row[name] == value, name
    assert {"time_axis", "exec_seconds"} <= summary.keys()  # the run's own, not a cell's


# ---------------------------------------------------------------------- Ctrl-C, kill, resume
# Eight cells of ~1 s: after the first row, Ctrl-C has several seconds of sweep left to land in
# (with four, a quiet machine finished the rest before the signal was handled).
RESUME = ["--preset", "demo", "--max-steps", "600", "--grid", "policy=strict,watermark:0.5",
          "--grid", "n=2,4", "--seeds", "2"]
RESUME_CELLS = 8


def test_ctrl_c_then_kill_then_resume_keeps_every_finished_row(tmp_path, ray_tmp):
    out = tmp_path / "out"
    first_run = Namespace(sweep_argv(*RESUME, "--workers", "1", "--ray-temp-dir", ray_tmp,
                                     "-o", str(out)), tmp_path / "1.log")
    wait_for_rows(out, 1, first_run)
    os.kill(first_run.main_pid(), signal.SIGINT)
    assert first_run.wait() == 130, first_run.output()
    log = first_run.output()
    assert "Traceback" not in log
    assert "sweep interrupted:" in log and f"--resume {out}" in log.splitlines()[-1]
    after_ctrl_c = read_rows(out)
    assert 1 <= len(after_ctrl_c) < RESUME_CELLS
    assert len((out / "results.csv").read_text().splitlines()) == 1 + len(after_ctrl_c)

    second_run = Namespace(sweep_argv("--resume", str(out), "--ray-temp-dir", ray_tmp),
                           tmp_path / "2.log")
    wait_for_rows(out, len(after_ctrl_c) + 1, second_run)
    os.kill(second_run.main_pid(), signal.SIGKILL)  # no cleanup at all this time
    second_run.wait()
    after_kill = read_rows(out)
    assert len(after_kill) > len(after_ctrl_c)

    third_run = Namespace(sweep_argv("--resume", str(out), "--ray-temp-dir", ray_tmp,
                                     "--no-report"), tmp_path / "3.log")
    assert third_run.wait() == 0, third_run.output()
    assert f"{len(after_kill)} already done" in third_run.output()
    final = read_rows(out)
    assert len(final) == RESUME_CELLS
    # finished rows were kept as they were, not run again
    for row in after_kill:
        assert next(r for r in final if r["key"] == row["key"]) == row
    lines = [line for line in (out / "results.jsonl").read_text().splitlines()
             if line.endswith("}")]
    assert len(lines) == RESUME_CELLS  # each cell ran exactly once
    # and the interrupted, killed and resumed sweep has the rows a straight run has
    serial = subprocess.run(sweep_argv(*RESUME, "--serial", "--no-report", "-o",
                                       str(tmp_path / "serial")),
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert serial.returncode == 0, serial.stderr
    assert stable(final) == stable(read_rows(tmp_path / "serial"))


# ---------------------------------------------------------------------- worker loss
def _task_processes(ns: Namespace) -> list[int]:
    """PIDs of Ray workers currently running a cell (Ray titles them after the task)."""
    found = []
    for pid in ns.alive():
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if title.startswith(b"ray::run_cell_on_ray"):
            found.append(pid)
    return found


def _kill_a_running_cell(ns: Namespace, timeout: float = START_TIMEOUT_S) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = _task_processes(ns)
        if running:
            os.kill(running[0], signal.SIGKILL)
            return running[0]
        if ns.proc.poll() is not None:
            raise AssertionError(f"sweep ended early:\n{ns.output()}")
        time.sleep(0.1)
    raise AssertionError("no worker ever ran a cell")


def test_worker_loss_is_retried_then_fails_only_that_cell(tmp_path, ray_tmp):
    out = tmp_path / "out"
    ns = Namespace(sweep_argv("--preset", "demo", "--max-steps", "400", "--grid",
                              "policy=off,strict,watermark:0.5", "--workers", "1", "--retries",
                              "1", "--ray-temp-dir", ray_tmp, "-o", str(out)), tmp_path / "log")
    first = _kill_a_running_cell(ns)
    deadline = time.monotonic() + START_TIMEOUT_S
    while first in _task_processes(ns) and time.monotonic() < deadline:
        time.sleep(0.1)
    _kill_a_running_cell(ns)  # the same cell again: the retry (capacity 1, it goes first)
    assert ns.wait() == 1, ns.output()
    rows = read_rows(out)
    assert [r["status"] for r in rows] == ["failed", "ok", "ok"], ns.output()
    lost = rows[0]
    assert lost["attempts"] == 2 and lost["message"].startswith("worker lost 2 time(s): ")
    assert all(r["attempts"] == 1 and r["steps"] > 0 for r in rows[1:])


# ---------------------------------------------------------------------- a 2-node cluster
CLUSTER = ["--preset", "demo", "--max-steps", "300", "--grid", "num_cpu_blocks=256,512",
           "--grid", "policy=off,strict", "--no-report"]


def test_two_node_cluster_rows_equal_local_and_one_by_one(tmp_path):
    ns = Namespace([sys.executable, __file__, "cluster", str(tmp_path)], tmp_path / "log")
    assert ns.wait(timeout=900) == 0, ns.output()
    report = json.loads((tmp_path / "scenario.json").read_text())
    assert report["codes"] == {"cluster": 0, "local": 0, "serial": 0}, ns.output()
    assert report["left_after_stopping_nodes"] == [], report
    cluster, local, serial = (read_rows(tmp_path / name) for name in ("cluster", "local",
                                                                      "serial"))
    assert len(cluster) == 4
    assert len({r["node"] for r in cluster}) == 2  # both nodes ran cells
    assert len({r["node"] for r in local}) == 1
    assert stable(cluster) == stable(local) == stable(serial)
    assert "Ray ready" in ns.output() and "joining the Ray cluster at 127.0.0.1:" in ns.output()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_nodes(address: str, count: int) -> None:
    code = ("import ray, time, sys\n"
            f"ray.init(address={address!r}, _node_ip_address='127.0.0.1', "
            "include_dashboard=False, log_to_driver=False)\n"
            "deadline = time.monotonic() + 240\n"
            f"while sum(n['Alive'] for n in ray.nodes()) < {count}:\n"
            "    if time.monotonic() > deadline: sys.exit('nodes did not join')\n"
            "    time.sleep(0.5)\n"
            "ray.shutdown()\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def _living_pids() -> list[int]:
    """Every process this /proc shows (the namespace's own), zombies left out."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                pids.append(int(entry))
    return pids


def cluster_scenario(work: Path) -> int:
    """Inside one namespace: a head node and a second node (`ray start ... --block`, 1 CPU
    each), a sweep through --address, then both nodes stopped by PID and a check that nothing
    of them is left; then the same sweep on a local Ray runtime and one by one."""
    ray_dir = tempfile.mkdtemp(prefix="obs-ray-", dir="/tmp")
    port = _free_port()
    address = f"127.0.0.1:{port}"
    ray_bin = str(BIN / "ray")
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--disable-usage-stats",
              "--block"]
    head = subprocess.Popen([ray_bin, "start", "--head", "--port", str(port), "--temp-dir",
                             ray_dir, "--include-dashboard", "false", *common])
    nodes = [head]
    codes: dict[str, int] = {}
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                if time.monotonic() > deadline or head.poll() is not None:
                    raise
                time.sleep(0.5)
        nodes.append(subprocess.Popen([ray_bin, "start", "--address", address, *common]))
        _wait_for_nodes(address, 2)
        codes["cluster"] = subprocess.run(sweep_argv(*CLUSTER, "--address", address, "-o",
                                                     str(work / "cluster"))).returncode
    finally:
        for node in reversed(nodes):  # by PID: `ray stop` would kill every Ray on the host
            node.send_signal(signal.SIGTERM)
        for node in nodes:
            try:
                node.wait(60)
            except subprocess.TimeoutExpired:
                node.kill()
                node.wait()
    time.sleep(2)
    left = [pid for pid in _living_pids() if pid not in (1, os.getpid())]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    codes["local"] = subprocess.run(sweep_argv(*CLUSTER, "--workers", "2", "--ray-temp-dir",
                                               ray_dir, "-o", str(work / "local"))).returncode
    codes["serial"] = subprocess.run(sweep_argv(*CLUSTER, "--serial", "-o",
                                                str(work / "serial"))).returncode
    shutil.rmtree(ray_dir, ignore_errors=True)
    (work / "scenario.json").write_text(json.dumps({"codes": codes,
                                                    "left_after_stopping_nodes": left}))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "cluster":
        sys.exit(cluster_scenario(Path(sys.argv[2])))
    sys.exit("usage: test_sweep_ray.py cluster DIR")
