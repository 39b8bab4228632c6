"""The docs lane: every command in the docs' `bash` blocks (README.md and docs/**/*.md) runs, on
the sim, and exits as the docs say.

CI runs this file in two venvs (.ci/run's `docs_lane`): vllm050 runs the V0 commands and those
that need no engine (summary, compare, export, ...), vllm033 the V1 ones (a command is V1 when
it names a `v1-` preset or HOW says so). `pytest` alone does not collect it (no `test_` name).

How a command runs:
- as written, in a fresh directory per block (recordings/ and tests/ linked in, HOME there too),
  the block's commands in order, each once in the lane (a command two pages show runs where it
  first appears); the exit status the doc expects is 0 unless the line's own comment says
  "exits N" (the README's `run --policy off`: "exits 3 when vLLM aborts");
- a screen (`observatory`, `live`, `replay`) runs in a pseudo-terminal of 120x40 until its
  text shows what HOW waits for, then gets `q` and must exit 0;
- anything else is declared in HOW, never silently: a shorter form (`--max-steps`, a smaller
  grid) or a stand-in for a placeholder (`train.py`, `vllm.log`), each with why; or not run,
  with why and what runs the same path instead (an install, CI itself, a GPU, a server that
  runs until stopped, another host).

tests/test_docs_lane_table.py (in the suite; it runs nothing) holds HOW to the docs: every entry
names a command some page still shows, and every declared difference says why.
"""

from __future__ import annotations

import os
import re
import select
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from shipped import shipped as shipped_recordings

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
TIMEOUT_S = 600


@dataclass(frozen=True)
class How:
    """How the lane runs one documented command, when not as written."""

    run: str | None = None  # the command as run (a shorter form, a stand-in for a placeholder)
    why: str = ""  # why it differs, or why it does not run
    skip: bool = False  # not run: `why` says what runs the same path instead
    screen: str | None = None  # a TUI: run in a pty until this regex shows, then `q`
    engine: str | None = None  # "v0" or "v1" when the command does not say (a script's vLLM)


V0_MODEL = "engine/adapters/models/opt-125m"
INSTALL = "installing: .ci/venv builds every venv CI uses with this very command"
SERVER = ("a server that runs until stopped, with a model to serve: "
          "tests/test_v1_serve.py and tests/test_v0_openai_server.py drive the same commands")
GPU = "needs a GPU (the gpu backend); the same command with --sim runs in this lane"
RELEASE_DAY = ("installs an unreleased vLLM's venv from the network (minutes, GBs): the "
               "release-day bench, run by hand when vLLM ships")
RELEASES = ("runs the workload in several releases' venvs on Ray, building any missing one "
            "(GBs each): tests/test_releases_cmd.py runs it on the venvs CI has built")
MADE = ("mkdir -p runs && observatory exec --sim --record runs/vm-15194-0.jsonl.zst -- python "
        "docs/examples/rollout_5578.py opt-125m > /dev/null 2>&1; ")
"""The rerun guide's recording (step 1's, named here as the guide names it), made first."""
MADE_WHY = "vm-15194-0: the recording the rerun guide's step 1 writes (host and pid), made first"
HUNT_RAY = ("Ray binds the machine's interface: tests/test_hunt_ray.py runs the hunt on a local "
            "Ray runtime in a network namespace")
STEPPED = r"step [\d,]+ / [1-9][\d,]*"  # the replay bar once steps ran (live) or loaded

