"""`observatory hunt`: random workloads against the installed release's real scheduler, each
hit shrunk to a minimal repro bundle (engine/hunt/). Ray and vLLM are imported only once
workloads run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.cli.base import CLISubcommand
from engine.cli.ray_flags import add_ray_flags, check_ray_flags
from engine.errors import ConfigError
from engine.exit_status import ExitStatus

DEFAULT_WORKLOADS = 100_000
DEFAULT_BUDGET_S = 600.0


class Hunt(CLISubcommand):
    name = "hunt"
    help = "search the installed vLLM's scheduler for bugs with random workloads"
    description = ("Generate small random workloads and engine settings from a seed, run them "
                   "on the installed release's real scheduler (the sim backend) with the "
                   "detectors (abort, exception, stall, livelock, thrash, starvation, KV "
                   "accounting), shrink each distinct hit while the same detector fires, and "
                   "write a repro bundle per hit (trace, config, recording, pytest, "
                   "paragraph) under DIR. Workloads run on Ray workers that keep vLLM "
                   "imported (or here, --serial). Exit 0 when nothing was found, 1 when "
                   "something was.")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        g = parser.add_argument_group("hunt")
        g.add_argument("--seed", type=int, default=0, metavar="N",
                       help="the hunt's seed: workload i of seed N is always the same "
                            "(default 0)")
        g.add_argument("--workloads", type=int, default=DEFAULT_WORKLOADS, metavar="N",
                       help="run at most N workloads (default: until the budget is spent)")
        g.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, metavar="SECONDS",
                       help=f"wall-clock budget; new workloads stop at 3/4 of it so hits "
                            f"can shrink (default {DEFAULT_BUDGET_S:.0f})")
        g.add_argument("--policy", metavar="P",
                       help="run every workload under this policy (search for workloads "
                            "that break a fix); default: drawn per workload, mostly off")
        g.add_argument("--shrink-runs", type=int, default=60, metavar="N",
                       help="runs at most to shrink one hit (default 60)")
        g.add_argument("-o", "--output", metavar="DIR",
                       help="directory for the bundles and report.json (default: "
                            "hunt-seed-N)")
        add_ray_flags(parser, "workloads")

    def cmd(self, args: argparse.Namespace) -> int:
        check_ray_flags(args, "workloads")
        for flag, value in (("--workloads", args.workloads), ("--shrink-runs",
                                                                 args.shrink_runs)):
            if value < 1:
                raise ConfigError(f"{flag} must be at least 1, got {value}")
        if not args.budget > 0:
            raise ConfigError(f"--budget must be a positive number of seconds, got "
                              f"{args.budget}")
        if not 0 <= args.seed < 2**32:
            raise ConfigError(f"--seed must be from 0 to {2**32 - 1}, got {args.seed}")
        policy = _policy(args.policy)
        out = Path(args.output or f"hunt-seed-{args.seed}")
        if (out / "report.json").exists():
            raise ConfigError(f"{out} already holds a hunt (report.json): give another "
                              f"--output")
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"--output {out}: cannot make that directory: "
                              f"{exc.strerror or exc}") from None
        from engine.hunt import bundle, report
        from engine.hunt.hunt import run_hunt

        progress = report.HuntProgress(args.workloads, args.budget)
        kwargs = dict(seed=args.seed, workloads=args.workloads, budget_s=args.budget,
                      policy=policy, out=out.resolve(), shrink_tries=args.shrink_runs,
                      bundle=bundle.write, advance=progress.advance, note=progress.note)
        try:
            if args.serial:
                from engine.hunt.pool import SerialPool

                result = run_hunt(SerialPool(), **kwargs)
            else:
                result = _on_ray(args, out, progress, kwargs)
        except KeyboardInterrupt:
            progress.close()
            sys.stderr.write(f"observatory hunt: interrupted; the bundles written so far are "
                             f"in {out}\n")
            return ExitStatus.INTERRUPTED
        finally:
            progress.close()
        (out / "report.json").write_text(report.to_json(result) + "\n")
        sys.stdout.write(report.table(result) + "\n")
        sys.stdout.flush()
        return ExitStatus.DIFFERENCE if result.findings else ExitStatus.OK


def _policy(text: str | None) -> str | None:
    """--policy, checked against the installed release before anything runs."""
    if text is None:
        return None
    from engine.adapters.policy_support import installed
    from engine.adapters.versions import require_supported
    from engine.policy import parse_policy, require_policy

    policy = parse_policy(text)
    require_policy(policy, installed(require_supported().engine))
    return str(policy)


def _on_ray(args: argparse.Namespace, out: Path, progress, kwargs):  # noqa: ANN001, ANN202
    from engine.hunt.hunt import run_hunt
    from engine.hunt.pool import RayPool
    from engine.sweep.ray_pool import check_reachable, ray_runtime, require_ray

    require_ray("hunt", "workloads")
    if args.address:
        check_reachable(args.address)
    log = out / "ray.log"
    where = f"the Ray cluster at {args.address}" if args.address else "a local Ray runtime"
    progress.note(f"hunt: seed {args.seed} on {where} (its log: {log})")
    with ray_runtime(args.address, args.workers, log, args.ray_temp_dir,
                     args.node_ip_address) as capacity:
        return run_hunt(RayPool(capacity), **kwargs)
