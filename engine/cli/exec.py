"""`observatory exec [options] -- COMMAND ...`: run someone's own command with every vLLM
engine it builds watched, in every process it spawns, without changing their code.

How: the command runs with engine/attached/boot first on PYTHONPATH. Its sitecustomize (which
chains any sitecustomize that was there) hooks vLLM's engine (V0) or scheduler (V1) module as
it is imported, and every engine then built is attached as the OBSERVATORY_* environment says
(engine.attached.env): the policy, the recording, the serving, the sim executor.

`--serve HOST:PORT` starts a hub here (engine.attached.hub): each engine serves its own stream
on 127.0.0.1 and announces itself in a directory the hub reads; a client names the engine
(`observatory live --connect HOST:PORT --engine NAME`) or gets the newest, and
`observatory engines --connect HOST:PORT` lists them. The exit status is the command's.

With `--record`, each engine's file is written by a scribe process (engine.host.scribe) that
seals it however the engine's process ends (vLLM V1 kills its EngineCore at shutdown). Each
scribe holds a lock in a directory of exec's own (OBSERVATORY_SCRIBES_DIR) until its file is
sealed, and exec returns only once it holds every one of them (at most SEAL_TIMEOUT_S, then
one line per recording still being written), so a recording is whole when exec returns.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from engine.cli.base import CLISubcommand
from engine.errors import ConfigError
from engine.kinds import kind_of

BOOT_DIR = Path(__file__).resolve().parent.parent / "attached" / "boot"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent
SEAL_TIMEOUT_S = 60.0  # a scribe seals in milliseconds once its engine's process is gone


class Exec(CLISubcommand):
    name = "exec"
    help = "run your own command (a script, vllm serve) with every vLLM engine it builds watched"
    description = ("Run COMMAND with the observatory attached to every vLLM scheduler it "
                   "creates, in every process it spawns, with no change to its code. "
                   "Example: observatory exec --sim --record runs/ -- python train.py")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--policy", default="off", metavar="P",
                            help="the policy every engine starts with (default off)")
        parser.add_argument("--record", metavar="PATH",
                            help="record every engine: a directory (one file per engine, "
                                 "named host-pid-index) or a .jsonl.zst file")
        parser.add_argument("--serve", metavar="HOST:PORT",
                            help="serve every engine's stream for observatory live --connect "
                                 "(127.0.0.1 unless --token-file is given)")
        parser.add_argument("--token-file", metavar="FILE",
                            help="the token clients present: read from FILE, or generated "
                                 "there (mode 600) if it does not exist")
        parser.add_argument("--sim", action="store_true",
                            help="every engine runs the observatory's sim executor: no model "
                                 "weights, no GPU")
        parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                            help="the command to run")

    def cmd(self, args: argparse.Namespace) -> int:
        from engine.policy import parse_policy

        command = list(args.command)
        if command and command[0] == "--":
            command = command[1:]
        if not command:
            raise ConfigError("exec needs a command after --: e.g. observatory exec --sim -- "
                              "python script.py")
        policy = parse_policy(args.policy)
        from engine.adapters.versions import installed_version, release_for

        version = installed_version()
        release = release_for(version)
        if release is None:
            return _run_unwatched(command, version, args)
        # a V0 policy on V1 (or back) would fail in every engine
        from engine.policy import require_engine_kind

        require_engine_kind(policy, release.engine)
        import engine

        env = {k: v for k, v in os.environ.items() if k not in engine.SET_HERE}  # the user's
        old = env.get("PYTHONPATH")
        env["PYTHONPATH"] = os.pathsep.join(
            [str(BOOT_DIR), str(PACKAGE_ROOT)] + ([old] if old else []))
        env["OBSERVATORY_EMBEDDED"] = "1"
        env["OBSERVATORY_POLICY"] = args.policy
        for name in ("OBSERVATORY_RECORD", "OBSERVATORY_SERVE", "OBSERVATORY_ENGINES_DIR",
                     "OBSERVATORY_SIM", "OBSERVATORY_TOKEN_FILE", "OBSERVATORY_SCRIBES_DIR"):
            env.pop(name, None)
        scribes = None
        if args.record:
            env["OBSERVATORY_RECORD"] = _record_target(args.record)
            from engine.host.scribe_pipe import SCRIBES_DIR_ENV

            scribes = tempfile.mkdtemp(prefix="observatory-scribes-")  # mode 700
            env[SCRIBES_DIR_ENV] = scribes
        if args.sim:
            env["OBSERVATORY_SIM"] = "1"
            env.update(_v1_sim_env(env["PYTHONPATH"]))
        hub = None
        try:
            if args.serve:
                hub, env = _start_hub(args, env)
            try:
                child = subprocess.Popen(command, env=env)
            except OSError as exc:
                if hub is not None:
                    hub.close()
                raise ConfigError(f"cannot run {command[0]!r}: {exc.strerror or exc}") from None
            return _wait_forwarding(child, hub)
        finally:
            if scribes is not None:
                _wait_for_recordings(scribes)


def _wait_for_recordings(scribes: str) -> None:
    """Return only once every scribe has sealed its file (or say which one is still being
    written), then remove exec's lock directory."""
    import shutil

    from engine.host.scribe_pipe import wait_sealed

    try:
        stuck = wait_sealed(scribes, SEAL_TIMEOUT_S)
    except KeyboardInterrupt:  # a Ctrl-C while waiting: the scribes finish on their own
        stuck = []
    for path in stuck:
        sys.stderr.write(f"observatory exec: the recording {path} is still being written "
                         f"after {SEAL_TIMEOUT_S:.0f} s; it is sealed when its writer "
                         f"finishes\n")
    shutil.rmtree(scribes, ignore_errors=True)