HOW: dict[str, How] = {
    # installing, testing: what CI itself does
    "pip install uv && uv pip install --compile-bytecode -e '.[vllm050,test]'":
        How(skip=True, why=INSTALL),
    "uv pip install -e '.[vllm0290,test]'": How(skip=True, why=INSTALL),
    "pip install -e '.[vllm033,test]'": How(skip=True, why=INSTALL),
    "uv pip install -e '.[EXTRA,test]' --override overrides/EXTRA.txt":
        How(skip=True, why=INSTALL + " (vllm034 with overrides/vllm034.txt)"),
    "python3.11 -m venv ~/.venvs/observatory && source ~/.venvs/observatory/bin/activate":
        How(skip=True, why=INSTALL),
    "pip install -e '.[vllm050,test]' && observatory": How(skip=True, why=INSTALL),
    "pytest": How(skip=True, why="CI's lane A runs the whole suite in the vllm050 venv"),
    "PYTHONHASHSEED=0 pytest tests/test_v1_*.py": How(skip=True, why="CI's V1 lines"),
    "bash .ci/run": How(skip=True, why="this lane is part of it"),
    "PYTHONHASHSEED=0 python -m tests.fidelity_v1.run":
        How(skip=True, why="vLLM's own V1 scheduler tests, bare and under each policy, for "
                           "minutes: CI's V1 lines run them (tests/test_fidelity_v1.py)"),
    # screens
    "observatory": How(screen=STEPPED),
    "observatory live --preset seed-5578": How(screen=STEPPED),
    "observatory replay recordings/seed-5578-off.jsonl.zst": How(screen=STEPPED),
    "observatory replay recordings/seed-5578-off.jsonl.zst recordings/seed-5578-strict.jsonl.zst":
        How(screen=STEPPED),
    "observatory run --record - | observatory replay --follow -": How(screen=STEPPED),
    "observatory replay RUN.jsonl.zst --reference real.jsonl.zst [--reference-offset S]":
        How(run="observatory replay recordings/seed-5578-fitted-off.jsonl.zst --reference "
                "real.jsonl.zst", screen=STEPPED,
            why="RUN: a shipped run of the fitted seed; the bracketed option is optional"),
    "observatory live --preset seed-5578-fitted --reference real.jsonl.zst": How(screen=STEPPED),
    # shorter, declared
    "observatory run --preset seed-5578 --policy reserve --max-steps 3000":
        How(run="observatory run --preset seed-5578 --policy reserve --max-steps 300",
            why="3,000 steps are a minute on a loaded CI machine; 300 show it runs"),
    "observatory sweep --preset demo --grid num_cpu_blocks=256,320,384,448,512,576,640,704,"
    "768,1024 --grid policy=off,strict,watermark:0.5 -o sweeps/demo-cpu-blocks":
        How(run="observatory sweep --preset demo --grid num_cpu_blocks=256,1024 "
                "--grid policy=off,strict -o sweeps/demo-cpu-blocks --serial",
            why="30 cells on Ray are minutes: 4 cells of the same grid, in this process "
                "(Ray binds the machine's interface: tests/test_sweep_ray.py runs it in a "
                "network namespace; sweeps/README.md says how the shipped grid was made)"),
    # the hunt: exit 1 means it found something (docs/guides/hunt.md), 0 that it did not
    "observatory hunt --seed 3 --budget 600 -o hunt-seed-3":
        How(run="observatory hunt --seed 3 --workloads 4 --serial -o hunt-seed-3 "
                "|| test $? -eq 1",
            why=f"600 s on Ray: the same seed's first 4 workloads in this process ({HUNT_RAY})"),
    "observatory hunt --seed 3 --workloads 64 --serial":
        How(run="observatory hunt --seed 3 --workloads 4 --serial || test $? -eq 1",
            why="64 workloads are minutes: the first 4"),
    "observatory hunt --seed 3 --policy whole-context":
        How(run="observatory hunt --seed 3 --policy whole-context --workloads 2 --serial "
                "|| test $? -eq 1", engine="v1",
            why=f"a V1 policy: the first 2 workloads in this process ({HUNT_RAY})"),
    "observatory hunt --address HEAD:6379 --budget 3600":
        How(skip=True, why=f"HEAD: a Ray cluster's head, a placeholder ({HUNT_RAY})"),
    "observatory fit vllm.log --n 8 --max-tokens 1000 -o fitted.toml && observatory run "
    "--config fitted.toml":
        How(run="observatory fit tests/fixtures/logs/v0-metrics.log --preset demo --n 8 "
                "--max-tokens 64 --rounds 0 -o fitted.toml && observatory run --config "
                "fitted.toml --max-steps 300",
            why="vllm.log: a V0 log with stats lines (a fixture); the fit of the clock alone "
                "(--rounds 0) on the demo's workload, as tests/test_fit.py runs it: the seed's "
                "~30 whole sims are many minutes; then 300 steps of the fitted run"),
    "observatory fit v1.log --preset v1-thrash --rounds 0 -o fitted.toml":
        How(run="observatory fit tests/fixtures/logs/v1-engine.log --preset v1-thrash "
                "--rounds 0 -o fitted.toml", why="v1.log: a V1 log (a fixture)"),
    # stand-ins for placeholders
    "observatory import-log vllm.log -o real.jsonl.zst":
        How(run="observatory import-log tests/fixtures/logs/v0-metrics.log -o real.jsonl.zst",
            why="vllm.log: a V0 log with stats lines (a fixture)"),
    "observatory run --trace my-trace.jsonl --trace-limit 1000":
        How(run="observatory run --trace tests/fixtures/traces/mooncake.jsonl "
                "--trace-limit 1000", why="my-trace.jsonl: a Mooncake trace (a fixture)"),
    "observatory exec --sim --record runs/ -- python train.py":
        How(run=f"observatory exec --sim --record runs/ -- python "
                f"tests/fixtures/attach/verl_rollout.py {V0_MODEL}", engine="v0",
            why="train.py: a verl-style rollout script (a fixture) on a tiny model config"),
    # the rerun guide's recording, made first in each block that reads it
    "observatory verify runs/vm-15194-0.jsonl.zst":
        How(run=MADE + "observatory verify runs/vm-15194-0.jsonl.zst", why=MADE_WHY),
    "for policy in strict watermark reserve; do observatory fork runs/vm-15194-0.jsonl.zst "
    "--at 100 --policy $policy --max-steps 3000; done":
        How(run=MADE + "for policy in strict reserve; do observatory fork "
                       "runs/vm-15194-0.jsonl.zst --at 100 --policy $policy --max-steps 400 "
                       "|| exit; done",
            why=MADE_WHY + "; two policies, 400 steps each (the guide's three run ~1,100)"),
    "observatory fork runs/vm-15194-0.jsonl.zst --at 200 --policy reserve":
        How(run=MADE + "observatory fork runs/vm-15194-0.jsonl.zst --at 200 --policy reserve",
            why=MADE_WHY),
    "observatory fork runs/vm-15194-0.jsonl.zst --at 100 --policy reserve":
        How(run=MADE + "observatory fork runs/vm-15194-0.jsonl.zst --at 100 --policy reserve "
                       "--max-steps 400", why=MADE_WHY + "; 400 steps"),
    "observatory export runs/vm-15194-0.jsonl.zst --format trace -o rollout.jsonl":
        How(run=MADE + "observatory export runs/vm-15194-0.jsonl.zst --format trace -o "
                       "rollout.jsonl", why=MADE_WHY),
    "observatory run --config rollout.toml --trace rollout.jsonl":
        How(run=MADE + "observatory export runs/vm-15194-0.jsonl.zst --format trace -o "
                       "rollout.jsonl 2> /dev/null && observatory run --config rollout.toml "
                       "--trace rollout.jsonl",
            why=MADE_WHY + ", and the export above it (a command shown twice runs once)"),
    "observatory compare runs/vm-15194-0.jsonl.zst runs/*fork100-strict*.zst "
    "runs/*fork100-watermark*.zst runs/*fork100-reserve*.zst --no-plot":
        How(skip=True, why="needs step 3's three forks (minutes): tests/test_rerun.py forks a "
                           "recording and compares the two"),
    "observatory replay runs/vm-15194-0.jsonl.zst":
        How(skip=True, why="tests/test_rerun.py drives f in replay on a recording of the "
                           "same kind"),
    "observatory exec --record runs/ -- python rollout.py": How(skip=True, why=GPU),
    # not run here
    "observatory exec --record runs/ -- python train.py": How(skip=True, why=GPU),
    "observatory exec --serve 127.0.0.1:8765 --token-file ~/.obs-token -- vllm serve M":
        How(skip=True, why=GPU),
    "observatory exec --serve 127.0.0.1:8765 --token-file ~/.obs-token -- python -m "
    "vllm.entrypoints.openai.api_server --model M --enable-chunked-prefill":
        How(skip=True, why=GPU),
    "observatory live --connect 127.0.0.1:8765 --token-file ~/.obs-token":
        How(skip=True, why="needs the served engine above: tests/test_attach_live.py "
                           "connects `live` to an `exec --sim --serve` the same way"),
    "observatory live --connect 127.0.0.1:8765 --token-file ~/.observatory-token":
        How(skip=True, why="needs `serve` on another host and ssh: tests/test_service.py "
                           "connects to a local `serve`"),
    "observatory serve --preset seed-5578 --token-file ~/.observatory-token":
        How(skip=True, why="a server that runs until stopped: tests/test_service.py"),
    "ssh -L 8765:127.0.0.1:8765 gpu-host": How(skip=True, why="another host"),
    # several releases' venvs (GBs each, minutes to build, the network)
    "python3.11 bench/v1_releases.py 0.35.0": How(skip=True, why=RELEASE_DAY),
    "python3.11 bench/v1_releases.py 0.35.0 --write": How(skip=True, why=RELEASE_DAY),
    "observatory releases --preset v1-thrash --releases 0.18.0,0.24.0,0.29.0,0.34.0":
        How(skip=True, why=RELEASES),
    "observatory releases --trace my-trace.jsonl --releases 0.18.0..0.34.0 --max-steps 3000":
        How(skip=True, why=RELEASES),
    "observatory releases --from recordings/mine.jsonl.zst --releases 0.24.0,0.29.0":
        How(skip=True, why=RELEASES),
    "VLLM_TARGET_DEVICE=cpu vllm serve tiny/ --distributed-executor-backend engine.SimExecutor":
        How(skip=True, why=SERVER),
    "vllm bench serve --base-url http://127.0.0.1:8000 --model tiny/ --dataset-name random "
    "--num-prompts 100": How(skip=True, why=SERVER),
    "observatory exec --sim --serve 127.0.0.1:8765 --token-file ~/.obs-token --record runs/ "
    "-- vllm serve tiny/": How(skip=True, why=SERVER),
    "observatory exec --sim --serve 127.0.0.1:8765 --token-file ~/.obs-token --record runs/ "
    "-- python -m vllm.entrypoints.openai.api_server --model tiny/ --host 127.0.0.1 "
    "--guided-decoding-backend lm-format-enforcer": How(skip=True, why=SERVER),
}
"""Every documented command the lane does not run exactly as written, and how and why."""


