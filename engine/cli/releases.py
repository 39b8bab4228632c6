"""`observatory releases`: the same workload through the real scheduler of several vLLM
releases, one uv venv each (engine/releases/), in parallel on Ray; one table of what each
release decided and the first step where its decisions part from the previous release's."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from engine.cli.base import CLISubcommand
from engine.cli.ray_flags import add_ray_flags
from engine.cli.run_flags import add_run_flags
from engine.errors import ConfigError
from engine.exit_status import ExitStatus


class Releases(CLISubcommand):
    name = "releases"
    help = "run one workload through several vLLM releases and show where their decisions part"
    description = ("Build (once) or reuse one uv venv per release in a cache directory "
                   "outside the clone, run the same workload (--preset, --trace or --from "
                   "REC) through each release's own scheduler as a headless `observatory run` "
                   "in that venv, in parallel on a local Ray runtime or a cluster (--address), "
                   "keep each recording (DIR/vllm-<release>.jsonl.zst, for compare and "
                   "replay), and print one table: preemptions, most of one request, recompute "
                   "tax, longest stall, tokens per simulated second, and the first step where "
                   "each release decides differently from the previous one, with what "
                   "differed. Exit 0 when every release ran, 1 when some failed.")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        first_run_flag = len(parser._actions)
        add_run_flags(parser)
        for action in parser._actions[first_run_flag:]:
            if action.dest in ("record", "no_record"):  # each release records into -o DIR
                action.help = argparse.SUPPRESS
        g = parser.add_argument_group("releases")
        g.add_argument("--releases", required=True, metavar="LIST",
                       help="comma-separated releases and ranges: 0.24.0,0.29.0,0.34.0 or "
                            "0.18.0..0.34.0 (a range takes every release the release table "
                            "resolves in it; `observatory versions` lists them)")
        g.add_argument("--from", dest="from_recording", metavar="REC",
                       help="the workload of an `observatory run` recording (its header's "
                            "settings; flags given too override them)")
        g.add_argument("-o", "--output", metavar="DIR",
                       help="where the recordings go (default recordings/releases-<time>)")
        g.add_argument("--venv-root", metavar="DIR",
                       help="the venvs' cache directory (default $OBSERVATORY_VENV_ROOT or "
                            "~/.cache/vllm-observatory, as .ci/venv)")
        g.add_argument("--json", action="store_true", help="print the rows as JSON")
        add_ray_flags(parser, "releases", "; each node builds the venvs it lacks in its "
                                          "--venv-root")

    def cmd(self, args: argparse.Namespace) -> int:
        from engine.releases import venvs
        from engine.releases.select import select

        spec = _workload(args)
        chosen = select(args.releases)
        if args.address:
            from engine.sweep.ray_pool import check_reachable

            check_reachable(args.address)
        elif not args.serial:
            from engine.sweep.ray_pool import require_ray

            require_ray("releases", "releases")
        out_dir = Path(args.output or f"recordings/releases-{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"-o {out_dir}: {exc.strerror or exc}") from None
        root = Path(args.venv_root) if args.venv_root else venvs.default_root()
        say = _say
        if not args.address:  # build here, one at a time (uv's cache is shared); a cluster's
            for release in chosen.releases:  # nodes build their own in their tasks
                venvs.ensure(release, root, say)
        from engine.releases.runs import as_shipped

        configs, notes = {}, []
        for release in chosen.releases:
            own, note = as_shipped(spec, release)
            configs[release.version] = _config_toml(own)
            notes += [note] if note else []
        outcomes = {o.version: o for o in _run(args, configs, str(root), say)}
        return _report(args, spec, chosen, outcomes, out_dir, notes)


def _say(line: str) -> None:
    print(f"releases: {line}", file=sys.stderr, flush=True)


def _workload(args: argparse.Namespace):  # -> RunSpec
    """The one RunSpec every release runs: --preset/--trace and the flags, or a recording's."""
    from engine import options
    from engine.spec import RunSpec, resolve_spec

    given = options.values_from_args(RunSpec, args)
    layers: list = []
    if args.from_recording:
        layers.append((args.from_recording, _recorded_spec(args.from_recording)))
    elif not (given.get("preset") or given.get("trace") or args.config):
        raise ConfigError("name the workload: --preset P, --trace T or --from REC (the same "
                          "for every release)")
    if args.config:
        layers.append((args.config, options.load_config(RunSpec, args.config)))
    if given.get("trace"):
        given["trace"] = str(Path(given["trace"]).resolve())  # the runs start elsewhere
    spec = resolve_spec([*layers, ("flags", given)]).validated()
    from engine.traces import source

    source.check(spec)  # a missing or unreadable trace fails here, before any venv is built
    return spec