def _run_unwatched(command: list[str], version: str | None,
                   args: argparse.Namespace) -> int:
    """The installed vLLM is one the observatory cannot attach to: run the user's command
    exactly as they would without exec (nothing on PYTHONPATH, no OBSERVATORY_* or vLLM
    settings of ours), after one warning line, so that a vLLM the hooks do not know never
    meets them and the user's program never dies of what exec set. `--sim` replaces the
    program's executor, which only an attached engine can do: that is refused instead."""
    from engine.adapters.versions import unsupported_line

    why = unsupported_line(version)
    if args.sim:
        raise ConfigError(f"exec --sim needs a vLLM the observatory can attach to: {why}")
    sys.stderr.write(f"observatory exec: {why}; running the command unwatched (nothing "
                     f"recorded or served)\n")
    sys.stderr.flush()
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        raise ConfigError(f"cannot run {command[0]!r}: {exc.strerror or exc}") from None
    return _wait_forwarding(child)


def _wait_forwarding(child: subprocess.Popen, hub=None) -> int:  # noqa: ANN001
    """Wait for `child`, passing on Ctrl-C, TERM and HUP; its exit status, as a shell's."""
    forward = {sig: signal.signal(sig, lambda signum, frame: _forward(child, signum))
               for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        code = child.wait()
    finally:
        for sig, handler in forward.items():
            signal.signal(sig, handler)
        if hub is not None:
            hub.close()
    return code if code >= 0 else 128 - code


def _record_target(text: str) -> str:
    """--record's absolute path; a directory is made now, so a path that cannot be one is a
    one-line error before the command starts, not a warning in each of its engines."""
    path = Path(text).expanduser().absolute()
    if path.exists() and not path.is_dir():
        return str(path)  # a file, /dev/full...: each engine opens it (one warning if it fails)
    if str(path).endswith((".jsonl.zst", ".jsonl")):
        if not path.parent.is_dir():
            raise ConfigError(f"--record {text}: no directory {path.parent}")
        return str(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--record {text}: cannot make that directory: "
                          f"{exc.strerror or exc}") from None
    return str(path)


def _forward(child: subprocess.Popen, signum: int) -> None:
    try:
        child.send_signal(signum)
    except OSError:
        pass


def _v1_sim_env(pythonpath: str) -> dict[str, str]:
    """What a V1 sim engine needs before its interpreter starts (engine.adapters.v1.platform),
    its PYTHONPATH `pythonpath` with the sim platform's plugin where the release needs it;
    nothing for V0."""
    from engine.adapters.versions import installed_version, release_for

    release = release_for(installed_version())
    if release is None or not kind_of(release.engine).sim_env_at_start:
        return {}
    from engine.adapters.v1.platform import HASH_SEED, sim_env

    env = {k: v for k, v in sim_env(release, pythonpath).items()
           if k != "VLLM_ENABLE_V1_MULTIPROCESSING"}
    return {**env, "PYTHONHASHSEED": HASH_SEED}


def _start_hub(args: argparse.Namespace, env: dict[str, str]):  # noqa: ANN202
    from engine.attached.env import parse_serve
    from engine.attached.hub import Hub
    from engine.cli.serve import _token

    engines_dir = tempfile.mkdtemp(prefix="observatory-engines-")  # mode 700
    token_file = args.token_file
    if token_file:
        token = _token(token_file, sys.stderr)
    else:  # as `observatory serve`: generated and printed; the engines read it from a file
        token = secrets.token_urlsafe(24)
        token_file = os.path.join(engines_dir, "token")
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
    address = parse_serve(args.serve, token)
    try:
        hub = Hub(address, token, engines_dir)
    except OSError as exc:
        import shutil

        shutil.rmtree(engines_dir, ignore_errors=True)
        from engine.errors import PeerError

        raise PeerError(f"cannot listen on {args.serve}: {exc.strerror or exc}") from None
    hub.start()
    env = {**env, "OBSERVATORY_ENGINES_DIR": engines_dir,
           "OBSERVATORY_TOKEN_FILE": str(Path(token_file).expanduser().absolute())}
    if args.token_file:
        hint = f"--token-file {args.token_file}"
    else:
        hint = "--token-file FILE"
        sys.stderr.write(f"observatory exec: token {token}\n")
    sys.stderr.write(f"observatory exec: serving on {hub.address}; attach with: observatory "
                     f"live --connect {hub.address} {hint} (observatory engines --connect "
                     f"{hub.address} lists the engines)\n")
    sys.stderr.flush()
    return hub, env