@dataclass(frozen=True)
class Command:
    text: str  # as the doc writes it (continuations joined, its comment apart)
    comment: str  # the line's own `# ...`
    where: str  # page:line

    @property
    def how(self) -> How:
        return HOW.get(self.text, How())

    @property
    def expected(self) -> int:
        """The exit status the doc says: "exits N" in the line's comment, else 0."""
        said = re.search(r"\bexits? (\d+)", self.comment)
        return int(said.group(1)) if said else 0

    @property
    def engine(self) -> str:
        if self.how.engine:
            return self.how.engine
        return "v1" if re.search(r"\bv1-|\bv1\.log\b|fidelity_v1", self.text) else "v0"


def commands(text: str, page: str, first_line: int) -> list[Command]:
    """A bash block's commands: continuation lines joined, comment-only lines dropped."""
    out: list[Command] = []
    pending, start = "", first_line
    for k, line in enumerate(text.splitlines()):
        if not pending:
            start = first_line + k
        body, comment = _split_comment(line)
        if body.rstrip().endswith("\\"):
            pending += body.rstrip()[:-1].strip() + " "
            continue
        whole = (pending + body).strip()
        pending = ""
        if whole:
            out.append(Command(" ".join(whole.split()), comment, f"{page}:{start}"))
    return out