def _recorded_spec(path: str) -> dict:
    """A recording's workload, as a layer (engine.analysis.rerun.workload_from_recording: a run
    of the observatory's own spec, or a program's own engine's requests at the steps they
    arrived on that engine's settings); one line for a recording that cannot be one (an
    imported log, one switched on mid-run, one made before requests' facts were kept)."""
    from engine.analysis.rerun import workload_from_recording

    spec = workload_from_recording(path).to_dict()
    spec.pop("toggles", None)  # the policy switches of that run are not the workload
    if spec.get("num_cpu_blocks") is not None:
        spec.pop("swap_space_gib", None)  # the blocks it had (a layer may not give both)
    return spec


def _config_toml(spec) -> str:
    """The spec as a --config file for the runs (every field, so no default decides)."""
    import msgspec

    from engine.sweep.toml_out import dumps

    data = msgspec.to_builtins(spec)
    return dumps({k: v for k, v in data.items() if v not in (None, [], {})})


def _run(args: argparse.Namespace, configs: dict[str, str], root: str, say):
    from engine.releases.runs import decode, run_on_ray, run_release

    if args.serial:
        for version, config in configs.items():
            say(f"running vLLM {version}")
            yield decode(run_release(version, root, config))
        return
    import tempfile

    from engine.sweep.ray_pool import ray_runtime

    log = Path(tempfile.mkdtemp(prefix="observatory-releases-")) / "ray.log"
    with ray_runtime(args.address, args.workers, log, args.ray_temp_dir,
                     args.node_ip_address) as capacity:
        say(f"running {len(configs)} releases on Ray, {capacity} at once (Ray's log: {log})")
        for outcome in run_on_ray(configs, root, capacity):
            say(f"vLLM {outcome.version}: "
                + (f"{outcome.seconds:.0f} s" if outcome.status == "ok" else outcome.message))
            yield outcome


def _report(args: argparse.Namespace, spec, chosen, outcomes: dict, out_dir: Path,
            notes: list[str]) -> int:
    from engine.releases.table import build, render
    from engine.stream.reader import load

    runs = []
    for release in chosen.releases:
        outcome = outcomes.get(release.version)
        if outcome is None or outcome.status != "ok":
            runs.append((release.version, None, outcome.message if outcome else "no result"))
            continue
        path = out_dir / f"vllm-{release.version}.jsonl.zst"
        path.write_bytes(outcome.recording)
        runs.append((release.version, load(str(path)), ""))
    rows = build(runs)
    workload = (f"{spec.trace or spec.preset}, policy {spec.policy}"
                + (f", {spec.max_steps:,} steps at most" if spec.max_steps else "")
                + f"; recordings in {out_dir}/")
    if args.json:
        import json

        print(json.dumps([{"release": r.version, "failed": r.failed or None,
                           "first_difference": r.difference, "differed": r.what or None,
                           "compared_with": r.compared_with or None,
                           "metrics": _builtins(r.metrics)} for r in rows]
                         + [{"note": note} for note in notes], indent=2))
    else:
        print(render(rows, chosen.left_out, workload, notes))
    failed = any(r.metrics is None for r in rows)
    return ExitStatus.DIFFERENCE if failed else ExitStatus.OK


def _builtins(metrics):
    if metrics is None:
        return None
    import msgspec

    return msgspec.to_builtins(metrics)