def _split_comment(line: str) -> tuple[str, str]:
    """(command part, comment) of one line: a `#` outside quotes that starts a word."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i], line[i + 1:].strip()
    return line, ""


def blocks() -> list[tuple[str, list[Command]]]:
    """(page:line, its commands) of every bash block, in page order."""
    out = []
    for path in PAGES:
        text = path.read_text()
        page = str(path.relative_to(ROOT))
        for m in BLOCK.finditer(text):
            line = text[:m.start()].count("\n") + 2
            out.append((f"{page}:{line - 1}", commands(m.group(1), page, line)))
    return out


def installed_engine() -> str:
    """"v0" or "v1": the engine of the installed vLLM (this lane's venv)."""
    from engine.adapters.versions import installed_engine as engine

    return engine()


def lane_plan() -> list[tuple[str, list[Command]]]:
    """Each block with the commands it runs here: each command once in the lane, where it
    first appears."""
    seen: set[str] = set()
    plan = []
    for where, cmds in blocks():
        mine = []
        for cmd in cmds:
            if cmd.text not in seen:
                seen.add(cmd.text)
                mine.append(cmd)
        plan.append((where, mine))
    return plan


# ---------------------------------------------------------------------------- running them
def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "COLUMNS"))}
    env.update(HOME=str(home), PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}",
               PYTHONPATH=str(ROOT), PYTHONHASHSEED="0", TERM="xterm-256color",
               COLUMNS="120", LINES="40")
    return env


def run_plain(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=TIMEOUT_S)


ANSI = re.compile(rb"\x1b\[[0-9;?<=>]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|"
                  rb"\x1b[()][0-9A-Za-z]|\x1b[=>78M]")


def run_screen(command: str, cwd: Path, env: dict[str, str], until: str) -> tuple[int, str]:
    """Run a TUI command in a 120x40 pseudo-terminal until `until` shows on its screen, press
    q, and wait for it to exit. (status, what it drew, escapes stripped)."""
    import fcntl
    import pty
    import struct
    import termios

    pid, fd = pty.fork()
    if pid == 0:  # the child: the pty is its terminal
        try:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
            os.chdir(cwd)
            os.execvpe("bash", ["bash", "-c", command], env)
        finally:
            os._exit(127)
    seen, pressed = b"", False
    deadline = time.monotonic() + TIMEOUT_S
    pattern = re.compile(until)
    try:
        while True:
            if time.monotonic() > deadline:
                raise AssertionError(f"{command!r}: no {until!r} on its screen in {TIMEOUT_S} s")
            ready, _, _ = select.select([fd], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # the child closed the terminal: it is exiting
                    break
                if not chunk:
                    break
                seen += chunk
            if not pressed and pattern.search(ANSI.sub(b"", seen).decode("utf-8", "replace")):
                os.write(fd, b"q")
                pressed = True
        _, status = os.waitpid(pid, 0)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.close(fd)
    drawn = ANSI.sub(b"", seen).decode("utf-8", "replace")
    assert pressed, f"{command!r} exited before {until!r} showed:\n{drawn[-2000:]}"
    return os.waitstatus_to_exitcode(status), drawn


def workdir(tmp_path: Path) -> Path:
    """A fresh directory for one block: the shipped recordings (recordings/MANIFEST's, each
    file linked into a directory of its own, so that a run told to record into recordings/
    lands here, not in the clone; a user's own runs go to runs/, here too), the test fixtures
    and the tiny model configs linked in, read only."""
    cwd = tmp_path / "cwd"
    (cwd / "recordings").mkdir(parents=True)
    for shipped in shipped_recordings("*"):
        (cwd / "recordings" / shipped.name).symlink_to(shipped)
    (cwd / "recordings" / "reference").symlink_to(ROOT / "recordings" / "reference")  # real logs
    for name in ("tests", "engine", "docs"):
        (cwd / name).symlink_to(ROOT / name)
    return cwd


def test_a_run_in_the_lane_records_into_its_own_directory(tmp_path):
    cwd = workdir(tmp_path)
    assert (cwd / "recordings").is_dir() and not (cwd / "recordings").is_symlink()
    assert (cwd / "recordings" / "seed-5578-off.jsonl.zst").resolve() == \
        ROOT / "recordings" / "seed-5578-off.jsonl.zst"


PLAN = lane_plan()


@pytest.mark.timeout(3 * TIMEOUT_S)  # a block is several commands, each up to TIMEOUT_S
@pytest.mark.parametrize("where, cmds", PLAN, ids=[where for where, _ in PLAN])
def test_the_documented_commands_run_and_exit_as_the_docs_say(where, cmds, tmp_path):
    here = installed_engine()
    cwd = workdir(tmp_path)
    env = environment(tmp_path)
    ran = 0
    for cmd in cmds:
        how = cmd.how
        if how.skip or cmd.engine != here:
            continue
        command = how.run or cmd.text
        started = time.monotonic()
        if how.screen:
            status, shown = run_screen(command, cwd, env, how.screen)
            assert status == cmd.expected, f"{cmd.where}: {command!r} exited {status}:\n" \
                                           f"{shown[-2000:]}"
        else:
            done = run_plain(command, cwd, env)
            assert done.returncode == cmd.expected, (
                f"{cmd.where}: {command!r} exited {done.returncode}, the docs say "
                f"{cmd.expected}:\n{done.stderr[-3000:]}")
        print(f"{cmd.where}: {command} ({time.monotonic() - started:.1f} s)")
        ran += 1
    if not ran:
        pytest.skip(f"nothing to run here on {here} (other engine, or declared in HOW)")
